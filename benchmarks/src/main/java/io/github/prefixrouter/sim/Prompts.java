package io.github.prefixrouter.sim;

import io.github.prefixrouter.workload.MmluPrompts;
import io.github.prefixrouter.workload.PromptSource;
import io.github.prefixrouter.workload.SyntheticMmluPrompts;
import java.nio.file.Path;

/** Chooses the prompt source: real MMLU when a directory is given, else the generator. */
final class Prompts {

  private Prompts() {}

  static PromptSource load(Path mmluDir, long seed) {
    if (mmluDir == null) {
      return SyntheticMmluPrompts.create(seed);
    }
    return MmluPrompts.load(mmluDir);
  }
}
