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
    GAUGE;

    String text() {
      return this == COUNTER ? "counter" : "gauge";
    }
  }

  private final StringBuilder out = new StringBuilder(8192);
  private final Set<String> families = new HashSet<>();
  private String family;

  /**
   * Starts a family: its {@code # HELP} and {@code # TYPE} lines.
   *
   * @throws IllegalArgumentException if the name is not a metric name, a counter's does not end
   *     in {@code _total}, or the family was written before
   */
  PrometheusText family(String name, Type type, String help) {
    if (!METRIC_NAME.matcher(name).matches()) {
      throw new IllegalArgumentException("not a metric name: " + name);
    }
    if (type == Type.COUNTER && !name.endsWith("_total")) {
      throw new IllegalArgumentException("a counter's name ends in _total: " + name);
    }
    if (!families.add(name)) {
      throw new IllegalArgumentException("family written twice: " + name);
    }
    family = name;
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
    out.append(family);
    if (label != null) {
      if (!LABEL_NAME.matcher(label).matches() || label.startsWith("__")) {
        throw new IllegalArgumentException("not a label name: " + label);
      }
      out.append('{').append(label).append("=\"");
      escape(labelValue, true);
      out.append("\"}");
    }
    out.append(' ').append(value(value)).append('\n');
    return this;
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
