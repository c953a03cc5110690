package io.github.prefixrouter.server;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * Run in a JVM of its own by {@link ClientKeepAliveTest} (the JDK HTTP client reads
 * {@code jdk.httpclient.keepalive.timeout} once per JVM): a transport sends a request to a peer
 * that closes every connection idle for {@code idleSeconds} or more since its last answer when a
 * request arrives on it, as the JDK server's idle close does when it crosses a request on its
 * way; then waits a little longer than that and sends a second request. Prints the property as
 * the client saw it and the outcome of each request:
 *
 * <pre>
 * property 20
 * first ok
 * second ok
 * </pre>
 */
public final class ClientKeepAliveProbe {

  private ClientKeepAliveProbe() {}

  public static void main(String[] args) throws Exception {
    long idleNanos = TimeUnit.SECONDS.toNanos(Long.parseLong(args[0]));
    ServerSocket server = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
    Thread acceptor = new Thread(() -> {
      try {
        while (true) {
          Socket s = server.accept();
          Thread t = new Thread(() -> serve(s, idleNanos), "peer-connection");
          t.setDaemon(true);
          t.start();
        }
      } catch (IOException closed) {
        // the probe is over
      }
    }, "peer-acceptor");
    acceptor.setDaemon(true);
    acceptor.start();
    HttpTransport t = HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().build();
    t.start((from, payload) -> CompletableFuture.completedFuture(new byte[0]));
    System.out.println("property " + System.getProperty("jdk.httpclient.keepalive.timeout"));
    PeerAddress peer = new PeerAddress("a", "127.0.0.1:" + server.getLocalPort());
    System.out.println("first " + outcome(t, peer));
    Thread.sleep(TimeUnit.NANOSECONDS.toMillis(idleNanos) + 1_000);
    System.out.println("second " + outcome(t, peer));
    t.close();
    server.close();
  }

  private static String outcome(Transport t, PeerAddress peer) throws InterruptedException {
    try {
      byte[] answer = t.request(peer, new byte[] {1}, Duration.ofSeconds(10))
          .get(20, TimeUnit.SECONDS);
      return new String(answer, StandardCharsets.US_ASCII);
    } catch (ExecutionException e) {
      return String.valueOf(e.getCause());
    } catch (java.util.concurrent.TimeoutException e) {
      return "no answer";
    }
  }

  /**
   * Answers "ok" to each request; closes the connection if it was idle for idleNanos or more
   * since its last answer. A new connection's first request is always answered: a client writes
   * it as soon as it has connected, but a slow start of the probe's JVM (class loading on a
   * loaded machine) once held it back for more than the 1 s of a short idle interval, and an
   * idle time counted from the accept lost the first request, which is not what is tested.
   */
  private static void serve(Socket s, long idleNanos) {
    try (s) {
      InputStream in = s.getInputStream();
      OutputStream out = s.getOutputStream();
      long idleSince = 0;
      boolean answered = false;
      while (true) {
        int first = in.read();
        if (first < 0) {
          return; // the client closed it
        }
        if (answered && System.nanoTime() - idleSince >= idleNanos) {
          return; // the idle close, crossing the request: nothing of it is read or answered
        }
        long length = readHeaders(in, first);
        in.readNBytes((int) length);
        out.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            .getBytes(StandardCharsets.US_ASCII));
        out.flush();
        answered = true;
        idleSince = System.nanoTime();
      }
    } catch (IOException e) {
      // the client went away
    }
  }

  /** Reads the headers after their first byte; returns the Content-Length (0 if none). */
  private static long readHeaders(InputStream in, int first) throws IOException {
    StringBuilder head = new StringBuilder().append((char) first);
    while (!head.toString().endsWith("\r\n\r\n")) {
      int c = in.read();
      if (c < 0) {
        throw new IOException("headers cut short");
      }
      head.append((char) c);
    }
    for (String line : head.toString().split("\r\n")) {
      if (line.toLowerCase(java.util.Locale.ROOT).startsWith("content-length:")) {
        return Long.parseLong(line.substring(15).trim());
      }
    }
    return 0;
  }
}
