package io.github.prefixrouter.sim;

/** How subject popularity is distributed. */
public enum Distribution {
  /** Every subject equally likely. */
  UNIFORM("uniform"),
  /** Zipf over subjects ranked in a seeded random order, exponent from the configuration. */
  SKEWED("skewed");

  private final String label;

  Distribution(String label) {
    this.label = label;
  }

  /** The short name used in tables and JSON. */
  public String label() {
    return label;
  }
}
