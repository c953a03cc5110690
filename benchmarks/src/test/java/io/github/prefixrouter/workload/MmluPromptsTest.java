package io.github.prefixrouter.workload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.knuddels.jtokkit.Encodings;
import com.knuddels.jtokkit.api.Encoding;
import com.knuddels.jtokkit.api.EncodingType;
import com.knuddels.jtokkit.api.IntArrayList;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The MMLU loader on small hand-written files: CSV quoting, and bad files named in the error. */
class MmluPromptsTest {

  /** Five dev questions, the shots of every prompt. */
  private static final String DEV = "q,a,b,c,d,A\n".repeat(5);

  /** The four shots {@link #DEV}'s rows make after a first one, as the prompt shows them. */
  private static final String FOUR_SHOTS = "q\nA. a\nB. b\nC. c\nD. d\nAnswer: A\n\n".repeat(4);

  private static Path mmlu(Path root, String dev, String test) throws Exception {
    Files.createDirectories(root.resolve("dev"));
    Files.createDirectories(root.resolve("test"));
    Files.writeString(root.resolve("dev/x_dev.csv"), dev);
    Files.writeString(root.resolve("test/x_test.csv"), test);
    return root;
  }

  private static String decode(int[] tokens) {
    Encoding enc = Encodings.newLazyEncodingRegistry().getEncoding(EncodingType.CL100K_BASE);
    IntArrayList list = new IntArrayList(tokens.length);
    for (int t : tokens) {
      list.add(t);
    }
    return enc.decode(list);
  }

  @Test
  void quotedFieldsKeepTheirCommasLineBreaksAndQuotes(@TempDir Path tmp) throws Exception {
    Path dir = mmlu(tmp, "\"2, 3 or 4?\",2,3,4,5,A\n" + "q,a,b,c,d,A\n".repeat(4),
        "\"Which, of these\nlines is \"\"quoted\"\"?\",one,\"two, three\",four,five,B\n");
    MmluPrompts p = MmluPrompts.load(dir);
    assertEquals(1, p.subjectCount());
    assertEquals(1, p.promptCount(0));
    assertEquals(
        "The following are multiple choice questions (with answers) about x.\n\n"
            + "2, 3 or 4?\nA. 2\nB. 3\nC. 4\nD. 5\nAnswer: A\n\n"
            + FOUR_SHOTS
            + "Which, of these\nlines is \"quoted\"?\nA. one\nB. two, three\nC. four\nD. five\n"
            + "Answer:",
        decode(p.prompt(0, 0)));
  }

  /**
   * A line break inside a quoted field stays as the file writes it, CRLF and CR included (the
   * real college_mathematics dev file has CRLF ones in a shot): the prompts, and so every figure
   * of the runs on them, are the data's own.
   */
  @Test
  void aLineBreakInAQuotedFieldIsKeptAsWritten(@TempDir Path tmp) throws Exception {
    Path dir = mmlu(tmp, "\"I.\r\nII.\",a,b,c,d,A\r\n" + "q,a,b,c,d,A\n".repeat(4),
        "\"one\rtwo\nthree\",a,b,c,d,B\r\n");
    MmluPrompts p = MmluPrompts.load(dir);
    assertEquals(
        "The following are multiple choice questions (with answers) about x.\n\n"
            + "I.\r\nII.\nA. a\nB. b\nC. c\nD. d\nAnswer: A\n\n"
            + FOUR_SHOTS
            + "one\rtwo\nthree\nA. a\nB. b\nC. c\nD. d\nAnswer:",
        decode(p.prompt(0, 0)));
  }

