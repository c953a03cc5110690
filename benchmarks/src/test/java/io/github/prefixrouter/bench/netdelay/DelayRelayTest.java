package io.github.prefixrouter.bench.netdelay;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * {@link DelayRelay} passes bytes unchanged both ways, shifts them by its delay each way without
 * slowing a stream, passes a half-close on, and leaves no thread or socket behind. Times are the
 * machine's: lower bounds are strict, upper bounds loose (the machine may be shared).
 */
class DelayRelayTest {

  private static final InetSocketAddress ANY = new InetSocketAddress(InetAddress.getLoopbackAddress(), 0);

  /** A target on loopback: echoes what it reads, then half-closes when the reader half-closes. */
  private static final class Echo implements AutoCloseable {
    final ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    final BlockingQueue<Socket> accepted = new LinkedBlockingQueue<>();
    private final List<Thread> threads = new ArrayList<>();
    private final boolean echo;

    Echo(boolean echo) throws IOException {
      this.echo = echo;
      Thread t = new Thread(this::accept, "echo-accept");
      t.setDaemon(true);
      threads.add(t);
      t.start();
    }

    InetSocketAddress address() {
      return (InetSocketAddress) server.getLocalSocketAddress();
    }

    private void accept() {
      try {
        while (true) {
          Socket s = server.accept();
          accepted.add(s);
          if (echo) {
            Thread t = new Thread(() -> copy(s), "echo");
            t.setDaemon(true);
            synchronized (threads) {
              threads.add(t);
            }
            t.start();
          }
        }
      } catch (IOException e) {
        // closed
      }
    }

    private static void copy(Socket s) {
      try (s) {
        s.setTcpNoDelay(true);
        InputStream in = s.getInputStream();
        OutputStream out = s.getOutputStream();
        byte[] buf = new byte[8192];
        int n;
        while ((n = in.read(buf)) >= 0) {
          out.write(buf, 0, n);
          out.flush();
        }
        s.shutdownOutput();
      } catch (IOException e) {
        // the test's side went away
      }
    }

    @Override
    public void close() throws Exception {
      server.close();
      for (Socket s : accepted) {
        s.close();
      }
    }
  }

  private static Socket connect(DelayRelay r) throws IOException {
    Socket s = new Socket();
    s.setTcpNoDelay(true);
    s.connect(r.address(), 5_000);
    s.setSoTimeout(10_000);
    return s;
  }

  /** Everything {@code s} sends back until it half-closes; written meanwhile on another thread. */
  private static byte[] roundTrip(Socket s, byte[] data) throws Exception {
    CompletableFuture<Void> sent = CompletableFuture.runAsync(() -> {
      try {
        s.getOutputStream().write(data);
        s.getOutputStream().flush();
        s.shutdownOutput();
      } catch (IOException e) {
        throw new RuntimeException(e);
      }
    });
    byte[] back = s.getInputStream().readAllBytes();
    sent.get(10, TimeUnit.SECONDS);
    return back;
  }

  @Property(tries = 25)
  void bytesPassBothWaysUnchanged(@ForAll @IntRange(min = 0, max = 400_000) int size,
      @ForAll @IntRange(min = 0, max = 2) int delayMs, @ForAll long seed) throws Exception {
    byte[] data = new byte[size];
    new Random(seed).nextBytes(data);
    try (Echo echo = new Echo(true);
        DelayRelay relay = DelayRelay.start(ANY, echo.address(), Duration.ofMillis(delayMs));
        Socket s = connect(relay)) {
      byte[] back = roundTrip(s, data);
      assertEquals(size, back.length, "bytes came back through the relay, of " + size + " sent");
      assertArrayEquals(data, back, "the bytes came back changed");
    }
  }

  /**
   * Every round trip takes at least twice the delay, and the fastest of them not much more: a
   * relay adding its delay twice each way takes 4 x 0.1 s for each. A stall of the machine can
   * slow any one round trip, so round trips go on, up to 20 s, until one has come back within
   * 2 x 0.1 s + 0.15 s; a relay slowing every one never gets there.
   */
  @Test
  void aRoundTripTakesTwiceTheDelayAndNotMuchMore() throws Exception {
    Duration delay = Duration.ofMillis(100);
    long most = 2 * delay.toMillis() + 150;
    try (Echo echo = new Echo(true);
        DelayRelay relay = DelayRelay.start(ANY, echo.address(), delay);
        Socket s = connect(relay)) {
      long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      long fastest = Long.MAX_VALUE;
      int i = 0;
      while (i < 5 || fastest >= most && System.nanoTime() < giveUp) {
        long t0 = System.nanoTime();
        s.getOutputStream().write(i);
        s.getOutputStream().flush();
        int b = s.getInputStream().read();
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertEquals(i & 0xff, b, "the byte echoed");
        assertTrue(ms >= 2 * delay.toMillis(), "round trip " + i + " took " + ms
            + " ms, under twice the one-way delay of " + delay.toMillis() + " ms");
        fastest = Math.min(fastest, ms);
        i++;
      }
      assertTrue(fastest < most, "the fastest of " + i + " round trips took " + fastest
          + " ms, not under " + most + " ms (twice the one-way delay of " + delay.toMillis()
          + " ms and 150 ms)");
    }
  }

