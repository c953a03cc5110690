package io.github.prefixrouter.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class FlagsTest {

  private static String refused(Runnable r) {
    return assertThrows(IllegalArgumentException.class, r::run).getMessage();
  }

  private static Flags parse(String... args) {
    return Flags.parse(args, Set.of("--full"), Set.of("--seeds", "--rate", "--modes"));
  }

  @Test
  void unknownRepeatedAndValuelessFlagsAreRefused() {
    assertEquals("unknown flag --sedes", refused(() -> parse("--sedes", "3")));
    assertEquals("bad argument '3'", refused(() -> parse("3")));
    assertEquals("--seeds is given twice", refused(() -> parse("--seeds", "1", "--seeds", "2")));
    assertEquals("--full is given twice", refused(() -> parse("--full", "--full")));
    assertEquals("--seeds needs a value", refused(() -> parse("--full", "--seeds")));
  }

  /**
   * A flag whose value was left out (a script's unset variable) is followed by another flag:
   * that flag was taken for its value, silently dropped ({@code --out --quick} wrote to a file
   * named --quick, and ran without --quick). It is refused, naming both; a value that only
   * looks like a flag (a negative number, a word starting with --) is still a value.
   */
  @Test
  void aFlagIsNotTakenForTheValueOfTheOneBefore() {
    assertEquals("--seeds needs a value, but is followed by the flag --full",
        refused(() -> parse("--seeds", "--full")));
    assertEquals("--seeds needs a value, but is followed by the flag --rate",
        refused(() -> parse("--seeds", "--rate", "5")));
    // --help is every main's flag: --out --help ran the whole benchmark, into a file --help
    assertEquals("--seeds needs a value, but is followed by the flag --help",
        refused(() -> parse("--seeds", "--help")));
    Flags f = parse("--rate", "-1", "--modes", "--not-a-flag");
    assertEquals("-1", f.string("--rate", null));
    assertEquals("--not-a-flag", f.string("--modes", null));
  }

  @Test
  void valuesAreCheckedWhenRead() {
    Flags f = parse("--seeds", "0", "--rate", "0", "--full");
    assertTrue(f.has("--full"));
    assertFalse(f.has("--modes"));
    assertEquals("--seeds must be at least 1 (and at most 2147483647), not 0",
        refused(() -> f.atLeast("--seeds", 3, 1)));
    assertEquals(0, f.atLeast("--seeds", 3, 0));
    assertEquals("--rate must be more than 0, not 0", refused(() -> f.positive("--rate", 1)));
    assertEquals("--seeds: not a whole number: 'x'",
        refused(() -> parse("--seeds", "x").atLeast("--seeds", 3, 1)));
    assertEquals("--rate: not a finite number: 'NaN'",
        refused(() -> parse("--rate", "NaN").positive("--rate", 1)));
    assertEquals(7, parse().atLeast("--seeds", 7, 1), "the default");
    assertEquals(List.of("b", "a"),
        parse("--modes", "b,a").oneOfEach("--modes", List.of(), Set.of("a", "b")));
    assertEquals("--modes: a is given twice",
        refused(() -> parse("--modes", "a,a").oneOfEach("--modes", List.of(), Set.of("a"))));
    assertEquals("--modes: unknown value 'c'",
        refused(() -> parse("--modes", "c").oneOfEach("--modes", List.of(), Set.of("a"))));
  }

  /**
   * {@code --help} and {@code -h} ask for the usage, which names every flag, one a line, with
   * the default the parser reads for it; as a flag's value they are that value.
   */
  @Test
  void helpNamesEveryFlagWithItsDefault() {
    assertThrows(Flags.HelpAsked.class, () -> parse("--seeds", "2", "--help"));
    assertThrows(Flags.HelpAsked.class, () -> parse("-h"));
    assertEquals("-h", parse("--modes", "-h").string("--modes", null));
    java.util.function.Function<String[], Object> parser = a -> {
      Flags f = parse(a);
      return List.of(f.atLeast("--seeds", 3, 1), f.positive("--rate", 4.5), f.has("--full"));
    };
    assertEquals("""
        usage: x [flags]
          --full
          --modes VALUE
          --rate VALUE   (default 4.5)
          --seeds VALUE  (default 3)
        """, Flags.help(parser, "usage: x [flags]"));
    assertEquals("usage: y\nno flags\n", Flags.help(a -> {
      Flags.helpIfAsked(a);
      return null;
    }, "usage: y"));
  }

  @Test
  void noLatenciesGiveNaNRatherThanAnException() {
    SimFleet.Latencies l = SimFleet.Latencies.of(new double[0]);
    assertTrue(Double.isNaN(l.mean()) && Double.isNaN(l.p50()) && Double.isNaN(l.p99()));
    assertEquals(new SimFleet.Latencies(2, 2, 3), SimFleet.Latencies.of(new double[] {3, 1, 2}));
  }
}