  private static void assertRejectedNaming(Path dir, String file, String what) {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> MmluPrompts.load(dir));
    assertTrue(e.getMessage().contains(file), e.getMessage());
    assertTrue(e.getMessage().contains(what), e.getMessage());
  }

  /**
   * A directory named like a data file cannot be read: the error names it (it was
   * "java.io.IOException: Is a directory", naming no path).
   */
  @Test
  void aDirectoryNamedLikeADataFileIsAnErrorNamingIt(@TempDir Path tmp) throws Exception {
    for (String file : new String[] {"dev/x_dev.csv", "test/x_test.csv"}) {
      Path dir = mmlu(tmp.resolve(file.substring(0, 3)), DEV, "q1,a,b,c,d,A\n");
      Files.delete(dir.resolve(file));
      Files.createDirectories(dir.resolve(file));
      RuntimeException e = assertThrows(RuntimeException.class, () -> MmluPrompts.load(dir));
      assertEquals("MMLU file " + dir.resolve(file).toAbsolutePath() + " is a directory, not a"
          + " file", e.getMessage());
    }
  }

  @Test
  void aTestFileWithoutQuestionsIsRejectedByName(@TempDir Path tmp) throws Exception {
    assertRejectedNaming(mmlu(tmp, DEV, ""), "x_test.csv", "no questions");
  }

  @Test
  void aRowWithoutSixColumnsIsRejectedWithItsFile(@TempDir Path tmp) throws Exception {
    assertRejectedNaming(
        mmlu(tmp, DEV, "q1,a,b,c,d,A\nq2,a,b,c,d\n"), "x_test.csv", "row 2 has 5");
    assertRejectedNaming(
        mmlu(tmp, "q,a,b,c,d,A,extra\n", "q1,a,b,c,d,A\n"), "x_dev.csv", "row 1 has 7");
  }

  @Test
  void malformedCsvIsRejectedWithItsFile(@TempDir Path tmp) throws Exception {
    assertRejectedNaming(
        mmlu(tmp, DEV, "\"unterminated,a,b,c,d,A\n"), "x_test.csv", "not valid CSV");
  }

  @Test
  void aQuestionWhoseTokensDoNotStartWithThePrefixIsRejectedWithItsFileAndRow(@TempDir Path tmp)
      throws Exception {
    // a question that starts with a line break merges with the prefix's closing blank line
    // ("\n\n" + "\n" is one token), so the prompt does not start with the shared prefix
    for (String q : new String[] {"\nWhich?", "\n\nWhich?"}) {
      assertRejectedNaming(
          mmlu(tmp, DEV, "q1,a,b,c,d,A\n\"" + q + "\",a,b,c,d,B\n"), "x_test.csv",
          "row 2");
    }
    // other leading blanks do not merge: the question loads
    MmluPrompts p = MmluPrompts.load(mmlu(tmp, DEV, "\" \nWhich?\",a,b,c,d,B\n"));
    assertTrue(decode(p.prompt(0, 0)).endsWith("Answer: A\n\n \nWhich?\nA. a\nB. b\nC. c\n"
        + "D. d\nAnswer:"));
  }

  @Test
  void bytesThatAreNotUtf8AreRejectedWithTheirFileAndLine(@TempDir Path tmp) throws Exception {
    Path dir = mmlu(tmp, DEV, "q1,a,b,c,d,A\n");
    byte[] latin1 = "q1,a,b,c,d,A\nq2 caf\u00e9,a,b,c,d,B\n".getBytes(StandardCharsets.ISO_8859_1);
    Files.write(dir.resolve("test/x_test.csv"), latin1);
    assertRejectedNaming(dir, "x_test.csv", "not valid UTF-8");
    assertRejectedNaming(dir, "x_test.csv", "line 2");
  }

  @Test
  void aByteOrderMarkIsNotPartOfTheFirstQuestion(@TempDir Path tmp) throws Exception {
    MmluPrompts p = MmluPrompts.load(mmlu(tmp, "\uFEFF" + DEV, "\uFEFFq1,a,b,c,d,B\n"));
    assertEquals(
        "The following are multiple choice questions (with answers) about x.\n\n"
            + "q\nA. a\nB. b\nC. c\nD. d\nAnswer: A\n\n" + FOUR_SHOTS
            + "q1\nA. a\nB. b\nC. c\nD. d\nAnswer:",
        decode(p.prompt(0, 0)));
  }

  @Test
  void aDevFileWithoutFiveShotsIsRejectedByName(@TempDir Path tmp) throws Exception {
    assertRejectedNaming(mmlu(tmp, "q,a,b,c,d,A\n".repeat(3), "q1,a,b,c,d,A\n"), "x_dev.csv",
        "has 3 rows, expected the 5 dev questions");
    assertRejectedNaming(mmlu(tmp, "", "q1,a,b,c,d,A\n"), "x_dev.csv", "has 0 rows");
  }

  @Test
  void aShotWhoseAnswerIsNotALetterIsRejectedWithItsFileAndRow(@TempDir Path tmp)
      throws Exception {
    // a last line cut short after its fifth comma still has six columns, the answer empty
    assertRejectedNaming(mmlu(tmp, "q,a,b,c,d,A\n".repeat(4) + "q,a,b,c,d,", "q1,a,b,c,d,A\n"),
        "x_dev.csv", "row 5: the answer is '', expected A, B, C or D");
  }

  @Test
  void theFirstFiveDevQuestionsAreTheShots(@TempDir Path tmp) throws Exception {
    MmluPrompts p = MmluPrompts.load(
        mmlu(tmp, "q,a,b,c,d,A\n".repeat(5) + "sixth,a,b,c,d,B\n", "q1,a,b,c,d,A\n"));
    assertEquals(
        "The following are multiple choice questions (with answers) about x.\n\n"
            + "q\nA. a\nB. b\nC. c\nD. d\nAnswer: A\n\n".repeat(5)
            + "q1\nA. a\nB. b\nC. c\nD. d\nAnswer:",
        decode(p.prompt(0, 0)));
  }

  @Test
  void aTestFileWithoutItsDevFileIsRejectedByName(@TempDir Path tmp) throws Exception {
    Path dir = mmlu(tmp, DEV, "q1,a,b,c,d,A\n");
    Files.writeString(dir.resolve("test/y_test.csv"), "q1,a,b,c,d,A\n");
    assertRejectedNaming(dir, "y_dev.csv", "missing MMLU file");
  }

  @Test
  void aQuestionWhoseAnswerIsNotALetterIsRejectedWithItsFileAndRow(@TempDir Path tmp)
      throws Exception {
    // a header line would be taken for a question
    assertRejectedNaming(mmlu(tmp, DEV, "question,A,B,C,D,answer\nq1,a,b,c,d,A\n"),
        "x_test.csv", "row 1: the answer is 'answer', expected A, B, C or D");
  }
}
