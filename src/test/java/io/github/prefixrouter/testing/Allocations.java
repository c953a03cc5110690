package io.github.prefixrouter.testing;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import org.opentest4j.TestAbortedException;

/** What a thread allocates, for tests that bound the heap a decoder or codec takes. */
public final class Allocations {

  private Allocations() {}

  /**
   * The bytes the calling thread has allocated so far (HotSpot's per-thread counter); the test
   * is skipped, not failed, on a JVM without one.
   *
   * @return the bytes allocated by this thread since it started
   * @throws TestAbortedException if this JVM does not count them
   */
  public static long ofThisThread() {
    ThreadMXBean b = ManagementFactory.getThreadMXBean();
    if (b instanceof com.sun.management.ThreadMXBean t
        && t.isThreadAllocatedMemorySupported() && t.isThreadAllocatedMemoryEnabled()) {
      return t.getCurrentThreadAllocatedBytes();
    }
    throw new TestAbortedException("no per-thread allocation counter on this JVM");
  }
}
