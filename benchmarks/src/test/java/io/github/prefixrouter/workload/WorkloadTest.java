package io.github.prefixrouter.workload;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class WorkloadTest {

  static double median(int[] v) {
    int[] s = v.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2.0;
  }

  @Test
  void syntheticPromptsHaveMmluShape() {
    SyntheticMmluPrompts p = SyntheticMmluPrompts.create(7);
    assertEquals(57, p.subjectCount());
    int[] prefix = new int[57];
    int total = 0;
    for (int s = 0; s < 57; s++) {
      prefix[s] = p.sharedPrefixLength(s);
      total += p.promptCount(s);
    }
    assertTrue(Arrays.stream(prefix).min().getAsInt() >= 200, "min prefix");
    assertTrue(Arrays.stream(prefix).max().getAsInt() <= 2400, "max prefix");
    assertTrue(Arrays.stream(prefix).max().getAsInt() >= 2000, "a long tail reaches ~2,400");
    double m = median(prefix);
    assertTrue(m >= 370 && m <= 430, "median prefix " + m);
    int[] suffix = new int[total];
    int i = 0;
    for (int s = 0; s < 57; s++) {
      for (int q = 0; q < p.promptCount(s); q++) {
        suffix[i++] = p.suffixLength(s, q);
        int[] full = p.prompt(s, q);
        assertEquals(prefix[s] + p.suffixLength(s, q), full.length);
        for (int t : full) {
          assertTrue(t >= 0 && t < 100_000, "token id " + t);
        }
      }
    }
    double ms = median(suffix);
    assertTrue(ms >= 65 && ms <= 75, "median suffix " + ms);
  }

  /**
   * The main job's generator (seed 42) against docs/simulator.md: 57 subjects of 250 questions,
   * prefixes of 200 to 2,400 tokens with median 400 and 32k tokens in all, questions of median
   * 70 and mean 79 tokens, ids over the whole 100,000-token vocabulary.
   */
  @Test
  void theMainJobsGeneratorHasTheDocumentedShape() {
    SyntheticMmluPrompts p = SyntheticMmluPrompts.create(42);
    assertEquals(57, p.subjectCount());
    int[] prefix = new int[57];
    int total = 0;
    int[] suffix = new int[57 * 250];
    long suffixSum = 0;
    int maxId = 0;
    for (int s = 0; s < 57; s++) {
      assertEquals(250, p.promptCount(s));
      prefix[s] = p.sharedPrefixLength(s);
      total += prefix[s];
      for (int q = 0; q < 250; q++) {
        suffix[s * 250 + q] = p.suffixLength(s, q);
        suffixSum += p.suffixLength(s, q);
        for (int t : p.prompt(s, q)) {
          maxId = Math.max(maxId, t);
        }
      }
    }
    assertTrue(Arrays.stream(prefix).min().getAsInt() >= 200, "min prefix");
    assertTrue(Arrays.stream(prefix).max().getAsInt() <= 2400, "max prefix");
    assertEquals(400, median(prefix), 10, "median prefix");
    assertEquals(32_000, total, 1_000, "all 57 prefixes");
    assertEquals(70, median(suffix), 2, "median question");
    assertEquals(79, (double) suffixSum / suffix.length, 2, "mean question");
    assertTrue(maxId >= 99_900 && maxId < 100_000, "largest id " + maxId);
  }

  @Test
  void syntheticPromptsStartWithTheirSubjectPrefixAndAreSeeded() {
    SyntheticMmluPrompts a = SyntheticMmluPrompts.create(3, 5);
    SyntheticMmluPrompts b = SyntheticMmluPrompts.create(3, 5);
    SyntheticMmluPrompts c = SyntheticMmluPrompts.create(4, 5);
    int[] prefix = a.sharedPrefix(10);
    int[] full = a.prompt(10, 2);
    assertArrayEquals(prefix, Arrays.copyOf(full, prefix.length));
    assertArrayEquals(full, b.prompt(10, 2));
    assertTrue(!Arrays.equals(full, c.prompt(10, 2)), "another seed, other prompts");
    assertTrue(!Arrays.equals(a.prompt(10, 1), full), "questions differ");
    int[] drawn = a.prompt(10, new SplittableRandom(1));
    assertArrayEquals(prefix, Arrays.copyOf(drawn, prefix.length));
    assertThrows(IllegalArgumentException.class, () -> SyntheticMmluPrompts.create(1, 0));
  }

  @Test
  void randomSequencesHaveTheRequestedShape() {
    int[][] r = RandomSequences.create(1, 10, 512);
    assertEquals(10, r.length);
    assertEquals(512, r[9].length);
    assertArrayEquals(r[3], RandomSequences.create(1, 10, 512)[3]);
    assertThrows(IllegalArgumentException.class, () -> RandomSequences.create(1, 1, 0));
  }

  @Test
  void realMmluPromptsStartWithTheirSubjectPrefix() {
    String dir = System.getProperty("mmlu.dir");
    assumeTrue(dir != null && Files.isDirectory(Path.of(dir, "dev")), "MMLU data not present");
    MmluPrompts p = MmluPrompts.load(Path.of(dir), 3);
    MmluPrompts whole = MmluPrompts.load(Path.of(dir), 3, true);
    assertEquals(57, p.subjectCount());
    assertEquals("abstract_algebra", p.subjectName(0));
    int[] prefix = new int[57];
    for (int s = 0; s < 57; s++) {
      prefix[s] = p.sharedPrefixLength(s);
      int[] pre = p.sharedPrefix(s);
      for (int q = 0; q < p.promptCount(s); q++) {
        int[] full = p.prompt(s, q);
        assertTrue(full.length > pre.length);
        assertArrayEquals(whole.prompt(s, q), full, "tokenized as a whole");
        assertArrayEquals(pre, Arrays.copyOf(full, pre.length), p.subjectName(s) + " " + q);
      }
    }
    // the data README's measured shape: 213 to 2,434 tokens, median 399 (it counts the
    // prefix a token or so differently at the boundary)
    int min = Arrays.stream(prefix).min().getAsInt();
    int max = Arrays.stream(prefix).max().getAsInt();
    assertTrue(min >= 205 && min <= 220, "min " + min);
    assertTrue(max >= 2420 && max <= 2445, "max " + max);
    assertTrue(Math.abs(median(prefix) - 399) <= 5, "median " + median(prefix));
  }

  @Test
  void loaderRejectsADirectoryThatIsNotMmlu(@org.junit.jupiter.api.io.TempDir Path tmp) {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> MmluPrompts.load(tmp));
    assertTrue(e.getMessage().contains("dev/"), e.getMessage());
  }
}
