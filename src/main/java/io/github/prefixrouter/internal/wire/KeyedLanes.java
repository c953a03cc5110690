package io.github.prefixrouter.internal.wire;

import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;

/**
 * Tasks in lanes by key (a remote peer, say): at most {@code perKey} tasks of one key run at
 * once, and the others wait in their key's lane, first in first out. It runs nothing itself:
 * {@link #offer} says whether a task may start now, and {@link #next}, called as one of a key's
 * running tasks ends, hands its place to the key's next waiting task. A key with no task running
 * or waiting has no entry, so the entries are never more than the tasks running and waiting.
 *
 * <p>Thread-safe.
 *
 * @param <K> the key
 * @param <T> the task
 */
public final class KeyedLanes<K, T> {

  private final int perKey;
  private final Map<K, Lane<T>> lanes = new HashMap<>();

  private static final class Lane<T> {
    int running;
    final ArrayDeque<T> waiting = new ArrayDeque<>();
  }

  /**
   * @param perKey the tasks of one key running at once at most, at least 1
   * @throws IllegalArgumentException if {@code perKey} is below 1
   */
  public KeyedLanes(int perKey) {
    if (perKey < 1) {
      throw new IllegalArgumentException("perKey must be at least 1, was " + perKey);
    }
    this.perKey = perKey;
  }

  /**
   * Adds a task of {@code key}: it runs now (counted as running, and the caller starts it) if
   * fewer than {@code perKey} of the key's tasks run, else it waits behind the key's others.
   *
   * @return true if the caller starts the task now; false if it waits
   */
  public synchronized boolean offer(K key, T task) {
    Lane<T> lane = lanes.computeIfAbsent(key, k -> new Lane<>());
    if (lane.running < perKey) {
      lane.running++;
      return true;
    }
    lane.waiting.add(task);
    return false;
  }

  /**
   * As {@link #offer}, but a task that would wait behind {@code maxWaiting} or more of its key's
   * waiting tasks is refused instead, and not added.
   *
   * @return true if the caller starts the task now; false if it waits; null if it is refused
   */
  public synchronized Boolean offer(K key, T task, int maxWaiting) {
    Lane<T> lane = lanes.get(key);
    if (lane != null && lane.running >= perKey && lane.waiting.size() >= maxWaiting) {
      return null;
    }
    return offer(key, task);
  }

  /**
   * One of {@code key}'s running tasks has ended: its place goes to the key's first waiting
   * task, which the caller starts, or, if none waits, is given up.
   *
   * @return the task that runs now in the ended one's place; null if none waits, or if the key
   *     has no entry (its tasks were forgotten by {@link #clear})
   */
  public synchronized T next(K key) {
    Lane<T> lane = lanes.get(key);
    if (lane == null) {
      return null;
    }
    T task = lane.waiting.poll();
    if (task != null) {
      return task;
    }
    if (--lane.running == 0) {
      lanes.remove(key);
    }
    return null;
  }

  /** Forgets every task, running and waiting (a shut-down owner's). */
  public synchronized void clear() {
    lanes.clear();
  }

  /** The keys with tasks running or waiting. */
  public synchronized int keys() {
    return lanes.size();
  }

  /** The tasks of {@code key} running now. */
  public synchronized int running(K key) {
    Lane<T> lane = lanes.get(key);
    return lane == null ? 0 : lane.running;
  }

  /** The tasks of {@code key} waiting now. */
  public synchronized int waiting(K key) {
    Lane<T> lane = lanes.get(key);
    return lane == null ? 0 : lane.waiting.size();
  }
}
