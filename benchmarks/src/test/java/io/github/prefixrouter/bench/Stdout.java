package io.github.prefixrouter.bench;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/** What a benchmark main prints, for its tests. */
public final class Stdout {

  private Stdout() {}

  /**
   * What {@code run} prints on {@code System.out}, read as UTF-8; {@code System.out} is restored
   * after it, even if it throws.
   */
  public static String of(Runnable run) {
    PrintStream before = System.out;
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
    try {
      run.run();
    } finally {
      System.setOut(before);
    }
    return out.toString(StandardCharsets.UTF_8);
  }
}
