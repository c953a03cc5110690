package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.RecordingListener.CLEARED;
import static io.github.prefixrouter.engine.vllm.RecordingListener.removed;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.RandomDistribution;
import net.jqwik.api.Tuple;
import net.jqwik.api.statistics.Statistics;

/**
 * Random interleavings of live and replayed messages, in order, with gaps, duplicates,
 * restarts and malformed payloads, against a model of the rules: what the listener must see
 * (a clear before a batch after lost messages or a restart, or in place of a malformed batch
 * or of one with a negative sequence number, after which the stream starts over; nothing for a
 * replayed duplicate) and the counters.
 */
class VllmKvEventSequenceProperties {

  /**
   * A message whose sequence number is {@code delta} away from the one expected (from 1000
   * for the first); {@code restart} sends a small number instead, as a restarted publisher.
   */
  record Msg(boolean replayed, int delta, boolean restart, boolean malformed) {}

  @Provide
  Arbitrary<List<Msg>> streams() {
    Arbitrary<Integer> delta = Arbitraries.frequencyOf(
        Tuple.of(12, Arbitraries.just(0)),
        Tuple.of(3, Arbitraries.integers().between(1, 3)),
        Tuple.of(3, Arbitraries.integers().between(-3, -1)));
    Arbitrary<Msg> msg = Combinators.combine(
            Arbitraries.integers().between(0, 9).map(x -> x < 3),
            delta,
            Arbitraries.integers().between(0, 19).map(x -> x == 0),
            Arbitraries.integers().between(0, 9).map(x -> x == 0))
        .as(Msg::new);
    return msg.list().ofMaxSize(40).withSizeDistribution(RandomDistribution.uniform());
  }

  /** Batch {@code id}: one removal of block {@code id}, so every applied batch is visible. */
  static byte[] batch(int id) {
    return Batches.batch(Batches.removed(id));
  }

  @Property
  void clearsAndAppliesAsTheRulesSay(@ForAll("streams") List<Msg> stream) {
    RecordingListener listener = new RecordingListener();
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(listener, 4);
    // the model
    boolean started = false;
    long next = -1;
    long applied = 0;
    long replayed = 0;
    long malformed = 0;
    long gaps = 0;
    long restarts = 0;
    long duplicates = 0;
    List<String> expected = new ArrayList<>();
    for (int id = 0; id < stream.size(); id++) {
      Msg m = stream.get(id);
      long seq = m.restart() ? Math.abs(m.delta()) : (started ? next : 1000) + m.delta();
      byte[] payload = m.malformed() ? Arrays.copyOf(batch(id), 9) : batch(id);
      if (m.replayed()) {
        receiver.onReplayed(seq, payload);
      } else {
        receiver.onMessage(seq, payload);
      }

      if (seq < 0) {
        // no message can follow a negative number: malformed, and the stream starts over
        malformed++;
        expected.add(CLEARED);
        started = false;
        next = -1;
      } else if (m.replayed() && started && seq < next) {
        duplicates++;
      } else {
        boolean clear = false;
        if (started && seq > next) {
          gaps++;
          clear = true;
        } else if (started && seq < next) {
          restarts++;
          clear = true;
        }
        if (m.malformed()) {
          malformed++;
          clear = true;
        }
        if (clear) {
          expected.add(CLEARED);
        }
        if (!m.malformed()) {
          expected.add(removed(id));
          applied++;
          replayed += m.replayed() ? 1 : 0;
        }
        started = true;
        next = seq + 1;
      }

      assertEquals(expected, listener.calls, "after " + m + " as seq " + seq);
      assertEquals(next, receiver.nextSeq());
      VllmKvEventReceiver.Stats s = receiver.stats();
      assertEquals(applied, s.batchesApplied(), "applied");
      assertEquals(applied, s.removedEvents(), "removed events");
      assertEquals(replayed, s.replayedBatches(), "replayed");
      assertEquals(malformed, s.malformedBatches(), "malformed");
      assertEquals(gaps, s.gaps(), "gaps");
      assertEquals(restarts, s.restarts(), "restarts");
      assertEquals(duplicates, s.duplicatesIgnored(), "duplicates");
      assertEquals(0, s.clearedEvents(), "no AllBlocksCleared was sent");
    }
    Statistics.label("gap").collect(gaps > 0);
    Statistics.label("restart").collect(restarts > 0);
    Statistics.label("duplicate").collect(duplicates > 0);
    Statistics.label("gap").coverage(c -> c.check(true).percentage(p -> p > 20));
    Statistics.label("restart").coverage(c -> c.check(true).percentage(p -> p > 20));
    Statistics.label("duplicate").coverage(c -> c.check(true).percentage(p -> p > 20));
  }
}
