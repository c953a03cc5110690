package io.github.prefixrouter.testing;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

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
}
