package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.RecordingListener.CLEARED;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.CacheEventListener;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.statistics.Statistics;

/**
 * Random batches of random events, encoded by {@link MsgpackWriter} with random widths, random
 * extra fields and both event forms (tagged arrays and tagged maps), decoded by the receiver:
 * the listener calls must be exactly the events (the reference model is the list itself), and
 * every damaged copy of such a payload must be rejected whole or decoded, never throw.
 */
class VllmKvEventDecodingProperties {

  static final int B = 3;

  /** A block hash: an integer (written signed or as an unsigned 64-bit), or bin bytes. */
  record HashSpec(long value, byte[] bytes, boolean unsigned) {
    /** The long the receiver must report: for bytes, the low 64 bits of their unsigned value. */
    long expected() {
      return bytes != null ? new BigInteger(1, bytes).longValue() : value;
    }

    void write(MsgpackWriter w) {
      if (bytes != null) {
        w.bin(bytes);
      } else if (unsigned) {
        w.uint64(value);
      } else {
        w.integer(value);
      }
    }

    @Override
    public String toString() {
      return bytes != null ? "bin" + bytes.length + ":" + Long.toHexString(expected())
          : (unsigned ? "u" : "") + value;
    }
  }

  /** A token id, possibly written as a bigram {@code [id, second]}. */
  record TokenSpec(int id, boolean bigram, int second) {}

  sealed interface EventSpec permits Stored, Removed, Cleared, Unknown {}

  /** {@code parent} null: nil (or, in map form, absent). */
  record Stored(HashSpec parent, List<HashSpec> hashes, List<TokenSpec> tokens, int blockSize,
      boolean mapForm) implements EventSpec {}

  record Removed(List<HashSpec> hashes, boolean mapForm) implements EventSpec {}

  record Cleared(boolean mapForm) implements EventSpec {}

  record Unknown(String tag, boolean mapForm) implements EventSpec {}

  /** rank: 0 absent, 1 nil, 2 an int; trailing: elements after the rank (needs a rank). */
  record BatchSpec(List<EventSpec> events, int rank, int trailing) {}

  @Provide
  Arbitrary<BatchSpec> batches() {
    Arbitrary<HashSpec> hash = Arbitraries.frequencyOf(
        Tuple.of(4, Arbitraries.longs().map(v -> new HashSpec(v, null, false))),
        Tuple.of(2, Arbitraries.longs().map(v -> new HashSpec(v, null, true))),
        Tuple.of(3, Arbitraries.bytes().array(byte[].class).ofMaxSize(40)
            .map(b -> new HashSpec(0, b, false))));
    Arbitrary<TokenSpec> token = Combinators.combine(
            Arbitraries.integers(), Arbitraries.integers().between(0, 9).map(x -> x == 0),
            Arbitraries.integers())
        .as(TokenSpec::new);
    Arbitrary<Boolean> mapForm = Arbitraries.integers().between(0, 4).map(x -> x == 0);
    // the tokens are drawn at the longest length and cut to B a hash (one more or one fewer
    // now and then), not flat-mapped from the hashes: a flatMap made jqwik build a new
    // arbitrary, and its edge cases, for every event drawn (about 800 MB at 10,000 tries)
    Arbitrary<EventSpec> stored = Combinators.combine(
            hash.list().ofMaxSize(4),
            hash.injectNull(0.3),
            token.list().ofSize(4 * B + 1),
            Arbitraries.integers().between(0, 9).map(x -> x == 0 ? -1 : x == 1 ? 1 : 0),
            Arbitraries.integers().between(0, 9).map(x -> x == 0 ? B + 1 : B),
            mapForm)
        .as((hashes, parent, tokens, delta, bs, map) -> new Stored(parent, hashes,
            List.copyOf(tokens.subList(0, Math.max(0, hashes.size() * B + delta))), bs, map));
    Arbitrary<EventSpec> removed =
        Combinators.combine(hash.list().ofMaxSize(4), mapForm).as(Removed::new);
    Arbitrary<EventSpec> cleared = mapForm.map(Cleared::new);
    Arbitrary<EventSpec> unknown = Combinators.combine(
            Arbitraries.strings().alpha().ofMinLength(1).ofMaxLength(12)
                .filter(t -> !Set.of(KvEventDecoder.STORED, KvEventDecoder.REMOVED,
                    KvEventDecoder.CLEARED).contains(t)),
            mapForm)
        .as(Unknown::new);
    Arbitrary<EventSpec> event = Arbitraries.frequencyOf(
        Tuple.of(6, stored), Tuple.of(4, removed), Tuple.of(1, cleared), Tuple.of(1, unknown));
    return Combinators.combine(event.list().ofMaxSize(12),
            Arbitraries.integers().between(0, 2), Arbitraries.integers().between(0, 2))
        .as((events, rank, trailing) -> new BatchSpec(events, rank, rank == 0 ? 0 : trailing));
  }

  // ---- encoding ----

