package io.github.prefixrouter.bench.json;

import io.github.prefixrouter.internal.json.Json;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The strict JSON reader on numbers: {@code tokenIds} parses a JSON array of {@code ids} token
 * ids (random in [0, 152,064), a large vocabulary) and {@code tokenIdsAsInts} the same followed by
 * {@link Json#asIntArray}, as the client endpoint and the engine adapter read prompts and
 * outputs; {@code mixedNumbers} parses an array of as many numbers of other forms (negative,
 * longs beyond int range, fractions, exponents), the slow path's share of the work.
 *
 * <pre>
 *   taskset -c 1 java -jar benchmarks/target/benchmarks.jar JsonParseBenchmark -prof gc
 * </pre>
 */
@State(Scope.Thread)
@Fork(value = 2, jvmArgsAppend = {"-Xms1g", "-Xmx1g"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class JsonParseBenchmark {

  @Param({"2000"})
  public int ids;

  private String idsText;
  private String mixedText;

  @Setup(Level.Trial)
  public void prepare() {
    SplittableRandom rnd = new SplittableRandom(7);
    StringBuilder a = new StringBuilder("[");
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < ids; i++) {
      a.append(i == 0 ? "" : ",").append(rnd.nextInt(152_064));
      b.append(i == 0 ? "" : ", ");
      switch (i % 4) {
        case 0 -> b.append(-rnd.nextInt(1_000_000));
        case 1 -> b.append(rnd.nextLong());
        case 2 -> b.append(rnd.nextInt(1000)).append('.').append(rnd.nextInt(1000));
        default -> b.append(rnd.nextInt(10)).append('e').append(rnd.nextInt(-20, 20));
      }
    }
    idsText = a.append(']').toString();
    mixedText = b.append(']').toString();
    if (tokenIdsAsInts().length != ids || ((List<?>) mixedNumbers()).size() != ids) {
      throw new IllegalStateException("parsed a different count");
    }
  }

  @Benchmark
  public Object tokenIds() {
    return Json.parse(idsText);
  }

  @Benchmark
  public int[] tokenIdsAsInts() {
    return Json.asIntArray(Json.parse(idsText), "ids");
  }

  @Benchmark
  public Object mixedNumbers() {
    return Json.parse(mixedText);
  }
}
