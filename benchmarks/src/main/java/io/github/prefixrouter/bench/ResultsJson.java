package io.github.prefixrouter.bench;

import java.net.URISyntaxException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

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

  private static final Pattern SPEC =
      Pattern.compile("%(\\d+\\$)?[-#+ 0,(<]*\\d*(\\.\\d+)?[a-zA-Z%]");

  /**
   * {@link String#format} in {@link Locale#ROOT}, except that a {@code double} (or
   * {@code float}) argument that is NaN or infinite is written as {@code null}, whatever its
   * conversion: JSON has no NaN or infinities, and a ratio over a zero (nothing measured, a
   * percentile of 0) must not make the whole file unreadable. Argument indexes ({@code %1$s})
   * are not supported.
   *
   * @param format the format, with JSON around its conversions
   * @param args its arguments
   * @return the JSON text
   */
  public static String format(String format, Object... args) {
    StringBuilder f = new StringBuilder();
    List<Object> kept = new ArrayList<>();
    Matcher m = SPEC.matcher(format);
    int at = 0;
    int arg = 0;
    while (m.find()) {
      if (m.group(1) != null) {
        throw new IllegalArgumentException("argument indexes are not supported: " + m.group());
      }
      f.append(format, at, m.start());
      at = m.end();
      char conversion = m.group().charAt(m.group().length() - 1);
      if (conversion == 'n' || conversion == '%') {
        f.append(m.group());
        continue;
      }
      Object a = arg < args.length ? args[arg] : null;
      arg++;
      if ((a instanceof Double || a instanceof Float)
          && !Double.isFinite(((Number) a).doubleValue())) {
        f.append("null");
      } else {
        f.append(m.group());
        kept.add(a);
      }
    }
    f.append(format, at, format.length());
    return String.format(Locale.ROOT, f.toString(), kept.toArray());
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