  static byte[] encode(BatchSpec batch, Random r) {
    MsgpackWriter w = new MsgpackWriter(r);
    w.array(2 + (batch.rank() > 0 ? 1 : 0) + batch.trailing());
    if (r.nextBoolean()) {
      w.float64(1.7e9 + r.nextDouble());
    } else {
      w.integer(r.nextInt(1 << 30));
    }
    w.array(batch.events().size());
    for (EventSpec e : batch.events()) {
      writeEvent(w, e, r);
    }
    if (batch.rank() == 1) {
      w.nil();
    } else if (batch.rank() == 2) {
      w.integer(r.nextInt(8));
    }
    for (int i = 0; i < batch.trailing(); i++) {
      w.any(r, 3);
    }
    return w.bytes();
  }

  static void hashes(MsgpackWriter w, List<HashSpec> hashes) {
    w.array(hashes.size());
    hashes.forEach(h -> h.write(w));
  }

  static void tokens(MsgpackWriter w, List<TokenSpec> tokens) {
    w.array(tokens.size());
    for (TokenSpec t : tokens) {
      if (t.bigram()) {
        w.array(2).integer(t.id()).integer(t.second());
      } else {
        w.integer(t.id());
      }
    }
  }

  /** One field of an event, by name; a map-form event writes its key first. */
  interface Field {
    void write(MsgpackWriter w);
  }

  static void writeEvent(MsgpackWriter w, EventSpec e, Random r) {
    String tag;
    List<String> names = new ArrayList<>();
    List<Field> fields = new ArrayList<>();
    boolean mapForm;
    if (e instanceof Stored s) {
      tag = KvEventDecoder.STORED;
      mapForm = s.mapForm();
      names.add("block_hashes");
      fields.add(x -> hashes(x, s.hashes()));
      if (s.parent() != null || !mapForm || r.nextBoolean()) {
        names.add("parent_block_hash");
        fields.add(x -> {
          if (s.parent() == null) {
            x.nil();
          } else {
            s.parent().write(x);
          }
        });
      }
      names.add("token_ids");
      fields.add(x -> tokens(x, s.tokens()));
      names.add("block_size");
      fields.add(x -> x.integer(s.blockSize()));
    } else if (e instanceof Removed rm) {
      tag = KvEventDecoder.REMOVED;
      mapForm = rm.mapForm();
      names.add("block_hashes");
      fields.add(x -> hashes(x, rm.hashes()));
    } else if (e instanceof Cleared c) {
      tag = KvEventDecoder.CLEARED;
      mapForm = c.mapForm();
    } else {
      Unknown u = (Unknown) e;
      tag = u.tag();
      mapForm = u.mapForm();
      // an unknown event may carry fields named like known ones, of other types
      names.add("block_hashes");
      fields.add(x -> x.str("not hashes"));
    }
    // newer versions' extra fields: anything at all, except that a BlockStored's array form
    // continues with lora_id, medium and lora_name (nil here: the base model; the LoRA fields
    // are checked by VllmKvEventReceiverTest's golden payloads), and a BlockRemoved's with
    // medium and group_idx (nil here: one KV-cache group; groups are checked by
    // VllmKvEventHybridModelTest)
    int extra = r.nextInt(4);
    for (int i = 0; i < extra; i++) {
      names.add("extra_" + i);
      boolean loraField = e instanceof Stored && !mapForm && (i == 0 || i == 2);
      boolean groupField = e instanceof Removed && !mapForm && i == 1;
      fields.add(loraField || groupField ? MsgpackWriter::nil : x -> x.any(r, 3));
    }
    if (mapForm) {
      names.add(KvEventDecoder.TAG_KEY);
      fields.add(x -> x.str(tag));
      List<Integer> order = new ArrayList<>();
      for (int i = 0; i < names.size(); i++) {
        order.add(i);
      }
      Collections.shuffle(order, r);
      w.map(names.size());
      for (int i : order) {
        w.str(names.get(i));
        fields.get(i).write(w);
      }
    } else {
      w.array(1 + fields.size()).str(tag);
      fields.forEach(f -> f.write(w));
    }
  }

  // ---- the reference: the events themselves ----

  record Expected(List<String> calls, long blockSizeMismatches, long tokenCountMismatches,
      long ignored, long stored, long removed, long cleared, long empty) {}

  static Expected expected(BatchSpec batch) {
    List<String> calls = new ArrayList<>();
    long bsm = 0;
    long tcm = 0;
    long ignored = 0;
    long stored = 0;
    long removed = 0;
    long cleared = 0;
    long empty = 0;
    for (EventSpec e : batch.events()) {
      if (e instanceof Stored s && s.hashes().isEmpty()
          || e instanceof Removed r && r.hashes().isEmpty()) {
        empty++;
      } else if (e instanceof Stored s) {
        if (s.blockSize() != B) {
          bsm++;
        } else if (s.tokens().size() != s.hashes().size() * B) {
          tcm++;
        } else {
          calls.add(RecordingListener.stored(
              s.parent() == null ? CacheEventListener.NO_PARENT : s.parent().expected(),
              s.hashes().stream().mapToLong(HashSpec::expected).toArray(),
              s.tokens().stream().mapToInt(TokenSpec::id).toArray()));
          stored++;
        }
      } else if (e instanceof Removed r) {
        calls.add(RecordingListener.removed(
            r.hashes().stream().mapToLong(HashSpec::expected).toArray()));
        removed++;
      } else if (e instanceof Cleared) {
        calls.add(CLEARED);
        cleared++;
      } else {
        ignored++;
      }
    }
    return new Expected(calls, bsm, tcm, ignored, stored, removed, cleared, empty);
  }

