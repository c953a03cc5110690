package io.github.prefixrouter.server;

import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.lang.reflect.Proxy;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.StringJoiner;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Run in a JVM of its own by {@link TcpNoDelayTest} (the JDK server reads
 * {@code sun.net.httpserver.nodelay} once per JVM): times sequential round trips on loopback
 * through two {@link HttpTransport}s (16 KiB each way) and through a {@link ClientEndpoint}'s
 * {@code GET /health}, and prints whether the sockets the JDK server accepts have TCP_NODELAY,
 * the property as the servers saw it and each batch's median in milliseconds:
 *
 * <pre>
 * accepted true
 * property true
 * transport 0.61 0.55 0.52
 * endpoint 0.40 0.38 0.37
 * </pre>
 */
public final class TcpNoDelayProbe {

  static final int PER_BATCH = 20;

  private TcpNoDelayProbe() {}

  public static void main(String[] args) throws Exception {
    int batches = Integer.parseInt(args[0]);
    byte[] key = "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.US_ASCII);
    Transport.InboundHandler echo = new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {}

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    };
    StringJoiner transport = new StringJoiner(" ", "transport ", "");
    try (HttpTransport a = HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0).clusterKey(key).build();
        HttpTransport b = HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0).clusterKey(key).build()) {
      a.start(echo);
      b.start(echo);
      byte[] body = new byte[16 * 1024];
      // batch -1 warms up, when there are batches to time: with none, the servers are only made
      for (int batch = batches == 0 ? 0 : -1; batch < batches; batch++) {
        double[] ms = new double[PER_BATCH];
        for (int i = 0; i < PER_BATCH; i++) {
          long t0 = System.nanoTime();
          byte[] answer = a.request(b.localAddress(), body, Duration.ofSeconds(10)).get(10, TimeUnit.SECONDS);
          ms[i] = (System.nanoTime() - t0) / 1e6;
          if (answer.length != body.length) {
            throw new IllegalStateException("answer of " + answer.length + " bytes");
          }
        }
        if (batch >= 0) {
          transport.add(Double.toString(median(ms)));
        }
      }
    }

    PrefixRouterNode node = (PrefixRouterNode) Proxy.newProxyInstance(
        PrefixRouterNode.class.getClassLoader(), new Class<?>[] {PrefixRouterNode.class},
        (proxy, method, margs) -> switch (method.getName()) {
          case "state" -> PrefixRouterNode.State.RUNNING;
          case "nodeId" -> "probe";
          case "toString" -> "probe";
          case "hashCode" -> 0;
          case "equals" -> proxy == margs[0];
          default -> throw new UnsupportedOperationException(method.getName());
        });
    StringJoiner endpoint = new StringJoiner(" ", "endpoint ", "");
    ClientEndpoint ce = new ClientEndpoint(node, java.util.List::of, 16, Duration.ofSeconds(5));
    InetSocketAddress addr = ce.start("127.0.0.1", 0);
    try {
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      HttpRequest health = HttpRequest.newBuilder(
          URI.create("http://127.0.0.1:" + addr.getPort() + ClientEndpoint.HEALTH)).GET().build();
      for (int batch = batches == 0 ? 0 : -1; batch < batches; batch++) {
        double[] ms = new double[PER_BATCH];
        for (int i = 0; i < PER_BATCH; i++) {
          long t0 = System.nanoTime();
          HttpResponse<String> r = c.send(health, HttpResponse.BodyHandlers.ofString());
          ms[i] = (System.nanoTime() - t0) / 1e6;
          if (r.statusCode() != 200 || r.body().isEmpty()) {
            throw new IllegalStateException(r.statusCode() + " " + r.body());
          }
        }
        if (batch >= 0) {
          endpoint.add(Double.toString(median(ms)));
        }
      }
    } finally {
      ce.stop();
    }
    // what the JDK server does with the sockets it accepts: the setting is read once per JVM,
    // so a server created after the library's shows what the library's servers got
    com.sun.net.httpserver.HttpServer plain =
        com.sun.net.httpserver.HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    plain.createContext("/", ex -> {
      byte[] b = acceptedNoDelay(ex).getBytes(StandardCharsets.US_ASCII);
      ex.sendResponseHeaders(200, b.length);
      ex.getResponseBody().write(b);
      ex.close();
    });
    plain.start();
    String accepted;
    try {
      accepted = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build().send(
          HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + plain.getAddress().getPort()
              + "/")).GET().build(), HttpResponse.BodyHandlers.ofString()).body();
    } finally {
      plain.stop(0);
    }
    System.out.println("accepted " + accepted);
    System.out.println("property " + System.getProperty("sun.net.httpserver.nodelay"));
    System.out.println(transport);
    System.out.println(endpoint);
    System.exit(0);
  }

  /**
   * TCP_NODELAY of the socket an exchange arrived on, read through the JDK server's internals
   * (the probe's JVM opens {@code sun.net.httpserver}), or "unknown: why".
   */
  static String acceptedNoDelay(com.sun.net.httpserver.HttpExchange ex) {
    try {
      Object impl = field(ex, "impl");
      Object connection = field(impl, "connection");
      java.nio.channels.SocketChannel ch = (java.nio.channels.SocketChannel) field(connection, "chan");
      return String.valueOf(ch.getOption(java.net.StandardSocketOptions.TCP_NODELAY));
    } catch (ReflectiveOperationException | RuntimeException | java.io.IOException e) {
      return "unknown: " + e;
    }
  }

  private static Object field(Object o, String name) throws ReflectiveOperationException {
    for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
      try {
        java.lang.reflect.Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
      } catch (NoSuchFieldException e) {
        // look in the superclass
      }
    }
    throw new NoSuchFieldException(o.getClass().getName() + "." + name);
  }

  static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return (s[(s.length - 1) / 2] + s[s.length / 2]) / 2;
  }
}
