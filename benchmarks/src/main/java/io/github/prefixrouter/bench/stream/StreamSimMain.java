package io.github.prefixrouter.bench.stream;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.SimFleet;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.workload.Tokens;
import io.github.prefixrouter.workload.ZipfDraw;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;

/**
 * Streamed output in a simulated 4-node cluster, side by side in one process: the same
 * requests, on the same seed, submitted without a listener ({@code whole}: the client gets the
 * output with the answer) and with one, STREAM messages gathered per {@code streamInterval}
 * (20 ms, the default) or sent per engine piece (0 ms).
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.github.prefixrouter.bench.stream.StreamSimMain \
 *     [--requests N] [--rounds N] [--warmup N] [--seed S] [--rate PER_SECOND]
 * </pre>
 *
 * <p>Prints per mode, over the requests after the first 20%: the time to the first output
 * (simulated: submission to the first piece, or to the answer without a listener) mean and p99,
 * the latency to the answer (mean), the share forwarded, the network messages and bytes per
 * request (gossip included) and the STREAM messages per forwarded request; then the wall time of
 * the whole simulation (median of the rounds, modes alternating) and every ratio to
 * {@code whole}.
 */
public final class StreamSimMain {

  record Outcome(double ttftMeanMs, double ttftP99Ms, double latencyMeanMs, double forwarded,
      double messagesPerRequest, double bytesPerRequest, double streamsPerForward, long failed,
      long wallNanos) {}

  private static final String[] MODES = {"whole", "stream-20ms", "stream-0ms"};

  private StreamSimMain() {}

  /** The settings of a run (see the class notes for the flags). */
  record Options(int requests, int rounds, long seed, double rate, int warmup) {}

  /**
   * Parses the command line.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or without its value,
   *     a value that is not a number, fewer than 1 request or round, a negative warm-up, or a
   *     rate outside {@link Flags#MIN_RATE} to {@link Flags#MAX_RATE}
   */
  static Options options(String[] args) {
    Flags f = Flags.parse(args, Set.of(),
        Set.of("--requests", "--rounds", "--seed", "--rate", "--warmup"));
    return new Options(f.atLeast("--requests", 3_000, 1, Flags.MAX_REQUESTS),
        f.atLeast("--rounds", 5, 1), f.whole("--seed", 1),
        f.between("--rate", 150, Flags.MIN_RATE, Flags.MAX_RATE), f.atLeast("--warmup", 4, 0));
  }

  public static void main(String[] args) {
    Options opts = Flags.parseOrExit("usage: benchmarks/run stream [flags]\n"
        + "  streamed vs whole output in a simulated cluster", args, StreamSimMain::options);
    int requests = opts.requests();
    int rounds = opts.rounds();
    long seed = opts.seed();
    double rate = opts.rate();
    int warmup = opts.warmup();
    System.out.printf(Locale.ROOT, "4 nodes x 8 slots; 64 system prompts of 1,024 tokens (Zipf 1)"
        + " + 16..143-token questions, 64 output tokens at 2 ms each (pieces of 4); %d requests at"
        + " %s/s (Poisson); 1 ms one-way delay; seed %d; %d warm-up and %d measured rounds,"
        + " modes alternating%n", requests, SimFleet.setting(rate), seed, warmup, rounds);
    for (int w = 0; w < warmup; w++) {
      for (String mode : MODES) {
        run(requests, seed, mode, rate); // warm-up of the JIT, not measured
      }
    }
    long[][] wall = new long[MODES.length][rounds];
    Outcome[] first = new Outcome[MODES.length];
    for (int round = 0; round < rounds; round++) {
      for (int m = 0; m < MODES.length; m++) {
        Outcome o = run(requests, seed, MODES[m], rate);
        wall[m][round] = o.wallNanos();
        if (round == 0) {
          first[m] = o;
        }
      }
    }
    System.out.println("mode          ttft-mean-ms  ttft-p99-ms  latency-mean-ms  forwarded"
        + "  msgs/req  bytes/req  STREAMs/fwd  failed  wall-ms(median)");
    double[] wallMs = new double[MODES.length];
    for (int m = 0; m < MODES.length; m++) {
      long[] w = wall[m].clone();
      Arrays.sort(w);
      wallMs[m] = w[w.length / 2] / 1e6;
      Outcome o = first[m];
      System.out.printf(Locale.ROOT, "%-12s  %12.1f  %11.1f  %15.1f  %9.3f  %8.2f  %9.0f  %11.2f"
              + "  %6d  %15.1f%n", MODES[m], o.ttftMeanMs(), o.ttftP99Ms(), o.latencyMeanMs(),
          o.forwarded(), o.messagesPerRequest(), o.bytesPerRequest(), o.streamsPerForward(),
          o.failed(), wallMs[m]);
    }
    for (int m = 1; m < MODES.length; m++) {
      Outcome a = first[m];
      Outcome b = first[0];
      System.out.printf(Locale.ROOT, "%s / whole: ttft mean %.3fx, latency mean %.3fx, messages"
              + " %.3fx, bytes %.3fx, wall time %.3fx (rounds: %s vs %s)%n", MODES[m],
          a.ttftMeanMs() / b.ttftMeanMs(), a.latencyMeanMs() / b.latencyMeanMs(),
          a.messagesPerRequest() / b.messagesPerRequest(),
          a.bytesPerRequest() / b.bytesPerRequest(), wallMs[m] / wallMs[0],
          Arrays.toString(ms(wall[m])), Arrays.toString(ms(wall[0])));
    }
  }

