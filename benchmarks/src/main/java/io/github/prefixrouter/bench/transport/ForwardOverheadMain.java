package io.github.prefixrouter.bench.transport;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.internal.CommonPoolSize;
import io.github.prefixrouter.internal.route.PricingAccess;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * What a forward costs beyond gossip's round trip on this machine: two library nodes on loopback
 * through {@link HttpTransport} (authenticated, TCP_NODELAY as the library sets it), engines that
 * answer at once, so a forward's time is the transport's. n1 runs a 1,024-token prompt; once n0's
 * replica shows it, n0 forwards {@code --n} requests of that prompt to n1, one at a time. Prints
 * gossip's smoothed round trip as n0's decision uses it, the per-forward overhead n0 learned
 * from the answers (its configured prior is {@code forwardOverhead}, 0.2 ms), and the median
 * time from submitting at n0 to the answer. Pin it with {@code taskset -c 1}.
 *
 * <pre>
 * java -cp benchmarks.jar io.github.prefixrouter.bench.transport.ForwardOverheadMain [--n 300]
 * </pre>
 */
public final class ForwardOverheadMain {

  private static final byte[] KEY =
      "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

  private ForwardOverheadMain() {}

  /** An engine that answers at once: one output token, no prefill or decode time. */
  static final class Instant implements InferenceEngine {
    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return CompletableFuture.completedFuture(
          new EngineResult(new int[] {1}, "", r.length(), 0, 0, 0));
    }
  }

  /**
   * The requests to time, {@code --n}.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or without its value,
   *     or a count below 1
   */
  static int requests(String[] args) {
    return Flags.parse(args, Set.of(), Set.of("--n")).atLeast("--n", 300, 1);
  }

  public static void main(String[] args) throws Exception {
    // before anything creates the pool: on 1 or 2 processors (one, pinned) every exchange the
    // transport sent started and ended a thread, which a node process does not
    CommonPoolSize.twoAtLeast();
    int n = Flags.parseOrExit("usage: benchmarks/run overhead [flags]\n"
        + "  a forward's cost beyond gossip's round trip, over HTTP", args,
        ForwardOverheadMain::requests);
    int p0 = freePort();
    int p1 = freePort();
    PeerAddress a0 = new PeerAddress("n0", "127.0.0.1:" + p0);
    PeerAddress a1 = new PeerAddress("n1", "127.0.0.1:" + p1);
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX)
        .coldPlacement(false).build();
    PrefixRouterNode n0 = node("n0", p0, cfg, a1);
    PrefixRouterNode n1 = node("n1", p1, cfg, a0);
    try (n0; n1) {
      n0.start();
      n1.start();
      SplittableRandom r = new SplittableRandom(7);
      int[] prompt = new int[1024];
      for (int i = 0; i < prompt.length; i++) {
        prompt[i] = r.nextInt(50_000);
      }
      n1.submit(InferenceRequest.of("seed", prompt)).get(10, TimeUnit.SECONDS);
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      RouteDecision d = n0.explain(InferenceRequest.of("probe", prompt));
      while (!"n1".equals(d.targetNodeId())) {
        if (System.nanoTime() > deadline) {
          throw new IllegalStateException("n0 never saw n1's prefix: " + d);
        }
        Thread.sleep(50);
        d = n0.explain(InferenceRequest.of("probe", prompt));
      }
      double[] ms = new double[n];
      int forwarded = 0;
      for (int i = 0; i < n; i++) {
        long t0 = System.nanoTime();
        InferenceResponse resp = n0.submit(InferenceRequest.of("q" + i, prompt))
            .get(10, TimeUnit.SECONDS);
        ms[i] = (System.nanoTime() - t0) / 1e6;
        forwarded += resp.forwarded() ? 1 : 0;
      }
      d = n0.explain(InferenceRequest.of("probe", prompt));
      long rtt = d.candidates().get(1).rttNanos();
      long overhead = PricingAccess.forwardOverheadNanos(n0, "n1");
      Arrays.sort(ms);
      System.out.printf(Locale.ROOT, "%d requests from n0, %d forwarded to n1%n", n, forwarded);
      System.out.printf(Locale.ROOT, "gossip's smoothed round trip n0 -> n1   %8.3f ms%n",
          rtt / 1e6);
      System.out.printf(Locale.ROOT, "learned per-forward overhead           %8.3f ms "
          + "(prior %.3f ms)%n", overhead / 1e6, cfg.forwardOverhead().toNanos() / 1e6);
      System.out.printf(Locale.ROOT, "submit to answer at n0, median / p90   %8.3f / %.3f ms%n",
          ms[n / 2], ms[(int) (n * 0.9)]);
    }
  }

  static PrefixRouterNode node(String id, int port, RouterConfig cfg, PeerAddress seed) {
    HttpTransport t = HttpTransport.builder().nodeId(id).listen("127.0.0.1", port)
        .clusterKey(KEY).build();
    return PrefixRouterNode.builder().nodeId(id).config(cfg).transport(t).engine(new Instant())
        .seeds(List.of(seed)).build();
  }

  static int freePort() throws Exception {
    try (ServerSocket s = new ServerSocket(0)) {
      return s.getLocalPort();
    }
  }
}
