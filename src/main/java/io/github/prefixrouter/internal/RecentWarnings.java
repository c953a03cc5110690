package io.github.prefixrouter.internal;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The memory behind a warning logged once per key (a sender, or a sender and what it was warned
 * of): the {@code capacity} keys seen most recently are remembered, the least recently seen
 * forgotten first, and a key forgotten warns again when it is seen again; at most
 * {@code perMinute} warnings are logged a minute (timed by the caller's clock, in milliseconds:
 * a wall clock, or a monotonic one), and a key left out then is not remembered, so it warns once
 * the minute is over. So senders under ever-new keys can neither fill the log nor silence the warning of another key for longer than
 * they keep sending. Each key keeps a value (what it was warned of), for tests. With a
 * {@code capacity} of 0 no key is remembered: every warning is logged, at most
 * {@code perMinute} a minute. The HTTP transport uses it for its warnings, and a
 * {@link CountedFailureLog} (with a {@code capacity} of 0) for the lines of its failures.
 *
 * <p>Thread-safe.
 */
public final class RecentWarnings {

  private final int perMinute;
  private final Map<String, String> seen;
  /** Start (the caller's clock, ms) of the minute the warnings are counted in. */
  private long minute;
  /** Warnings logged in that minute. */
  private int warnings;
  /** Warnings left out since the last one logged. */
  private long leftOut;

  public RecentWarnings(int capacity, int perMinute) {
    this.perMinute = perMinute;
    this.seen = new LinkedHashMap<>(16, 0.75f, true) {
      @Override
      protected boolean removeEldestEntry(Map.Entry<String, String> eldest) {
        return size() > capacity;
      }
    };
  }

  /**
   * Whether a warning of {@code key} is to be logged now ({@code nowMillis}): not if the key is
   * remembered (it becomes the most recently seen), nor if this minute's warnings are used up
   * (counted as left out); otherwise the key is remembered with {@code value}.
   *
   * @return -1 if no warning is to be logged, else the warnings left out since the last one
   *     logged (for the one to log to say so)
   */
  public synchronized long admit(String key, String value, long nowMillis) {
    if (seen.get(key) != null) { // seen again: now the most recent
      return -1;
    }
    // the first warning starts a minute; so does a clock stepped back
    if (warnings == 0 || nowMillis < minute || nowMillis - minute >= 60_000) {
      minute = nowMillis;
      warnings = 0;
    }
    if (warnings >= perMinute) {
      leftOut++;
      return -1;
    }
    warnings++;
    seen.put(key, value);
    long n = leftOut;
    leftOut = 0;
    return n;
  }

  /** The keys remembered, each with its value. */
  public synchronized Map<String, String> seen() {
    return Map.copyOf(seen);
  }
}
