package io.github.prefixrouter.bench.kvevents;

import io.github.prefixrouter.engine.vllm.VllmKvEventReceiver;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;

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
 * <p>Needs a parallel collector, as the tree benchmark's memory column does (see
 * {@code docs/tree.md}): under the serial collector some samples come out near 0.
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

  public static void main(String[] args) throws InterruptedException {
    for (KvEventWorkload.HashKind kind : KvEventWorkload.HashKind.values()) {
      Heap h = measure(KvEventWorkload.standard(kind));
      System.out.printf("%s hashes: %,d tokens held; %.3f bytes per token filled, %.3f after %d"
              + " cycles (%,d batches)%n", kind, h.heldTokens(), h.filledBytesPerToken(),
          h.steadyBytesPerToken(), CYCLES, h.batchesApplied());
    }
  }

  static Heap measure(KvEventWorkload w) throws InterruptedException {
    byte[][] payloads = w.payloads();
    long before = usedHeap();
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(KvEventWorkload.BLOCK_SIZE)
        .build();
    w.fill(tree.engineEvents());
    long filled = usedHeap() - before;
    VllmKvEventReceiver receiver =
        new VllmKvEventReceiver(tree.engineEvents(), KvEventWorkload.BLOCK_SIZE);
    long seq = 0;
    for (int c = 0; c < CYCLES; c++) {
      for (byte[] p : payloads) {
        receiver.onMessage(seq++, p);
      }
    }
    long steady = usedHeap() - before;
    if (tree.sizeTokens() != w.heldTokens()) {
      throw new IllegalStateException("tree holds " + tree.sizeTokens() + " tokens, not "
          + w.heldTokens() + ": " + receiver.stats());
    }
    return new Heap(tree.sizeTokens(), filled, steady, receiver.stats().batchesApplied());
  }

  private static long usedHeap() throws InterruptedException {
    Runtime rt = Runtime.getRuntime();
    for (int i = 0; i < 6; i++) {
      System.gc();
      Thread.sleep(40);
    }
    return rt.totalMemory() - rt.freeMemory();
  }
}
