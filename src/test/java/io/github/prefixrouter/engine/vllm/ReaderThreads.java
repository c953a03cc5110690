package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadFactory;

/**
 * The thread factory of a subscriber under test: daemon threads named "kv-events-under-test",
 * each kept in {@link #made}, so that a test can check they have all ended once it closed the
 * subscriber.
 */
final class ReaderThreads implements ThreadFactory {

  /** Every thread made, in order. */
  final List<Thread> made = new CopyOnWriteArrayList<>();

  @Override
  public Thread newThread(Runnable r) {
    Thread t = new Thread(r, "kv-events-under-test");
    t.setDaemon(true);
    made.add(t);
    return t;
  }

  /** Fails unless every thread made has ended. */
  void assertAllEnded() {
    for (Thread t : made) {
      assertFalse(t.isAlive(), "the reader thread ends with close()");
    }
  }
}