  /**
   * Fifty chunks 10 ms apart through 300 ms each way come back about 0.6 s after the last was
   * sent, shifted: a relay waiting the delay out per chunk, one chunk after the other, would
   * take 50 x 0.3 s = 15 s. The bound, 5 s after the last chunk and the two delays, leaves room
   * for a stall of the machine and is still 10 s short of that.
   */
  @Test
  void aStreamIsShiftedNotSlowed() throws Exception {
    Duration delay = Duration.ofMillis(300);
    int chunks = 50;
    try (Echo echo = new Echo(true);
        DelayRelay relay = DelayRelay.start(ANY, echo.address(), delay);
        Socket s = connect(relay)) {
      long t0 = System.nanoTime();
      CompletableFuture<Long> sent = CompletableFuture.supplyAsync(() -> {
        try {
          for (int i = 0; i < chunks; i++) {
            if (i > 0) {
              Thread.sleep(10);
            }
            s.getOutputStream().write(new byte[] {(byte) i, 1, 2, 3});
            s.getOutputStream().flush();
          }
          long last = System.nanoTime();
          s.shutdownOutput();
          return last;
        } catch (IOException | InterruptedException e) {
          throw new RuntimeException(e);
        }
      });
      byte[] back = s.getInputStream().readAllBytes();
      long end = System.nanoTime();
      long lastSent = sent.get(10, TimeUnit.SECONDS);
      long ms = TimeUnit.NANOSECONDS.toMillis(end - t0);
      long afterLast = TimeUnit.NANOSECONDS.toMillis(end - lastSent);
      assertEquals(4 * chunks, back.length, "bytes back");
      for (int i = 0; i < chunks; i++) {
        assertEquals(i, back[4 * i], "chunk " + i + " out of order");
      }
      long least = 2 * delay.toMillis() + (chunks - 1) * 10L;
      assertTrue(ms >= least, "the stream came back in " + ms + " ms, under " + least);
      long most = 2 * delay.toMillis() + 5_000;
      assertTrue(afterLast < most, "the stream came back " + afterLast + " ms after its last "
          + "chunk was sent (" + ms + " ms in all), not shifted by " + 2 * delay.toMillis()
          + " ms but slowed (expected about " + 2 * delay.toMillis() + " ms after the last)");
    }
  }

  @Test
  void aCloseOnOneSideReachesTheOtherAfterTheDelay() throws Exception {
    Duration delay = Duration.ofMillis(50);
    try (Echo target = new Echo(false);
        DelayRelay relay = DelayRelay.start(ANY, target.address(), delay);
        Socket s = connect(relay)) {
      s.getOutputStream().write(7);
      Socket far = target.accepted.poll(10, TimeUnit.SECONDS);
      assertTrue(far != null, "the relay connected to the target");
      far.setSoTimeout(10_000);
      assertEquals(7, far.getInputStream().read(), "the byte sent");
      long t0 = System.nanoTime();
      s.shutdownOutput();
      assertEquals(-1, far.getInputStream().read(), "the target saw the half-close as the end");
      long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
      assertTrue(ms >= delay.toMillis(), "the half-close arrived after " + ms + " ms, under the "
          + delay.toMillis() + " ms delay");
      // the other way is still open after the half-close
      far.getOutputStream().write(new byte[] {1, 2});
      far.close();
      assertArrayEquals(new byte[] {1, 2}, s.getInputStream().readAllBytes(),
          "the target's bytes, then its close as the end");
      s.close();
      waitFor(() -> relay.openConnections() == 0 && relay.liveThreads() == 1,
          () -> "after both ends closed, the relay holds " + relay.openConnections()
              + " connections and " + relay.liveThreads() + " threads (1: the accepting one)");
    }
  }

  @Test
  void theTargetsCloseReachesTheClient() throws Exception {
    try (Echo target = new Echo(false);
        DelayRelay relay = DelayRelay.start(ANY, target.address(), Duration.ofMillis(5));
        Socket s = connect(relay)) {
      Socket far = target.accepted.poll(10, TimeUnit.SECONDS);
      assertTrue(far != null, "the relay connected to the target");
      far.close();
      assertEquals(-1, s.getInputStream().read(), "the client saw the target's close");
    }
  }

