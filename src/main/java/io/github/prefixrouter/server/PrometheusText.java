package io.github.prefixrouter.server;

import java.util.HashSet;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * Writes Prometheus' text exposition format, version 0.0.4: for each family a {@code # HELP} and
 * a {@code # TYPE} line, then its samples, each family once.
 *
 * <pre>
 * # HELP prefix_router_fallbacks_total Forwarding attempts that fell back, by cause.
 * # TYPE prefix_router_fallbacks_total counter
 * prefix_router_fallbacks_total{cause="TIMEOUT"} 3
 * </pre>
 *
 * Label values are escaped as the format asks (backslash, double quote and line feed), and so
 * is help text (backslash and line feed). Not thread-safe; one per answer.
 */
final class PrometheusText {

  /** The answer's media type. */
  static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

  /** What a metric's name may be. */
  static final Pattern METRIC_NAME = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
  /** What a label's name may be ({@code __} names are reserved for Prometheus). */
  static final Pattern LABEL_NAME = Pattern.compile("[a-zA-Z_][a-zA-Z0-9_]*");

  /** A family's type. */
  enum Type {
    /** Only goes up (from 0 when the process starts); its name ends in {@code _total}. */
    COUNTER,
    /** A current value that may go up and down. */
    GAUGE,
    /**
     * Observations counted in buckets ({@link #histogram}): per series its
     * {@code _bucket{le="..."}} samples, cumulative and ending with {@code le="+Inf"}, its
     * {@code _sum} and its {@code _count}.
     */
    HISTOGRAM;

    String text() {
      return switch (this) {
        case COUNTER -> "counter";
        case GAUGE -> "gauge";
        case HISTOGRAM -> "histogram";
      };
    }
  }

  private final StringBuilder out = new StringBuilder(8192);
  private final Set<String> families = new HashSet<>();
  private String family;
  private Type type;

  /**
   * Starts a family: its {@code # HELP} and {@code # TYPE} lines.
   *
   * @throws IllegalArgumentException if the name is not a metric name, a counter's does not end
   *     in {@code _total}, a histogram's ends in {@code _total}, {@code _bucket}, {@code _sum} or
   *     {@code _count} (its samples' suffixes), or the family was written before
   */
  PrometheusText family(String name, Type type, String help) {
    if (!METRIC_NAME.matcher(name).matches()) {
      throw new IllegalArgumentException("not a metric name: " + name);
    }
    if (type == Type.COUNTER && !name.endsWith("_total")) {
      throw new IllegalArgumentException("a counter's name ends in _total: " + name);
    }
    if (type == Type.HISTOGRAM && (name.endsWith("_total") || name.endsWith("_bucket")
        || name.endsWith("_sum") || name.endsWith("_count"))) {
      throw new IllegalArgumentException(
          "a histogram's name does not end in _total, _bucket, _sum or _count: " + name);
    }
    if (!families.add(name)) {
      throw new IllegalArgumentException("family written twice: " + name);
    }
    family = name;
    this.type = type;
    out.append("# HELP ").append(name).append(' ');
    escape(help, false);
    out.append('\n');
    out.append("# TYPE ").append(name).append(' ').append(type.text()).append('\n');
    return this;
  }

  /** A sample of the current family without labels. */
  PrometheusText sample(Number value) {
    return sample(null, null, value);
  }

  /**
   * A sample of the current family with one label.
   *
   * @param label the label's name, or null for none
   * @param labelValue its value, any text (escaped here)
   */
  PrometheusText sample(String label, String labelValue, Number value) {
    if (family == null) {
      throw new IllegalStateException("a sample before its family");
    }
    if (type == Type.HISTOGRAM) {
      throw new IllegalStateException(family + " is a histogram: its samples are written by "
          + "histogram()");
    }
    line("", label, labelValue, null, value);
    return this;
  }

  /**
   * The samples of one histogram of the current family, a {@link Type#HISTOGRAM} one:
   * {@code _bucket} per bound and for {@code +Inf} (cumulative counts), {@code _sum} and
   * {@code _count} (the {@code +Inf} count), each with the label, and the buckets with
   * {@code le} after it.
   *
   * @param label the label's name, or null for none ({@code le} is the histogram's own)
   * @param labelValue its value, any text (escaped here)
   */
  PrometheusText histogram(String label, String labelValue, LatencyHistogram.Snapshot h) {
    if (family == null) {
      throw new IllegalStateException("a histogram before its family");
    }
    if (type != Type.HISTOGRAM) {
      throw new IllegalStateException(family + " is a " + type.text() + ", not a histogram");
    }
    if ("le".equals(label)) {
      throw new IllegalArgumentException("le is the histogram's own label");
    }
    long[] cumulative = h.cumulative();
    for (int i = 0; i < cumulative.length; i++) {
      double le = i < LatencyHistogram.BOUNDS_SECONDS.length
          ? LatencyHistogram.BOUNDS_SECONDS[i] : Double.POSITIVE_INFINITY;
      line("_bucket", label, labelValue, value(le), cumulative[i]);
    }
    line("_sum", label, labelValue, null, h.sumSeconds());
    line("_count", label, labelValue, null, h.count());
    return this;
  }

  /** One sample line: the family's name and suffix, its label and {@code le} if any, its value. */
  private void line(String suffix, String label, String labelValue, String le, Number value) {
    out.append(family).append(suffix);
    if (label != null) {
      if (!LABEL_NAME.matcher(label).matches() || label.startsWith("__")) {
        throw new IllegalArgumentException("not a label name: " + label);
      }
      out.append('{').append(label).append("=\"");
      escape(labelValue, true);
      out.append('"');
    }
    if (le != null) {
      out.append(label == null ? "{" : ",").append("le=\"").append(le).append('"');
    }
    if (label != null || le != null) {
      out.append('}');
    }
    out.append(' ').append(value(value)).append('\n');
  }

  /** A number as the format writes it: integers as they are, {@code NaN}, {@code +Inf}, {@code -Inf}. */
  static String value(Number n) {
    if (n instanceof Double || n instanceof Float) {
      double d = n.doubleValue();
      if (Double.isNaN(d)) {
        return "NaN";
      }
      if (Double.isInfinite(d)) {
        return d > 0 ? "+Inf" : "-Inf";
      }
      return Double.toString(d);
    }
    return n.toString(); // Long, Integer: exact
  }

  /** Backslash and line feed escaped; in a label value the double quote too. */
  private void escape(String s, boolean quote) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\') {
        out.append("\\\\");
      } else if (c == '\n') {
        out.append("\\n");
      } else if (c == '"' && quote) {
        out.append("\\\"");
      } else {
        out.append(c);
      }
    }
  }

  @Override
  public String toString() {
    return out.toString();
  }
}
