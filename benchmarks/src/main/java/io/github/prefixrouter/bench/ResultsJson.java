package io.github.prefixrouter.bench;

import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.Locale;

/** What the benchmark mains share to write their {@code results/*.json}. */
public final class ResultsJson {

  private ResultsJson() {}

  /**
   * A JSON number with four significant digits, or {@code null} for NaN and infinities.
   *
   * @param v the value
   * @return its JSON text
   */
  public static String num(double v) {
    return Double.isNaN(v) || Double.isInfinite(v) ? "null"
        : String.format(Locale.ROOT, "%.4g", v);
  }

  /**
   * A JSON string (backslashes and quotes escaped; the callers' strings have no control
   * characters).
   *
   * @param s the string
   * @return its JSON text
   */
  public static String str(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  /**
   * {@code benchmarks/target/results}: next to the jar or the classes directory {@code anchor}
   * was loaded from, or relative to the working directory if that cannot be told.
   *
   * @param anchor a class of the benchmarks module
   * @return the results directory (not created)
   */
  public static Path resultsDir(Class<?> anchor) {
    try {
      Path code = Path.of(anchor.getProtectionDomain().getCodeSource().getLocation().toURI());
      return code.getParent().resolve("results");
    } catch (URISyntaxException | RuntimeException e) {
      return Path.of("benchmarks", "target", "results");
    }
  }
}
