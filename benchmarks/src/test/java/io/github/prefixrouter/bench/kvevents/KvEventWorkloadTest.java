package io.github.prefixrouter.bench.kvevents;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.engine.vllm.KvEventDecoderAccess;
import io.github.prefixrouter.engine.vllm.VllmKvEventReceiver;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.msgpack.value.Value;

class KvEventWorkloadTest {

  /**
   * The benchmark's own batches, one whole cycle into a real tree: every batch applies cleanly,
   * the tree stays at its steady size after each, and the cycle ends on the very blocks it
   * started from (so the next cycle applies as cleanly: it is the same batches on the same
   * tree).
   */
  @ParameterizedTest
  @EnumSource(KvEventWorkload.HashKind.class)
  void aCycleAppliesCleanlyAndEndsWhereItStarted(KvEventWorkload.HashKind kind) {
    KvEventWorkload w = KvEventWorkload.standard(kind);
    ConcurrentPrefixTree tree = KvEventBenchmark.steadyTree(w);
    tree.checkInvariants();
    long[] start = sorted(tree.blockHashes());
    assertEquals(w.heldTokens() / KvEventWorkload.BLOCK_SIZE, start.length);
    VllmKvEventReceiver receiver =
        new VllmKvEventReceiver(tree.engineEvents(), KvEventWorkload.BLOCK_SIZE);
    byte[][] payloads = w.payloads();
    long stored = 0;
    for (int b = 0; b < payloads.length; b++) {
      receiver.onMessage(1000 + b, payloads[b]);
      assertEquals(w.heldTokens(), tree.sizeTokens(), "after batch " + b);
      List<?> events = KvEventDecoderAccess.decode(payloads[b]);
      long s = KvEventDecoderAccess.storedBlocks(events);
      assertEquals(s, KvEventDecoderAccess.removedBlocks(events), "batch " + b);
      stored += s;
    }
    tree.checkInvariants();
    assertArrayEquals(start, sorted(tree.blockHashes()));
    assertEquals(w.blocksPerCycle(), stored);

    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(payloads.length, s.batchesApplied());
    assertEquals(0, s.malformedBatches());
    assertEquals(0, s.tokenCountMismatches());
    assertEquals(0, s.blockSizeMismatches());
    assertEquals(0, s.gaps() + s.restarts() + s.listenerFailures() + s.ignoredEvents());
    assertEquals(w.blocksPerCycle() + (long) payloads.length * w.storesPerBatch,
        s.storedEvents() + s.removedEvents());
    CacheEventStats t = tree.engineEventStats();
    assertEquals(0, t.unknownParents(), t.toString());
    assertEquals(0, t.unknownBlocks(), t.toString());
    assertEquals(0, t.malformedEvents(), t.toString());
    assertEquals(0, t.duplicateBlocks(), t.toString());
    assertEquals(0, t.aliasedBlocks(), t.toString());
    assertEquals(0, t.conflictingEvents(), t.toString());
  }

  /** The baselines read the same payloads into the same events as the library's decoder. */
  @ParameterizedTest
  @EnumSource(KvEventWorkload.HashKind.class)
  void baselinesReadTheSameEvents(KvEventWorkload.HashKind kind) {
    KvEventWorkload w = new KvEventWorkload(kind, 16 * 2_000, 8, 4, 128, 4, 64, 7);
    for (byte[] p : w.payloads()) {
      List<?> ours = KvEventDecoderAccess.decode(p);
      Object[] typed = MsgpackCoreDecoder.typed(p);
      assertEquals(ours.size(), typed.length);
      long stored = 0;
      long removed = 0;
      for (Object e : typed) {
        if (e instanceof MsgpackCoreDecoder.Stored st) {
          stored += st.hashes().length;
          assertEquals(KvEventWorkload.BLOCK_SIZE, st.blockSize());
          assertEquals(st.hashes().length * KvEventWorkload.BLOCK_SIZE, st.tokens().length);
        } else {
          removed += ((MsgpackCoreDecoder.Removed) e).hashes().length;
        }
      }
      assertEquals(KvEventDecoderAccess.storedBlocks(ours), stored);
      assertEquals(KvEventDecoderAccess.removedBlocks(ours), removed);
      Value v = MsgpackCoreDecoder.values(p);
      assertEquals(3, v.asArrayValue().size());
      assertEquals(typed.length, v.asArrayValue().get(1).asArrayValue().size());
    }
    assertTrue(w.blocksPerBatch() > 100 && w.blocksPerBatch() < 160, w.description());
  }

  private static long[] sorted(long[] a) {
    long[] c = a.clone();
    Arrays.sort(c);
    return c;
  }
}
