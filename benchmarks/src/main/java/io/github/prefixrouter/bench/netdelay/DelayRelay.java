package io.github.prefixrouter.bench.netdelay;

import java.io.Closeable;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;

/**
 * A TCP relay that adds a fixed one-way delay: it accepts connections on one address, connects
 * each to a target address, and passes the bytes both ways, each chunk written {@code delay}
 * after it was read. Order is kept and there is no bandwidth limit: a chunk read at time t is
 * written at t + delay, so a stream is shifted in time, not slowed. The end of a stream (the
 * sender's half-close) reaches the other side the same delay later, as a half-close of the
 * connection to it; a connection is closed once both ways have ended, or at once, both sides,
 * when reading or writing either side fails.
 *
 * <p>It stands in for netem's delay where the kernel has none: put one in front of each node's
 * peer port and have the node advertise the relay's address, and every node-to-node message
 * crosses one relay each way (docs/deployment.md, "Real network delay"). The relay's own cost
 * (a thread hand-off and a copy per chunk) is in its figures at delay 0.
 *
 * <p>Plain threads: one accepting, and per connection one reading and one writing each way.
 * {@link #close} closes the listening socket and every connection and waits for all of them to
 * end.
 */
public final class DelayRelay implements Closeable {

  /** The largest chunk read at once. */
  private static final int CHUNK = 64 * 1024;

  /** How long {@link #close} waits for the relay's threads, in all. */
  private static final Duration CLOSE_WAIT = Duration.ofSeconds(10);

  /** How long connecting to the target may take before the accepted connection is closed. */
  private static final int CONNECT_TIMEOUT_MS = 5_000;

  /** The end of a stream, queued after its last chunk. */
  private static final byte[] END = new byte[0];

  private final ServerSocket server;
  private final InetSocketAddress target;
  private final long delayNanos;
  private final String name;
  private final Set<Thread> threads = ConcurrentHashMap.newKeySet();
  private final Set<Connection> connections = new HashSet<>();
  private final AtomicInteger ids = new AtomicInteger();
  private boolean closed; // guarded by connections

  private DelayRelay(ServerSocket server, InetSocketAddress target, long delayNanos) {
    this.server = server;
    this.target = target;
    this.delayNanos = delayNanos;
    this.name = "delay-relay-" + server.getLocalPort();
  }

  /**
   * Starts a relay.
   *
   * @param listen the address to accept on (port 0: any free port, see {@link #address})
   * @param target the address each accepted connection is relayed to
   * @param delay the one-way delay added to every chunk, 0 or more
   * @return the relay, accepting
   * @throws IOException if the listening socket cannot be bound
   * @throws IllegalArgumentException if {@code delay} is negative
   */
  public static DelayRelay start(InetSocketAddress listen, InetSocketAddress target,
      Duration delay) throws IOException {
    if (delay.isNegative()) {
      throw new IllegalArgumentException("delay must be 0 or more, not " + delay);
    }
    ServerSocket server = new ServerSocket();
    try {
      server.setReuseAddress(true);
      server.bind(listen);
    } catch (IOException | RuntimeException e) {
      server.close();
      throw e;
    }
    DelayRelay r = new DelayRelay(server, target, delay.toNanos());
    r.spawn(r.name + "-accept", r::accept);
    return r;
  }

  /**
   * The address the relay accepts on.
   *
   * @return its bound address
   */
  public InetSocketAddress address() {
    return (InetSocketAddress) server.getLocalSocketAddress();
  }

  /**
   * The address each connection is relayed to.
   *
   * @return the target
   */
  public InetSocketAddress target() {
    return target;
  }

  /**
   * How many relayed connections are open (accepted and not yet closed).
   *
   * @return the count
   */
  public int openConnections() {
    synchronized (connections) {
      return connections.size();
    }
  }

  /**
   * How many of the relay's threads are running.
   *
   * @return the count
   */
  public int liveThreads() {
    return threads.size();
  }

