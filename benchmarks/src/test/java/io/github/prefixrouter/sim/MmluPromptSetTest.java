package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class MmluPromptSetTest {

  @Test
  void buildsFiveShotPromptsThatShareTheSubjectPrefix(@TempDir Path dir) throws IOException {
    Files.createDirectories(dir.resolve("dev"));
    Files.createDirectories(dir.resolve("test"));
    StringBuilder dev = new StringBuilder();
    for (int i = 0; i < 5; i++) {
      dev.append("\"Question ").append(i).append(", with a comma?\",a,b,c,d,A\n");
    }
    Files.writeString(dir.resolve("dev/tiny_topic_dev.csv"), dev);
    Files.writeString(dir.resolve("test/tiny_topic_test.csv"),
        "What is 2+2?,3,4,5,6,B\n\"Multi\nline\",x,y,z,w,D\n");
    MmluPromptSet p = new MmluPromptSet(dir);
    assertEquals(1, p.subjects());
    assertEquals("tiny_topic", p.subjectName(0));
    assertEquals(2, p.questions(0));
    int[] a = p.prompt(0, 0);
    int[] b = p.prompt(0, 1);
    int shared = p.sharedPrefixLength(0);
    assertTrue(shared > 20);
    assertTrue(a.length > shared && b.length > shared);
    assertTrue(Arrays.equals(a, 0, shared, b, 0, shared));
    assertTrue(Arrays.equals(a, p.prompt(0, 0)), "same prompt every time");
    int common = 0;
    while (a[common] == b[common]) {
      common++;
    }
    assertTrue(common >= shared - 1, "prompts share the prefix's tokens: " + common);
  }

  @Test
  void rejectsADirectoryThatIsNotMmlu(@TempDir Path dir) {
    assertTrue(
        assertThrows(IOException.class, () -> new MmluPromptSet(dir)).getMessage()
            .contains("does not look like MMLU"));
  }

  @Test
  void realDataSetWhenPresent() throws IOException {
    String d = System.getProperty("mmlu.dir");
    assumeTrue(d != null && Files.isDirectory(Path.of(d, "dev")), "MMLU data not available");
    MmluPromptSet p = new MmluPromptSet(Path.of(d));
    assertEquals(57, p.subjects());
    int[] lens = new int[57];
    for (int s = 0; s < 57; s++) {
      lens[s] = p.sharedPrefixLength(s);
    }
    Arrays.sort(lens);
    // the data set's README: shared prefixes of 213 to 2,434 tokens, median 399 (cl100k_base);
    // the prefix's final blank line tokenizes with the question's first word: +-1 token
    assertEquals(399, lens[28], 2);
    assertTrue(lens[0] >= 211 && lens[56] <= 2435, lens[0] + ".." + lens[56]);
    int[] a = p.prompt(3, 0);
    int[] b = p.prompt(3, 1);
    int common = 0;
    while (a[common] == b[common]) {
      common++;
    }
    assertTrue(common >= p.sharedPrefixLength(3) - 1, "shared prefix tokens: " + common);
  }
}
