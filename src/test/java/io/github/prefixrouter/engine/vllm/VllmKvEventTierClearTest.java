package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.VllmKvEventCpuOffloadTest.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * vLLM started with {@code "tier_scoped_clear_events": true} publishes a prefix-cache reset
 * that clears only its GPU block pool as {@code TierBlocksCleared} of medium {@code GPU} (alone
 * in its batch), not {@code AllBlocksCleared}. Skipped as an event of an unknown tag, it left
 * every block vLLM had just dropped in the mirror, claimed and gossiped, with no removal ever to
 * come for them.
 */
class VllmKvEventTierClearTest {

  static final int B = VllmKvEventCpuOffloadTest.B;
  static final long H1 = VllmKvEventCpuOffloadTest.H1;
  static final long H2 = VllmKvEventCpuOffloadTest.H2;
  static final int[] PROMPT = VllmKvEventCpuOffloadTest.PROMPT;

  /** {@code TierBlocksCleared}, with an ownership domain when {@code owner} is not null. */
  private static byte[] tierCleared(boolean maps, String medium, String owner) {
    MsgpackWriter w = new MsgpackWriter().array(2).float64(1.5).array(1);
    if (maps) {
      w.map(owner == null ? 2 : 3).str("type").str("TierBlocksCleared").str("medium").str(medium);
      if (owner != null) {
        w.str("ownership").str(owner);
      }
    } else {
      w.array(owner == null ? 2 : 3).str("TierBlocksCleared").str(medium);
      if (owner != null) {
        w.str(owner);
      }
    }
    return w.bytes();
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void aClearOfTheGpuTierEmptiesTheMirror(boolean maps) {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
    receiver.onMessage(0, stored(maps, "GPU", PROMPT, H1, H2));
    assertEquals(8, tree.match(PROMPT));
    receiver.onMessage(1, tierCleared(maps, "GPU", null));
    assertEquals(0, tree.match(PROMPT), "vLLM dropped every block of its GPU pool");
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(1, s.clearedEvents());
    assertEquals(0, s.ignoredEvents());
    assertEquals(0, s.malformedBatches());
    // the stream goes on: stores after the clear are mirrored
    receiver.onMessage(2, stored(maps, "GPU", PROMPT, H1, H2));
    assertEquals(8, tree.match(PROMPT));
    tree.checkInvariants();
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void aClearOfAnUnmirroredOffloadTierLeavesTheGpusBlocks(boolean maps) {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
    receiver.onMessage(0, stored(maps, "GPU", PROMPT, H1, H2));
    receiver.onMessage(1, stored(maps, "CPU", new int[0], H1, H2)); // offloaded, not mirrored
    receiver.onMessage(2, tierCleared(maps, "CPU", "kvcr"));
    assertEquals(8, tree.match(PROMPT), "the GPU still holds both blocks");
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(0, s.clearedEvents());
    assertEquals(1, s.unmirroredRemovals());
    assertEquals(0, s.ignoredEvents());
    // a clear of a tier named by no store is applied, as a removal of an unseen medium is
    receiver.onMessage(3, tierCleared(maps, "STORAGE", null));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(1, receiver.stats().clearedEvents());
    tree.checkInvariants();
  }
}
