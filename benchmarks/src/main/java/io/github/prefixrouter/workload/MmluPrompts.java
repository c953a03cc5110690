package io.github.prefixrouter.workload;

import com.knuddels.jtokkit.Encodings;
import com.knuddels.jtokkit.api.Encoding;
import com.knuddels.jtokkit.api.EncodingType;
import java.io.IOException;
import java.io.Reader;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;
import org.apache.commons.csv.CSVException;
import org.apache.commons.csv.CSVFormat;
import org.apache.commons.csv.CSVRecord;

/**
 * Real MMLU 5-shot prompts, tokenized with cl100k_base (jtokkit).
 *
 * <p>Reads {@code dev/<subject>_dev.csv} (its first 5 rows are the shots, at least 5 needed)
 * and {@code test/<subject>_test.csv} (the questions) from an MMLU directory, CSV without
 * header, six columns (question, A, B, C, D, answer letter), UTF-8 with or without a byte
 * order mark; a field in double quotes may hold commas, line breaks and doubled quotes. A line
 * break inside a quoted field is kept as written, CRLF and CR included (the real
 * {@code college_mathematics_dev.csv} has CRLF ones in a shot question).
 * The prompt of a test question is the standard 5-shot layout:
 *
 * <pre>
 * The following are multiple choice questions (with answers) about abstract algebra.
 *
 * {dev question}
 * A. ...
 * B. ...
 * C. ...
 * D. ...
 * Answer: B
 *
 * ... (5 shots) ...
 * {test question}
 * A. ...
 * ...
 * D. ...
 * Answer:
 * </pre>
 *
 * The shared prefix is the header and the 5 shots; {@link #sharedPrefixLength} is the length of
 * its tokens, which every prompt of the subject starts with (loading checks it).
 */
public final class MmluPrompts implements PromptSource {

  private static final CSVFormat CSV = CSVFormat.DEFAULT.builder().build();

  /** Dev questions every prompt shows as answered examples: MMLU's standard 5 shots. */
  static final int SHOTS = 5;

  private final Path dir;
  private final String[] names;
  private final int[][] prefixes;
  private final int[][][] prompts;

  private MmluPrompts(Path dir, String[] names, int[][] prefixes, int[][][] prompts) {
    this.dir = dir;
    this.names = names;
    this.prefixes = prefixes;
    this.prompts = prompts;
  }

  /** Loads every test question of every subject. */
  public static MmluPrompts load(Path dir) {
    return load(dir, Integer.MAX_VALUE);
  }

  /**
   * Loads at most {@code maxQuestionsPerSubject} test questions per subject (the first ones in
   * file order), to keep tokenization short.
   *
   * @throws IllegalArgumentException if the directory does not look like MMLU, or a subject's file
   *     (dev or test) is missing or a directory, is not valid UTF-8 or not valid CSV, has a row
   *     without six columns or a row whose answer is not a letter A to D, (dev file) has fewer
   *     than 5 rows, or (test file) has no row or a question whose prompt's tokens do not start
   *     with the shared prefix's; the message names the file
   * @throws UncheckedIOException if a file cannot be read; the message names it
   */
  public static MmluPrompts load(Path dir, int maxQuestionsPerSubject) {
    return load(dir, maxQuestionsPerSubject, false);
  }

