package io.github.prefixrouter.bench.tree;

import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.ref.Reference;
import java.util.Arrays;

/**
 * Retained heap of a structure, measured as the difference in used heap after full collections
 * before and after building it. Inputs are created fresh inside the measured region (a new
 * string key per sequence, and the tree copies its token arrays), so whatever a structure keeps
 * of its inputs is counted and whatever it drops is collected.
 */
public final class MemoryMeter {

  private static final MemoryMXBean MEMORY = ManagementFactory.getMemoryMXBean();

  private MemoryMeter() {}

  /**
   * Why retained-heap figures cannot be trusted in this JVM, or null. With the serial collector
   * (which the JVM picks when it sees a single CPU, for example under {@code taskset -c 1}) the
   * used-heap difference around a build came out as 0, a few hundred bytes or negative for some
   * structures (a structure of an earlier sample still counted in the baseline, or one not yet
   * counted), while the same code under G1 gives the same figures run after run.
   */
  public static String unreliableReason() {
    for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
      if (gc.getName().equals("MarkSweepCompact")) {
        return "this JVM runs the serial collector, under which the retained-heap samples are"
            + " wrong (0 or negative for some structures); run the JVM with -XX:+UseG1GC";
      }
    }
    return null;
  }

  /**
   * Used heap after full collections, once two in a row agree within 16 KiB (at most six).
   *
   * @return used heap bytes
   */
  public static long usedAfterGc() {
    long last = Long.MAX_VALUE;
    for (int i = 0; i < 6; i++) {
      System.gc();
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      long used = MEMORY.getHeapMemoryUsage().getUsed();
      if (i >= 2 && Math.abs(used - last) < 16 * 1024) {
        return used;
      }
      last = used;
    }
    return last;
  }

  /** Median over {@code repeats} of the bytes retained by {@code impl} holding the cached set. */
  static long retainedBytes(String impl, TreeWorkload w, int repeats) {
    long[] samples = new long[repeats];
    for (int r = 0; r < repeats; r++) {
      long before = usedAfterGc();
      PrefixIndex index = PrefixIndex.create(impl, Long.MAX_VALUE);
      for (int[] seq : w.cached) {
        int[] copy = seq.clone();
        index.insert(copy, TokenStrings.encode(copy));
      }
      long after = usedAfterGc();
      Reference.reachabilityFence(index);
      samples[r] = after - before;
    }
    Arrays.sort(samples);
    return samples[repeats / 2];
  }
}
