package io.github.prefixrouter.internal.zmq;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;

/**
 * A plain TCP server on loopback that runs a script on every connection it accepts: a peer
 * that writes whatever bytes a test wants, valid or not. Connections stay open until the
 * script returns or the peer is closed.
 */
public final class HostilePeer implements AutoCloseable {

  public interface Script {
    void run(Socket socket, InputStream in, OutputStream out) throws Exception;
  }

  private final ServerSocket server;
  private final Thread thread;
  private final List<Socket> accepted = new ArrayList<>();
  private volatile int connections;

  public HostilePeer(Script script) throws IOException {
    this(script, 0);
  }

  /**
   * A peer whose connections have a receive buffer of {@code receiveBufferBytes} (0: the
   * system's), set on the listening socket before it binds so that every connection advertises
   * a window that small from its first segment on.
   */
  public HostilePeer(Script script, int receiveBufferBytes) throws IOException {
    server = new ServerSocket();
    if (receiveBufferBytes > 0) {
      server.setReceiveBufferSize(receiveBufferBytes);
    }
    server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 50);
    thread = new Thread(() -> serve(script), "hostile-peer");
    thread.setDaemon(true);
    thread.start();
  }

  private void serve(Script script) {
    while (!server.isClosed()) {
      Socket s;
      try {
        s = server.accept();
      } catch (IOException e) {
        return;
      }
      synchronized (accepted) {
        accepted.add(s);
      }
      connections++;
      Thread t = new Thread(() -> {
        try (s) {
          script.run(s, s.getInputStream(), s.getOutputStream());
        } catch (Exception ignored) {
          // the client closed on us: expected
        }
      }, "hostile-peer-connection");
      t.setDaemon(true);
      t.start();
    }
  }

  public int port() {
    return server.getLocalPort();
  }

  public ZmtpEndpoint endpoint() {
    return new ZmtpEndpoint("127.0.0.1", port());
  }

  public int connections() {
    return connections;
  }

  /** Reads a client's greeting and the one short command frame (its READY) that follows. */
  public static void readClientHandshake(InputStream in) throws IOException {
    DataInputStream d = new DataInputStream(in);
    d.readFully(new byte[64]);
    readFrame(d);
  }

  /** Reads one frame and returns its flags and body (flags in element 0 of the result's pair). */
  public static byte[] readFrame(DataInputStream d) throws IOException {
    int flags = d.readUnsignedByte();
    long size = (flags & ZmtpSocket.FLAG_LONG) != 0 ? d.readLong() : d.readUnsignedByte();
    byte[] body = new byte[(int) size];
    d.readFully(body);
    return body;
  }

  /** Blocks until the client closes the connection. */
  public static void awaitClientClose(InputStream in) throws IOException {
    byte[] b = new byte[4096];
    while (in.read(b) >= 0) {
      // discard
    }
  }

  @Override
  public void close() throws IOException {
    server.close();
    synchronized (accepted) {
      for (Socket s : accepted) {
        s.close();
      }
    }
    try {
      thread.join(10_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
