package io.github.prefixrouter.bench.kvevents;

import io.github.prefixrouter.engine.vllm.KvEventDecoderAccess;
import io.github.prefixrouter.engine.vllm.VllmKvEventReceiver;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What a node pays per vLLM KV-event batch: {@link VllmKvEventReceiver#onMessage} decoding a
 * steady-state batch ({@link KvEventWorkload#standard}: 4 finished prefills of 1 to 64 blocks
 * stored, as many blocks removed, 1M tokens held) and applying it to a real engine-driven
 * {@link ConcurrentPrefixTree}, side by side with:
 *
 * <ul>
 *   <li>{@code receiveNoTree}: the same receiver with a listener that does nothing (decode,
 *       checks and dispatch);
 *   <li>{@code decodeOnly}: the library's decoder alone;
 *   <li>{@code msgpackCoreValues}: msgpack-core's generic {@code unpackValue} of the same bytes
 *       (the baseline: a general-purpose decode into Java values);
 *   <li>{@code msgpackCoreTyped}: msgpack-core reading the same bytes into the same typed
 *       arrays as the library's decoder (what a decoder written on that library would cost).
 * </ul>
 *
 * Every invocation takes the next batch of the cycle (the tree's size is the same after every
 * batch, see {@link KvEventWorkload}), with consecutive sequence numbers. {@code
 * KvEventBenchmarkMain} runs this class and derives the cost per block and the blocks per
 * second one core applies.
 */
@State(Scope.Thread)
@Fork(value = 2, jvmArgsAppend = {"-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class KvEventBenchmark {

  @Param({"INT", "BIN"})
  public String hashes;

  private KvEventWorkload workload;
  private byte[][] payloads;
  private int next = -1;
  private long seq = 1_000;
  private ConcurrentPrefixTree tree;
  private VllmKvEventReceiver receiver;
  private VllmKvEventReceiver noTree;

  @Setup(Level.Trial)
  public void setUp() {
    workload = KvEventWorkload.standard(KvEventWorkload.HashKind.valueOf(hashes));
    payloads = workload.payloads();
    tree = steadyTree(workload);
    receiver = new VllmKvEventReceiver(tree.engineEvents(), KvEventWorkload.BLOCK_SIZE);
    noTree = new VllmKvEventReceiver(new NoOpListener(), KvEventWorkload.BLOCK_SIZE);
  }

  /** An engine-driven tree holding the state every cycle of {@code w} starts from. */
  static ConcurrentPrefixTree steadyTree(KvEventWorkload w) {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(KvEventWorkload.BLOCK_SIZE)
        .build();
    w.fill(t.engineEvents());
    if (t.sizeTokens() != w.heldTokens()) {
      throw new IllegalStateException("filled tree holds " + t.sizeTokens() + " tokens, not "
          + w.heldTokens());
    }
    return t;
  }

  /** A run whose batches did not apply cleanly fails instead of reporting a figure. */
  @TearDown(Level.Trial)
  public void check() {
    VllmKvEventReceiver.Stats s = receiver.stats();
    if (s.malformedBatches() + s.tokenCountMismatches() + s.blockSizeMismatches() + s.gaps()
        + s.restarts() + s.listenerFailures() != 0) {
      throw new IllegalStateException("batches did not apply cleanly: " + s);
    }
    if (s.batchesApplied() > 0 && tree.sizeTokens() != workload.heldTokens()) {
      throw new IllegalStateException("tree holds " + tree.sizeTokens() + " tokens, not "
          + workload.heldTokens() + ": " + tree.engineEventStats());
    }
  }

  private byte[] nextPayload() {
    next = next + 1 == payloads.length ? 0 : next + 1;
    return payloads[next];
  }

  @Benchmark
  public void applyToTree() {
    receiver.onMessage(seq++, nextPayload());
  }

  @Benchmark
  public void receiveNoTree() {
    noTree.onMessage(seq++, nextPayload());
  }

  @Benchmark
  public Object decodeOnly() {
    return KvEventDecoderAccess.decode(nextPayload());
  }

  @Benchmark
  public Object msgpackCoreValues() {
    return MsgpackCoreDecoder.values(nextPayload());
  }

  @Benchmark
  public Object msgpackCoreTyped() {
    return MsgpackCoreDecoder.typed(nextPayload());
  }

  /** Takes every call and does nothing with it. */
  static final class NoOpListener implements CacheEventListener {
    long calls;

    @Override
    public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
      calls += blockHashes.length;
    }

    @Override
    public void onBlocksRemoved(long[] blockHashes) {
      calls += blockHashes.length;
    }

    @Override
    public void onAllCleared() {
      calls++;
    }
  }
}