  /**
   * With {@code tokenizeWhole}, every prompt text is tokenized as a whole; without, a question
   * that starts with a non-space character is tokenized alone and appended to the prefix tokens,
   * which gives the same ids (cl100k_base pre-tokenization always cuts after the prefix's final
   * blank line in that case) several times faster.
   */
  static MmluPrompts load(Path dir, int maxQuestionsPerSubject, boolean tokenizeWhole) {
    if (maxQuestionsPerSubject < 1) {
      throw new IllegalArgumentException(
          "maxQuestionsPerSubject must be at least 1, was " + maxQuestionsPerSubject);
    }
    Path devDir = dir.resolve("dev");
    Path testDir = dir.resolve("test");
    List<String> subjects = subjects(dir);
    int n = subjects.size();
    // read and check every file first, in this thread, so a bad file is reported as itself
    List<List<CSVRecord>> shotsOf = new ArrayList<>(n);
    List<List<CSVRecord>> testsOf = new ArrayList<>(n);
    for (String subject : subjects) {
      shotsOf.add(shots(devDir.resolve(subject + "_dev.csv")));
      Path testFile = testDir.resolve(subject + "_test.csv");
      List<CSVRecord> tests = read(testFile);
      if (tests.isEmpty()) {
        throw new IllegalArgumentException(
            "MMLU file " + testFile.toAbsolutePath() + " has no questions");
      }
      requireAnswers(testFile, tests);
      testsOf.add(tests);
    }
    Encoding enc = Encodings.newLazyEncodingRegistry().getEncoding(EncodingType.CL100K_BASE);
    int[][] prefixes = new int[n][];
    int[][][] prompts = new int[n][][];
    int[] offending = new int[n];
    Arrays.fill(offending, -1);
    // subjects are independent: tokenize them in parallel (the result does not depend on it);
    // a question that does not tokenize after the prefix is reported from this thread, below
    java.util.stream.IntStream.range(0, n).parallel().forEach(s -> {
      String subject = subjects.get(s);
      List<CSVRecord> tests = testsOf.get(s);
      String prefix = prefixText(subject, shotsOf.get(s));
      prefixes[s] = enc.encode(prefix).toArray();
      int count = Math.min(tests.size(), maxQuestionsPerSubject);
      prompts[s] = new int[count][];
      for (int q = 0; q < count; q++) {
        int[] tokens =
            tokenize(enc, prefix, prefixes[s], questionText(tests.get(q)), tokenizeWhole);
        if (!Arrays.equals(tokens, 0, prefixes[s].length, prefixes[s], 0, prefixes[s].length)) {
          offending[s] = q;
          return;
        }
        prompts[s][q] = tokens;
      }
    });
    for (int s = 0; s < n; s++) {
      if (offending[s] >= 0) {
        Path testFile = testDir.resolve(subjects.get(s) + "_test.csv");
        throw new IllegalArgumentException("MMLU file " + testFile.toAbsolutePath() + ": row "
            + testsOf.get(s).get(offending[s]).getRecordNumber() + ": the prompt's tokens do not"
            + " start with the subject's shared prefix (a question that starts with a line break"
            + " merges with the prefix's closing blank line)");
      }
    }
    return new MmluPrompts(dir, subjects.toArray(String[]::new), prefixes, prompts);
  }

