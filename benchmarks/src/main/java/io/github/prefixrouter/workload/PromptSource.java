package io.github.prefixrouter.workload;

import java.util.random.RandomGenerator;

/**
 * MMLU-shaped prompts as token ids: a fixed set of subjects, each with a shared prefix (the
 * 5-shot header) that every prompt of the subject starts with, followed by a question.
 *
 * <p>Implementations are immutable and thread-safe; arrays returned are fresh copies.
 */
public interface PromptSource {

  /** Number of subjects (57 for MMLU). */
  int subjectCount();

  /** The subject's name, for example {@code "abstract_algebra"}. */
  String subjectName(int subject);

  /** Number of distinct prompts (questions) of the subject. */
  int promptCount(int subject);

  /** The tokens every prompt of the subject starts with. */
  int[] sharedPrefix(int subject);

  /** Length in tokens of {@link #sharedPrefix(int)}. */
  int sharedPrefixLength(int subject);

  /** The {@code index}-th prompt of the subject, {@code 0 <= index < promptCount(subject)}. */
  int[] prompt(int subject, int index);

  /** A uniformly chosen prompt of the subject. */
  default int[] prompt(int subject, RandomGenerator random) {
    return prompt(subject, random.nextInt(promptCount(subject)));
  }

  /** One line saying where the prompts come from (for reports). */
  String description();
}
