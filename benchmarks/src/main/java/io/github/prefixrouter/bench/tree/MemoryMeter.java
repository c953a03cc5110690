package io.github.prefixrouter.bench.tree;

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
final class MemoryMeter {

  private static final MemoryMXBean MEMORY = ManagementFactory.getMemoryMXBean();

  private MemoryMeter() {}

  static long usedAfterGc() {
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
