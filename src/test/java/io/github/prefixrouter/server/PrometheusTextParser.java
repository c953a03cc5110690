package io.github.prefixrouter.server;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * A strict reader of Prometheus' text exposition format 0.0.4, for tests: it refuses whatever
 * the format does not allow and whatever this project's exposition promises not to do. Every
 * family has {@code # HELP} and {@code # TYPE} (once each) before its first sample, its samples
 * follow together (a family never appears twice), metric and label names match the format's
 * patterns, label values use only the format's escapes, every value parses as a float, counters
 * end in {@code _total} and are not negative, no sample is repeated, no blank line, no other
 * comment, a line feed after the last line. A histogram's samples are its {@code _bucket},
 * {@code _sum} and {@code _count}; per series (its labels but {@code le}) the buckets' {@code le}
 * rise, their counts are cumulative (never falling, never negative), the last is
 * {@code le="+Inf"}, and {@code _count} is there and equals it, as is {@code _sum}.
 */
final class PrometheusTextParser {

  static final Pattern METRIC_NAME = Pattern.compile("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static final Pattern LABEL_NAME = Pattern.compile("[a-zA-Z_][a-zA-Z0-9_]*");
  private static final Pattern FLOAT = Pattern.compile("[-+]?(\\d+(\\.\\d*)?|\\.\\d+)([eE][-+]?\\d+)?");
  private static final Set<String> TYPES = Set.of("counter", "gauge", "histogram", "summary", "untyped");

  /** One sample. */
  record Sample(String name, Map<String, String> labels, double value) {}

  /**
   * One series of a histogram: its buckets' bounds and cumulative counts, in order ({@code +Inf}
   * last), its sum and its count.
   */
  record Histogram(List<Double> le, List<Double> cumulative, double sum, double count) {
    /** The observations above {@code bound} (one of the bounds). */
    double above(double bound) {
      return count - cumulative.get(le.indexOf(bound));
    }
  }

  /** One family: its type, help text and samples, in order. */
  static final class Family {
    final String name;
    String type;
    String help;
    final List<Sample> samples = new ArrayList<>();

    Family(String name) {
      this.name = name;
    }

    /** The value of the only sample without labels. */
    double value() {
      if (samples.size() != 1 || !samples.get(0).labels().isEmpty()) {
        throw new AssertionError(name + " has not exactly one sample without labels: " + samples);
      }
      return samples.get(0).value();
    }

    /**
     * The histogram whose only label (but {@code le}) is {@code label=value} (a null label:
     * none): its buckets' bounds and cumulative counts in order, its sum and its count.
     */
    Histogram histogram(String label, String value) {
      Map<String, String> series = label == null ? Map.of() : Map.of(label, value);
      List<Double> le = new ArrayList<>();
      List<Double> counts = new ArrayList<>();
      Double sum = null;
      Double count = null;
      for (Sample s : samples) {
        Map<String, String> rest = new LinkedHashMap<>(s.labels());
        String bound = rest.remove("le");
        if (!rest.equals(series)) {
          continue;
        }
        if (s.name().equals(name + "_bucket")) {
          le.add(bound.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(bound));
          counts.add(s.value());
        } else if (s.name().equals(name + "_sum")) {
          sum = s.value();
        } else if (s.name().equals(name + "_count")) {
          count = s.value();
        }
      }
      if (le.isEmpty() || sum == null || count == null) {
        throw new AssertionError(name + " has no histogram {" + label + "=\"" + value + "\"}: "
            + samples);
      }
      return new Histogram(List.copyOf(le), List.copyOf(counts), sum, count);
    }

    /** The value of the sample whose only label is {@code label=value}. */
    double value(String label, String value) {
      for (Sample s : samples) {
        if (s.labels().equals(Map.of(label, value))) {
          return s.value();
        }
      }
      throw new AssertionError(name + " has no sample {" + label + "=\"" + value + "\"}: " + samples);
    }
  }

  /** A violation of the format, with the line it is on. */
  static final class FormatException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    FormatException(int line, String message) {
      super("line " + line + ": " + message);
    }
  }

  private PrometheusTextParser() {}

  /** The families, in order, keyed by name. */
  static Map<String, Family> parse(String text) {
    if (!text.isEmpty() && !text.endsWith("\n")) {
      throw new FormatException(0, "the text does not end with a line feed");
    }
    Map<String, Family> families = new LinkedHashMap<>();
    Set<String> seen = new HashSet<>();
    Family current = null;
    String[] lines = text.isEmpty() ? new String[0] : text.substring(0, text.length() - 1).split("\n", -1);
    for (int i = 0; i < lines.length; i++) {
      int n = i + 1;
      String line = lines[i];
      if (line.isEmpty()) {
        throw new FormatException(n, "blank line");
      }
      if (line.startsWith("#")) {
        boolean help = line.startsWith("# HELP ");
        boolean type = line.startsWith("# TYPE ");
        if (!help && !type) {
          throw new FormatException(n, "a comment that is neither HELP nor TYPE: " + line);
        }
        String rest = line.substring(7);
        int sp = rest.indexOf(' ');
        String name = sp < 0 ? rest : rest.substring(0, sp);
        String arg = sp < 0 ? "" : rest.substring(sp + 1);
        if (!METRIC_NAME.matcher(name).matches()) {
          throw new FormatException(n, "bad metric name '" + name + "'");
        }
        Family f = families.get(name);
        if (f == null) {
          f = new Family(name);
          families.put(name, f);
          current = f;
        } else if (f != current) {
          throw new FormatException(n, "family " + name + " appears twice");
        }
        if (!f.samples.isEmpty()) {
          throw new FormatException(n, (help ? "HELP" : "TYPE") + " of " + name + " after its samples");
        }
        if (help) {
          if (f.help != null) {
            throw new FormatException(n, "HELP of " + name + " twice");
          }
          f.help = unescape(arg, false, n);
        } else {
          if (f.type != null) {
            throw new FormatException(n, "TYPE of " + name + " twice");
          }
          if (!TYPES.contains(arg)) {
            throw new FormatException(n, "bad type '" + arg + "'");
          }
          if (arg.equals("counter") && !name.endsWith("_total")) {
            throw new FormatException(n, "counter " + name + " does not end in _total");
          }
          f.type = arg;
        }
        continue;
      }
      Sample s = sample(line, n);
      if (current == null || !current.name.equals(s.name())
          && !("histogram".equals(current.type) && histogramSample(current.name, s.name()))) {
        throw new FormatException(n, "sample " + s.name() + " is not of the family declared last"
            + (current == null ? "" : " (" + current.name + ")"));
      }
      if (current.help == null || current.type == null) {
        throw new FormatException(n, "sample of " + s.name() + " before its HELP and TYPE");
      }
      if (current.type.equals("histogram")) {
        if (current.name.equals(s.name())) {
          throw new FormatException(n, "histogram " + s.name() + " has a sample without suffix");
        }
        if (s.name().endsWith("_bucket") != s.labels().containsKey("le")) {
          throw new FormatException(n, "le on a histogram's _sum or _count, or a bucket without "
              + "it: " + line);
        }
      }
      if (current.type.equals("counter") && !(s.value() >= 0)) {
        throw new FormatException(n, "counter " + s.name() + " is " + s.value());
      }
      if (!seen.add(s.name() + s.labels())) {
        throw new FormatException(n, "sample repeated: " + line);
      }
      current.samples.add(s);
    }
    for (Family f : families.values()) {
      if (f.help == null || f.type == null) {
        throw new FormatException(0, "family " + f.name + " lacks HELP or TYPE");
      }
      if (f.type.equals("histogram")) {
        checkHistogram(f);
      }
    }
    return families;
  }

  private static boolean histogramSample(String family, String sample) {
    return sample.equals(family + "_bucket") || sample.equals(family + "_sum")
        || sample.equals(family + "_count");
  }

  /** Per series: buckets rising and cumulative, +Inf last, _count equal to it, _sum there. */
  private static void checkHistogram(Family f) {
    Map<Map<String, String>, List<Sample>> buckets = new LinkedHashMap<>();
    Map<Map<String, String>, Double> counts = new LinkedHashMap<>();
    Set<Map<String, String>> sums = new HashSet<>();
    for (Sample s : f.samples) {
      if (s.name().endsWith("_bucket")) {
        Map<String, String> series = new LinkedHashMap<>(s.labels());
        series.remove("le");
        buckets.computeIfAbsent(Map.copyOf(series), k -> new ArrayList<>()).add(s);
      } else if (s.name().endsWith("_count")) {
        counts.put(s.labels(), s.value());
      } else {
        sums.add(s.labels());
      }
    }
    if (!buckets.keySet().equals(counts.keySet()) || !buckets.keySet().equals(sums)) {
      throw new FormatException(0, "histogram " + f.name + ": series with buckets " + buckets.keySet()
          + ", with _count " + counts.keySet() + ", with _sum " + sums);
    }
    for (Map.Entry<Map<String, String>, List<Sample>> e : buckets.entrySet()) {
      double lastLe = Double.NEGATIVE_INFINITY;
      double lastCount = 0;
      for (Sample b : e.getValue()) {
        String le = b.labels().get("le");
        double bound = le.equals("+Inf") ? Double.POSITIVE_INFINITY : value(le, 0);
        if (!(bound > lastLe)) {
          throw new FormatException(0, "histogram " + f.name + e.getKey() + ": le " + le
              + " after " + lastLe);
        }
        if (!(b.value() >= lastCount)) {
          throw new FormatException(0, "histogram " + f.name + e.getKey() + ": bucket le=" + le
              + " counts " + b.value() + ", below the " + lastCount + " of the one before");
        }
        lastLe = bound;
        lastCount = b.value();
      }
      if (lastLe != Double.POSITIVE_INFINITY) {
        throw new FormatException(0, "histogram " + f.name + e.getKey() + " has no +Inf bucket");
      }
      if (counts.get(e.getKey()) != lastCount) {
        throw new FormatException(0, "histogram " + f.name + e.getKey() + ": _count "
            + counts.get(e.getKey()) + " is not the +Inf bucket's " + lastCount);
      }
    }
  }

  private static Sample sample(String line, int n) {
    int i = 0;
    while (i < line.length() && line.charAt(i) != '{' && line.charAt(i) != ' ') {
      i++;
    }
    String name = line.substring(0, i);
    if (!METRIC_NAME.matcher(name).matches()) {
      throw new FormatException(n, "bad metric name '" + name + "'");
    }
    Map<String, String> labels = new LinkedHashMap<>();
    if (i < line.length() && line.charAt(i) == '{') {
      i++;
      while (true) {
        int eq = line.indexOf('=', i);
        if (eq < 0) {
          throw new FormatException(n, "label without '='");
        }
        String label = line.substring(i, eq);
        if (!LABEL_NAME.matcher(label).matches() || label.startsWith("__")) {
          throw new FormatException(n, "bad label name '" + label + "'");
        }
        if (eq + 1 >= line.length() || line.charAt(eq + 1) != '"') {
          throw new FormatException(n, "label value not quoted");
        }
        StringBuilder v = new StringBuilder();
        int j = eq + 2;
        for (; j < line.length() && line.charAt(j) != '"'; j++) {
          char c = line.charAt(j);
          if (c == '\\') {
            if (j + 1 >= line.length()) {
              throw new FormatException(n, "a backslash at the end");
            }
            char e = line.charAt(++j);
            switch (e) {
              case '\\' -> v.append('\\');
              case '"' -> v.append('"');
              case 'n' -> v.append('\n');
              default -> throw new FormatException(n, "bad escape \\" + e + " in a label value");
            }
          } else {
            v.append(c);
          }
        }
        if (j >= line.length()) {
          throw new FormatException(n, "unterminated label value");
        }
        if (labels.put(label, v.toString()) != null) {
          throw new FormatException(n, "label " + label + " twice");
        }
        i = j + 1;
        if (i < line.length() && line.charAt(i) == ',') {
          i++;
          continue;
        }
        if (i < line.length() && line.charAt(i) == '}') {
          i++;
          break;
        }
        throw new FormatException(n, "expected ',' or '}' after a label");
      }
    }
    if (i >= line.length() || line.charAt(i) != ' ') {
      throw new FormatException(n, "no value");
    }
    String[] rest = line.substring(i + 1).split(" ", -1);
    if (rest.length > 2) {
      throw new FormatException(n, "more than a value and a timestamp: " + line);
    }
    if (rest.length == 2 && !rest[1].matches("-?\\d+")) {
      throw new FormatException(n, "bad timestamp '" + rest[1] + "'");
    }
    return new Sample(name, Map.copyOf(labels), value(rest[0], n));
  }

  private static double value(String v, int n) {
    switch (v) {
      case "NaN":
        return Double.NaN;
      case "+Inf":
        return Double.POSITIVE_INFINITY;
      case "-Inf":
        return Double.NEGATIVE_INFINITY;
      default:
        if (!FLOAT.matcher(v).matches()) {
          throw new FormatException(n, "value '" + v + "' is not a float");
        }
        return Double.parseDouble(v);
    }
  }

  private static String unescape(String s, boolean quote, int n) {
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '\\') {
        char e = i + 1 < s.length() ? s.charAt(++i) : ' ';
        if (e == '\\') {
          b.append('\\');
        } else if (e == 'n') {
          b.append('\n');
        } else if (e == '"' && quote) {
          b.append('"');
        } else {
          throw new FormatException(n, "bad escape in '" + s + "'");
        }
      } else {
        b.append(c);
      }
    }
    return b.toString();
  }
}
