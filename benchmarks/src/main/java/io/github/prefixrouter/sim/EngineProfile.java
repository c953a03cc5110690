package io.github.prefixrouter.sim;

import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.testing.SimulatedEngine;

/**
 * The simulated engine of every node: a 0.5B-class model (Qwen2.5-0.5B-like) on a commodity
 * machine, as in a peer-to-peer network of ordinary computers. See docs/simulator.md for where
 * each default comes from.
 *
 * @param blockSize tokens per KV block (vLLM's default 16)
 * @param capacityTokens KV-cache capacity per node in tokens
 * @param slots requests one engine runs at once
 * @param prefillOverheadNanos fixed time of every prefill (HTTP, tokenization, scheduling)
 * @param prefillNanosPerToken prefill time per uncached prompt token
 * @param decodeNanosPerToken time per generated token
 */
public record EngineProfile(
    int blockSize,
    long capacityTokens,
    int slots,
    long prefillOverheadNanos,
    long prefillNanosPerToken,
    long decodeNanosPerToken) {

  /** The defaults documented in docs/simulator.md. */
  public static final EngineProfile DEFAULT =
      new EngineProfile(16, 65_536, 1, 10_000_000L, 2_500_000L, 15_000_000L);

  public EngineProfile {
    if (blockSize < 1) {
      throw new IllegalArgumentException("blockSize must be >= 1, was " + blockSize);
    }
    if (capacityTokens < blockSize) {
      throw new IllegalArgumentException(
          "capacityTokens must hold at least one block (" + blockSize + "), was " + capacityTokens);
    }
    if (slots < 1) {
      throw new IllegalArgumentException("slots must be >= 1, was " + slots);
    }
    if (prefillOverheadNanos < 0 || prefillNanosPerToken < 0 || decodeNanosPerToken < 0) {
      throw new IllegalArgumentException("engine timings must be >= 0");
    }
  }

  /** A profile with another capacity. */
  public EngineProfile withCapacityTokens(long tokens) {
    return new EngineProfile(
        blockSize, tokens, slots, prefillOverheadNanos, prefillNanosPerToken, decodeNanosPerToken);
  }

  /** A profile with another number of slots. */
  public EngineProfile withSlots(int n) {
    return new EngineProfile(
        blockSize, capacityTokens, n, prefillOverheadNanos, prefillNanosPerToken,
        decodeNanosPerToken);
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
