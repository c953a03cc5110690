package io.github.prefixrouter.sim;

import com.knuddels.jtokkit.Encodings;
import com.knuddels.jtokkit.api.Encoding;
import com.knuddels.jtokkit.api.EncodingType;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.commons.csv.CSVFormat;
import org.apache.commons.csv.CSVRecord;

/**
 * Real MMLU 5-shot prompts (the data set's README layout), tokenized with cl100k_base: each full
 * prompt (header, the five dev examples, the test question) is tokenized on first use and kept.
 * With this tokenizer the prompts of a subject share the token ids of its prefix. Thread-safe.
 */
final class MmluPromptSet implements PromptSet {

  private static final String[] LETTERS = {"A", "B", "C", "D"};

  private final List<String> names = new ArrayList<>();
  private final List<String> prefixTexts = new ArrayList<>();
  private final List<int[]> prefixes = new ArrayList<>();
  private final List<List<String>> questions = new ArrayList<>();
  private final ConcurrentHashMap<Long, int[]> prompts = new ConcurrentHashMap<>();
  private final Encoding encoding =
      Encodings.newLazyEncodingRegistry().getEncoding(EncodingType.CL100K_BASE);

  MmluPromptSet(Path dir) throws IOException {
    Path dev = dir.resolve("dev");
    Path test = dir.resolve("test");
    if (!Files.isDirectory(dev) || !Files.isDirectory(test)) {
      throw new IOException(dir + " does not look like MMLU: expected dev/ and test/ directories");
    }
    List<Path> devFiles = new ArrayList<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dev, "*_dev.csv")) {
      ds.forEach(devFiles::add);
    }
    devFiles.sort(null);
    for (Path f : devFiles) {
      String file = f.getFileName().toString();
      String subject = file.substring(0, file.length() - "_dev.csv".length());
      Path testFile = test.resolve(subject + "_test.csv");
      if (!Files.exists(testFile)) {
        continue;
      }
      StringBuilder prefix =
          new StringBuilder("The following are multiple choice questions (with answers) about ")
              .append(subject.replace('_', ' '))
              .append(".\n\n");
      for (CSVRecord r : read(f)) {
        prefix.append(format(r, true));
      }
      List<String> qs = new ArrayList<>();
      for (CSVRecord r : read(testFile)) {
        qs.add(format(r, false));
      }
      if (qs.isEmpty()) {
        continue;
      }
      names.add(subject);
      prefixTexts.add(prefix.toString());
      prefixes.add(encoding.encode(prefix.toString()).toArray());
      questions.add(qs);
    }
    if (names.isEmpty()) {
      throw new IOException("no MMLU subjects found under " + dir);
    }
  }

  private static List<CSVRecord> read(Path f) throws IOException {
    try (Reader in = Files.newBufferedReader(f, StandardCharsets.UTF_8)) {
      return CSVFormat.DEFAULT.parse(in).getRecords();
    }
  }

  private static String format(CSVRecord r, boolean withAnswer) throws IOException {
    if (r.size() < 6) {
      throw new IOException("MMLU row " + r.getRecordNumber() + " has " + r.size() + " columns");
    }
    StringBuilder sb = new StringBuilder(r.get(0));
    for (int i = 0; i < 4; i++) {
      sb.append('\n').append(LETTERS[i]).append(". ").append(r.get(i + 1));
    }
    sb.append("\nAnswer:");
    if (withAnswer) {
      sb.append(' ').append(r.get(5)).append("\n\n");
    }
    return sb.toString();
  }

  @Override
  public int subjects() {
    return names.size();
  }

  @Override
  public String subjectName(int subject) {
    return names.get(subject);
  }

  @Override
  public int questions(int subject) {
    return questions.get(subject).size();
  }

  @Override
  public int[] prompt(int subject, int question) {
    return prompts
        .computeIfAbsent(
            ((long) subject << 32) | question,
            k ->
                encoding
                    .encode(prefixTexts.get(subject) + questions.get(subject).get(question))
                    .toArray())
        .clone();
  }

  @Override
  /** Tokens of the subject's prefix tokenized alone (the shared part of its prompts). */
  public int sharedPrefixLength(int subject) {
    return prefixes.get(subject).length;
  }

  @Override
  public String description() {
    return "MMLU 5-shot prompts, " + names.size() + " subjects, cl100k_base tokens";
  }
}