  /**
   * The subjects of an MMLU directory, in name order: one per {@code dev/<subject>_dev.csv}.
   *
   * @throws IllegalArgumentException if the directory has no {@code dev/} and {@code test/}, no
   *     dev file, or a test file whose dev file is missing (the message names it)
   * @throws UncheckedIOException if a directory cannot be listed
   */
  static List<String> subjects(Path dir) {
    Path devDir = dir.resolve("dev");
    Path testDir = dir.resolve("test");
    if (!Files.isDirectory(devDir) || !Files.isDirectory(testDir)) {
      throw new IllegalArgumentException(
          "not an MMLU directory (needs dev/ and test/): " + dir.toAbsolutePath());
    }
    List<String> subjects = new ArrayList<>();
    try (Stream<Path> files = Files.list(devDir)) {
      files.map(p -> p.getFileName().toString())
          .filter(n -> n.endsWith("_dev.csv"))
          .map(n -> n.substring(0, n.length() - "_dev.csv".length()))
          .sorted()
          .forEach(subjects::add);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    if (subjects.isEmpty()) {
      throw new IllegalArgumentException("no dev/*_dev.csv files in " + dir.toAbsolutePath());
    }
    // a subject is listed by its dev file: one whose dev file is missing would be left out
    try (Stream<Path> files = Files.list(testDir)) {
      files.map(p -> p.getFileName().toString())
          .filter(f -> f.endsWith("_test.csv"))
          .map(f -> f.substring(0, f.length() - "_test.csv".length()))
          .filter(s -> !subjects.contains(s))
          .sorted()
          .findFirst()
          .ifPresent(s -> {
            throw new IllegalArgumentException("missing MMLU file "
                + devDir.resolve(s + "_dev.csv").toAbsolutePath() + ", the shots of "
                + testDir.resolve(s + "_test.csv").toAbsolutePath());
          });
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return subjects;
  }

  private static int[] tokenize(Encoding enc, String prefix, int[] prefixTokens, String question,
      boolean whole) {
    if (whole || question.isEmpty() || Character.isWhitespace(question.charAt(0))) {
      return enc.encode(prefix + question).toArray();
    }
    int[] qt = enc.encode(question).toArray();
    int[] tokens = Arrays.copyOf(prefixTokens, prefixTokens.length + qt.length);
    System.arraycopy(qt, 0, tokens, prefixTokens.length, qt.length);
    return tokens;
  }

  /** The per-subject header and 5 answered shots. */
  public static String prefixText(String subject, List<CSVRecord> shots) {
    StringBuilder b = new StringBuilder();
    b.append("The following are multiple choice questions (with answers) about ")
        .append(subject.replace('_', ' '))
        .append(".\n\n");
    for (CSVRecord r : shots) {
      appendQuestion(b, r);
      b.append(' ').append(field(r, 5)).append("\n\n");
    }
    return b.toString();
  }

  /** A test question in the shot layout, ending with "Answer:". */
  public static String questionText(CSVRecord r) {
    StringBuilder b = new StringBuilder();
    appendQuestion(b, r);
    return b.toString();
  }

  private static void appendQuestion(StringBuilder b, CSVRecord r) {
    b.append(field(r, 0));
    char letter = 'A';
    for (int i = 1; i <= 4; i++, letter++) {
      b.append('\n').append(letter).append(". ").append(field(r, i));
    }
    b.append("\nAnswer:");
  }

  private static String field(CSVRecord r, int i) {
    if (r.size() != 6) {
      throw new IllegalArgumentException(
          "MMLU row " + r.getRecordNumber() + " has " + r.size() + " columns, expected 6");
    }
    return r.get(i);
  }

  /**
   * The shots of a dev file: its first {@value #SHOTS} rows, as the standard 5-shot evaluation
   * takes them, each answered with a letter A to D.
   *
   * @throws IllegalArgumentException if the file cannot be {@linkplain #read read}, has fewer
   *     rows, or a shot's answer is not one letter A to D (a line cut short after its fifth
   *     comma); the message names the file
   */
  static List<CSVRecord> shots(Path file) {
    List<CSVRecord> rows = read(file);
    if (rows.size() < SHOTS) {
      throw new IllegalArgumentException("MMLU file " + file.toAbsolutePath() + " has "
          + rows.size() + " rows, expected the " + SHOTS + " dev questions of a " + SHOTS
          + "-shot prompt");
    }
    List<CSVRecord> shots = rows.subList(0, SHOTS);
    requireAnswers(file, shots);
    return shots;
  }

  /**
   * Refuses a row whose answer is not one letter A to D: a shot shows it, and a question row
   * without one is no MMLU question (a header line, a row cut short after its fifth comma).
   */
  private static void requireAnswers(Path file, List<CSVRecord> rows) {
    for (CSVRecord r : rows) {
      String answer = r.get(5);
      if (answer.length() != 1 || "ABCD".indexOf(answer.charAt(0)) < 0) {
        throw new IllegalArgumentException("MMLU file " + file.toAbsolutePath() + ": row "
            + r.getRecordNumber() + ": the answer is '" + answer + "', expected A, B, C or D");
      }
    }
  }

  /**
   * The rows of an MMLU file, each checked to have the six columns.
   *
   * @throws IllegalArgumentException if the file is missing or a directory, is not valid UTF-8
   *     or not valid CSV, or has a row without six columns; the message names the file
   * @throws UncheckedIOException if the file cannot be read; the message names it
   */
  static List<CSVRecord> read(Path file) {
    if (Files.isDirectory(file)) {
      // listed by its name as a subject's file: reading it failed with "Is a directory" alone
      throw new IllegalArgumentException(
          "MMLU file " + file.toAbsolutePath() + " is a directory, not a file");
    }
    List<CSVRecord> rows;
    try (Reader in = new StringReader(text(file))) {
      rows = CSV.parse(in).getRecords();
    } catch (NoSuchFileException e) {
      throw new IllegalArgumentException("missing MMLU file " + file.toAbsolutePath(), e);
    } catch (CSVException e) {
      throw malformed(file, e);
    } catch (UncheckedIOException e) {
      if (e.getCause() instanceof CSVException c) {
        throw malformed(file, c);
      }
      throw e;
    } catch (IOException e) {
      // the exception's own message need not name the file
      throw new UncheckedIOException(
          "MMLU file " + file.toAbsolutePath() + " cannot be read: " + e.getMessage(), e);
    }
    for (CSVRecord r : rows) {
      if (r.size() != 6) {
        throw new IllegalArgumentException(
            "MMLU file " + file.toAbsolutePath() + ": row " + r.getRecordNumber() + " has "
                + r.size() + " columns, expected 6 (question, A, B, C, D, answer)");
      }
    }
    return rows;
  }

  /**
   * The file's text, decoded as UTF-8, without a leading byte order mark; bytes that are not
   * UTF-8 are refused with the line they are on (a reader would replace them, or fail without
   * naming the file).
   */
  private static String text(Path file) throws IOException {
    byte[] bytes = Files.readAllBytes(file);
    ByteBuffer in = ByteBuffer.wrap(bytes);
    CharBuffer out = CharBuffer.allocate(bytes.length);
    CharsetDecoder decoder = StandardCharsets.UTF_8.newDecoder();
    CoderResult r = decoder.decode(in, out, true);
    if (!r.isError()) {
      r = decoder.flush(out);
    }
    if (r.isError()) {
      int at = in.position();
      int line = 1;
      for (int i = 0; i < at; i++) {
        if (bytes[i] == '\n') {
          line++;
        }
      }
      throw new IllegalArgumentException("MMLU file " + file.toAbsolutePath()
          + " is not valid UTF-8: line " + line + " (byte " + at + ")");
    }
    out.flip();
    if (out.hasRemaining() && out.get(0) == '\uFEFF') {
      out.position(1); // a byte order mark, which editors on Windows write, is no text
    }
    return out.toString();
  }

  private static IllegalArgumentException malformed(Path file, CSVException e) {
    return new IllegalArgumentException(
        "MMLU file " + file.toAbsolutePath() + " is not valid CSV: " + e.getMessage(), e);
  }

  @Override
  public int subjectCount() {
    return names.length;
  }

  @Override
  public String subjectName(int subject) {
    return names[subject];
  }

  @Override
  public int promptCount(int subject) {
    return prompts[subject].length;
  }

  @Override
  public int[] sharedPrefix(int subject) {
    return prefixes[subject].clone();
  }

  @Override
  public int sharedPrefixLength(int subject) {
    return prefixes[subject].length;
  }

  @Override
  public int[] prompt(int subject, int index) {
    return prompts[subject][index].clone();
  }

  @Override
  public String description() {
    int total = 0;
    for (int[][] p : prompts) {
      total += p.length;
    }
    return "MMLU 5-shot prompts from " + dir + " (" + names.length + " subjects, " + total
        + " prompts, cl100k_base)";
  }
}
