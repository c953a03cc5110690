package io.github.prefixrouter.bench.kvevents;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class EngineTreeHeapMainTest {

  @Test
  void measuresTheSteadyTreeAfterEveryBatchOfItsCyclesApplied() throws Exception {
    KvEventWorkload w = KvEventWorkload.standard(KvEventWorkload.HashKind.INT);
    EngineTreeHeapMain.Heap h = EngineTreeHeapMain.measure(w);
    assertEquals(w.heldTokens(), h.heldTokens());
    assertEquals((long) EngineTreeHeapMain.CYCLES * w.batches(), h.batchesApplied());
    // the heap figures themselves depend on the collector (none under the serial one, see
    // docs/tree.md), so they are the tool's output, not asserted here
  }
}