  @Property
  void decodedCallsAreTheEncodedEvents(@ForAll("batches") BatchSpec batch,
      @ForAll Random widths) {
    byte[] payload = encode(batch, widths);
    RecordingListener listener = new RecordingListener();
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(listener, B);
    receiver.onMessage(7, payload);
    Expected x = expected(batch);
    assertEquals(x.calls(), listener.calls, () -> "payload " + hex(payload));
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(0, s.malformedBatches());
    assertEquals(1, s.batchesApplied());
    assertEquals(x.blockSizeMismatches(), s.blockSizeMismatches());
    assertEquals(x.tokenCountMismatches(), s.tokenCountMismatches());
    assertEquals(x.ignored(), s.ignoredEvents());
    assertEquals(x.stored(), s.storedEvents());
    assertEquals(x.removed(), s.removedEvents());
    assertEquals(x.cleared(), s.clearedEvents());
    assertEquals(x.empty(), s.emptyEvents());
    assertEquals(8, receiver.nextSeq());
    Statistics.label("forms").collect(
        batch.events().stream().anyMatch(VllmKvEventDecodingProperties::isMap) ? "map" : "array");
    Statistics.label("stores applied").collect(x.stored() > 0);
  }

  static boolean isMap(EventSpec e) {
    return e instanceof Stored s ? s.mapForm() : e instanceof Removed r ? r.mapForm()
        : e instanceof Cleared c ? c.mapForm() : ((Unknown) e).mapForm();
  }

  static String hex(byte[] b) {
    return java.util.HexFormat.of().formatHex(b);
  }

  /** A receiver that has applied one batch (seq 0); the calls are forgotten. */
  static VllmKvEventReceiver started(RecordingListener listener) {
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(listener, B);
    receiver.onMessage(0, Batches.batch());
    listener.take();
    return receiver;
  }

  /** After a damaged payload: the receiver takes the next good batch as usual. */
  static void stillWorks(VllmKvEventReceiver receiver, RecordingListener listener) {
    long seq = receiver.nextSeq();
    receiver.onMessage(seq, Batches.batch(Batches.removed(42), Batches.cleared()));
    assertEquals(List.of(RecordingListener.removed(42), CLEARED), listener.take());
    assertEquals(seq + 1, receiver.nextSeq());
  }

  @Property
  void everyTruncationIsMalformedAndAppliesNothing(@ForAll("batches") BatchSpec batch,
      @ForAll Random widths) {
    byte[] payload = encode(batch, widths);
    RecordingListener listener = new RecordingListener();
    VllmKvEventReceiver receiver = started(listener);
    for (int n = 0; n < payload.length; n++) {
      receiver.onMessage(receiver.nextSeq(), Arrays.copyOf(payload, n));
      assertEquals(List.of(CLEARED), listener.take(), "truncated to " + n);
      assertEquals(n + 1, receiver.stats().malformedBatches());
    }
    assertEquals(0, receiver.stats().storedEvents() + receiver.stats().removedEvents());
    stillWorks(receiver, listener);
  }

  @Property
  void damagedPayloadsAreRejectedWholeOrDecoded(@ForAll("batches") BatchSpec batch,
      @ForAll Random widths, @ForAll @IntRange(min = 1, max = 3) int flips) {
    byte[] payload = encode(batch, widths);
    if (payload.length == 0) {
      return;
    }
    for (int i = 0; i < flips; i++) {
      payload[widths.nextInt(payload.length)] ^= (byte) (1 + widths.nextInt(255));
    }
    RecordingListener listener = new RecordingListener();
    VllmKvEventReceiver receiver = started(listener);
    receiver.onMessage(receiver.nextSeq(), payload);
    VllmKvEventReceiver.Stats s = receiver.stats();
    List<String> calls = listener.take();
    if (s.malformedBatches() == 1) {
      assertEquals(List.of(CLEARED), calls, "a rejected batch only clears");
      assertEquals(1, s.batchesApplied());
    } else {
      assertEquals(0, s.malformedBatches());
      assertEquals(2, s.batchesApplied());
      assertEquals(s.storedEvents() + s.removedEvents() + s.clearedEvents(), calls.size());
      assertTrue(s.listenerFailures() == 0);
    }
    Statistics.label("rejected").collect(s.malformedBatches() == 1);
    stillWorks(receiver, listener);
  }
}
