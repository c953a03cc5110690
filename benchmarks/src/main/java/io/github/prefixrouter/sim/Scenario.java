package io.github.prefixrouter.sim;

/** One cell of the comparison: a policy at a network delay under a popularity distribution. */
public record Scenario(Policy policy, int delayMs, Distribution distribution) {

  @Override
  public String toString() {
    return policy.label() + " @" + delayMs + "ms " + distribution.label();
  }
}
