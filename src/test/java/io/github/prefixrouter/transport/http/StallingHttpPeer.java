package io.github.prefixrouter.transport.http;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * An HTTP "server" on loopback that reads each request up to the end of its headers, writes a
 * fixed beginning of an answer (headers promising more body than it sends) and then stalls,
 * holding the connection open until {@link #close()}: a peer or endpoint that stops mid-answer.
 */
public final class StallingHttpPeer implements AutoCloseable {

  private final ServerSocket server;
  private final List<Socket> held = new CopyOnWriteArrayList<>();

  /**
   * Starts accepting on an ephemeral loopback port.
   *
   * @param answerStart what to write to every connection once its request headers are read
   * @throws IOException if the port cannot be opened
   */
  public StallingHttpPeer(String answerStart) throws IOException {
    server = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
    byte[] answer = answerStart.getBytes(StandardCharsets.US_ASCII);
    Thread acceptor = new Thread(() -> {
      try {
        while (true) {
          Socket s = server.accept();
          held.add(s);
          skipHeaders(s.getInputStream());
          s.getOutputStream().write(answer);
          s.getOutputStream().flush();
        }
      } catch (IOException closed) {
        // closed: the test is over
      }
    }, "stalling-http-peer");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  /** The port it listens on. */
  public int port() {
    return server.getLocalPort();
  }

  /** Reads up to and including the blank line that ends the headers (or to the end). */
  private static void skipHeaders(InputStream in) throws IOException {
    int matched = 0;
    while (matched < 4) {
      int c = in.read();
      if (c < 0) {
        return;
      }
      matched = (c == (matched % 2 == 0 ? '\r' : '\n')) ? matched + 1 : 0;
    }
  }

  /** Stops accepting and closes every connection it holds. */
  @Override
  public void close() throws IOException {
    server.close();
    for (Socket s : held) {
      s.close();
    }
  }
}
