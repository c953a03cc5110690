package io.github.prefixrouter.workload;

import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * A seeded generator of MMLU-shaped prompts, for when the real data set is not at hand.
 *
 * <p>Shape (matching MMLU 5-shot prompts under cl100k_base): 57 subjects; each subject's shared
 * prefix length is a fixed quantile of a distribution spanning 200 to 2,400 tokens with median
 * 400 (lengths are then assigned to subjects in a seeded order); each question adds a suffix
 * drawn from a log-normal distribution with median 70 tokens (clamped to 15..600); token ids are
 * uniform over a 100,000-token vocabulary. The same seed always gives the same prompts.
 */
public final class SyntheticMmluPrompts implements PromptSource {

  public static final int SUBJECTS = 57;
  public static final int VOCABULARY = 100_000;
  public static final int MIN_PREFIX = 200;
  public static final int MEDIAN_PREFIX = 400;
  public static final int MAX_PREFIX = 2_400;
  public static final int MEDIAN_SUFFIX = 70;
  public static final int DEFAULT_QUESTIONS_PER_SUBJECT = 250;

  private final long seed;
  private final int[][] prefixes;
  private final int[][][] suffixes;

  private SyntheticMmluPrompts(long seed, int questionsPerSubject) {
    this.seed = seed;
    SplittableRandom r = new SplittableRandom(seed);
    int[] lengths = new int[SUBJECTS];
    for (int i = 0; i < SUBJECTS; i++) {
      lengths[i] = prefixQuantile((i + 0.5) / SUBJECTS);
    }
    for (int i = SUBJECTS - 1; i > 0; i--) { // seeded shuffle of lengths over subjects
      int j = r.nextInt(i + 1);
      int t = lengths[i];
      lengths[i] = lengths[j];
      lengths[j] = t;
    }
    prefixes = new int[SUBJECTS][];
    suffixes = new int[SUBJECTS][questionsPerSubject][];
    for (int s = 0; s < SUBJECTS; s++) {
      SplittableRandom sr = r.split();
      prefixes[s] = sr.ints(lengths[s], 0, VOCABULARY).toArray();
      for (int q = 0; q < questionsPerSubject; q++) {
        int len = (int) Math.round(MEDIAN_SUFFIX * Math.exp(0.5 * gaussian(sr)));
        len = Math.max(15, Math.min(600, len));
        suffixes[s][q] = sr.ints(len, 0, VOCABULARY).toArray();
      }
    }
  }

  /** The generator with {@value #DEFAULT_QUESTIONS_PER_SUBJECT} questions per subject. */
  public static SyntheticMmluPrompts create(long seed) {
    return create(seed, DEFAULT_QUESTIONS_PER_SUBJECT);
  }

  /** The generator with the given number of questions per subject (at least 1). */
  public static SyntheticMmluPrompts create(long seed, int questionsPerSubject) {
    if (questionsPerSubject < 1) {
      throw new IllegalArgumentException(
          "questionsPerSubject must be at least 1, was " + questionsPerSubject);
    }
    return new SyntheticMmluPrompts(seed, questionsPerSubject);
  }

  /**
   * Prefix length at quantile p: geometric from 200 (p = 0) to the median 400 (p = 0.5), then
   * 400 · 6^(((p - 0.5) / 0.5)^2), reaching 2,400 at p = 1 (a long right tail, like MMLU's
   * history and law subjects).
   */
  static int prefixQuantile(double p) {
    double v;
    if (p <= 0.5) {
      v = MIN_PREFIX * Math.pow(2, p / 0.5);
    } else {
      double x = (p - 0.5) / 0.5;
      v = MEDIAN_PREFIX * Math.pow((double) MAX_PREFIX / MEDIAN_PREFIX, x * x);
    }
    return (int) Math.round(Math.max(MIN_PREFIX, Math.min(MAX_PREFIX, v)));
  }

  private static double gaussian(SplittableRandom r) {
    // Box-Muller from the seeded source (no shared state)
    double u1 = 1.0 - r.nextDouble();
    double u2 = r.nextDouble();
    return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
  }

  @Override
  public int subjectCount() {
    return SUBJECTS;
  }

  @Override
  public String subjectName(int subject) {
    return "subject_" + java.util.Objects.checkIndex(subject, SUBJECTS);
  }

  @Override
  public int promptCount(int subject) {
    return suffixes[subject].length;
  }

  @Override
  public int[] sharedPrefix(int subject) {
    return prefixes[subject].clone();
  }

  @Override
  public int sharedPrefixLength(int subject) {
    return prefixes[subject].length;
  }

  /** Length of the question part of a prompt. */
  public int suffixLength(int subject, int index) {
    return suffixes[subject][index].length;
  }

  @Override
  public int[] prompt(int subject, int index) {
    int[] p = prefixes[subject];
    int[] s = suffixes[subject][index];
    int[] out = Arrays.copyOf(p, p.length + s.length);
    System.arraycopy(s, 0, out, p.length, s.length);
    return out;
  }

  @Override
  public String description() {
    return "synthetic MMLU-shaped prompts (seed " + seed + ", " + SUBJECTS + " subjects, "
        + suffixes[0].length + " questions each, vocabulary " + VOCABULARY + ")";
  }
}
