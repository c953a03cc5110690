package io.github.prefixrouter.load;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

class LoadWorkloadTest {

  @Test
  void syntheticSubjectsShareTheirPrefixWithinMmluBounds() {
    List<LoadWorkload.Subject> s = LoadWorkload.synthetic(57, 5, 1);
    assertEquals(57, s.size());
    for (LoadWorkload.Subject sub : s) {
      assertTrue(sub.prefixTokens() >= 213 && sub.prefixTokens() <= 2434, "prefix " + sub.prefixTokens());
      int[] first = Arrays.copyOf(sub.prompts().get(0), sub.prefixTokens());
      for (int[] p : sub.prompts()) {
        assertArrayEquals(first, Arrays.copyOf(p, sub.prefixTokens()));
        assertTrue(p.length > sub.prefixTokens());
      }
    }
  }

  @Test
  void zipfSequenceConcentratesOnFewSubjectsAndUniformDoesNot() {
    List<LoadWorkload.Subject> s = LoadWorkload.synthetic(20, 3, 2);
    assertEquals(2000, LoadWorkload.sequence(s, 2000, 0, 3).size());
    double uniformTop = topShare(s, LoadWorkload.sequence(s, 2000, 0, 3));
    double zipfTop = topShare(s, LoadWorkload.sequence(s, 2000, 1.2, 3));
    assertTrue(uniformTop < 0.12, "uniform top subject share " + uniformTop);
    assertTrue(zipfTop > 0.25, "zipf top subject share " + zipfTop);
  }

  private static double topShare(List<LoadWorkload.Subject> s, List<int[]> seq) {
    Map<Integer, Integer> counts = new HashMap<>();
    for (int[] p : seq) {
      for (int i = 0; i < s.size(); i++) {
        if (s.get(i).prompts().contains(p)) {
          counts.merge(i, 1, Integer::sum);
        }
      }
    }
    return counts.values().stream().mapToInt(Integer::intValue).max().orElse(0) / (double) seq.size();
  }

  @Test
  void mmluPromptsStartWithTheirSubjectsTokenizedPrefix() throws Exception {
    Path dir = Path.of(System.getProperty("mmlu.dir", "../../shared/data/mmlu"));
    Assumptions.assumeTrue(Files.isDirectory(dir.resolve("test")), "MMLU data not present");
    List<LoadWorkload.Subject> s = LoadWorkload.mmlu(dir, 2);
    assertEquals(57, s.size());
    for (LoadWorkload.Subject sub : s) {
      assertTrue(sub.prefixTokens() >= 150 && sub.prefixTokens() <= 2600, sub.name() + " " + sub.prefixTokens());
      int[] a = sub.prompts().get(0);
      int[] b = sub.prompts().get(1);
      int common = 0;
      while (common < Math.min(a.length, b.length) && a[common] == b[common]) {
        common++;
      }
      // two questions of a subject share (at least nearly) the whole 5-shot prefix
      assertTrue(common >= sub.prefixTokens() - 2, sub.name() + ": common " + common + " of " + sub.prefixTokens());
    }
  }
}
