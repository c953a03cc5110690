package io.github.prefixrouter.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.function.Function;

/** The check of a benchmark main's {@code --out FILE}, for the tests of each main taking one. */
public final class OutputFlag {

  private OutputFlag() {}

  /**
   * Asserts that {@code options} (a main's flag parsing, giving the {@code --out} it took)
   * refuses an {@code --out} under a file and one that is a directory, with {@link Flags}'
   * messages, before anything runs, and takes one in a directory not made yet.
   *
   * @param dir an empty directory of the test's
   * @param fileName the results file's name, as {@code route.json}
   * @param options the main's flag parsing
   */
  public static void assertCheckedBeforeAnythingRuns(Path dir, String fileName,
      Function<String[], Path> options) throws IOException {
    Path file = Files.writeString(dir.resolve("results"), "not a directory");
    Path under = file.resolve("results").resolve(fileName);
    assertEquals("--out " + under + ": " + file + " exists and is not a directory",
        refused(options, under));
    assertEquals("--out " + dir + " is a directory, not a file", refused(options, dir));
    Path fresh = dir.resolve("new").resolve(fileName);
    assertEquals(fresh, options.apply(new String[] {"--out", fresh.toString()}));
  }

  private static String refused(Function<String[], Path> options, Path out) {
    return assertThrows(IllegalArgumentException.class,
        () -> options.apply(new String[] {"--out", out.toString()})).getMessage();
  }
}
