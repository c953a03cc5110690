package io.github.prefixrouter.bench.clock;

import io.github.prefixrouter.internal.GuardedClock;
import io.github.prefixrouter.spi.Clock;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What reading a clock through its {@link GuardedClock} costs against reading it directly: the
 * system's clock ({@code System::nanoTime}) read raw and through one guard, by 1 thread and by 2
 * threads at once. The state is shared by the benchmark's threads, so the 2 threads read one
 * guard, as a node's request threads read the node's: each good reading writes it as the guard's
 * latest when the clock has moved on, in a slot picked by the thread's id (with one value for
 * all threads, as the guard kept before, the 2 threads wrote the same one). Average time per
 * reading, in one run:
 *
 * <pre>
 *   taskset -c 0,1 java -jar benchmarks/target/benchmarks.jar GuardedClockBenchmark
 *   benchmarks/run jmh GuardedClockBenchmark
 * </pre>
 *
 * With 2 threads on a 2-core machine, other work on it takes cores from the benchmark's
 * threads: note the load average with the figures.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(2)
public class GuardedClockBenchmark {

  private final Clock raw = System::nanoTime;
  private final GuardedClock guarded = GuardedClock.of("bench", System::nanoTime);

  @Benchmark
  @Threads(1)
  public long raw1Thread() {
    return raw.nanoTime();
  }

  @Benchmark
  @Threads(1)
  public long guarded1Thread() {
    return guarded.nanoTime();
  }

  @Benchmark
  @Threads(2)
  public long raw2Threads() {
    return raw.nanoTime();
  }

  @Benchmark
  @Threads(2)
  public long guarded2Threads() {
    return guarded.nanoTime();
  }

  @Benchmark
  @Threads(2)
  public long ownGuard2Threads(OwnGuard own) {
    return own.guarded.nanoTime();
  }

  /** A guard of each thread's own: the guard's work without the threads sharing its reading. */
  @State(Scope.Thread)
  public static class OwnGuard {
    final GuardedClock guarded = GuardedClock.of("bench", System::nanoTime);
  }
}
