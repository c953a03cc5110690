package io.github.prefixrouter.testing;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.Supplier;

/** What a run logs while a test runs: slf4j-simple writes to standard error. */
public final class LoggedLines {

  private LoggedLines() {}

  /** The lines {@code run} logs that contain {@code what}. */
  public static List<String> logged(String what, Runnable run) {
    PrintStream err = System.err;
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    System.setErr(new PrintStream(log, true, StandardCharsets.UTF_8));
    try {
      run.run();
    } finally {
      System.setErr(err);
    }
    return log.toString(StandardCharsets.UTF_8).lines().filter(l -> l.contains(what)).toList();
  }

  /**
   * Runs {@code run} and passes on to standard error every line it logs but those that contain
   * {@code what}, also when it throws: for a test that provokes a logged line on purpose many
   * times, and would otherwise bury what else is logged under it.
   *
   * @return what {@code run} returned
   */
  public static <T> T without(String what, Supplier<T> run) {
    PrintStream err = System.err;
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    System.setErr(new PrintStream(log, true, StandardCharsets.UTF_8));
    try {
      return run.get();
    } finally {
      System.setErr(err);
      log.toString(StandardCharsets.UTF_8).lines().filter(l -> !l.contains(what))
          .forEach(err::println);
    }
  }
}
