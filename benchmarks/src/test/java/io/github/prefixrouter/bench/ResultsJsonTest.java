package io.github.prefixrouter.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class ResultsJsonTest {

  /** NaN and infinities become null whatever their conversion; everything else as formatted. */
  @Test
  void formatWritesNullForNaNAndInfinities() {
    assertEquals("{\"a\": null, \"b\": 1.50, \"c\": null, \"d\": 3, \"e\": null, \"f\": 0.25}%\n",
        ResultsJson.format("{\"a\": %.1f, \"b\": %.2f, \"c\": %8.3f, \"d\": %d, \"e\": %.4g, "
                + "\"f\": %s}%%%n", Double.NaN, 1.5, Double.POSITIVE_INFINITY, 3,
            Double.NEGATIVE_INFINITY, 0.25));
    assertEquals("null", ResultsJson.format("%.1f", Float.NaN));
    assertEquals("0.0", ResultsJson.format("%.1f", -0.0 + 0.0));
  }
}
