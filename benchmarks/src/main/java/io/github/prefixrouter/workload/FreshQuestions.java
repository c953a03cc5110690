package io.github.prefixrouter.workload;

import java.util.Arrays;
import java.util.random.RandomGenerator;

/**
 * An unbounded stream of distinct MMLU-shaped questions built on a {@link PromptSource}: each
 * prompt is a subject's shared prefix (its 5-shot header, as in the source) followed by a
 * question never asked before, as long as a question of the same subject drawn from the
 * source, with token ids drawn uniformly from a 100,000-token vocabulary.
 *
 * <p>Real MMLU has 14,079 test questions, about 70 tokens each past the shared prefix: a cache
 * of a million tokens holds them all and, once warm, never evicts. Fresh questions keep the
 * same prefix sharing and question lengths while making every request add new blocks, so a
 * cache of any size fills and then churns (evicts as much as it stores), which is the steady
 * state of a serving fleet whose users keep asking new questions.
 *
 * <p>Stateless and thread-safe; the randomness comes from the caller's generator.
 */
public final class FreshQuestions {

  /** Token ids of fresh questions lie in {@code 0..VOCABULARY-1}. */
  public static final int VOCABULARY = 100_000;

  private final PromptSource shape;

  public FreshQuestions(PromptSource shape) {
    this.shape = java.util.Objects.requireNonNull(shape, "shape");
  }

  public PromptSource shape() {
    return shape;
  }

  /**
   * A prompt of {@code subject}: its shared prefix, then a fresh question as long as question
   * {@code lengthOf} of the source's subject.
   */
  public int[] next(int subject, int lengthOf, RandomGenerator random) {
    int prefix = shape.sharedPrefixLength(subject);
    int total = Math.max(prefix + 1, shape.prompt(subject, lengthOf).length);
    int[] out = Arrays.copyOf(shape.sharedPrefix(subject), total);
    for (int i = prefix; i < total; i++) {
      out[i] = random.nextInt(VOCABULARY);
    }
    return out;
  }

  /** A prompt of a uniformly chosen subject, shaped like a uniformly chosen question of it. */
  public int[] next(RandomGenerator random) {
    int subject = random.nextInt(shape.subjectCount());
    return next(subject, random.nextInt(shape.promptCount(subject)), random);
  }

  public String description() {
    return "fresh questions (a new question on every request) shaped like " + shape.description();
  }
}
