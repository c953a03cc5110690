package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.GroupedEvents.hashes;
import static io.github.prefixrouter.engine.vllm.GroupedEvents.tokens;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * vLLM with CPU offloading (its OffloadingConnector, {@code --kv-offloading-size}) publishes the
 * offload tier's changes in the same stream: a {@code BlockStored} of medium {@code CPU} with no
 * token ids and no parent, and a {@code BlockRemoved} of medium {@code CPU} when the tier evicts.
 * The stores cannot be mirrored (no tokens); their removals must then not take the GPU's copy of
 * the same hashes out of the mirror while the GPU still holds them.
 */
class VllmKvEventCpuOffloadTest {

  static final int B = 4;
  static final long H1 = 0x1111;
  static final long H2 = 0x2222;
  static final int[] PROMPT = {1, 2, 3, 4, 5, 6, 7, 8};

  /** One batch of one event, as a map (current vLLM) or a tagged array (earlier versions). */
  static byte[] stored(boolean maps, String medium, int[] tokens, long... hashes) {
    MsgpackWriter w = new MsgpackWriter().array(2).float64(1.5).array(1);
    if (maps) {
      w.map(8).str("type").str("BlockStored").str("block_hashes");
      hashes(w, hashes).str("parent_block_hash").nil().str("token_ids");
      tokens(w, tokens).str("block_size").integer(B).str("lora_id").nil()
          .str("medium").str(medium).str("lora_name").nil();
    } else {
      w.array(8).str("BlockStored");
      hashes(w, hashes).nil();
      tokens(w, tokens).integer(B).nil().str(medium).nil();
    }
    return w.bytes();
  }