  /**
   * Stops accepting, closes every relayed connection (both sides) and waits for the relay's
   * threads to end.
   *
   * @throws IOException if a thread of the relay has not ended after ten seconds
   */
  @Override
  public void close() throws IOException {
    List<Connection> open;
    synchronized (connections) {
      closed = true;
      open = new ArrayList<>(connections);
    }
    closeQuietly(server);
    for (Connection c : open) {
      c.close();
    }
    long deadline = System.nanoTime() + CLOSE_WAIT.toNanos();
    for (Thread t : new ArrayList<>(threads)) {
      long left = deadline - System.nanoTime();
      try {
        if (left > 0) {
          t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    if (!threads.isEmpty()) {
      throw new IOException(name + ": " + threads.size() + " threads still running after "
          + CLOSE_WAIT.toSeconds() + " s");
    }
  }

  @Override
  public String toString() {
    return "DelayRelay " + address() + " -> " + target + ", "
        + TimeUnit.NANOSECONDS.toMicros(delayNanos) / 1000.0 + " ms one way";
  }

  private Thread spawn(String threadName, Runnable body) {
    Thread t = new Thread(() -> {
      try {
        body.run();
      } finally {
        threads.remove(Thread.currentThread());
      }
    }, threadName);
    t.setDaemon(true);
    threads.add(t);
    t.start();
    return t;
  }

  private void accept() {
    while (true) {
      Socket client;
      try {
        client = server.accept();
      } catch (IOException e) {
        return; // closed
      }
      Connection c = new Connection(client, ids.incrementAndGet());
      synchronized (connections) {
        if (closed) {
          closeQuietly(client);
          return;
        }
        connections.add(c);
      }
      c.begin();
    }
  }

  /** One relayed connection: the accepted socket, the one to the target, and four threads. */
  private final class Connection {
    private final Socket client;
    private final Socket upstream = new Socket();
    private final String prefix;
    private final List<Thread> own = new ArrayList<>(4); // guarded by this
    private final AtomicInteger endsWritten = new AtomicInteger();
    private boolean done; // guarded by this

    Connection(Socket client, int id) {
      this.client = client;
      this.prefix = name + "-" + id;
    }

    /** Connects to the target, then relays; on its own thread, so accepting never waits. */
    void begin() {
      start(prefix + "-connect", () -> {
        try {
          client.setTcpNoDelay(true);
          upstream.setTcpNoDelay(true);
          upstream.connect(target, CONNECT_TIMEOUT_MS);
        } catch (IOException e) {
          close();
          return;
        }
        pipe(client, upstream, prefix + "-up");
        pipe(upstream, client, prefix + "-down");
      });
    }

    /** Reads {@code from} on one thread and writes what it read to {@code to} on another. */
    private void pipe(Socket from, Socket to, String threadName) {
      BlockingQueue<Chunk> queue = new LinkedBlockingQueue<>();
      start(threadName + "-read", () -> read(from, queue));
      start(threadName + "-write", () -> write(queue, to));
    }

    private void read(Socket from, BlockingQueue<Chunk> queue) {
      byte[] buf = new byte[CHUNK];
      try {
        InputStream in = from.getInputStream();
        int n;
        while ((n = in.read(buf)) >= 0) {
          if (n > 0) {
            queue.add(new Chunk(System.nanoTime() + delayNanos, Arrays.copyOf(buf, n)));
          }
        }
        queue.add(new Chunk(System.nanoTime() + delayNanos, END));
      } catch (IOException e) {
        close(); // reset, or closed by close()
      }
    }

    private void write(BlockingQueue<Chunk> queue, Socket to) {
      try {
        OutputStream out = to.getOutputStream();
        while (true) {
          Chunk c = queue.take();
          long wait;
          while ((wait = c.due - System.nanoTime()) > 0) {
            LockSupport.parkNanos(wait);
            if (Thread.interrupted()) {
              throw new InterruptedException();
            }
          }
          if (c.bytes == END) {
            to.shutdownOutput();
            if (endsWritten.incrementAndGet() == 2) {
              close(); // both ways ended
            }
            return;
          }
          out.write(c.bytes);
          out.flush();
        }
      } catch (IOException | InterruptedException e) {
        close();
      }
    }

    private void start(String threadName, Runnable body) {
      synchronized (this) {
        if (done) {
          return;
        }
        own.add(spawn(threadName, body));
      }
    }

    /** Closes both sockets and interrupts the connection's threads; once. */
    void close() {
      List<Thread> toStop;
      synchronized (this) {
        if (done) {
          return;
        }
        done = true;
        toStop = new ArrayList<>(own);
      }
      closeQuietly(client);
      closeQuietly(upstream);
      for (Thread t : toStop) {
        if (t != Thread.currentThread()) {
          t.interrupt();
        }
      }
      synchronized (connections) {
        connections.remove(this);
      }
    }
  }

  /** Bytes read and the time they are due to be written ({@link System#nanoTime}). */
  private record Chunk(long due, byte[] bytes) {}

  private static void closeQuietly(Closeable c) {
    try {
      c.close();
    } catch (IOException e) {
      // closing: nothing more to do
    }
  }

  /**
   * The address {@code hostPort} names: {@code host:port}, an IPv6 host in brackets.
   *
   * @param hostPort the text
   * @return the address, resolved
   * @throws IllegalArgumentException if it is not {@code host:port} with a port from 0 to 65535
   */
  public static InetSocketAddress parse(String hostPort) {
    int colon = hostPort.lastIndexOf(':');
    if (colon <= 0 || colon == hostPort.length() - 1) {
      throw new IllegalArgumentException("not HOST:PORT: '" + hostPort + "'");
    }
    String host = hostPort.substring(0, colon);
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    } else if (host.contains(":")) {
      throw new IllegalArgumentException("not HOST:PORT (an IPv6 host goes in brackets): '"
          + hostPort + "'");
    }
    int port;
    try {
      port = Integer.parseInt(hostPort.substring(colon + 1));
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("not HOST:PORT (the port is no number): '" + hostPort
          + "'");
    }
    if (port < 0 || port > 65535) {
      throw new IllegalArgumentException("not HOST:PORT (port " + port + " is out of range): '"
          + hostPort + "'");
    }
    return new InetSocketAddress(host, port);
  }
}
