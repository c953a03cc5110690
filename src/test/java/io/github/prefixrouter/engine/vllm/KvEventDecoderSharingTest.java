package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
}
