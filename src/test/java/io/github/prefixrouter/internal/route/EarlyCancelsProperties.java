package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;

/**
 * {@link EarlyCancels} against a naive model: lists of what was recorded, scanned whole, where an
 * entry counts while it is younger than the time bound and among the newest {@code capacity}.
 */
class EarlyCancelsProperties {

  static final long TTL = 10;
  static final int CAPACITY = 3;

  /** A CANCEL as the model keeps it: when, and the request it stands for (null: none yet). */
  static final class MCancel {
    final String key;
    long at;
    InferenceRequest request;

    MCancel(String key) {
      this.key = key;
    }
  }

  record MAnswer(String key, long at, InferenceRequest request) {}

  final List<MCancel> cancels = new ArrayList<>();
  final List<MAnswer> answers = new ArrayList<>();

  private void forget(long now) {
    cancels.removeIf(c -> now - c.at >= TTL);
    answers.removeIf(a -> now - a.at() >= TTL);
    while (cancels.size() > CAPACITY) {
      cancels.remove(0);
    }
    while (answers.size() > CAPACITY) {
      answers.remove(0);
    }
  }

  private MCancel cancelOf(String key) {
    return cancels.stream().filter(c -> c.key.equals(key)).findFirst().orElse(null);
  }

  @Property
  void behavesAsTheModel(@ForAll @LongRange(min = 1, max = 1_000_000_000L) long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    cancels.clear();
    answers.clear();
    EarlyCancels m = new EarlyCancels(TTL, CAPACITY);
    String[] keys = {"p\na", "p\nb", "q\na", "q\nc", "r\nd"};
    InferenceRequest[][] requests = new InferenceRequest[keys.length][3];
    for (int k = 0; k < keys.length; k++) {
      for (int v = 0; v < 3; v++) {
        requests[k][v] = new InferenceRequest(keys[k].substring(2), new int[] {k, v},
            GenerationParams.DEFAULT);
      }
    }
    long now = rnd.nextLong(); // any reading: only differences count
    for (int step = 0; step < 60; step++) {
      now += rnd.nextInt(5);
      int k = rnd.nextInt(keys.length);
      String key = keys[k];
      InferenceRequest r = requests[k][rnd.nextInt(3)];
      forget(now);
      switch (rnd.nextInt(3)) {
        case 0 -> { // a CANCEL, ending a running request or not
          InferenceRequest ended = rnd.nextBoolean() ? r : null;
          MCancel c = cancelOf(key);
          if (c == null) {
            c = new MCancel(key);
            for (MAnswer a : answers) {
              if (a.key().equals(key)) {
                c.request = a.request();
              }
            }
          } else {
            cancels.remove(c);
          }
          if (ended != null) {
            c.request = ended;
          }
          c.at = now;
          cancels.add(c);
          forget(now);
          assertEquals(c.request == null, m.onCancel(key, ended, now), "step " + step);
        }
        case 1 -> { // a FORWARD that joins nothing running
          MCancel c = cancelOf(key);
          boolean expected = c != null && (c.request == null || c.request.equals(r));
          if (c != null && c.request == null) {
            c.request = r;
          }
          assertEquals(expected, m.stops(key, r, now), "step " + step);
        }
        default -> { // an answer
          answers.removeIf(a -> a.key().equals(key));
          answers.add(new MAnswer(key, now, r));
          forget(now);
          m.answered(key, r, now);
        }
      }
      assertEquals(cancels.size(), countLive(m, now, true), "step " + step);
    }
  }

  /** The entries {@code m} holds that are not expired at {@code now}. */
  private static int countLive(EarlyCancels m, long now, boolean cancels) {
    // expired entries are dropped when the memory is next used; a stops() of an absent key
    // uses it without changing anything
    m.stops("absent\nkey", new InferenceRequest("key", new int[] {0}, GenerationParams.DEFAULT),
        now);
    return cancels ? m.cancelsRemembered() : m.answersRemembered();
  }
}
