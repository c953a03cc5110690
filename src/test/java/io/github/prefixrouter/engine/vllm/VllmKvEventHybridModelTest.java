package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.GroupedEvents.removed;
import static io.github.prefixrouter.engine.vllm.GroupedEvents.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A hybrid model (sliding-window or Mamba layers next to full attention: gpt-oss, Gemma 3,
 * Jamba, ...) served by a vLLM whose hybrid KV-cache manager publishes events: every KV-cache
 * group reports its own blocks, with its index ({@code group_idx}) and, on stores, its kind. A
 * sliding-window group skips the blocks that fell out of its window (its store then names fewer
 * blocks than its tokens span) and evicts a prompt's early blocks long before the full-attention
 * group does. The mirror must follow the groups that hold the whole prefix.
 */
class VllmKvEventHybridModelTest {

  static final int B = 4;
  static final long H1 = 0x1111;
  static final long H2 = 0x2222;
  static final long H3 = 0x3333;
  static final long H4 = 0x4444;
  static final int[] PROMPT = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  static final Long FULL = 0L;
  static final Long SLIDING = 1L;

  private final ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
  private final VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
  private long seq;

  private void send(byte[] batch) {
    receiver.onMessage(seq++, batch);
    tree.checkInvariants();
  }

  private static int[] head(int blocks) {
    return Arrays.copyOf(PROMPT, blocks * B);
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void aSlidingWindowGroupsEvictionsLeaveThePrefixInTheMirror(boolean maps) {
    send(stored(maps, FULL, "full_attention", B, null, PROMPT, H1, H2, H3, H4));
    // the sliding group's blocks 1 and 2 had left its window: null blocks, not named
    send(stored(maps, SLIDING, "sliding_window", B, null, PROMPT, H3, H4));
    assertEquals(16, tree.match(PROMPT));
    // it evicts the early blocks an earlier, shorter request had cached in it
    send(removed(maps, SLIDING, H1, H2));
    assertEquals(16, tree.match(PROMPT), "the full-attention group still holds all four");
    send(removed(maps, SLIDING, H3, H4));
    assertEquals(16, tree.match(PROMPT));
    send(removed(maps, FULL, H4));
    assertEquals(12, tree.match(PROMPT));
    send(removed(maps, FULL, H1, H2, H3));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(0, tree.engineEventStats().unknownBlocks(), "every removal applied was held");
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(1, s.storedEvents());
    assertEquals(2, s.removedEvents());
    assertEquals(3, s.otherGroupEvents());
    assertEquals(0, s.tokenCountMismatches(), "a skipped group's stores are no mismatch");
    assertEquals(0, s.unmirroredRemovals());
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void aMambaGroupOfLargerBlocksIsNoConfigurationError(boolean maps) {
    send(stored(maps, FULL, "full_attention", B, null, head(2), H1, H2));
    send(stored(maps, 1L, "mamba", 2 * B, null, head(2), H2));
    send(removed(maps, 1L, H2));
    assertEquals(8, tree.match(PROMPT));
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(0, s.blockSizeMismatches());
    assertEquals(2, s.otherGroupEvents());
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void groupsOfUnreportedKindRemoveOnlyTheCopiesTheyStored(boolean maps) {
    send(stored(maps, FULL, null, B, null, PROMPT, H1, H2, H3, H4));
    // a short request, within the window: the unnamed sliding group stores whole blocks
    send(stored(maps, SLIDING, null, B, null, head(2), H1, H2));
    // then a store with its early blocks skipped: it cannot be mirrored
    send(stored(maps, SLIDING, null, B, null, PROMPT, H3, H4));
    assertEquals(16, tree.match(PROMPT));
    send(removed(maps, SLIDING, H1, H2, H3));
    assertEquals(16, tree.match(PROMPT), "H3 is the full group's: the sliding group never "
        + "added a copy of it");
    send(removed(maps, SLIDING, H4));
    assertEquals(16, tree.match(PROMPT));
    send(removed(maps, FULL, H4));
    assertEquals(12, tree.match(PROMPT));
    send(removed(maps, FULL, H1));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(0, tree.engineEventStats().unknownBlocks());
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(1, s.tokenCountMismatches());
    assertEquals(1, s.unmirroredRemovals(), "the sliding group's removal of H4 alone");
    assertEquals(3, s.removedEvents());
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void aGroupFoundToBeASlidingWindowGivesBackItsCopies(boolean maps) {
    send(stored(maps, FULL, "full_attention", B, null, head(2), H1, H2));
    send(stored(maps, SLIDING, null, B, null, head(2), H1, H2)); // kind not yet known
    send(stored(maps, SLIDING, "sliding_window", B, H2, Arrays.copyOfRange(PROMPT, 8, 12), H3));
    send(removed(maps, FULL, H2));
    assertEquals(4, tree.match(PROMPT), "the sliding group's copy of H2 was given back");
    send(removed(maps, FULL, H1));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(0, tree.engineEventStats().unknownBlocks());
  }

  /**
   * A broken connection mostly means vLLM restarted, and the vLLM that follows may have other
   * groups: here one that does not report kinds, whose group 1 is full attention and group 0 a
   * sliding window. The kinds learned of the engine before were kept: group 1's stores were
   * skipped as a sliding window's, and group 0's removals took the prefix out of the mirror.
   */
  @ParameterizedTest(name = "reset {0}")
  @ValueSource(booleans = {true, false})
  void anEngineAfterAResetOrARestartHasItsGroupsKindsLearnedAfresh(boolean reset) {
    send(stored(true, FULL, "full_attention", B, null, PROMPT, H1, H2, H3, H4));
    send(stored(true, SLIDING, "sliding_window", B, null, PROMPT, H3, H4));
    assertEquals(16, tree.match(PROMPT));
    if (reset) {
      receiver.reset(); // the connection broke
    } else {
      seq = 0; // the sequence numbers show the restart
    }
    send(stored(false, SLIDING, null, B, null, PROMPT, H1, H2, H3, H4));
    assertEquals(16, tree.match(PROMPT), "group 1 holds the whole prefix now");
    send(stored(false, FULL, null, B, null, head(2), H1, H2));
    send(removed(false, FULL, H1, H2));
    assertEquals(16, tree.match(PROMPT), "group 0 removed only the copies it stored");
    assertEquals(1, receiver.stats().otherGroupEvents(), "the first engine's sliding store");
    assertEquals(reset ? 1 : 0, receiver.stats().resets());
    assertEquals(reset ? 0 : 1, receiver.stats().restarts());
  }

  /** docs/vllm-kv-events.md: a group's kind is the one its latest store naming a kind named. */
  @Test
  void aGroupsKindIsTheOneItsLatestStoreNamed() {
    send(stored(true, SLIDING, "sliding_window", B, null, PROMPT, H3, H4));
    assertEquals(0, tree.match(PROMPT));
    send(stored(true, SLIDING, "full_attention", B, null, PROMPT, H1, H2, H3, H4));
    assertEquals(16, tree.match(PROMPT), "group 1 now holds the whole prefix: mirrored");
    send(removed(true, SLIDING, H3));
    assertEquals(8, tree.match(PROMPT));
    assertEquals(1, receiver.stats().otherGroupEvents());
    assertEquals(1, receiver.stats().storedEvents());
    assertEquals(1, receiver.stats().removedEvents());
  }

  @Test
  void eventsWithoutAGroupAreAppliedAsBefore() {
    send(stored(true, null, null, B, null, PROMPT, H1, H2, H3, H4));
    send(removed(true, null, H3));
    assertEquals(8, tree.match(PROMPT));
    send(removed(false, null, 0x9999)); // unknown to the mirror: applied, counted there
    assertEquals(1, tree.engineEventStats().unknownBlocks());
    assertEquals(2, receiver.stats().removedEvents());
  }

  @Test
  void groupsOfUnknownKindWhoseCopiesAreAllRemovedLeaveNothingTracked() {
    // a publisher moving through ever new group indexes: each group's tracking goes with its
    // last copy, so the receiver's state does not grow with the number of groups it has seen
    for (long g = 0; g < 20_000; g++) {
      receiver.onMessage(seq++, stored(g % 2 == 0, g, null, B, null, head(1), H1));
      receiver.onMessage(seq++, removed(g % 2 == 0, g, H1));
      assertEquals(0, tree.match(PROMPT));
    }
    assertEquals(0, receiver.trackedGroups());
    assertEquals(0, receiver.stats().trackingOverflows());
    assertEquals(20_000, receiver.stats().removedEvents());
    // a group whose kind became known while tracked stays tracked until the mirror is cleared
    send(stored(true, 7L, null, B, null, head(1), H1));
    send(stored(true, 7L, "full_attention", B, null, head(2), H1, H2));
    send(removed(true, 7L, H1, H2));
    assertEquals(1, receiver.trackedGroups());
    send(stored(true, FULL, "full_attention", B, null, head(1), H1));
    send(removed(true, 7L, H1)); // group 7 holds no copy of H1 now: group 0's stays
    assertEquals(4, tree.match(PROMPT));
    tree.checkInvariants();
  }

  @Test
  void copiesOfMoreGroupsThanAreTrackedAtOnceClearTheMirror() {
    RecordingListener listener = new RecordingListener();
    VllmKvEventReceiver r = new VllmKvEventReceiver(listener, B);
    long g = 0;
    for (; g < VllmKvEventReceiver.MAX_GROUPS; g++) {
      r.onMessage(g, stored(false, g, null, B, null, head(1), 100 + g));
    }
    assertEquals(VllmKvEventReceiver.MAX_GROUPS, r.trackedGroups());
    assertEquals(0, r.stats().trackingOverflows());
    r.onMessage(g, stored(false, g, null, B, null, head(1), 100 + g));
    assertEquals(1, r.stats().trackingOverflows());
    assertEquals(0, r.trackedGroups());
    assertEquals(RecordingListener.CLEARED, listener.calls.get(listener.calls.size() - 1));
    // tracking starts again from nothing
    r.onMessage(g + 1, stored(false, 5L, null, B, null, head(1), H1));
    assertEquals(1, r.trackedGroups());
  }

  @Test
  void aClearForgetsTheTrackedCopies() {
    send(stored(true, SLIDING, null, B, null, head(2), H1, H2));
    send(Batches.batch(Batches.cleared()));
    send(stored(true, FULL, null, B, null, head(2), H1, H2));
    send(removed(true, SLIDING, H1, H2)); // copies from before the clear: gone with it
    assertEquals(8, tree.match(PROMPT));
    assertEquals(1, receiver.stats().unmirroredRemovals());
  }

  @Test
  void tooManyTrackedCopiesClearTheMirror() {
    RecordingListener listener = new RecordingListener();
    VllmKvEventReceiver r = new VllmKvEventReceiver(listener, 1);
    int perStore = 1 << 16;
    long[] hashes = new long[perStore];
    int[] tokens = new int[perStore];
    long stores = VllmKvEventReceiver.MAX_TRACKED_COPIES / perStore;
    for (long i = 0; i <= stores; i++) {
      for (int j = 0; j < perStore; j++) {
        hashes[j] = i * perStore + j + 1;
      }
      r.onMessage(i, stored(false, 0L, null, 1, null, tokens, hashes));
    }
    assertEquals(1, r.stats().trackingOverflows());
    assertEquals(RecordingListener.CLEARED, listener.calls.get(listener.calls.size() - 1));
    // the copies were forgotten with the mirror: a removal of one of them is not applied
    listener.calls.clear();
    r.onMessage(stores + 1, removed(false, 0L, 1));
    assertEquals(0, listener.calls.size());
  }
}