  private static String[] ms(long[] nanos) {
    String[] s = new String[nanos.length];
    for (int i = 0; i < nanos.length; i++) {
      s[i] = String.format(Locale.ROOT, "%.0f", nanos[i] / 1e6);
    }
    return s;
  }

  static Outcome run(int requests, long seed, String mode, double rate) {
    long wallStart = System.nanoTime();
    boolean listen = !mode.equals("whole");
    Duration interval = mode.equals("stream-0ms") ? Duration.ZERO : Duration.ofMillis(20);
    SimulatedScheduler sim = new SimulatedScheduler();
    InMemoryNetwork net = new InMemoryNetwork(sim, seed);
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(1))
        .withJitter(Duration.ofNanos(100_000)));
    int n = 4;
    List<PeerAddress> all = SimFleet.addresses(n);
    RouterConfig cfg = RouterConfig.builder().treeCapacityTokens(65_536)
        .streamInterval(interval).build();
    List<PrefixRouterNode> nodes = new ArrayList<>();
    long[] streams = new long[1];
    for (int i = 0; i < n; i++) {
      SimulatedEngine e = SimFleet.engine(sim, 8, 65_536).streamChunkTokens(4).build();
      PrefixRouterNode node = SimFleet.node(i, all, cfg, counting(net.transport("n" + i), streams),
          e, sim, seed);
      nodes.add(node);
      node.start();
    }
    sim.advanceBy(Duration.ofSeconds(3).toNanos()); // membership converges
    long messages0 = net.messagesSent();
    long bytes0 = net.bytesSent();

    SplittableRandom r = new SplittableRandom(seed);
    int prompts = 64;
    int[][] system = SimFleet.systemPrompts(r, prompts, 1024);
    ZipfDraw popularity = ZipfDraw.of(prompts, 1.0);
    long[] submitted = new long[requests];
    long[] firstOutput = new long[requests];
    long[] done = new long[requests];
    List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
    long t = sim.nanoTime();
    for (int q = 0; q < requests; q++) {
      t += SimFleet.poissonGap(r, rate);
      int k = popularity.rank(r.nextDouble());
      int[] prompt = Tokens.concat(system[k], SimFleet.tokens(r, 16 + r.nextInt(128)));
      int entry = r.nextInt(n);
      sim.advanceTo(t);
      submitted[q] = sim.nanoTime();
      final int index = q;
      InferenceRequest req = new InferenceRequest("q" + q, prompt, GenerationParams.greedy(64));
      CompletableFuture<InferenceResponse> f;
      if (listen) {
        OutputListener l = (tokens, text) -> {
          if (firstOutput[index] == 0 && tokens.length > 0) {
            firstOutput[index] = sim.nanoTime();
          }
        };
        f = nodes.get(entry).submit(req, l);
      } else {
        f = nodes.get(entry).submit(req);
      }
      f.whenComplete((v, err) -> {
        done[index] = sim.nanoTime();
        if (firstOutput[index] == 0) {
          firstOutput[index] = done[index];
        }
      });
      futures.add(f);
    }
    SimFleet.awaitAll(sim, futures);
    long messages = net.messagesSent() - messages0;
    long bytes = net.bytesSent() - bytes0;
    int warmup = requests / 5;
    double[] ttft = new double[requests - warmup];
    double latency = 0;
    long forwarded = 0;
    long allForwarded = 0;
    long failed = 0;
    for (int q = 0; q < requests; q++) {
      CompletableFuture<InferenceResponse> f = futures.get(q);
      boolean ok = f.isDone() && !f.isCompletedExceptionally();
      if (ok && f.join().forwarded()) {
        allForwarded++;
      }
      if (q < warmup) {
        continue;
      }
      if (!ok) {
        failed++;
      } else if (f.join().forwarded()) {
        forwarded++;
      }
      ttft[q - warmup] = (firstOutput[q] - submitted[q]) / 1e6;
      latency += (done[q] - submitted[q]) / 1e6;
    }
    SimFleet.stopAll(sim, nodes);
    SimFleet.Latencies l = SimFleet.Latencies.of(ttft);
    int measured = ttft.length;
    return new Outcome(l.mean(), l.p99(), latency / measured, (double) forwarded / measured,
        (double) messages / requests, (double) bytes / requests,
        allForwarded == 0 ? 0 : (double) streams[0] / allForwarded, failed,
        System.nanoTime() - wallStart);
  }

  /** Counts the STREAM messages (type 0x26) a node sends. */
  private static Transport counting(Transport t, long[] streams) {
    return new ForwardingTransport(t) {
      @Override
      public void send(PeerAddress to, byte[] payload) {
        if (payload.length > 0 && payload[0] == 0x26) {
          streams[0]++;
        }
        delegate.send(to, payload);
      }
    };
  }
}
