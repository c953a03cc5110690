package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;

/**
 * The cap on a tokenizer answer that an answer budget allows ({@link
 * EngineTokenizer#maxAnswerBytes(long)}): the largest whose documented budget, 16 MiB and 9
 * bytes per byte of the cap, fits in it, at most 64 MiB, so that one answer at the cap alone
 * always passes.
 */
class EngineTokenizerAnswerCapProperties {

  private static final long BASE = 16L << 20;
  private static final int MOST = 64 << 20;

  /** The budget one answer at {@code cap} takes, as docs/engines.md states it. */
  private static long budgetOf(long cap) {
    return BASE + 9 * cap;
  }

  @Property
  void theCapIsTheLargestWhoseBudgetFitsAtMost64MiB(
      @ForAll @LongRange(min = BASE + 9, max = 4L << 30) long budget) {
    int cap = EngineTokenizer.maxAnswerBytes(budget);
    assertTrue(cap >= 1 && cap <= MOST, "cap " + cap + " for a budget of " + budget);
    assertTrue(budgetOf(cap) <= budget, "one answer at the cap " + cap + " takes "
        + budgetOf(cap) + " bytes, more than the budget of " + budget);
    assertTrue(cap == MOST || budgetOf(cap + 1L) > budget, "a cap of " + (cap + 1)
        + " fits the budget of " + budget + " too, and the cap is " + cap);
    assertEquals(budgetOf(cap), EngineTokenizer.answerBudget(cap),
        "answerBudget is not the documented 16 MiB and 9 bytes per byte of the cap");
  }

  @Example
  void theDefaultMinimumAndBeyond() {
    assertEquals(MOST, EngineTokenizer.maxAnswerBytes(592L << 20), "592m: the default cap");
    assertEquals(592L << 20, EngineTokenizer.DEFAULT_ANSWER_BUDGET);
    assertEquals(MOST, EngineTokenizer.maxAnswerBytes(1L << 30),
        "a budget above the default's reads more answers at once, not larger ones");
    assertEquals(1 << 20, EngineTokenizer.maxAnswerBytes(25L << 20), "25m: a cap of 1 MiB");
    assertEquals(25L << 20, EngineTokenizer.MIN_ANSWER_BUDGET);
    assertEquals((1 << 20) - 1, EngineTokenizer.maxAnswerBytes((25L << 20) - 1));
    assertEquals(9_786_709, EngineTokenizer.maxAnswerBytes(100L << 20), "100m");
    assertEquals(1, EngineTokenizer.maxAnswerBytes(BASE + 9));
    assertThrows(IllegalArgumentException.class,
        () -> EngineTokenizer.maxAnswerBytes(BASE + 8), "not even one byte fits");
  }
}
