package io.github.prefixrouter.workload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.server.LoadDriver;
import io.github.prefixrouter.server.ReferenceChatTokens;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ChatWorkloadTest {

  private static double topSystemShare(List<LoadDriver.Prompt> prompts) {
    Map<String, Integer> counts = new HashMap<>();
    for (LoadDriver.Prompt p : prompts) {
      counts.merge(p.messages().get(0).content(), 1, Integer::sum);
    }
    return counts.values().stream().mapToInt(Integer::intValue).max().getAsInt()
        / (double) prompts.size();
  }

  @Test
  void requestsShareTheirSubjectsSystemPromptsZipfConcentratesAndSeedsAreDistinct() {
    ChatWorkload w = ChatWorkload.synthetic(3, 16, 50);
    assertEquals(16, w.subjectCount());
    for (long seed = 1; seed <= 20; seed++) {
      ChatWorkload g = ChatWorkload.synthetic(seed, 16, 1);
      for (int s = 0; s < 16; s++) {
        int n = g.system(s).length();
        assertTrue(n >= 800 && n <= 1600, "system prompt of " + n + " characters");
      }
    }
    List<LoadDriver.Prompt> uniform = w.requests(2000, 0, 5);
    List<LoadDriver.Prompt> zipf = w.requests(2000, 1.1, 5);
    Set<String> systems = new HashSet<>();
    for (int s = 0; s < 16; s++) {
      systems.add(w.system(s));
    }
    Set<Long> seeds = new HashSet<>();
    for (LoadDriver.Prompt p : zipf) {
      assertEquals(2, p.messages().size());
      assertEquals("system", p.messages().get(0).role());
      assertEquals("user", p.messages().get(1).role());
      assertTrue(systems.contains(p.messages().get(0).content()));
      assertTrue(seeds.add(p.seed()), "seed " + p.seed() + " twice");
    }
    assertTrue(topSystemShare(uniform) < 0.1, "uniform " + topSystemShare(uniform));
    assertTrue(topSystemShare(zipf) > 0.2, "zipf " + topSystemShare(zipf));
    // reproducible
    assertEquals(zipf, w.requests(2000, 1.1, 5).stream().toList());
    assertEquals(zipf.get(7).messages(), ChatWorkload.synthetic(3, 16, 50).requests(2000, 1.1, 5)
        .get(7).messages());
  }

  @Test
  void theReferenceTokenizersIdsAreOnePerCharacterOfTheRenderedChat() {
    List<LoadDriver.Message> m = List.of(new LoadDriver.Message("system", "Be brief."),
        new LoadDriver.Message("user", "Hi?"));
    int[] ids = ReferenceChatTokens.tokens(m);
    String rendered = "<|system|>\nBe brief.\n<|user|>\nHi?\n<|assistant|>\n";
    assertEquals(rendered.length(), ids.length);
    // two conversations with the same system prompt share the ids of its rendering
    int[] other = ReferenceChatTokens.tokens(List.of(m.get(0), new LoadDriver.Message("user", "Yo")));
    int shared = "<|system|>\nBe brief.\n<|user|>\n".length();
    assertTrue(java.util.Arrays.equals(ids, 0, shared, other, 0, shared));
    assertTrue(ids[shared] != other[shared]);
  }

  @Test
  void mmluSystemPromptsAreTrimmedToTheirLimit() {
    Path dir = Path.of("..", "..", "shared", "data", "mmlu");
    if (!Files.isDirectory(dir)) {
      dir = Path.of("/work/shared/data/mmlu");
    }
    Assumptions.assumeTrue(Files.isDirectory(dir), "no MMLU data");
    ChatWorkload w = ChatWorkload.mmlu(dir, 1600, 600, 20);
    assertEquals(57, w.subjectCount());
    for (int s = 0; s < w.subjectCount(); s++) {
      assertTrue(w.system(s).length() <= 1600, w.system(s).length() + " characters");
      assertTrue(w.system(s).startsWith("The following are multiple choice questions"));
    }
    for (LoadDriver.Prompt p : w.requests(200, 1.1, 1)) {
      String q = p.messages().get(1).content();
      assertTrue(q.length() <= 600 && q.endsWith("Answer:"), q);
    }
  }

  private static Path mmlu(Path root, String dev, String test) throws Exception {
    Files.createDirectories(root.resolve("dev"));
    Files.createDirectories(root.resolve("test"));
    Files.writeString(root.resolve("dev/x_dev.csv"), dev);
    if (test != null) {
      Files.writeString(root.resolve("test/x_test.csv"), test);
    }
    return root;
  }

  private static void assertRejectedNaming(Path dir, String file, String what) {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ChatWorkload.mmlu(dir, 1600, 600, 20));
    assertTrue(e.getMessage().contains(file), e.getMessage());
    assertTrue(e.getMessage().contains(what), e.getMessage());
  }

  @Test
  void mmluFilesThatCannotBeReadAreRejectedByName(@TempDir Path tmp) throws Exception {
    assertRejectedNaming(mmlu(tmp.resolve("a"), "q,a,b,c,d,A\n", null), "x_test.csv", "missing");
    assertRejectedNaming(
        mmlu(tmp.resolve("b"), "q,a,b,c,d,A\n", "q1,a,b,c,d,A\nq2,a,b,c,d\n"),
        "x_test.csv", "row 2 has 5");
    assertRejectedNaming(
        mmlu(tmp.resolve("c"), "q,a,b,c,d,A,extra\n", "q1,a,b,c,d,A\n"), "x_dev.csv", "row 1 has 7");
    assertRejectedNaming(
        mmlu(tmp.resolve("d"), "q,a,b,c,d,A\n", "\"unterminated,a,b,c,d,A\n"),
        "x_test.csv", "not valid CSV");
    Path empty = tmp.resolve("e");
    Files.createDirectories(empty.resolve("dev"));
    Files.createDirectories(empty.resolve("test"));
    assertRejectedNaming(empty, "e", "no dev/*_dev.csv files");
  }

  /** A directory named like a data file is an error naming it, as in the token workload. */
  @Test
  void aDirectoryNamedLikeADataFileIsAnErrorNamingIt(@TempDir Path tmp) throws Exception {
    Path dir = mmlu(tmp, "q,a,b,c,d,A\n", null);
    Files.createDirectories(dir.resolve("test/x_test.csv"));
    RuntimeException e =
        assertThrows(RuntimeException.class, () -> ChatWorkload.mmlu(dir, 1600, 600, 20));
    assertEquals("MMLU file " + dir.resolve("test/x_test.csv").toAbsolutePath()
        + " is a directory, not a file", e.getMessage());
  }

  @Test
  void aTestFileWithoutItsDevFileIsRejectedByName(@TempDir Path tmp) throws Exception {
    Path dir = mmlu(tmp, "q,a,b,c,d,A\n", "q1,a,b,c,d,A\n");
    Files.writeString(dir.resolve("test/y_test.csv"), "q1,a,b,c,d,A\n");
    assertRejectedNaming(dir, "y_dev.csv", "missing MMLU file");
  }

  @Test
  void mmluFilesWithQuotedFieldsMakeTheChats(@TempDir Path tmp) throws Exception {
    ChatWorkload w = ChatWorkload.mmlu(
        mmlu(tmp, "\"2, 3 or 4?\",2,3,4,5,A\n", "\"Which, of\nthese?\",one,\"two, three\",four,five,B\n"),
        1600, 600, 20);
    assertEquals(1, w.subjectCount());
    assertEquals("The following are multiple choice questions (with answers) about x.\n\n"
        + "2, 3 or 4?\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer: A", w.system(0));
    assertEquals("Which, of\nthese?\nA. one\nB. two, three\nC. four\nD. five\nAnswer:",
        w.requests(1, 0, 1).get(0).messages().get(1).content());
  }

  @Test
  void aSystemPromptThatFitsItsLimitKeepsEveryShot(@TempDir Path tmp) throws Exception {
    Path dir = mmlu(tmp, "q,a,b,c,d,A\n", "q1,a,b,c,d,B\n");
    String whole = "The following are multiple choice questions (with answers) about x.\n\n"
        + "q\nA. a\nB. b\nC. c\nD. d\nAnswer: A";
    // the system prompt is sent without the layout's trailing blank line: exactly its length fits
    ChatWorkload w = ChatWorkload.mmlu(dir, whole.length(), 600, 20);
    assertEquals(whole, w.system(0));
    assertTrue(w.description().contains(" 0 shots dropped"), w.description());
    ChatWorkload shorter = ChatWorkload.mmlu(dir, whole.length() - 1, 600, 20);
    assertEquals("The following are multiple choice questions (with answers) about x.",
        shorter.system(0));
  }

  /**
   * A limit shorter than a subject's header leaves the header alone, longer than the limit: the
   * description says so (it said every system prompt was within the limit).
   */
  @Test
  void aLimitShorterThanTheHeaderIsNotDescribedAsMet(@TempDir Path tmp) throws Exception {
    Path dir = mmlu(tmp, "q,a,b,c,d,A\n", "q1,a,b,c,d,B\n");
    String header = "The following are multiple choice questions (with answers) about x.";
    ChatWorkload w = ChatWorkload.mmlu(dir, 10, 600, 20);
    assertEquals(header, w.system(0));
    assertTrue(w.description().contains("system prompt: header and shots within 10 characters,"
        + " except 1 subject whose header alone is longer (sent without shots), 1 shots dropped;"),
        w.description());
    ChatWorkload fits = ChatWorkload.mmlu(dir, header.length(), 600, 20);
    assertEquals(header, fits.system(0));
    assertTrue(fits.description().contains("within " + header.length() + " characters, 1 shots"
        + " dropped;"), fits.description());
  }
}
