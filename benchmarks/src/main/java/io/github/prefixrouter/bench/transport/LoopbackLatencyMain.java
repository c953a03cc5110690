package io.github.prefixrouter.bench.transport;

import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.SimFleet;
import io.github.prefixrouter.internal.CommonPoolSize;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.io.File;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Sequential request/answer latency on loopback, one request at a time: through
 * {@link HttpTransport} (two transports in one JVM, 100 B and 16 KiB bodies each way; and a
 * message sent back as a message, the path of gossip's SYN and ACK that measure the RTT) and through
 * a node's client endpoint (a {@code NodeMain} process, JDK {@link HttpClient}).
 *
 * <p>The JDK HTTP server reads {@code sun.net.httpserver.nodelay} once, so each setting runs in a
 * JVM of its own: this process starts the children for {@code -Dsun.net.httpserver.nodelay=false}
 * and {@code =true} in turn, {@code --rounds} times each, and prints each child's medians and the
 * ratios false / true of the medians over all rounds. Pin it with {@code taskset -c 1}; the
 * children inherit the pinning.
 *
 * <pre>
 * java -cp benchmarks.jar io.github.prefixrouter.bench.transport.LoopbackLatencyMain [--rounds 2] [--n 200]
 * </pre>
 */
public final class LoopbackLatencyMain {

  private static final byte[] KEY =
      "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

  /** Untimed round trips before each timed series. */
  private static final int WARMUP = 100;

  private LoopbackLatencyMain() {}

  /** The settings of a run; {@code child} is null but in the child JVMs. */
  record Options(int rounds, int n, String child) {}

  /**
   * Parses the command line.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or without its value,
   *     a count below 1, or a {@code --child} other than {@code transport}
   */
  static Options options(String[] args) {
    Flags f = Flags.parse(args, Set.of(), Set.of("--rounds", "--n", "--child"));
    String child = f.string("--child", null);
    if (child != null && !child.equals("transport")) {
      throw new IllegalArgumentException("--child: unknown value '" + child + "'");
    }
    return new Options(f.atLeast("--rounds", 2, 1), f.atLeast("--n", 200, 1), child);
  }

  public static void main(String[] args) throws Exception {
    // before anything creates the pool: on 1 or 2 processors (one, pinned) every exchange the
    // transport sent started and ended a thread, which a node process does not
    CommonPoolSize.twoAtLeast();
    Options o = Flags.parseOrExit("usage: benchmarks/run loopback [flags]\n"
        + "  request latency on loopback, TCP_NODELAY off vs on", args,
        LoopbackLatencyMain::options);
    int rounds = o.rounds();
    int n = o.n();
    String child = o.child();
    if ("transport".equals(child)) {
      for (Map.Entry<String, Double> e : transportMedians(n).entrySet()) {
        System.out.println("RESULT " + e.getKey() + " " + e.getValue());
      }
      return;
    }
    String[] settings = {"false", "true"};
    Map<String, Map<String, List<Double>>> all = new LinkedHashMap<>();
    for (int r = 0; r < rounds; r++) {
      for (String s : settings) {
        Map<String, Double> m = new LinkedHashMap<>(runTransportChild(s, n));
        m.putAll(clientEndpointMedians(s, n));
        System.out.println("round " + r + " nodelay=" + s + " " + m);
        for (Map.Entry<String, Double> e : m.entrySet()) {
          all.computeIfAbsent(e.getKey(), k -> new LinkedHashMap<>())
              .computeIfAbsent(s, k -> new ArrayList<>()).add(e.getValue());
        }
      }
    }
    System.out.println();
    System.out.print(table(all));
  }

  /**
   * The closing table: per measurement, the medians over all rounds of each setting and their
   * ratio false / true ({@code -} where the {@code true} median is 0), in {@link Locale#ROOT}
   * whatever the default locale.
   *
   * @param all per measurement, per setting ({@code "false"}, {@code "true"}), each round's median
   */
  static String table(Map<String, Map<String, List<Double>>> all) {
    StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%-34s %14s %14s %8s%n",
        "median ms (median over rounds)", "nodelay=false", "nodelay=true", "ratio"));
    for (Map.Entry<String, Map<String, List<Double>>> e : all.entrySet()) {
      double off = median(e.getValue().get("false"));
      double on = median(e.getValue().get("true"));
      sb.append(String.format(Locale.ROOT, "%-34s %14.3f %14.3f %8s%n", e.getKey(), off, on,
          SimFleet.figure(off / on, "%.1fx")));
    }
    return sb.toString();
  }

  private static Map<String, Double> runTransportChild(String nodelay, int n) throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process p = new ProcessBuilder(java, "-Dsun.net.httpserver.nodelay=" + nodelay, "-cp",
        System.getProperty("java.class.path"), LoopbackLatencyMain.class.getName(), "--child",
        "transport", "--n", Integer.toString(n))
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    Map<String, Double> out = new LinkedHashMap<>();
    for (String line : new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).split("\n")) {
      if (line.startsWith("RESULT ")) {
        int sp = line.lastIndexOf(' ');
        out.put(line.substring("RESULT ".length(), sp), Double.parseDouble(line.substring(sp + 1)));
      }
    }
    if (p.waitFor() != 0) {
      throw new IllegalStateException("child failed");
    }
    return out;
  }

  /**
   * Two transports. Requests: B answers A's requests with a body of the request's size. Messages
   * (the gossip path, SYN then ACK): B sends each message of A's straight back as a message, and
   * A times the turn from its {@code send} to the echo's arrival.
   */
  private static Map<String, Double> transportMedians(int n) throws Exception {
    java.util.concurrent.BlockingQueue<byte[]> echoes = new java.util.concurrent.LinkedBlockingQueue<>();
    HttpTransport a = HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0).clusterKey(KEY).build();
    HttpTransport b = HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0).clusterKey(KEY).build();
    Map<String, Double> out = new LinkedHashMap<>();
    try (a; b) {
      a.start(new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {
          echoes.add(payload);
        }

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          return CompletableFuture.completedFuture(new byte[payload.length]);
        }
      });
      b.start(new Transport.InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {
          b.send(from, payload);
        }

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          return CompletableFuture.completedFuture(new byte[payload.length]);
        }
      });
      // all request series first: after a message series (a send does not wait for its 204) the
      // pooled connections are in other TCP states, and a 16 KiB request series timed after one
      // was spared the delayed ACK with TCP_NODELAY off (3 ms instead of 48 ms, in one run)
      for (int size : new int[] {100, 16 * 1024}) {
        byte[] body = new byte[size];
        for (int i = 0; i < WARMUP; i++) {
          a.request(b.localAddress(), body, Duration.ofSeconds(10)).get(10, TimeUnit.SECONDS);
        }
        double[] ms = new double[n];
        for (int i = 0; i < n; i++) {
          long t0 = System.nanoTime();
          a.request(b.localAddress(), body, Duration.ofSeconds(10)).get(10, TimeUnit.SECONDS);
          ms[i] = (System.nanoTime() - t0) / 1e6;
        }
        out.put("transport request " + label(size), median(ms));
      }
      for (int size : new int[] {100, 16 * 1024}) {
        byte[] body = new byte[size];
        double[] ms = new double[n];
        for (int i = 0; i < WARMUP + n; i++) {
          long t0 = System.nanoTime();
          a.send(b.localAddress(), body);
          if (echoes.poll(10, TimeUnit.SECONDS) == null) {
            throw new IllegalStateException("message echo lost");
          }
          if (i >= WARMUP) {
            ms[i - WARMUP] = (System.nanoTime() - t0) / 1e6;
          }
        }
        out.put("transport message+echo " + label(size), median(ms));
      }
    }
    return out;
  }

  private static String label(int size) {
    return size == 100 ? "100B" : "16KiB";
  }

  /** A NodeMain process (reference engine) with the setting; its client endpoint timed from here. */
  private static Map<String, Double> clientEndpointMedians(String nodelay, int n) throws Exception {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    File ready = File.createTempFile("loopback-latency", ".ready");
    ready.delete();
    ProcessBuilder node = new ProcessBuilder(java, "-Dsun.net.httpserver.nodelay=" + nodelay, "-cp",
        System.getProperty("java.class.path"), "io.github.prefixrouter.server.NodeMain", "--id", "n0",
        "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0", "--insecure", "--engine", "reference",
        "--ready-file", ready.getPath())
        .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD);
    node.environment().remove("PREFIX_ROUTER_CLUSTER_KEY"); // --insecure refuses a key there
    Process p = node.start();
    Map<String, Double> out = new LinkedHashMap<>();
    try {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (!ready.exists() || Files.readString(ready.toPath()).isBlank()) {
        if (System.nanoTime() > deadline || !p.isAlive()) {
          throw new IllegalStateException("node did not start");
        }
        Thread.sleep(50);
      }
      String clientAddr = null;
      for (String f : Files.readString(ready.toPath()).trim().split("\\s+")) {
        if (f.startsWith("client=")) {
          clientAddr = f.substring("client=".length());
        }
      }
      HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      HttpRequest health = HttpRequest.newBuilder(URI.create("http://" + clientAddr + "/health")).GET().build();
      int[] prompt = new int[64];
      Arrays.setAll(prompt, i -> 100 + i);
      String json = "{\"prompt\": " + Arrays.toString(prompt) + ", \"max_tokens\": 1}";
      HttpRequest completion = HttpRequest.newBuilder(URI.create("http://" + clientAddr + "/v1/route/completions"))
          .header("Content-Type", "application/json")
          .POST(HttpRequest.BodyPublishers.ofString(json)).build();
      out.put("client endpoint GET /health", time(http, health, n));
      out.put("client endpoint POST completion", time(http, completion, n));
    } finally {
      p.destroy();
      p.waitFor(30, TimeUnit.SECONDS);
      ready.delete();
    }
    return out;
  }

  private static double time(HttpClient http, HttpRequest req, int n) throws Exception {
    for (int i = 0; i < WARMUP; i++) {
      check(http.send(req, HttpResponse.BodyHandlers.ofByteArray()));
    }
    double[] ms = new double[n];
    for (int i = 0; i < n; i++) {
      long t0 = System.nanoTime();
      check(http.send(req, HttpResponse.BodyHandlers.ofByteArray()));
      ms[i] = (System.nanoTime() - t0) / 1e6;
    }
    return median(ms);
  }

  private static void check(HttpResponse<byte[]> r) {
    if (r.statusCode() != 200) {
      throw new IllegalStateException("status " + r.statusCode() + ": " + new String(r.body(), StandardCharsets.UTF_8));
    }
  }

  private static double median(double[] v) {
    double[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  private static double median(List<Double> v) {
    return median(v.stream().mapToDouble(Double::doubleValue).toArray());
  }
}
