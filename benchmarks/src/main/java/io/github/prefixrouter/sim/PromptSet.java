package io.github.prefixrouter.sim;

/**
 * The prompts a simulation draws from: subjects, each with a shared prefix (the header and the
 * few-shot examples) and a set of questions, each a suffix continuing that prefix.
 */
public interface PromptSet {

  /** Number of subjects. */
  int subjects();

  /** The subject's name, for reports. */
  String subjectName(int subject);

  /** Number of questions of the subject (at least one). */
  int questions(int subject);

  /** The full prompt of one question: the subject's shared prefix then the question's tokens. */
  int[] prompt(int subject, int question);

  /** Length of the subject's shared prefix, in tokens. */
  int sharedPrefixLength(int subject);

  /** Where the prompts come from, for reports (for example "MMLU 5-shot, cl100k_base"). */
  String description();
}
