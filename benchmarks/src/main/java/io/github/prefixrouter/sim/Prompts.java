package io.github.prefixrouter.sim;

import java.io.IOException;
import java.nio.file.Path;

/** Chooses the prompt source: real MMLU when a directory is given, else the generator. */
final class Prompts {

  private Prompts() {}

  static PromptSet load(Path mmluDir, long seed) throws IOException {
    if (mmluDir == null) {
      return new SyntheticPromptSet(seed, 57, 200);
    }
    return new MmluPromptSet(mmluDir);
  }
}
