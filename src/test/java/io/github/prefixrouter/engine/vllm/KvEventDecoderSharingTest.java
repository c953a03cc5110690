package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.testing.Allocations;
import java.io.ByteArrayOutputStream;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * A payload of tiny events must not decode into an object per event: two bytes of msgpack (an
 * event of an unknown tag) decoded to a 56-byte event and tag each, so a 16 MiB payload, the
 * largest a subscriber takes, held about 370 MB while it was decoded. Events that carry
 * nothing but their tag are shared, so what a batch retains per such event is one reference.
 */
class KvEventDecoderSharingTest {

  /** A batch's header, {@code [ts, array32 of n events]}, its events to follow. */
  private static ByteArrayOutputStream batchOf(int n) throws java.io.IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write(0x92); // [ts, events]
    out.write(0x00);
    out.write(0xdd); // array32 of n events
    out.write(new byte[] {(byte) (n >>> 24), (byte) (n >>> 16), (byte) (n >>> 8), (byte) n});
    return out;
  }

  @Test
  void eventsThatCarryOnlyTheirTagAreSharedWithinABatch() throws Exception {
    int n = 100_000;
    ByteArrayOutputStream out = batchOf(n);
    for (int i = 0; i < n; i++) {
      switch (i % 4) {
        case 0 -> out.write(new byte[] {(byte) 0x91, (byte) 0xa0}); // [""]
        case 1 -> out.write(new byte[] {(byte) 0x91, (byte) 0xa1, 'x'}); // ["x"]
        case 2 -> { // ["AllBlocksCleared"]
          out.write(0x91);
          out.write(0xa0 | KvEventDecoder.CLEARED.length());
          out.write(KvEventDecoder.CLEARED.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        }
        default -> out.write(new byte[] {(byte) 0x81, (byte) 0xa4, 't', 'y', 'p', 'e',
            (byte) 0xa1, 'x'}); // {"type": "x"}
      }
    }
    List<KvEvent> events = KvEventDecoder.decode(out.toByteArray());
    assertEquals(n, events.size());
    Set<KvEvent> distinct = Collections.newSetFromMap(new IdentityHashMap<>());
    distinct.addAll(events);
    assertEquals(3, distinct.size(), "one instance each of Unknown(\"\"), Unknown(\"x\"), Cleared");
    assertEquals(new KvEvent.Unknown(""), events.get(0));
    assertEquals(new KvEvent.Unknown("x"), events.get(1));
    assertInstanceOf(KvEvent.Cleared.class, events.get(2));
    assertEquals(new KvEvent.Unknown("x"), events.get(3));
  }

  /**
   * Tiny events of as many distinct tags: six bytes each ({@code ["abcd"]}), each decoded to an
   * event and a tag of its own, so a 16 MiB payload of them held about 190 MB once decoded
   * (and the map that shared them 100 MB more while it was decoded). Past the first
   * {@link KvEventDecoder#MAX_UNKNOWN_TAGS} distinct tags of a batch, events of further unknown
   * tags share one instance: the receiver only counts them.
   */
  @Test
  void eventsOfManyDistinctUnknownTagsShareInstancesPastTheFirstTags() throws Exception {
    int n = 100_000;
    ByteArrayOutputStream out = batchOf(n);
    for (int i = 0; i < n; i++) {
      out.write(new byte[] {(byte) 0x91, (byte) 0xa4, (byte) (i & 0x7f), (byte) ((i >>> 7) & 0x7f),
          (byte) ((i >>> 14) & 0x7f), 'x'}); // a distinct 4-character tag each
    }
    byte[] payload = out.toByteArray();
    List<KvEvent> events = KvEventDecoder.decode(payload);
    assertEquals(n, events.size());
    Set<KvEvent> distinct = Collections.newSetFromMap(new IdentityHashMap<>());
    for (KvEvent e : events) {
      assertInstanceOf(KvEvent.Unknown.class, e);
      distinct.add(e);
    }
    assertTrue(distinct.size() <= KvEventDecoder.MAX_UNKNOWN_TAGS + 1,
        distinct.size() + " distinct events retained for " + n + " tiny events");
    // the first tags are kept as they came
    assertEquals(new KvEvent.Unknown("\0\0\0x"), events.get(0));
    assertEquals(new KvEvent.Unknown("\1\0\0x"), events.get(1));

    // the receiver still counts every one of them, and applies nothing
    RecordingListener listener = new RecordingListener();
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(listener, 16);
    receiver.onMessage(0, payload);
    assertEquals(n, receiver.stats().ignoredEvents());
    assertEquals(1, receiver.stats().batchesApplied());
  }

  /**
   * Stores and removals naming no block, the smallest well-formed events of their tags
   * ({@code ["BlockStored",[],nil,[],16]} is 17 bytes): each decoded to an event and two
   * arrays of its own (a 16 MiB payload of them, about 986,000 events, held 86 MiB), and each
   * then reached the listener, since 0 blocks times the block size is 0 tokens. They change
   * nothing a mirror holds, so the decoder drops them (a shared instance stands for each) and
   * the receiver counts them; an AllBlocksCleared, which names no block either, still clears,
   * and a sliding-window group's store naming no block (vLLM sends one when all its new blocks
   * left the window) still has that group's events skipped.
   */
  @Test
  void storesAndRemovalsNamingNoBlockAreSharedAndNeverReachTheListener() throws Exception {
    int n = 100_000;
    ByteArrayOutputStream out = batchOf(n + 4);
    for (int i = 0; i < n; i++) {
      out.write(switch (i % 4) {
        case 0 -> new MsgpackWriter().array(5).str(KvEventDecoder.STORED).array(0).nil()
            .array(0).integer(16).bytes();
        case 1 -> new MsgpackWriter().array(2).str(KvEventDecoder.REMOVED).array(0).bytes();
        case 2 -> new MsgpackWriter().map(5).str("type").str(KvEventDecoder.STORED)
            .str("block_hashes").array(0).str("parent_block_hash").integer(i)
            .str("token_ids").array(0).str("block_size").integer(16).bytes();
        default -> new MsgpackWriter().map(2).str("block_hashes").array(0)
            .str("type").str(KvEventDecoder.REMOVED).bytes();
      });
    }
    out.write(new MsgpackWriter().array(1).str(KvEventDecoder.CLEARED).bytes());
    out.write(Batches.stored(null, new long[] {7}, new int[16], 16));
    MsgpackWriter window = new MsgpackWriter().array(11).str(KvEventDecoder.STORED).array(0)
        .integer(7).array(16);
    for (int t = 0; t < 16; t++) {
      window.integer(t);
    }
    out.write(window.integer(16).nil().str("GPU").nil().nil().integer(1).str("sliding_window")
        .bytes());
    out.write(new MsgpackWriter().array(4).str(KvEventDecoder.REMOVED).array(1).integer(7)
        .str("GPU").integer(1).bytes());
    byte[] payload = out.toByteArray();

    List<KvEvent> events = KvEventDecoder.decode(payload);
    Set<KvEvent> distinct = Collections.newSetFromMap(new IdentityHashMap<>());
    distinct.addAll(events.subList(0, n));
    assertEquals(1, distinct.size(), "instances decoded for " + n + " events naming no block");

    RecordingListener listener = new RecordingListener();
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(listener, 16);
    receiver.onMessage(0, payload);
    assertEquals(List.of(RecordingListener.CLEARED,
        RecordingListener.stored(CacheEventListener.NO_PARENT, new long[] {7}, new int[16])),
        listener.calls, "the listener's calls");
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(1, s.storedEvents());
    assertEquals(0, s.removedEvents());
    assertEquals(1, s.clearedEvents());
    assertEquals(n, s.emptyEvents());
    assertEquals(2, s.otherGroupEvents(), "the sliding-window group's store and removal");
    assertEquals(0, s.tokenCountMismatches() + s.ignoredEvents());
    assertEquals(1, s.batchesApplied());
  }

  /**
   * Stores and removals naming no block keep their group and kind (a sliding-window group's
   * kind counts) for the first {@link KvEventDecoder#MAX_NO_BLOCK_GROUPS} groups of a batch;
   * the events of further groups share one instance, so a payload of such events of as many
   * groups still holds a reference per event.
   */
  @Test
  void eventsNamingNoBlockOfManyGroupsShareInstancesPastTheFirstGroups() throws Exception {
    int n = 100_000;
    ByteArrayOutputStream out = batchOf(n);
    for (int i = 0; i < n; i++) {
      out.write(new MsgpackWriter().array(4).str(KvEventDecoder.REMOVED).array(0).nil()
          .integer(i).bytes());
    }
    List<KvEvent> events = KvEventDecoder.decode(out.toByteArray());
    assertEquals(n, events.size());
    Set<KvEvent> distinct = Collections.newSetFromMap(new IdentityHashMap<>());
    distinct.addAll(events);
    assertEquals(KvEventDecoder.MAX_NO_BLOCK_GROUPS + 1, distinct.size(),
        "instances retained for " + n + " removals naming no block, each of its own group");
    assertEquals(new KvEvent.NoBlocks(0L, null), events.get(0));
    assertEquals(new KvEvent.NoBlocks(null, null), events.get(n - 1));
  }

  /**
   * A batch declaring as many events as it has bytes left, whose first event is malformed, is
   * refused without a list sized for them all: the list grows with the events read, so a 16 MiB
   * payload declaring 16 million events allocated 64 MB for a list it then threw away.
   */
  @Test
  void aBatchDeclaringMoreEventsThanItHoldsAllocatesNoListForThemAll() throws Exception {
    int n = 4_000_000;
    ByteArrayOutputStream out = batchOf(n);
    out.write(new byte[n]); // n bytes: as many events as bytes, each a 0, not an event
    byte[] payload = out.toByteArray();
    long before = Allocations.ofThisThread();
    assertThrows(MalformedKvEventException.class, () -> KvEventDecoder.decode(payload));
    long allocated = Allocations.ofThisThread() - before;
    assertTrue(allocated < 1 << 20, "refusing its first event allocated " + allocated + " bytes");
  }

}
