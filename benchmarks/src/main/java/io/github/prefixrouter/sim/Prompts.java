package io.github.prefixrouter.sim;

import java.nio.file.Path;

/** Chooses the prompt source: real MMLU when a directory is given, else the generator. */
final class Prompts {

  private Prompts() {}

  static PromptSet load(Path mmluDir, long seed) {
    if (mmluDir == null) {
      return new SyntheticPromptSet(seed, 57, 200);
    }
    throw new UnsupportedOperationException("MMLU loading is not wired yet");
  }
}
