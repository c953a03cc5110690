package io.github.prefixrouter.sim;

/** The routing policies a simulation compares, in report order. */
public enum Policy {
  /** Every request runs on the node it entered (the library's LOCAL_ONLY policy). */
  NO_ROUTING("no-routing", true),
  /** A uniformly random node (simulator-level baseline). */
  RANDOM("random", false),
  /** The node with the fewest outstanding requests, with instant knowledge (baseline). */
  LEAST_LOADED("least-loaded", false),
  /**
   * Consistent hashing with bounded loads on the prompt's first blocks: the bound of Mirrokni et
   * al. with KubeAI's load factor 1.25 (docs/simulator.md says how it differs from KubeAI's).
   */
  CHWBL("chwbl", false),
  /** A centralized router with instant, exact knowledge of every cache, SGLang's policy. */
  ORACLE("sglang-oracle", false),
  /**
   * A centralized, delay-aware router with instant, exact knowledge of every engine's queue and
   * cache: the node where the request is expected to finish first (reference column).
   */
  EARLIEST_COMPLETION("earliest-completion", false),
  /** The source paper's policy: longest estimated prefix, local on ties (LONGEST_PREFIX). */
  PAPER("paper", true),
  /** The library's default cost-aware policy (COST_AWARE). */
  COST_AWARE("cost-aware", true),
  /**
   * The cost-aware policy without the value of local caching ({@code
   * RouterConfig.localCaching(false)}): every request goes where it is cheapest for itself. For
   * comparison only, not in the default set.
   */
  COST_AWARE_GREEDY("cost-aware-greedy", true);

  /** The policies of the main job: every one but the ablation. */
  public static java.util.List<Policy> defaults() {
    return java.util.List.of(
        NO_ROUTING, RANDOM, LEAST_LOADED, CHWBL, ORACLE, EARLIEST_COMPLETION, PAPER, COST_AWARE);
  }

  private final String label;
  private final boolean library;

  Policy(String label, boolean library) {
    this.label = label;
    this.library = library;
  }

  /** The short name used in tables, JSON and on the command line. */
  public String label() {
    return label;
  }

  /** True if the policy runs inside the library's nodes, false for a simulator-level baseline. */
  public boolean library() {
    return library;
  }

  /** Parses a label (case-insensitive). */
  public static Policy parse(String s) {
    for (Policy p : values()) {
      if (p.label.equalsIgnoreCase(s) || p.name().equalsIgnoreCase(s)) {
        return p;
      }
    }
    throw new IllegalArgumentException("unknown policy '" + s + "'; known: " + labels());
  }

  /** All labels, comma separated. */
  public static String labels() {
    StringBuilder sb = new StringBuilder();
    for (Policy p : values()) {
      if (sb.length() > 0) {
        sb.append(", ");
      }
      sb.append(p.label);
    }
    return sb.toString();
  }
}
