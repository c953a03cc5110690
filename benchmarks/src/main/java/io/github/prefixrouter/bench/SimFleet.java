package io.github.prefixrouter.bench;

import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.workload.Tokens;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;

/**
 * What the simulated-cluster mains ({@code ScopeSimMain}, {@code SlotSimMain},
 * {@code StreamSimMain}) share: nodes {@code n0..n(N-1)} on an {@link InMemoryNetwork}, each
 * seeded with the others, engines of the same speeds, a 50,000-token vocabulary, Poisson
 * arrivals, and the wait for the answers.
 */
public final class SimFleet {

  /** The simulated engines' vocabulary. */
  public static final int VOCABULARY = 50_000;

  private SimFleet() {}

  /**
   * A figure of a printed table: {@code v} in {@code format} ({@link Locale#ROOT}), or "-" where
   * it does not exist (NaN or infinite): a ratio to a baseline that measured nothing (0 / 0,
   * x / 0), or a figure over no request at all.
   *
   * @param v the figure
   * @param format its format, with one conversion
   * @return the text
   */
  public static String figure(double v, String format) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, format, v) : "-";
  }

  /**
   * A setting as a printed header gives it ({@link Locale#ROOT}): up to six significant digits,
   * without trailing zeros, so that a rate of 0.2 per second is not printed as 0 (or 0.5 as 1)
   * and 150 is printed as 150.
   *
   * @param v the setting
   * @return the text
   */
  public static String setting(double v) {
    return String.format(Locale.ROOT, "%.6g", v).replaceAll("(\\.\\d*?)0+(e|$)", "$1$2")
        .replaceAll("\\.(e|$)", "$1");
  }

  /**
   * The addresses of nodes {@code n0..n(count-1)}.
   *
   * @param count how many nodes
   * @return their addresses, in order
   */
  public static List<PeerAddress> addresses(int count) {
    List<PeerAddress> all = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      all.add(InMemoryNetwork.addressOf("n" + i));
    }
    return all;
  }

  /**
   * An in-memory network on {@code sim} whose links delay every message by
   * {@code oneWayDelayNanos}, with a tenth of it as jitter.
   *
   * @param sim the simulated clock and scheduler
   * @param seed the network's seed (loss, jitter)
   * @param oneWayDelayNanos the one-way delay
   * @return the network
   */
  public static InMemoryNetwork network(SimulatedScheduler sim, long seed,
      long oneWayDelayNanos) {
    InMemoryNetwork net = new InMemoryNetwork(sim, seed);
    net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofNanos(oneWayDelayNanos))
        .withJitter(Duration.ofNanos(oneWayDelayNanos / 10)));
    return net;
  }

  /**
   * An engine on {@code sim}: 2 ms + 100 µs per token of prefill, 2 ms per output token.
   *
   * @param sim the simulated clock and scheduler
   * @param slots requests it runs at once
   * @param capacityTokens its KV-cache capacity
   * @return the builder, for more settings
   */
  public static SimulatedEngine.Builder engine(SimulatedScheduler sim, int slots,
      int capacityTokens) {
    return SimulatedEngine.builder().scheduler(sim).slots(slots).capacityTokens(capacityTokens)
        .prefillOverheadNanos(2_000_000).prefillNanosPerToken(100_000)
        .decodeNanosPerToken(2_000_000).vocabularySize(VOCABULARY);
  }

  /**
   * Node {@code n<i>} on simulated time, seeded with every other address of {@code all}, its
   * random generator seeded from {@code seed} and {@code i}. Not started.
   *
   * @param i the node's index in {@code all}
   * @param all every node's address
   * @param config the routing configuration
   * @param transport its transport
   * @param engine its engine
   * @param sim the simulated clock and scheduler
   * @param seed the run's seed
   * @return the node
   */
  public static PrefixRouterNode node(int i, List<PeerAddress> all, RouterConfig config,
      Transport transport, InferenceEngine engine, SimulatedScheduler sim, long seed) {
    List<PeerAddress> seeds = new ArrayList<>(all);
    seeds.remove(i);
    return PrefixRouterNode.builder().nodeId("n" + i).config(config).transport(transport)
        .engine(engine).clock(sim).scheduler(sim).random(new SplittableRandom(seed * 31 + i))
        .seeds(seeds).build();
  }

  /**
   * Random token ids of the engines' vocabulary.
   *
   * @param r the generator
   * @param n how many
   * @return the tokens
   */
  public static int[] tokens(SplittableRandom r, int n) {
    return Tokens.random(r, n, VOCABULARY);
  }

  /**
   * {@code count} system prompts of {@code length} tokens each, drawn in order from {@code r}.
   *
   * @param r the generator
   * @param count how many prompts
   * @param length tokens each
   * @return the prompts
   */
  public static int[][] systemPrompts(SplittableRandom r, int count, int length) {
    int[][] system = new int[count][];
    for (int k = 0; k < count; k++) {
      system[k] = tokens(r, length);
    }
    return system;
  }

  /**
   * The time to the next arrival of a Poisson process (one draw of {@code r}).
   *
   * @param r the generator
   * @param ratePerSecond arrivals per second
   * @return nanoseconds
   */
  public static long poissonGap(SplittableRandom r, double ratePerSecond) {
    return (long) (-Math.log(1 - r.nextDouble()) / ratePerSecond * 1e9);
  }

  /**
   * Runs the simulation in steps of 100 ms until every future is done, or for 10 simulated
   * minutes at the most.
   *
   * @param sim the simulated clock and scheduler
   * @param futures the answers awaited
   */
  public static void awaitAll(SimulatedScheduler sim,
      List<? extends CompletableFuture<?>> futures) {
    long deadline = sim.nanoTime() + Duration.ofMinutes(10).toNanos();
    while (futures.stream().anyMatch(f -> !f.isDone()) && sim.nanoTime() < deadline) {
      sim.advanceBy(Duration.ofMillis(100).toNanos());
    }
  }

  /**
   * Stops every node and runs the simulation 5 seconds more, for the stops to end.
   *
   * @param sim the simulated clock and scheduler
   * @param nodes the nodes
   */
  public static void stopAll(SimulatedScheduler sim, List<PrefixRouterNode> nodes) {
    nodes.forEach(PrefixRouterNode::stop);
    sim.advanceBy(Duration.ofSeconds(5).toNanos());
  }

  /** Answers counted: prompt and cached prompt tokens, forwarded and failed requests. */
  public static final class Tally {
    long prompt;
    long cached;
    long forwarded;
    long failed;

    /**
     * Counts the outcome of {@code f}: a failure if it failed or is not done, else its tokens.
     *
     * @param f a request's future
     * @return its answer, or null if it failed or is not done
     */
    public InferenceResponse add(CompletableFuture<InferenceResponse> f) {
      if (!f.isDone() || f.isCompletedExceptionally()) {
        failed++;
        return null;
      }
      InferenceResponse resp = f.join();
      prompt += resp.result().promptTokens();
      cached += Math.max(0, resp.result().cachedPromptTokens());
      forwarded += resp.forwarded() ? 1 : 0;
      return resp;
    }

    /** Cached over prompt tokens, of the answers counted. */
    public double hitRate() {
      return (double) cached / prompt;
    }

    /** Answers served by a peer. */
    public long forwarded() {
      return forwarded;
    }

    /** Requests failed or never answered. */
    public long failed() {
      return failed;
    }
  }

  /** The mean, median and 99th percentile of latencies. */
  public record Latencies(double mean, double p50, double p99) {

    /**
     * Sorts {@code values} (in place), then takes their mean, median ({@code [n / 2]}) and
     * 99th percentile ({@code [(int) (n * 0.99)]}); all three NaN if there are none (no request
     * fell in the window measured).
     *
     * @param values the latencies; sorted on return
     * @return the figures
     */
    public static Latencies of(double[] values) {
      if (values.length == 0) {
        return new Latencies(Double.NaN, Double.NaN, Double.NaN);
      }
      Arrays.sort(values);
      double mean = Arrays.stream(values).average().orElse(0);
      return new Latencies(mean, values[values.length / 2],
          values[(int) (values.length * 0.99)]);
    }
  }
}
