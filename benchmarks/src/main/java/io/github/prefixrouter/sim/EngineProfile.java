package io.github.prefixrouter.sim;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.testing.SimulatedEngine;

/**
 * The simulated engine of every node: a 0.5B-class model (Qwen2.5-0.5B-like) on a commodity
 * machine, as in a peer-to-peer network of ordinary computers. See docs/simulator.md for where
 * each default comes from.
 *
 * @param blockSize tokens per KV block (vLLM's default 16), 1 to 1024
 * @param capacityTokens KV-cache capacity per node in tokens, at least one block and at most
 *     2^31 - 1 blocks
 * @param slots requests one engine runs at once, 1 to {@link SimulatedEngine#MAX_SLOTS}
 * @param prefillOverheadNanos fixed time of every prefill (HTTP, tokenization, scheduling)
 * @param prefillNanosPerToken prefill time per uncached prompt token
 * @param decodeNanosPerToken time per generated token
 * @param reportsTimings whether each run's result carries its prefill and decode time, which
 *     the library's nodes learn their prefill cost from; false gives the nodes results without
 *     them, as the library's adapter for OpenAI-compatible servers does (whose API has none)
 */
public record EngineProfile(
    int blockSize,
    long capacityTokens,
    int slots,
    long prefillOverheadNanos,
    long prefillNanosPerToken,
    long decodeNanosPerToken,
    boolean reportsTimings) {

  /** The defaults documented in docs/simulator.md. */
  public static final EngineProfile DEFAULT =
      new EngineProfile(16, 65_536, 1, 10_000_000L, 2_500_000L, 15_000_000L);

  /** A profile whose engines report each run's timings. */
  public EngineProfile(
      int blockSize,
      long capacityTokens,
      int slots,
      long prefillOverheadNanos,
      long prefillNanosPerToken,
      long decodeNanosPerToken) {
    this(blockSize, capacityTokens, slots, prefillOverheadNanos, prefillNanosPerToken,
        decodeNanosPerToken, true);
  }

  /**
   * Checks the profile against the simulated engine's and the nodes' limits, so that a bad flag
   * is refused before anything runs: past them every run failed as its first engine was built.
   */
  public EngineProfile {
    if (blockSize < 1 || blockSize > RouterConfig.MAX_BLOCK_SIZE) {
      throw new IllegalArgumentException("blockSize must be 1 to " + RouterConfig.MAX_BLOCK_SIZE
          + " tokens, was " + blockSize);
    }
    if (capacityTokens < blockSize) {
      throw new IllegalArgumentException(
          "capacityTokens must hold at least one block (" + blockSize + "), was " + capacityTokens);
    }
    if (capacityTokens / blockSize > Integer.MAX_VALUE) {
      throw new IllegalArgumentException("capacityTokens must be at most " + Integer.MAX_VALUE
          + " blocks of " + blockSize + " tokens, was " + capacityTokens);
    }
    if (slots < 1 || slots > SimulatedEngine.MAX_SLOTS) {
      throw new IllegalArgumentException(
          "slots must be 1 to " + SimulatedEngine.MAX_SLOTS + ", was " + slots);
    }
    if (prefillOverheadNanos < 0 || prefillNanosPerToken < 0 || decodeNanosPerToken < 0) {
      throw new IllegalArgumentException("engine timings must be >= 0");
    }
  }

  /** A profile with another capacity. */
  public EngineProfile withCapacityTokens(long tokens) {
    return new EngineProfile(
        blockSize, tokens, slots, prefillOverheadNanos, prefillNanosPerToken, decodeNanosPerToken,
        reportsTimings);
  }

  /** A profile with another number of slots. */
  public EngineProfile withSlots(int n) {
    return new EngineProfile(
        blockSize, capacityTokens, n, prefillOverheadNanos, prefillNanosPerToken,
        decodeNanosPerToken, reportsTimings);
  }

  /** A profile whose engines report their runs' timings, or not. */
  public EngineProfile withTimings(boolean reported) {
    return new EngineProfile(
        blockSize, capacityTokens, slots, prefillOverheadNanos, prefillNanosPerToken,
        decodeNanosPerToken, reported);
  }

  /** Builds one node's engine on the shared scheduler. */
  SimulatedEngine newEngine(Scheduler scheduler, long blockIdSeed) {
    return SimulatedEngine.builder()
        .scheduler(scheduler)
        .blockSize(blockSize)
        .capacityTokens(capacityTokens)
        .slots(slots)
        .prefillOverheadNanos(prefillOverheadNanos)
        .prefillNanosPerToken(prefillNanosPerToken)
        .decodeNanosPerToken(decodeNanosPerToken)
        .blockIdSeed(blockIdSeed)
        .build();
  }
}
