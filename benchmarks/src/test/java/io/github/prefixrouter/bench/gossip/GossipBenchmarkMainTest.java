package io.github.prefixrouter.bench.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.workload.PromptSource;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code --mmlu}: a given directory is used or is an error; the generator only without one. */
class GossipBenchmarkMainTest {

  @Test
  void aMissingMmluDirectoryIsAnErrorNamingIt(@TempDir Path tmp) {
    Path missing = tmp.resolve("no-such-mmlu");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GossipBenchmarkMain.prompts(missing, 1));
    assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
  }

  @Test
  void aDirectoryWithoutTheMmluFilesIsAnError(@TempDir Path tmp) throws Exception {
    Files.createDirectories(tmp.resolve("dev"));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GossipBenchmarkMain.prompts(tmp, 1));
    assertTrue(e.getMessage().contains("not an MMLU directory"), e.getMessage());
  }

  @Test
  void aGivenMmluDirectoryIsLoaded(@TempDir Path tmp) throws Exception {
    Files.createDirectories(tmp.resolve("dev"));
    Files.createDirectories(tmp.resolve("test"));
    Files.writeString(tmp.resolve("dev/x_dev.csv"), "q,a,b,c,d,A\n");
    Files.writeString(tmp.resolve("test/x_test.csv"), "q1,a,b,c,d,B\n");
    PromptSource p = GossipBenchmarkMain.prompts(tmp, 1);
    assertEquals(1, p.subjectCount());
    assertTrue(p.description().startsWith("MMLU 5-shot prompts from"), p.description());
  }

  @Test
  void withoutADirectoryTheGeneratorIsUsed() {
    PromptSource p = GossipBenchmarkMain.prompts(null, 1);
    assertTrue(p.description().startsWith("synthetic MMLU-shaped prompts"), p.description());
  }
}
