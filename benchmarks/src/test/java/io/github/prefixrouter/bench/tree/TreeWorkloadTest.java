package io.github.prefixrouter.bench.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TreeWorkloadTest {

  @Test
  void entropyOfKnownDistributions() {
    assertEquals(0.0, TreeWorkload.entropyBits(List.of(7), 7), 1e-12);
    assertEquals(2.0, TreeWorkload.entropyBits(List.of(1, 1, 1, 1), 4), 1e-12);
    assertEquals(1.5, TreeWorkload.entropyBits(List.of(2, 1, 1), 4), 1e-12);
  }

  @Test
  void randomTokensCarryAboutLog2OfTheVocabulary() {
    TreeWorkload w = TreeWorkload.get("random-512");
    double log2Vocab =
        Math.log(io.github.prefixrouter.workload.SyntheticMmluPrompts.VOCABULARY) / Math.log(2);
    // about a million distinct tokens over the 100,000 ids: the empirical entropy sits just
    // under log2 of the vocabulary
    assertTrue(w.entropyBitsPerToken > log2Vocab - 0.1 && w.entropyBitsPerToken <= log2Vocab,
        "entropy " + w.entropyBitsPerToken);
  }

  /**
   * A given {@code --mmlu} directory that cannot be loaded is an error, and the forks are not
   * pointed at it; no directory at all is what means the generator.
   */
  @Test
  void anMmluDirectoryThatCannotBeLoadedIsAnError(@TempDir Path tmp) throws Exception {
    String before = System.getProperty(TreeWorkload.MMLU_PROPERTY);
    Path missing = tmp.resolve("no-such-mmlu");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> TreeWorkload.useMmlu(missing));
    assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
    Files.createDirectories(tmp.resolve("dev")); // dev/ alone, no test/
    assertThrows(IllegalArgumentException.class, () -> TreeWorkload.useMmlu(tmp));
    assertEquals(before, System.getProperty(TreeWorkload.MMLU_PROPERTY));
  }
}
