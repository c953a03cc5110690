package io.github.prefixrouter.bench.kvevents;

import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.bench.tree.MemoryMeter;
import io.github.prefixrouter.engine.vllm.VllmKvEventReceiver;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.util.Locale;
import java.util.Set;

/**
 * The heap an engine-driven tree retains at the steady state of {@link KvEventBenchmark}'s
 * workload (1M tokens held, as vLLM's events keep storing and removing chains): the tree is
 * filled, then every batch of the workload's cycle is applied {@value #CYCLES} times through a
 * {@link VllmKvEventReceiver}, and the used heap after repeated full collections, less what it
 * was before the tree existed, is divided by the tokens the tree holds. Two builds of the core
 * are compared by putting each one's jar first on the class path:
 *
 * <pre>
 *   java -XX:+UseG1GC -cp OLD.jar:benchmarks/target/benchmarks.jar \
 *       io.github.prefixrouter.bench.kvevents.EngineTreeHeapMain
 * </pre>
 *
 * <p>It takes no arguments: one given stops it with {@code error: ...} and exit code 2
 * ({@link Flags#parseOrExit}) before anything is measured.
 *
 * <p>Needs a parallel collector, as the tree benchmark's memory column does (see
 * {@code docs/tree.md}): under the serial collector some samples come out near 0, so it then
 * prints no figures ({@link MemoryMeter#unreliableReason}).
 */
public final class EngineTreeHeapMain {

  /** Cycles of the workload's batches applied after the fill. */
  static final int CYCLES = 3;

  private EngineTreeHeapMain() {}

  /** What one measurement found. */
  record Heap(long heldTokens, long filledBytes, long steadyBytes, long batchesApplied) {

    double filledBytesPerToken() {
      return filledBytes / (double) heldTokens;
    }

    double steadyBytesPerToken() {
      return steadyBytes / (double) heldTokens;
    }
  }

  public static void main(String[] args) {
    Flags.parseOrExit("usage: EngineTreeHeapMain\n  the heap an engine tree holds, measured",
        args, a -> Flags.parse(a, Set.of(), Set.of()));
    String unreliable = MemoryMeter.unreliableReason();
    if (unreliable != null) {
      System.err.println("no figures: " + unreliable);
      System.exit(2);
    }
    for (KvEventWorkload.HashKind kind : KvEventWorkload.HashKind.values()) {
      System.out.print(line(kind, measure(KvEventWorkload.standard(kind))));
    }
  }

  /** One kind's line of the output, in {@link Locale#ROOT} whatever the default locale. */
  static String line(KvEventWorkload.HashKind kind, Heap h) {
    return String.format(Locale.ROOT, "%s hashes: %,d tokens held; %.3f bytes per token filled,"
            + " %.3f after %d cycles (%,d batches)%n", kind, h.heldTokens(),
        h.filledBytesPerToken(), h.steadyBytesPerToken(), CYCLES, h.batchesApplied());
  }

  static Heap measure(KvEventWorkload w) {
    byte[][] payloads = w.payloads();
    long before = MemoryMeter.usedAfterGc();
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(KvEventWorkload.BLOCK_SIZE)
        .build();
    w.fill(tree.engineEvents());
    long filled = MemoryMeter.usedAfterGc() - before;
    VllmKvEventReceiver receiver =
        new VllmKvEventReceiver(tree.engineEvents(), KvEventWorkload.BLOCK_SIZE);
    long seq = 0;
    for (int c = 0; c < CYCLES; c++) {
      for (byte[] p : payloads) {
        receiver.onMessage(seq++, p);
      }
    }
    long steady = MemoryMeter.usedAfterGc() - before;
    if (tree.sizeTokens() != w.heldTokens()) {
      throw new IllegalStateException("tree holds " + tree.sizeTokens() + " tokens, not "
          + w.heldTokens() + ": " + receiver.stats());
    }
    return new Heap(tree.sizeTokens(), filled, steady, receiver.stats().batchesApplied());
  }


}
