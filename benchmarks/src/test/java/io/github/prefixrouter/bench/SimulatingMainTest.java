package io.github.prefixrouter.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.ToIntFunction;
import org.junit.jupiter.api.Test;

/**
 * The checks every simulating main ({@code scope}, {@code slots}, {@code stream}) passes alike:
 * the bounds {@link Flags} puts on {@code --rate} and {@code --requests}. A subclass names its
 * main's option parser, request count and entry point, and reads refusals and printed output
 * through {@link #refused} and {@link #output}.
 *
 * @param <O> the main's parsed options
 */
public abstract class SimulatingMainTest<O> {

  private final Function<String[], O> options;
  private final ToIntFunction<O> requests;
  private final Consumer<String[]> main;

  /**
   * Checks the main whose options {@code options} parses (an {@link IllegalArgumentException} if
   * it refuses them), whose request count {@code requests} reads from them, and which
   * {@code main} runs.
   */
  protected SimulatingMainTest(Function<String[], O> options, ToIntFunction<O> requests,
      Consumer<String[]> main) {
    this.options = options;
    this.requests = requests;
    this.main = main;
  }

  /** The message the main's refusal of {@code args} gives. */
  protected final String refused(String... args) {
    return assertThrows(IllegalArgumentException.class, () -> options.apply(args)).getMessage();
  }

  /** What the main prints on {@code args}. */
  protected final String output(String... args) {
    return Stdout.of(() -> main.accept(args));
  }

  /**
   * A --rate whose arrivals cannot be simulated is refused naming the flag: 1e-300 overflowed
   * the arrival times ("cannot go back in time" in a stack trace), and 1e9 ran out of memory
   * or ran practically forever.
   */
  @Test
  void ratesThatCannotBeSimulatedAreRefused() {
    for (String r : new String[] {"1e-300", "0.0009", "1e9", "100000.5"}) {
      assertEquals("--rate must be from 0.001 to 100000, not " + r, refused("--rate", r));
    }
  }

  /**
   * A request count above 1,000,000, far above any sensible run, is refused naming the flag:
   * --requests 2000000000 ran out of memory building the workload.
   */
  @Test
  void requestsBeyondTheBoundAreRefused() {
    for (String n : new String[] {"2000000000", "1000001"}) {
      assertEquals("--requests must be at least 1 (and at most 1000000), not " + n,
          refused("--requests", n));
    }
    assertEquals(1_000_000,
        requests.applyAsInt(options.apply(new String[] {"--requests", "1000000"})));
  }
}