  private static byte[] removed(boolean maps, String medium, long... hashes) {
    MsgpackWriter w = new MsgpackWriter().array(2).float64(1.5).array(1);
    if (maps) {
      w.map(3).str("type").str("BlockRemoved").str("block_hashes");
      hashes(w, hashes).str("medium").str(medium);
    } else {
      w.array(3).str("BlockRemoved");
      hashes(w, hashes).str(medium);
    }
    return w.bytes();
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void theOffloadTiersEvictionsLeaveTheGpusBlocksInTheMirror(boolean maps) {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
    receiver.onMessage(0, stored(maps, "GPU", PROMPT, H1, H2));
    receiver.onMessage(1, stored(maps, "CPU", new int[0], H1, H2)); // offloaded
    assertEquals(8, tree.match(PROMPT));
    receiver.onMessage(2, removed(maps, "CPU", H1, H2)); // the CPU tier evicts them
    assertEquals(8, tree.match(PROMPT), "the GPU still holds both blocks");
    receiver.onMessage(3, removed(maps, "GPU", H2));
    assertEquals(4, tree.match(PROMPT));
    receiver.onMessage(4, removed(maps, "GPU", H1));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(0, tree.engineEventStats().unknownBlocks(), "every removal applied was held");
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(1, s.storedEvents());
    assertEquals(1, s.tokenCountMismatches());
    assertEquals(2, s.removedEvents());
    assertEquals(1, s.unmirroredRemovals());
    assertEquals(0, s.blockSizeMismatches());
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void aTokenlessStoreOfAnotherBlockSizeIsNoConfigurationError(boolean maps) {
    // the offload tier may use larger blocks than the GPU (its offloaded block size): its
    // stores carry no tokens either way, and say nothing about the node's block size
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
    receiver.onMessage(0, stored(maps, "GPU", PROMPT, H1, H2));
    byte[] big = new MsgpackWriter().array(2).float64(1.5).array(1).array(8).str("BlockStored")
        .array(1).integer(0x3333).nil().array(0).integer(4 * B).nil().str("CPU").nil().bytes();
    receiver.onMessage(1, big);
    receiver.onMessage(2, removed(maps, "CPU", 0x3333));
    assertEquals(8, tree.match(PROMPT));
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(0, s.blockSizeMismatches());
    assertEquals(1, s.tokenCountMismatches());
    assertEquals(1, s.unmirroredRemovals());
    assertEquals(0, tree.engineEventStats().unknownBlocks());
  }

  /**
   * A medium some of whose stores came without token ids, and one of whose stores was mirrored,
   * has copies in the mirror: its removals are applied, or the mirror would keep claiming blocks
   * that medium no longer holds.
   */
  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void theRemovalsOfAMediumWithAMirroredStoreAreApplied(boolean maps) {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
    receiver.onMessage(0, stored(maps, "CPU", new int[0], 0x3333)); // without token ids
    receiver.onMessage(1, stored(maps, "CPU", PROMPT, H1, H2)); // with them: mirrored
    assertEquals(8, tree.match(PROMPT));
    receiver.onMessage(2, removed(maps, "CPU", H2));
    assertEquals(4, tree.match(PROMPT), "the medium no longer holds H2");
    receiver.onMessage(3, removed(maps, "CPU", H1));
    assertEquals(0, tree.match(PROMPT));
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(2, s.removedEvents());
    assertEquals(0, s.unmirroredRemovals());
    assertEquals(0, tree.engineEventStats().unknownBlocks());
    tree.checkInvariants();
  }

  @Test
  void mediaAreRememberedCutAndUpToALimit() {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
    long seq = 0;
    receiver.onMessage(seq++, stored(true, "GPU", PROMPT, H1, H2));
    // a tier named by a long string: remembered by its first 64 characters
    String tier = "T".repeat(100);
    receiver.onMessage(seq++, stored(true, tier, new int[0], H1, H2));
    receiver.onMessage(seq++, removed(true, tier, H2));
    assertEquals(8, tree.match(PROMPT), "the tier's removal is skipped");
    assertEquals(1, receiver.stats().unmirroredRemovals());
    // a publisher naming ever new media is not remembered past the limit
    for (int i = 0; i < 20_000; i++) {
      receiver.onMessage(seq++, stored(i % 2 == 0, i + "-medium-" + "x".repeat(1_000),
          new int[0], H1));
    }
    assertEquals(1 + VllmKvEventReceiver.MAX_MEDIA, receiver.rememberedMedia());
    // the first tier is still known; a medium past the limit is not, so its removals apply
    receiver.onMessage(seq++, removed(false, tier, H2));
    assertEquals(8, tree.match(PROMPT));
    receiver.onMessage(seq++, removed(false, "medium-past-the-limit", H2));
    assertEquals(4, tree.match(PROMPT));
    tree.checkInvariants();
  }

  /**
   * The media learned from one engine used to survive a reset or a restart: a tier that carried
   * token ids before (and was mirrored) but carries none in the engine that follows had its
   * removals applied, taking the GPU's copy of the same hashes out of the mirror.
   */
  @ParameterizedTest(name = "restart shown by {0}")
  @ValueSource(strings = {"reset", "sequence"})
  void mediaLearnedBeforeAResetOrARestartAreForgotten(String how) {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
    receiver.onMessage(0, stored(true, "CPU", PROMPT, H1, H2)); // a tier mirrored, tokens given
    receiver.onMessage(1, stored(true, "GPU", PROMPT, H1, H2));
    long seq = 2;
    if (how.equals("reset")) {
      receiver.reset();
    } else {
      seq = 0; // the publisher restarted: its numbers begin again
    }
    receiver.onMessage(seq, stored(true, "GPU", PROMPT, H1, H2));
    assertEquals(1, receiver.rememberedMedia(), "only the GPU, of the engine that follows");
    receiver.onMessage(seq + 1, stored(true, "CPU", new int[0], H1, H2)); // now token-less
    receiver.onMessage(seq + 2, removed(true, "CPU", H1, H2));
    assertEquals(8, tree.match(PROMPT), "the GPU still holds both blocks");
    assertEquals(1, receiver.stats().unmirroredRemovals());
    tree.checkInvariants();
  }
}
