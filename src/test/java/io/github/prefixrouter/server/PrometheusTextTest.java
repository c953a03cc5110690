package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.server.PrometheusText.Type;
import java.util.List;
import java.util.Map;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Test;

/** The writer of the text format, and the strict reader the other tests check it with. */
class PrometheusTextTest {

  @Test
  void labelValuesAndHelpAreEscapedAsTheFormatAsks() {
    String text = new PrometheusText()
        .family("x_total", Type.COUNTER, "back\\slash and\nline \"quoted\"")
        .sample("node", "a\\b\"c\nd", 3)
        .toString();
    assertEquals("# HELP x_total back\\\\slash and\\nline \"quoted\"\n"
        + "# TYPE x_total counter\n"
        + "x_total{node=\"a\\\\b\\\"c\\nd\"} 3\n", text);
    PrometheusTextParser.Family f = PrometheusTextParser.parse(text).get("x_total");
    assertEquals("back\\slash and\nline \"quoted\"", f.help);
    assertEquals(3.0, f.value("node", "a\\b\"c\nd"));
  }

  @Property(tries = 300)
  void anyLabelValueReadsBackAsWritten(@ForAll String value, @ForAll long n) {
    String text = new PrometheusText().family("g", Type.GAUGE, value).sample("l", value, n)
        .toString();
    PrometheusTextParser.Family f = PrometheusTextParser.parse(text).get("g");
    assertEquals(value, f.help);
    assertEquals((double) n, f.value("l", value));
  }

  @Test
  void numbersAreWrittenAsTheFormatReadsThem() {
    assertEquals("9223372036854775807", PrometheusText.value(Long.MAX_VALUE));
    assertEquals("42", PrometheusText.value(42));
    assertEquals("0.5", PrometheusText.value(0.5));
    assertEquals("NaN", PrometheusText.value(Double.NaN));
    assertEquals("+Inf", PrometheusText.value(Double.POSITIVE_INFINITY));
    assertEquals("-Inf", PrometheusText.value(Double.NEGATIVE_INFINITY));
    assertEquals("1.0E-5", PrometheusText.value(1e-5));
    String text = new PrometheusText().family("g", Type.GAUGE, "h")
        .sample("k", "a", Double.NaN).sample("k", "b", Double.NEGATIVE_INFINITY)
        .sample("k", "c", 1e-5).toString();
    PrometheusTextParser.Family f = PrometheusTextParser.parse(text).get("g");
    assertTrue(Double.isNaN(f.value("k", "a")));
    assertEquals(Double.NEGATIVE_INFINITY, f.value("k", "b"));
    assertEquals(1e-5, f.value("k", "c"));
  }

  @Test
  void theWriterRefusesWhatTheFormatForbids() {
    assertThrows(IllegalArgumentException.class,
        () -> new PrometheusText().family("x", Type.COUNTER, "a counter without _total"));
    assertThrows(IllegalArgumentException.class,
        () -> new PrometheusText().family("1x", Type.GAUGE, "h"));
    assertThrows(IllegalArgumentException.class,
        () -> new PrometheusText().family("x-y", Type.GAUGE, "h"));
    assertThrows(IllegalArgumentException.class,
        () -> new PrometheusText().family("g", Type.GAUGE, "h").family("g", Type.GAUGE, "h"));
    assertThrows(IllegalArgumentException.class,
        () -> new PrometheusText().family("g", Type.GAUGE, "h").sample("__name", "v", 1));
    assertThrows(IllegalArgumentException.class,
        () -> new PrometheusText().family("g", Type.GAUGE, "h").sample("a-b", "v", 1));
    assertThrows(IllegalStateException.class, () -> new PrometheusText().sample(1));
  }

  /** The reader refuses each of these: a test built on it can fail. */
  @Test
  void theReaderIsStrict() {
    String ok = "# HELP a_total h\n# TYPE a_total counter\na_total 1\n";
    assertEquals(1.0, PrometheusTextParser.parse(ok).get("a_total").value());
    Map<String, String> bad = new java.util.LinkedHashMap<>();
    bad.put("no HELP", "# TYPE g gauge\ng 1\n");
    bad.put("no TYPE", "# HELP g h\ng 1\n");
    bad.put("HELP after the sample", "# TYPE g gauge\ng 1\n# HELP g h\n");
    bad.put("family twice", "# HELP g h\n# TYPE g gauge\ng 1\n# HELP f h\n# TYPE f gauge\nf 1\n"
        + "# HELP g h\n");
    bad.put("samples apart", "# HELP g h\n# TYPE g gauge\ng{a=\"1\"} 1\n# HELP f h\n# TYPE f gauge\n"
        + "f 1\ng{a=\"2\"} 1\n");
    bad.put("counter without _total", "# HELP c h\n# TYPE c counter\nc 1\n");
    bad.put("negative counter", "# HELP c_total h\n# TYPE c_total counter\nc_total -1\n");
    bad.put("bad value", "# HELP g h\n# TYPE g gauge\ng 1,5\n");
    bad.put("Java-only value", "# HELP g h\n# TYPE g gauge\ng 1d\n");
    bad.put("Infinity", "# HELP g h\n# TYPE g gauge\ng Infinity\n");
    bad.put("bad name", "# HELP g-x h\n# TYPE g-x gauge\ng-x 1\n");
    bad.put("bad label", "# HELP g h\n# TYPE g gauge\ng{1a=\"x\"} 1\n");
    bad.put("bad escape", "# HELP g h\n# TYPE g gauge\ng{a=\"x\\t\"} 1\n");
    bad.put("unescaped quote", "# HELP g h\n# TYPE g gauge\ng{a=\"x\"y\"} 1\n");
    bad.put("sample twice", "# HELP g h\n# TYPE g gauge\ng 1\ng 2\n");
    bad.put("blank line", "# HELP g h\n# TYPE g gauge\n\ng 1\n");
    bad.put("other comment", "# g h\n");
    bad.put("no final line feed", "# HELP g h\n# TYPE g gauge\ng 1");
    bad.put("bad type", "# HELP g h\n# TYPE g gaugee\ng 1\n");
    for (Map.Entry<String, String> e : bad.entrySet()) {
      assertThrows(PrometheusTextParser.FormatException.class,
          () -> PrometheusTextParser.parse(e.getValue()), e.getKey());
    }
    assertEquals(List.of("a_total"), List.copyOf(PrometheusTextParser.parse(ok).keySet()));
  }
}
