package io.github.prefixrouter.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/**
 * {@link RecentWarnings} against a model that keeps the keys in a list, least recently seen
 * first: a key in the list is not warned of and moves to the end; otherwise it is warned of if
 * fewer than {@code perMinute} warnings were logged since the minute began (a minute begins with
 * the first warning after the last one ended, or when the clock went back), and then appended,
 * the first key dropped past {@code capacity}; a key left out is counted, and the next warning
 * reports the count. Clock steps are drawn around the minute's edges, backwards included.
 */
class RecentWarningsProperties {

  /** One key seen after a clock step. */
  record Op(int key, int stepChoice) {}

  @Provide
  Arbitrary<List<Op>> ops() {
    Arbitrary<Op> op = Combinators.combine(
        Arbitraries.integers().between(0, 11),
        Arbitraries.integers().between(0, 6)).as(Op::new);
    return op.list().ofMinSize(1).ofMaxSize(300);
  }

  @Property(tries = 300)
  void warningsAndMemoryMatchAListModel(@ForAll("ops") List<Op> ops,
      @ForAll @IntRange(min = 0, max = 6) int capacity,
      @ForAll @IntRange(min = 1, max = 4) int perMinute) {
    RecentWarnings w = new RecentWarnings(capacity, perMinute);
    long[] steps = {0, 1, 59_999, 60_000, 60_001, -1, -60_000};
    long now = 1_700_000_000_000L;
    List<String> seen = new ArrayList<>();
    Map<String, String> values = new HashMap<>();
    long minute = 0;
    int logged = 0;
    long leftOut = 0;
    int i = 0;
    for (Op op : ops) {
      now += steps[op.stepChoice()];
      String key = "k" + op.key();
      String value = "v" + i++;
      long expected;
      if (seen.remove(key)) {
        seen.add(key);
        expected = -1;
      } else {
        if (logged == 0 || now < minute || now - minute >= 60_000) {
          minute = now;
          logged = 0;
        }
        if (logged >= perMinute) {
          leftOut++;
          expected = -1;
        } else {
          logged++;
          seen.add(key);
          values.put(key, value);
          if (seen.size() > capacity) {
            values.remove(seen.remove(0));
          }
          expected = leftOut;
          leftOut = 0;
        }
      }
      assertEquals(expected, w.admit(key, value, now), key + " at " + now);
      Map<String, String> model = new HashMap<>();
      for (String k : seen) {
        model.put(k, values.get(k));
      }
      assertEquals(model, w.seen());
    }
  }
}
