package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * {@link KeyedLanes} against a model: per key, the tasks running (at most {@code perKey}) and a
 * first-in first-out queue of the others. Every task starts exactly once, a key's tasks start in
 * the order they were offered, a task waits only while its key has {@code perKey} running, one
 * offered with a bound on the waiting is refused (and never starts) exactly when it would wait
 * behind that many, and a key with nothing running or waiting has no entry.
 */
class KeyedLanesProperties {

  /**
   * Each step offers a new task of key {@code step % 4} ({@code step / 4 % 3} 0), ends the oldest
   * running task of that key (1, if it has any), or offers a new task that may wait behind at
   * most {@code maxWaiting} of the key's (2).
   */
  @Property(tries = 500)
  void matchesTheModel(@ForAll @IntRange(min = 1, max = 3) int perKey,
      @ForAll @IntRange(min = 0, max = 2) int maxWaiting,
      @ForAll @Size(max = 200) List<@IntRange(min = 0, max = 95) Integer> steps) {
    KeyedLanes<Integer, Integer> lanes = new KeyedLanes<>(perKey);
    Map<Integer, ArrayDeque<Integer>> running = new HashMap<>();
    Map<Integer, ArrayDeque<Integer>> waiting = new HashMap<>();
    Map<Integer, List<Integer>> offered = new HashMap<>();
    Map<Integer, List<Integer>> started = new HashMap<>();
    int nextTask = 0;
    for (int step : steps) {
      int key = step % 4;
      ArrayDeque<Integer> run = running.computeIfAbsent(key, k -> new ArrayDeque<>());
      ArrayDeque<Integer> wait = waiting.computeIfAbsent(key, k -> new ArrayDeque<>());
      int kind = (step / 4) % 3;
      if (kind == 2 && run.size() >= perKey && wait.size() >= maxWaiting) {
        assertNull(lanes.offer(key, nextTask++, maxWaiting), "refused behind a full queue");
      } else if (kind != 1) {
        int task = nextTask++;
        offered.computeIfAbsent(key, k -> new ArrayList<>()).add(task);
        boolean now = kind == 0 ? lanes.offer(key, task) : lanes.offer(key, task, maxWaiting);
        assertEquals(run.size() < perKey, now, "a task starts at once iff its key has room");
        if (now) {
          run.add(task);
          started.computeIfAbsent(key, k -> new ArrayList<>()).add(task);
        } else {
          wait.add(task);
        }
      } else if (!run.isEmpty()) {
        run.poll();
        Integer next = lanes.next(key);
        assertEquals(wait.poll(), next, "the key's first waiting task takes the place");
        if (next != null) {
          run.add(next);
          started.computeIfAbsent(key, k -> new ArrayList<>()).add(next);
        }
      }
      int keys = 0;
      for (int k = 0; k < 4; k++) {
        int r = running.getOrDefault(k, new ArrayDeque<>()).size();
        int w = waiting.getOrDefault(k, new ArrayDeque<>()).size();
        assertEquals(r, lanes.running(k));
        assertEquals(w, lanes.waiting(k));
        assertTrue(r <= perKey, "running within the limit");
        assertTrue(w == 0 || r == perKey, "a task waits only while its key is full");
        keys += r + w > 0 ? 1 : 0;
      }
      assertEquals(keys, lanes.keys(), "only keys with tasks have entries");
    }
    for (Map.Entry<Integer, List<Integer>> e : started.entrySet()) {
      List<Integer> o = offered.get(e.getKey());
      assertEquals(o.subList(0, e.getValue().size()), e.getValue(), "started in offer order");
    }
  }

  @Example
  void aClearedKeyHasNoNextTask() {
    KeyedLanes<String, String> lanes = new KeyedLanes<>(1);
    assertTrue(lanes.offer("k", "a"));
    lanes.offer("k", "b");
    lanes.clear();
    assertEquals(0, lanes.keys());
    assertNull(lanes.next("k"));
  }

  @Example
  void aLimitBelowOneIsRefused() {
    assertThrows(IllegalArgumentException.class, () -> new KeyedLanes<String, String>(0));
  }
}
