package io.github.prefixrouter.internal.wire;

import java.util.List;
import java.util.Set;

/**
 * The selector threads of JDK HTTP clients ({@code HttpClient-<n>-SelectorManager}), for tests
 * that check an owner of a client ends its selector: JDK 17's client cannot be closed, and its
 * selector thread otherwise runs until the client is garbage collected.
 */
public final class SelectorThreads {

  private SelectorThreads() {}

  /** The threads now, to pass to {@link #since}. */
  public static Set<Thread> now() {
    return Set.copyOf(Thread.getAllStackTraces().keySet());
  }

  /** The live selector threads that are not in {@code before}. */
  public static List<Thread> since(Set<Thread> before) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && !before.contains(t)
            && t.getName().matches("HttpClient-\\d+-SelectorManager"))
        .toList();
  }

  /**
   * Waits up to 10 s for {@code threads} to end.
   *
   * @return the names of those still alive then (empty: all ended)
   */
  public static List<String> aliveAfterWaiting(List<Thread> threads) throws InterruptedException {
    for (Thread t : threads) {
      t.join(10_000);
    }
    return threads.stream().filter(Thread::isAlive).map(Thread::getName).toList();
  }
}