  @Test
  void anUnreachableTargetClosesTheAcceptedConnection() throws Exception {
    InetSocketAddress gone;
    try (ServerSocket free = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      gone = (InetSocketAddress) free.getLocalSocketAddress();
    }
    try (DelayRelay relay = DelayRelay.start(ANY, gone, Duration.ZERO);
        Socket s = connect(relay)) {
      assertEquals(-1, s.getInputStream().read(), "the accepted connection was closed");
      waitFor(() -> relay.openConnections() == 0 && relay.liveThreads() == 1,
          () -> relay.openConnections() + " connections and " + relay.liveThreads()
              + " threads left");
    }
  }

  /** Many connections opened and ended leave only the accepting thread; close ends it too. */
  @Test
  void closingTheRelayEndsItsThreadsAndSockets() throws Exception {
    try (Echo echo = new Echo(true)) {
      DelayRelay relay = DelayRelay.start(ANY, echo.address(), Duration.ofMillis(2));
      String prefix = "delay-relay-" + relay.address().getPort();
      for (int i = 0; i < 20; i++) {
        try (Socket s = connect(relay)) {
          assertArrayEquals(new byte[] {(byte) i}, roundTrip(s, new byte[] {(byte) i}));
        }
      }
      waitFor(() -> relay.openConnections() == 0 && relay.liveThreads() == 1,
          () -> "20 connections ended leave " + relay.openConnections() + " connections and "
              + relay.liveThreads() + " threads (1: the accepting one)");
      List<Socket> open = new ArrayList<>();
      for (int i = 0; i < 3; i++) {
        Socket s = connect(relay);
        s.getOutputStream().write(i);
        assertEquals(i, s.getInputStream().read(), "the byte echoed");
        open.add(s);
      }
      assertEquals(3, relay.openConnections());
      relay.close();
      assertEquals(0, relay.liveThreads(), "threads of the relay running after close");
      assertEquals(0, relay.openConnections(), "connections open after close");
      // a thread leaves the relay's count as its body ends, a moment before it terminates: one
      // of the 20 connections' ended threads could still be seen alive here
      waitFor(() -> Thread.getAllStackTraces().keySet().stream()
          .noneMatch(t -> t.getName().startsWith(prefix)), () -> "a thread named " + prefix
          + "... still runs 10 s after close");
      for (Socket s : open) {
        try (s) {
          int b;
          try {
            b = s.getInputStream().read();
          } catch (IOException e) {
            b = -1; // reset: closed as well
          }
          assertEquals(-1, b, "a relayed connection still open after close");
        }
      }
      assertThrows(ConnectException.class, () -> connect(relay).close(),
          "the relay still accepts after close");
    }
  }

  @Test
  void badCommandLinesAreRefused() {
    assertEquals("--listen is required (HOST:PORT, comma-separated)", refused());
    assertEquals("--target is required (HOST:PORT, comma-separated)",
        refused("--listen", "127.0.0.1:7100"));
    assertEquals("--listen names 2 addresses and --target 1: they pair in order, so they must "
        + "be as many", refused("--listen", "127.0.0.1:7100,127.0.0.1:7101", "--target",
        "127.0.0.1:7000"));
    assertEquals("--target: not HOST:PORT: '7000'",
        refused("--listen", "127.0.0.1:7100", "--target", "7000"));
    assertEquals("--listen: not HOST:PORT (port 70000 is out of range): '127.0.0.1:70000'",
        refused("--listen", "127.0.0.1:70000", "--target", "127.0.0.1:7000"));
    assertEquals("--delay-ms must be from 0 to 60000, not -1", refused("--listen",
        "127.0.0.1:7100", "--target", "127.0.0.1:7000", "--delay-ms", "-1"));
    assertEquals("--delay-ms needs a value", refused("--delay-ms"));
    DelayRelayMain.Options o = DelayRelayMain.options(new String[] {"--listen",
        "127.0.0.1:7100,[::1]:7101", "--target", "127.0.0.1:7000,localhost:7001", "--delay-ms",
        "2.5"});
    assertEquals(List.of(new InetSocketAddress("127.0.0.1", 7100),
        new InetSocketAddress("::1", 7101)), o.listen());
    assertEquals(List.of(new InetSocketAddress("127.0.0.1", 7000),
        new InetSocketAddress("localhost", 7001)), o.target());
    assertEquals(Duration.ofMillis(2).plusNanos(500_000), o.delay());
    assertEquals(Duration.ZERO, DelayRelayMain.options(new String[] {"--listen", "localhost:1",
        "--target", "localhost:2"}).delay());
  }

  private static String refused(String... args) {
    return assertThrows(IllegalArgumentException.class, () -> DelayRelayMain.options(args))
        .getMessage();
  }

  private static void waitFor(java.util.function.BooleanSupplier done,
      java.util.function.Supplier<String> what) throws InterruptedException {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (!done.getAsBoolean()) {
      assertTrue(System.nanoTime() < deadline, what);
      Thread.sleep(10);
    }
  }
}
