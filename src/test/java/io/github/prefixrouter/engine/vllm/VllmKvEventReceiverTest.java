package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.RecordingListener.CLEARED;
import static io.github.prefixrouter.engine.vllm.RecordingListener.removed;
import static io.github.prefixrouter.engine.vllm.RecordingListener.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.CacheEventListener;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class VllmKvEventReceiverTest {

  static final int B = 4;
  static final long NO_PARENT = CacheEventListener.NO_PARENT;

  static byte[] hex(String s) {
    return HexFormat.of().parseHex(s);
  }

  static int[] range(int from, int to) {
    return IntStream.range(from, to).toArray();
  }

  // ---- golden payloads: msgpack encodings by an independent msgpack library ----

  /**
   * msgpack encoding of {@code [1764630000.25, [["BlockStored", [101, 102], None, [1..8], 4,
   * None, "GPU"], ["BlockStored", [103], 102, [9, 10, 11, 12], 4, None, "GPU"],
   * ["BlockRemoved", [103, 101], "GPU"], ["AllBlocksCleared"]], 0]}.
   */
  static final byte[] INT_HASHES = hex("93cb41da4b877c1000009497ab426c6f636b53746f726564926566c0"
      + "98010203040506070804c0a347505597ab426c6f636b53746f72656491676694090a0b0c04c0a3475055"
      + "93ac426c6f636b52656d6f766564926765a347505591b0416c6c426c6f636b73436c656172656400");

  /**
   * msgpack encoding of {@code [1764630000.25, [["BlockStored", [-5, 2^64-1, 2^63, -2^63],
   * 2^63+7, [100..115], 4], ["BlockRemoved", [2^64-1, -5]]]]}: negative and unsigned 64-bit
   * hashes, no data-parallel rank, no fields after block_size, an array16 of tokens.
   */
  static final byte[] WIDE_HASHES = hex("92cb41da4b877c1000009295ab426c6f636b53746f72656494fbcf"
      + "ffffffffffffffffcf8000000000000000d38000000000000000cf8000000000000007dc00106465666768"
      + "696a6b6c6d6e6f707172730492ac426c6f636b52656d6f76656492cffffffffffffffffffb");

  /**
   * msgpack encoding of {@code [1764630000.25, [["BlockStored", [sha256("block a"),
   * sha256("block b")], sha256("parent"), [7] * 8, 4, None, "GPU", None, None],
   * ["BlockRemoved", [sha256("block b"), b"\x01\x02\x03"], None]], 1]}: 32-byte bin hashes
   * and a 3-byte one.
   */
  static final byte[] BYTES_HASHES = hex("93cb41da4b877c1000009299ab426c6f636b53746f72656492c420"
      + "7b68006fec95e3d5cccbee15378a0eac8bba3d1aeff771ede6606635d0b50cc1c420587cb8b9d8950f1cf6"
      + "8865d4ebfde3a6c1184b6499267a46b22a70ed57072cf0c420e47125968b3b71049fbc4802d1e40a71ea13"
      + "59decfabacf70b34588037d4ff0c98070707070707070704c0a3475055c0c093ac426c6f636b52656d6f76"
      + "656492c420587cb8b9d8950f1cf68865d4ebfde3a6c1184b6499267a46b22a70ed57072cf0c403010203c0"
      + "01");

  /** The last 8 bytes of sha256("block a"), sha256("block b"), sha256("parent"). */
  static final long SHA_A = 0xE6606635D0B50CC1L;
  static final long SHA_B = 0xB22A70ED57072CF0L;
  static final long SHA_P = 0x0B34588037D4FF0CL;

  /**
   * msgpack encoding of {@code [1764630000.25, [["BlockStored", [11], None, [1, 2, 3, 4], 4, 7,
   * "CPU", "adapter", [["mm", 1.5]], {"k": [1, {"x": b"\x00"}]}, 2.25, ExtType(5, b"abc"),
   * True], ["BlockRemoved", [11], "CPU", {"future": [None, -1.0]}, 3.5], ["AllBlocksCleared",
   * "GPU", {"z": 1}]], 3, {"future": True}, 1.0, [[]]]}: fields and batch elements beyond
   * those known, of every kind.
   */
  static final byte[] EXTRA_FIELDS = hex("96cb41da4b877c100000939dab426c6f636b53746f726564910bc0"
      + "94010203040407a3435055a7616461707465729192a26d6dcb3ff800000000000081a16b920181a178c401"
      + "00cb4002000000000000c70305616263c395ac426c6f636b52656d6f766564910ba343505581a666757475"
      + "726592c0cbbff0000000000000cb400c00000000000093b0416c6c426c6f636b73436c6561726564a34750"
      + "5581a17a010381a6667574757265c3cb3ff00000000000009190");

  /**
   * msgpack encoding of {@code [1764630000.25, [["BlockStored", [21], None, [[1, 900], [2,
   * 901], 3, [4, 903]], 4, None, "GPU"]]]}: bigram token ids.
   */
  static final byte[] BIGRAMS = hex("92cb41da4b877c1000009197ab426c6f636b53746f7265649115c09492"
      + "01cd03849202cd0385039204cd038704c0a3475055");

  /**
   * msgpack encoding of {@code [1764630000.25, [["BlockStored", [31], None, [1, 1, 1, 1], 4],
   * ["BlockMoved", [31, 32], {"to": "disk"}, 1.0], ["BlockRemoved", [31]]], None]}: an unknown
   * tag between known events, a nil data-parallel rank.
   */
  static final byte[] UNKNOWN_TAG = hex("93cb41da4b877c1000009395ab426c6f636b53746f726564911fc0"
      + "94010101010494aa426c6f636b4d6f766564921f2081a2746fa46469736bcb3ff000000000000092ac426c"
      + "6f636b52656d6f766564911fc0");

  /**
   * msgpack encoding of {@code [1764630000.25, [{"block_hashes": [41, 42], "type":
   * "BlockStored", "parent_block_hash": 40, "token_ids": [5..12], "medium": "GPU",
   * "block_size": 4, "lora_id": None}, {"block_hashes": [42], "type": "BlockRemoved", "medium":
   * None}, {"type": "KVFutureEvent", "block_hashes": "not a list"}, {"type":
   * "AllBlocksCleared"}]]}: events as tagged maps.
   */
  static final byte[] MAP_EVENTS = hex("92cb41da4b877c1000009487ac626c6f636b5f686173686573922"
      + "92aa474797065ab426c6f636b53746f726564b1706172656e745f626c6f636b5f6861736828a9746f6b65"
      + "6e5f6964739805060708090a0b0ca66d656469756da3475055aa626c6f636b5f73697a6504a76c6f72615f"
      + "6964c083ac626c6f636b5f686173686573912aa474797065ac426c6f636b52656d6f766564a66d656469"
      + "756dc082a474797065ad4b564675747572654576656e74ac626c6f636b5f686173686573aa6e6f742061"
      + "206c69737481a474797065b0416c6c426c6f636b73436c6561726564");

  /**
   * msgpack encoding of {@code [1764630000.25, [["BlockStored", [51], None, [1, 2, 3, 4], 4, 2,
   * "GPU", "sql-lora"], ["BlockStored", [52], 51, [5, 6, 7, 8], 4, 2, "GPU", "sql-lora"],
   * ["BlockStored", [53], None, [1, 2, 3, 4], 4, 3, "GPU"], ["BlockStored", [54], 53, [5, 6, 7,
   * 8], 4, 3, "GPU"], ["BlockStored", [55], None, [1, 2, 3, 4], 4, None, "GPU", None]], 0]}:
   * a chain of a named adapter, one of an adapter known by id only, one of the base model.
   */
  static final byte[] LORA_ARRAYS = hex("93cb41da4b877c1000009598ab426c6f636b53746f7265649133c0"
      + "94010203040402a3475055a873716c2d6c6f726198ab426c6f636b53746f72656491343394050607080402"
      + "a3475055a873716c2d6c6f726197ab426c6f636b53746f7265649135c094010203040403a347505597ab42"
      + "6c6f636b53746f72656491363594050607080403a347505598ab426c6f636b53746f7265649137c0940102"
      + "030404c0a3475055c000");

  /**
   * msgpack encoding of {@code [1764630000.25, [{"type": "BlockStored", "block_hashes": [61],
   * "parent_block_hash": None, "token_ids": [9, 9, 9, 9], "block_size": 4, "lora_id": 5,
   * "medium": "GPU", "lora_name": "tenant-lora"}, {"type": "BlockStored", "block_hashes": [62],
   * "token_ids": [9, 9, 9, 9], "block_size": 4, "lora_id": 6}, {"type": "BlockStored",
   * "block_hashes": [63], "token_ids": [8, 8, 8, 8], "block_size": 4, "lora_name": "bad\nname",
   * "lora_id": 7}]]}: the same as maps, and a name that is no valid adapter name.
   */
  static final byte[] LORA_MAPS = hex("92cb41da4b877c1000009388a474797065ab426c6f636b53746f7265"
      + "64ac626c6f636b5f686173686573913db1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f69"
      + "64739409090909aa626c6f636b5f73697a6504a76c6f72615f696405a66d656469756da3475055a96c6f72"
      + "615f6e616d65ab74656e616e742d6c6f726185a474797065ab426c6f636b53746f726564ac626c6f636b5f"
      + "686173686573913ea9746f6b656e5f6964739409090909aa626c6f636b5f73697a6504a76c6f72615f6964"
      + "0686a474797065ab426c6f636b53746f726564ac626c6f636b5f686173686573913fa9746f6b656e5f6964"
      + "739408080808aa626c6f636b5f73697a6504a96c6f72615f6e616d65a86261640a6e616d65a76c6f7261"
      + "5f696407");

  static final List<byte[]> GOLDEN =
      List.of(INT_HASHES, WIDE_HASHES, BYTES_HASHES, EXTRA_FIELDS, BIGRAMS, UNKNOWN_TAG,
          MAP_EVENTS, LORA_ARRAYS, LORA_MAPS);

  final RecordingListener listener = new RecordingListener();
  final VllmKvEventReceiver receiver = new VllmKvEventReceiver(listener, B);

  List<String> apply(byte[] payload) {
    receiver.onMessage(receiver.nextSeq() < 0 ? 0 : receiver.nextSeq(), payload);
    return listener.take();
  }

  @Test
  void intHashes() {
    assertEquals(List.of(
            stored(NO_PARENT, new long[] {101, 102}, range(1, 9)),
            stored(102, new long[] {103}, range(9, 13)),
            removed(103, 101),
            CLEARED),
        apply(INT_HASHES));
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(1, s.batchesApplied());
    assertEquals(2, s.storedEvents());
    assertEquals(1, s.removedEvents());
    assertEquals(1, s.clearedEvents());
    assertEquals(0, s.malformedBatches() + s.ignoredEvents() + s.gaps() + s.restarts());
    assertEquals(1, receiver.nextSeq());
  }

  @Test
  void negativeAndUnsigned64BitHashesKeepTheirBits() {
    assertEquals(List.of(
            stored(0x8000000000000007L, new long[] {-5, -1, Long.MIN_VALUE, Long.MIN_VALUE},
                range(100, 116)),
            removed(-1, -5)),
        apply(WIDE_HASHES));
  }

  @Test
  void bytesHashesMapToTheirLast8BytesBigEndian() {
    assertEquals(List.of(
            stored(SHA_P, new long[] {SHA_A, SHA_B}, new int[] {7, 7, 7, 7, 7, 7, 7, 7}),
            removed(SHA_B, 0x010203)),
        apply(BYTES_HASHES));
  }

  @Test
  void fieldsAndElementsBeyondTheKnownOnesAreSkipped() {
    assertEquals(List.of( // lora_id 7 named "adapter": the chain is that adapter's
            RecordingListener.stored("adapter", NO_PARENT, new long[] {11}, new int[] {1, 2, 3, 4}),
            removed(11),
            CLEARED),
        apply(EXTRA_FIELDS));
    assertEquals(0, receiver.stats().malformedBatches());
  }

  @Test
  void aChainStartsInTheScopeOfItsLoraNameAndOneKnownByIdOnlyIsSkipped() {
    assertEquals(List.of(
            RecordingListener.stored("sql-lora", NO_PARENT, new long[] {51}, range(1, 5)),
            stored(51, new long[] {52}, range(5, 9)),
            // 53 (lora id 3, no name) skipped; its continuation goes on, to an unknown parent
            stored(53, new long[] {54}, range(5, 9)),
            stored(NO_PARENT, new long[] {55}, range(1, 5))),
        apply(LORA_ARRAYS));
    assertEquals(1, receiver.stats().unattributedStores());
    assertEquals(4, receiver.stats().storedEvents());
    assertEquals(List.of(
            RecordingListener.stored("tenant-lora", NO_PARENT, new long[] {61},
                new int[] {9, 9, 9, 9})),
        apply(LORA_MAPS));
    assertEquals(3, receiver.stats().unattributedStores()); // id only; a name with a newline
    assertEquals(0, receiver.stats().malformedBatches());
  }

  @Test
  void aChainOfANamedAdapterGoesUnderItsScopeInTheTree() {
    io.github.prefixrouter.internal.tree.ConcurrentPrefixTree tree =
        io.github.prefixrouter.internal.tree.ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver r = new VllmKvEventReceiver(tree.engineEvents(), B);
    r.onMessage(0, LORA_ARRAYS);
    int[] prompt = range(1, 9);
    long lora = io.github.prefixrouter.internal.tree.BlockHasher.scopeRoot("sql-lora", "");
    assertEquals(8, tree.match(lora, prompt));
    assertEquals(4, tree.match(prompt)); // 55, the base model's; 53 and 54 not attributed
    assertEquals(0, tree.match(
        io.github.prefixrouter.internal.tree.BlockHasher.scopeRoot("other", ""), prompt));
    tree.checkInvariants();
  }

  /**
   * msgpack writes a string of up to 31 bytes with its length in its first byte (fixstr, 0xa0
   * to 0xbf), one of up to 255 bytes after a length byte (str8) and a longer one after two
   * (str16): an adapter's name of any length up to the longest valid one names its adapter.
   */
  @Test
  void adapterNamesOfEveryLengthNameTheirAdapter() {
    for (int n = 1; n <= io.github.prefixrouter.CacheScope.MAX_ADAPTER_BYTES; n++) {
      String name = "a".repeat(n);
      byte[] store = new MsgpackWriter().array(8).str("BlockStored").array(1).integer(n).nil()
          .array(4).integer(1).integer(2).integer(3).integer(4).integer(B).integer(7)
          .str("GPU").str(name).bytes();
      assertEquals(List.of(RecordingListener.stored(name, NO_PARENT, new long[] {n}, range(1, 5))),
          apply(Batches.batch(store)), "a name of " + n + " bytes");
    }
    assertEquals(0, receiver.stats().malformedBatches());
  }

  @Test
  void bigramTokenIdsContributeTheirFirstElement() {
    assertEquals(List.of(stored(NO_PARENT, new long[] {21}, new int[] {1, 2, 3, 4})),
        apply(BIGRAMS));
  }

  @Test
  void unknownTagsAreSkippedAndCounted() {
    assertEquals(List.of(stored(NO_PARENT, new long[] {31}, new int[] {1, 1, 1, 1}), removed(31)),
        apply(UNKNOWN_TAG));
    assertEquals(1, receiver.stats().ignoredEvents());
    assertEquals(1, receiver.stats().storedEvents());
  }

  @Test
  void eventsEncodedAsTaggedMaps() {
    assertEquals(List.of(stored(40, new long[] {41, 42}, range(5, 13)), removed(42), CLEARED),
        apply(MAP_EVENTS));
    assertEquals(1, receiver.stats().ignoredEvents());
  }

  @Test
  void batchEncodedAsAMap() {
    byte[] payload = new MsgpackWriter().map(3)
        .str("data_parallel_rank").integer(2)
        .str("events").array(1).raw(toInts(Batches.removed(5)))
        .str("ts").float32(1.5f)
        .bytes();
    assertEquals(List.of(removed(5)), apply(payload));
    byte[] noEvents = new MsgpackWriter().map(1).str("ts").float64(1).bytes();
    assertEquals(List.of(CLEARED), apply(noEvents));
    assertEquals(1, receiver.stats().malformedBatches());
  }

  static int[] toInts(byte[] b) {
    int[] out = new int[b.length];
    for (int i = 0; i < b.length; i++) {
      out[i] = b[i] & 0xFF;
    }
    return out;
  }

  // ---- stores that cannot be mirrored ----

  @Test
  void aBlockSizeOtherThanTheNodesSkipsTheStoreOnly() {
    RecordingListener l = new RecordingListener();
    VllmKvEventReceiver r = new VllmKvEventReceiver(l, 8);
    r.onMessage(0, INT_HASHES);
    assertEquals(List.of(removed(103, 101), CLEARED), l.take());
    assertEquals(2, r.stats().blockSizeMismatches());
    assertEquals(0, r.stats().storedEvents());
    assertEquals(0, r.stats().tokenCountMismatches());
  }

  @Test
  void aTokenCountOtherThanBlocksTimesBlockSizeSkipsTheStore() {
    byte[] payload = Batches.batch(
        Batches.stored(null, new long[] {1, 2}, range(0, 7), B),
        Batches.stored(null, new long[] {3}, range(0, 4), B),
        Batches.stored(null, new long[] {}, range(0, 4), B));
    assertEquals(List.of(stored(NO_PARENT, new long[] {3}, range(0, 4))), apply(payload));
    assertEquals(1, receiver.stats().tokenCountMismatches());
    assertEquals(1, receiver.stats().emptyEvents(), "the store naming no block");
    assertEquals(0, receiver.stats().blockSizeMismatches());
  }

  // ---- a failing listener ----

  @Test
  void listenerExceptionsAreCountedAndTheNextEventsStillApplied() {
    listener.failOn = "stored";
    assertEquals(List.of(
            stored(NO_PARENT, new long[] {101, 102}, range(1, 9)),
            stored(102, new long[] {103}, range(9, 13)),
            removed(103, 101),
            CLEARED),
        apply(INT_HASHES));
    assertEquals(2, receiver.stats().listenerFailures());
    assertEquals(0, receiver.stats().storedEvents());
    assertEquals(1, receiver.stats().removedEvents());
    listener.failOn = "cleared";
    receiver.onMessage(5, Batches.batch(Batches.removed(9)));
    assertEquals(List.of(CLEARED, removed(9)), listener.take());
    assertEquals(3, receiver.stats().listenerFailures());
    assertEquals(6, receiver.nextSeq());
  }

  @Test
  void listenerErrorsAreCountedAndTheNextEventsStillApplied() {
    // an Error escaped the receiver, and ended the subscriber's thread: no event reached the
    // node after it
    listener.failWithError = true;
    failingListenerLosesNoEvent();
  }

  @Test
  void listenerOutOfMemoryIsCountedAndTheNextEventsStillApplied() {
    // the tree's engine events throw it on once they have repaired the tree; thrown on from
    // here, it would reach the subscriber as a sink failure, which goes on with the next
    // message: the batch's later events would be lost, with no gap to show it
    listener.failWithOutOfMemory = true;
    failingListenerLosesNoEvent();
  }

  @Test
  void listenerCheckedExceptionsAreCountedAndTheNextEventsStillApplied() {
    // a checked exception thrown undeclared escaped the receiver after the first event, the
    // batch's other events were never applied, and the subscriber took it for its connection
    // failing
    listener.failWithChecked = true;
    failingListenerLosesNoEvent();
  }

  /**
   * With the listener failing (as set up) on every store, then on clears: each failure is
   * counted and the batch's later events, a reset's clear and the next message still reach it.
   */
  private void failingListenerLosesNoEvent() {
    listener.failOn = "stored";
    assertEquals(List.of(
            stored(NO_PARENT, new long[] {101, 102}, range(1, 9)),
            stored(102, new long[] {103}, range(9, 13)),
            removed(103, 101),
            CLEARED),
        apply(INT_HASHES));
    assertEquals(2, receiver.stats().listenerFailures());
    listener.failOn = "cleared";
    receiver.reset();
    assertEquals(3, receiver.stats().listenerFailures());
    receiver.onMessage(5, Batches.batch(Batches.removed(9)));
    assertEquals(List.of(CLEARED, removed(9)), listener.take());
  }

  // ---- malformed input ----

  void assertMalformed(byte[] payload) {
    long before = receiver.stats().malformedBatches();
    long seq = receiver.nextSeq() < 0 ? 0 : receiver.nextSeq();
    receiver.onMessage(seq, payload);
    assertEquals(List.of(CLEARED), listener.take(), "a malformed batch only clears");
    assertEquals(before + 1, receiver.stats().malformedBatches());
    assertEquals(seq + 1, receiver.nextSeq(), "a malformed batch is passed over");
    // still works
    receiver.onMessage(seq + 1, Batches.batch(Batches.removed(77)));
    assertEquals(List.of(removed(77)), listener.take());
  }

  @Test
  void everyTruncationOfAGoldenPayloadIsMalformed() {
    for (byte[] golden : GOLDEN) {
      for (int n = 0; n < golden.length; n++) {
        assertMalformed(Arrays.copyOf(golden, n));
      }
    }
    assertEquals(GOLDEN.stream().mapToInt(g -> g.length).sum(),
        receiver.stats().malformedBatches());
    assertEquals(0, receiver.stats().storedEvents());
  }

  @Test
  void bytesAfterTheBatchAreMalformed() {
    byte[] g = Arrays.copyOf(INT_HASHES, INT_HASHES.length + 1);
    assertMalformed(g);
    byte[] twice = new byte[2 * BIGRAMS.length];
    System.arraycopy(BIGRAMS, 0, twice, 0, BIGRAMS.length);
    System.arraycopy(BIGRAMS, 0, twice, BIGRAMS.length, BIGRAMS.length);
    assertMalformed(twice);
  }

  static final int[] TS = {0xCB, 0x41, 0xDA, 0x4B, 0x87, 0x7C, 0x10, 0, 0};

  /** {@code [ts, [event]]} with the event given as raw bytes. */
  static byte[] withEvent(int... event) {
    return new MsgpackWriter().array(2).raw(TS).array(1).raw(event).bytes();
  }

  static int[] concat(int[]... parts) {
    return Arrays.stream(parts).flatMapToInt(Arrays::stream).toArray();
  }

  static int[] str(String s) {
    return toInts(new MsgpackWriter().str(s).bytes());
  }

  @Test
  void hostileHeadersAreMalformedWithoutAllocating() {
    // a batch claiming 2^31 elements
    assertMalformed(new MsgpackWriter().raw(0xDD, 0x80, 0, 0, 0).bytes());
    // an events array of 2^31 - 1 and of 2^32 - 1 elements
    assertMalformed(new MsgpackWriter().array(2).raw(TS).raw(0xDD, 0x7F, 0xFF, 0xFF, 0xFF).bytes());
    assertMalformed(new MsgpackWriter().array(2).raw(TS).raw(0xDD, 0xFF, 0xFF, 0xFF, 0xFF).bytes());
    // a tag of str32 length 2^32 - 1
    assertMalformed(withEvent(0x91, 0xDB, 0xFF, 0xFF, 0xFF, 0xFF));
    // block hashes: an array32 of 2^32 - 1, then a bin32 of 2^32 - 1 bytes
    assertMalformed(withEvent(concat(new int[] {0x92}, str("BlockRemoved"),
        new int[] {0xDD, 0xFF, 0xFF, 0xFF, 0xFF, 1})));
    assertMalformed(withEvent(concat(new int[] {0x92}, str("BlockRemoved"),
        new int[] {0x91, 0xC6, 0xFF, 0xFF, 0xFF, 0xFF, 1, 2})));
    // token ids: array16 of 65535
    assertMalformed(withEvent(concat(new int[] {0x95}, str("BlockStored"),
        new int[] {0x91, 1, 0xC0, 0xDC, 0xFF, 0xFF, 1, 2, 3, 4})));
    // a map32 of 2^32 - 1 entries as event, and as an extra field
    assertMalformed(withEvent(0xDF, 0xFF, 0xFF, 0xFF, 0xFF));
    assertMalformed(withEvent(concat(new int[] {0x92}, str("AllBlocksCleared"),
        new int[] {0xDF, 0x80, 0, 0, 0, 0xC0})));
    // ext32 of 2^32 - 1 bytes, ext8 with its data cut
    assertMalformed(withEvent(concat(new int[] {0x92}, str("AllBlocksCleared"),
        new int[] {0xC9, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0})));
    assertMalformed(withEvent(concat(new int[] {0x92}, str("AllBlocksCleared"),
        new int[] {0xC7, 3, 1, 0, 0})));
    // the byte that starts no msgpack value
    assertMalformed(withEvent(concat(new int[] {0x92}, str("AllBlocksCleared"),
        new int[] {0xC1})));
  }

  @Test
  void nestingIsBounded() {
    // an extra batch element (after the rank) nested k arrays deep: the nil inside lies at
    // depth k + 2
    java.util.function.IntFunction<byte[]> nested = k -> {
      MsgpackWriter w = new MsgpackWriter().array(4).raw(TS).array(0).nil();
      for (int i = 0; i < k; i++) {
        w.array(1);
      }
      return w.nil().bytes();
    };
    receiver.onMessage(0, nested.apply(MsgpackReader.MAX_DEPTH - 2));
    assertEquals(0, receiver.stats().malformedBatches());
    assertEquals(List.of(), listener.take());
    assertMalformed(nested.apply(MsgpackReader.MAX_DEPTH - 1));
    // far deeper than any stack: rejected at the bound, no StackOverflowError
    assertMalformed(nested.apply(1_000_000));
    MsgpackWriter deepMap = new MsgpackWriter().array(2).raw(TS).array(1).array(2)
        .str("AllBlocksCleared");
    for (int i = 0; i < 100_000; i++) {
      deepMap.map(1).str("k");
    }
    assertMalformed(deepMap.nil().bytes());
  }

  @Test
  void wrongTypesAreMalformed() {
    assertMalformed(new byte[0]);
    assertMalformed(new MsgpackWriter().str("batch").bytes());
    assertMalformed(new MsgpackWriter().array(1).raw(TS).bytes()); // no events
    assertMalformed(new MsgpackWriter().array(2).str("ts").array(0).bytes());
    assertMalformed(new MsgpackWriter().array(2).raw(TS).str("events").bytes());
    assertMalformed(new MsgpackWriter().array(3).raw(TS).array(0).str("rank").bytes());
    assertMalformed(withEvent(0x90)); // no tag
    assertMalformed(withEvent(0x91, 0x05)); // tag not a str
    assertMalformed(withEvent(0x05)); // event neither array nor map
    // BlockStored with too few fields
    assertMalformed(withEvent(concat(new int[] {0x94}, str("BlockStored"),
        new int[] {0x91, 1, 0xC0, 0x94, 1, 2, 3, 4})));
    // hashes that are strs, a float, or nil
    assertMalformed(withEvent(concat(new int[] {0x92}, str("BlockRemoved"), str("h"))));
    assertMalformed(withEvent(concat(new int[] {0x92}, str("BlockRemoved"), new int[] {0x91},
        str("h"))));
    assertMalformed(withEvent(concat(new int[] {0x92}, str("BlockRemoved"),
        new int[] {0x91, 0xCA, 0, 0, 0, 0})));
    assertMalformed(withEvent(concat(new int[] {0x92}, str("BlockRemoved"),
        new int[] {0x91, 0xC0})));
    // BlockRemoved without hashes
    assertMalformed(withEvent(concat(new int[] {0x91}, str("BlockRemoved"))));
    // block_size a str
    assertMalformed(withEvent(concat(new int[] {0x95}, str("BlockStored"),
        new int[] {0x91, 1, 0xC0, 0x94, 1, 2, 3, 4}, str("4"))));
    // a map event without a tag, with a non-str key, without token_ids
    assertMalformed(withEvent(concat(new int[] {0x81}, str("block_hashes"), new int[] {0x90})));
    assertMalformed(withEvent(concat(new int[] {0x82, 1, 2}, str("type"), str("AllBlocksCleared"))));
    assertMalformed(withEvent(concat(new int[] {0x83}, str("type"), str("BlockStored"),
        str("block_hashes"), new int[] {0x90}, str("block_size"), new int[] {4})));
  }

  @Test
  void tokenIdsOutsideIntRangeOrOddBigramsAreMalformed() {
    for (int[] token : List.of(
        new int[] {0xCE, 0x80, 0, 0, 0}, // 2^31
        new int[] {0xD3, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF}, // -2^31 - 1
        new int[] {0xCF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, // 2^64 - 1
        new int[] {0x93, 1, 2, 3}, // a bigram of three
        new int[] {0x92, 0xC0, 2}, // a bigram whose id is nil
        new int[] {0xCB, 0, 0, 0, 0, 0, 0, 0, 0})) { // a float
      assertMalformed(withEvent(concat(new int[] {0x95}, str("BlockStored"),
          new int[] {0x91, 1, 0xC0, 0x94, 1, 2, 3}, token, new int[] {4})));
    }
    // the extremes of int range are ids
    receiver.onMessage(receiver.nextSeq(), withEvent(concat(new int[] {0x95}, str("BlockStored"),
        new int[] {0x91, 1, 0xC0, 0x94, 0xD2, 0x80, 0, 0, 0, 0xCE, 0x7F, 0xFF, 0xFF, 0xFF, 0, 0,
            4})));
    assertEquals(List.of(stored(NO_PARENT, new long[] {1},
        new int[] {Integer.MIN_VALUE, Integer.MAX_VALUE, 0, 0})), listener.take());
  }

  @Test
  void aMalformedEventDropsTheWholeBatch() {
    byte[] good = Batches.removed(1);
    byte[] bad = toBytes(concat(new int[] {0x92}, str("BlockRemoved"), str("x")));
    assertMalformed(Batches.batch(good, good, bad));
    assertEquals(1, receiver.stats().removedEvents(), "only the good batch sent after it");
  }

  static byte[] toBytes(int[] ints) {
    return new MsgpackWriter().raw(ints).bytes();
  }

  // ---- sequence numbers ----

  byte[] marker(long id) {
    return Batches.batch(Batches.removed(id));
  }

  @Test
  void sequenceNumbers() {
    assertEquals(-1, receiver.nextSeq());
    receiver.onMessage(100, marker(1)); // the first is applied as it is
    receiver.onMessage(101, marker(2));
    assertEquals(List.of(removed(1), removed(2)), listener.take());
    assertEquals(102, receiver.nextSeq());
    receiver.onMessage(105, marker(3)); // 102..104 lost
    assertEquals(List.of(CLEARED, removed(3)), listener.take());
    receiver.onMessage(3, marker(4)); // restarted
    assertEquals(List.of(CLEARED, removed(4)), listener.take());
    receiver.onReplayed(2, marker(5)); // already applied
    receiver.onReplayed(3, marker(5));
    assertEquals(List.of(), listener.take());
    receiver.onReplayed(4, marker(6));
    receiver.onReplayed(6, marker(7)); // the replay misses 5
    assertEquals(List.of(removed(6), CLEARED, removed(7)), listener.take());
    receiver.onMessage(7, Arrays.copyOf(marker(8), 5)); // malformed: lost
    assertEquals(List.of(CLEARED), listener.take());
    assertEquals(8, receiver.nextSeq());
    receiver.onMessage(8, marker(9));
    assertEquals(List.of(removed(9)), listener.take());
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(2, s.gaps());
    assertEquals(1, s.restarts());
    assertEquals(2, s.duplicatesIgnored());
    assertEquals(2, s.replayedBatches());
    assertEquals(1, s.malformedBatches());
    assertEquals(7, s.batchesApplied());
    assertEquals(7, s.removedEvents());
    assertEquals(0, s.clearedEvents(), "the receiver's own clears are not engine events");
  }

  /**
   * Gaps and restarts are counted each time, but logged at warn level only the 1st, 2nd, 4th,
   * 8th... time, like malformed batches: a publisher dropping messages for a slow subscriber,
   * or sending numbers that jump about, would otherwise write a warning per message.
   */
  @Test
  void aStreamOfGapsAndRestartsIsLoggedSparingly() {
    java.io.PrintStream err = System.err;
    java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
    System.setErr(new java.io.PrintStream(log, true, java.nio.charset.StandardCharsets.UTF_8));
    try {
      receiver.onMessage(0, marker(1));
      for (int i = 1; i <= 1_000; i++) {
        // up by 10 (9 lost), then back by 5 (a restart), and so on
        receiver.onMessage(i % 2 == 1 ? 10L * i : 10L * i - 15, marker(1));
      }
    } finally {
      System.setErr(err);
    }
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(500, s.gaps());
    assertEquals(500, s.restarts());
    String text = log.toString(java.nio.charset.StandardCharsets.UTF_8);
    long lost = text.lines().filter(l -> l.contains("were lost")).count();
    long back = text.lines().filter(l -> l.contains("went back")).count();
    // 1, 2, 4, ..., 256: 9 of each
    assertEquals(9, lost, text.length() > 2_000 ? text.substring(0, 2_000) : text);
    assertEquals(9, back);
  }

  @Test
  void aGapAndAMalformedBatchClearOnce() {
    receiver.onMessage(0, marker(1));
    receiver.onMessage(5, new byte[] {(byte) 0xC1});
    assertEquals(List.of(removed(1), CLEARED), listener.take());
    assertEquals(1, receiver.stats().gaps());
    assertEquals(1, receiver.stats().malformedBatches());
  }

  @Test
  void aReplayBeforeAnyMessageStartsTheStream() {
    receiver.onReplayed(10, marker(1));
    assertEquals(List.of(removed(1)), listener.take());
    assertEquals(11, receiver.nextSeq());
    assertEquals(1, receiver.stats().replayedBatches());
  }

  /**
   * A message numbered 2^63 - 1 cannot be followed: its successor would wrap to -2^63. It made
   * {@code nextSeq()} -2^63, after which the subscriber asked for no replay and the next
   * message counted as a gap. It is now malformed (like a negative number, which counted as a
   * restart): cleared, nothing applied, and the stream starts over.
   */
  @Test
  void aSequenceNumberNoMessageCanFollowIsMalformedAndStartsTheStreamOver() {
    for (long bad : new long[] {Long.MAX_VALUE, -5, Long.MIN_VALUE}) {
      VllmKvEventReceiver.Stats s0 = receiver.stats();
      receiver.onMessage(100, marker(1));
      receiver.onMessage(bad, marker(2));
      assertEquals(List.of(removed(1), CLEARED), listener.take(), "after " + bad);
      assertEquals(-1, receiver.nextSeq());
      receiver.onMessage(101, marker(3)); // the first of a new stream
      receiver.onReplayed(bad, marker(4));
      assertEquals(-1, receiver.nextSeq());
      receiver.onReplayed(102, marker(5));
      assertEquals(List.of(removed(3), CLEARED, removed(5)), listener.take(), "after " + bad);
      assertEquals(103, receiver.nextSeq());
      VllmKvEventReceiver.Stats s = receiver.stats();
      assertEquals(2, s.malformedBatches() - s0.malformedBatches(), "after " + bad);
      assertEquals(3, s.batchesApplied() - s0.batchesApplied());
      assertEquals(0, s.gaps() + s.restarts() + s.duplicatesIgnored());
      receiver.reset();
      listener.take();
    }
    // the largest number that can be followed is applied; the next one cannot be
    receiver.onMessage(VllmKvEventReceiver.MAX_SEQ, marker(6));
    assertEquals(Long.MAX_VALUE, receiver.nextSeq());
    receiver.onMessage(Long.MAX_VALUE, marker(7));
    assertEquals(List.of(removed(6), CLEARED), listener.take());
    assertEquals(-1, receiver.nextSeq());
  }

  @Test
  void constructorChecks() {
    assertThrows(IllegalArgumentException.class, () -> new VllmKvEventReceiver(listener, 0));
    assertThrows(NullPointerException.class, () -> new VllmKvEventReceiver(null, 4));
    assertThrows(NullPointerException.class, () -> receiver.onMessage(0, null));
    assertEquals(-1, receiver.nextSeq(), "a rejected call changes nothing");
  }

  @Test
  void thePayloadIsNotModified() {
    byte[] copy = INT_HASHES.clone();
    apply(copy);
    assertTrue(Arrays.equals(INT_HASHES, copy));
  }
}
