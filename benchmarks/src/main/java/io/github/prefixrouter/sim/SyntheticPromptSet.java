package io.github.prefixrouter.sim;

import java.util.SplittableRandom;

/**
 * MMLU-shaped prompts without the data set: 57 subjects, per-subject shared prefixes of 213 to
 * 2,434 tokens (log-normal, median about 400), questions of median about 72 tokens, token ids from
 * a 100k vocabulary. Built deterministically from a seed.
 */
final class SyntheticPromptSet implements PromptSet {

  private final int[][] prefixes;
  private final int[][][] questions;

  SyntheticPromptSet(long seed, int subjects, int questionsPerSubject) {
    SplittableRandom rnd = new SplittableRandom(seed);
    prefixes = new int[subjects][];
    questions = new int[subjects][questionsPerSubject][];
    for (int s = 0; s < subjects; s++) {
      int len = (int) Math.round(Math.exp(Math.log(400) + 0.55 * gaussian(rnd)));
      prefixes[s] = tokens(rnd, Math.max(213, Math.min(2434, len)));
      for (int q = 0; q < questionsPerSubject; q++) {
        int ql = (int) Math.round(Math.exp(Math.log(72) + 0.6 * gaussian(rnd)));
        questions[s][q] = tokens(rnd, Math.max(12, Math.min(600, ql)));
      }
    }
  }

  private static double gaussian(SplittableRandom rnd) {
    double u = 1.0 - rnd.nextDouble();
    double v = rnd.nextDouble();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  private static int[] tokens(SplittableRandom rnd, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = rnd.nextInt(100_000);
    }
    return t;
  }

  @Override
  public int subjects() {
    return prefixes.length;
  }

  @Override
  public String subjectName(int subject) {
    return "subject-" + subject;
  }

  @Override
  public int questions(int subject) {
    return questions[subject].length;
  }

  @Override
  public int[] prompt(int subject, int question) {
    int[] p = prefixes[subject];
    int[] q = questions[subject][question];
    int[] out = new int[p.length + q.length];
    System.arraycopy(p, 0, out, 0, p.length);
    System.arraycopy(q, 0, out, p.length, q.length);
    return out;
  }

  @Override
  public int sharedPrefixLength(int subject) {
    return prefixes[subject].length;
  }

  @Override
  public String description() {
    return "MMLU-shaped synthetic prompts (" + prefixes.length + " subjects)";
  }
}
