package io.github.prefixrouter.load;

import com.knuddels.jtokkit.Encodings;
import com.knuddels.jtokkit.api.Encoding;
import com.knuddels.jtokkit.api.EncodingType;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.apache.commons.csv.CSVFormat;
import org.apache.commons.csv.CSVRecord;

/**
 * The prompts the load generator sends: MMLU 5-shot prompts tokenized with cl100k_base when a
 * data directory is given, else an MMLU-shaped generator (per-subject shared prefixes of 213 to
 * 2,434 tokens with median about 400, questions of median about 72 tokens).
 */
final class LoadWorkload {

  /** One subject: its shared prefix and its questions' full prompts. */
  record Subject(String name, int prefixTokens, List<int[]> prompts) {}

  private LoadWorkload() {}

  /** MMLU-shaped prompts from a seed. */
  static List<Subject> synthetic(int subjects, int questionsPerSubject, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    List<Subject> out = new ArrayList<>();
    for (int s = 0; s < subjects; s++) {
      int len = (int) Math.round(Math.exp(Math.log(400) + 0.55 * gaussian(rnd)));
      int[] prefix = tokens(rnd, Math.max(213, Math.min(2434, len)));
      List<int[]> prompts = new ArrayList<>();
      for (int q = 0; q < questionsPerSubject; q++) {
        int ql = (int) Math.round(Math.exp(Math.log(72) + 0.6 * gaussian(rnd)));
        int[] question = tokens(rnd, Math.max(12, Math.min(600, ql)));
        int[] p = java.util.Arrays.copyOf(prefix, prefix.length + question.length);
        System.arraycopy(question, 0, p, prefix.length, question.length);
        prompts.add(p);
      }
      out.add(new Subject("subject-" + s, prefix.length, prompts));
    }
    return out;
  }

  /** MMLU's dev (5 shots) and test (questions) splits from {@code dir}, tokenized. */
  static List<Subject> mmlu(Path dir, int maxQuestionsPerSubject) throws IOException {
    Path dev = dir.resolve("dev");
    Path test = dir.resolve("test");
    if (!Files.isDirectory(dev) || !Files.isDirectory(test)) {
      throw new IOException(dir + " must hold MMLU's dev/ and test/ directories");
    }
    Encoding enc = Encodings.newDefaultEncodingRegistry().getEncoding(EncodingType.CL100K_BASE);
    List<Subject> out = new ArrayList<>();
    List<Path> files;
    try (Stream<Path> s = Files.list(test)) {
      files = s.filter(p -> p.getFileName().toString().endsWith("_test.csv")).sorted().toList();
    }
    for (Path t : files) {
      String subject = t.getFileName().toString().replace("_test.csv", "");
      StringBuilder prefix = new StringBuilder("The following are multiple choice questions (with answers) about "
          + subject.replace('_', ' ') + ".\n\n");
      for (CSVRecord r : read(dev.resolve(subject + "_dev.csv"))) {
        prefix.append(format(r)).append(' ').append(r.get(5)).append("\n\n");
      }
      int prefixTokens = enc.encode(prefix.toString()).size();
      List<int[]> prompts = new ArrayList<>();
      for (CSVRecord r : read(t)) {
        if (prompts.size() >= maxQuestionsPerSubject) {
          break;
        }
        prompts.add(enc.encode(prefix + format(r)).toArray());
      }
      out.add(new Subject(subject, prefixTokens, prompts));
    }
    if (out.isEmpty()) {
      throw new IOException("no *_test.csv files in " + test);
    }
    return out;
  }

  private static String format(CSVRecord r) {
    return r.get(0) + "\nA. " + r.get(1) + "\nB. " + r.get(2) + "\nC. " + r.get(3) + "\nD. " + r.get(4) + "\nAnswer:";
  }

  private static List<CSVRecord> read(Path csv) throws IOException {
    try (Reader in = Files.newBufferedReader(csv, StandardCharsets.UTF_8)) {
      return CSVFormat.DEFAULT.parse(in).getRecords();
    }
  }

  /**
   * The request sequence: {@code n} prompts, subjects drawn uniformly or from a Zipf law with
   * exponent {@code zipf} (0 for uniform) over a seeded random ranking of subjects, questions
   * drawn uniformly within the subject.
   */
  static List<int[]> sequence(List<Subject> subjects, int n, double zipf, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    int k = subjects.size();
    int[] rank = new int[k];
    for (int i = 0; i < k; i++) {
      rank[i] = i;
    }
    for (int i = k - 1; i > 0; i--) {
      int j = rnd.nextInt(i + 1);
      int t = rank[i];
      rank[i] = rank[j];
      rank[j] = t;
    }
    double[] cdf = new double[k];
    double sum = 0;
    for (int i = 0; i < k; i++) {
      sum += zipf <= 0 ? 1.0 : 1.0 / Math.pow(i + 1, zipf);
      cdf[i] = sum;
    }
    List<int[]> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      double u = rnd.nextDouble() * sum;
      int r = 0;
      while (r < k - 1 && cdf[r] < u) {
        r++;
      }
      Subject s = subjects.get(rank[r]);
      out.add(s.prompts().get(rnd.nextInt(s.prompts().size())));
    }
    return out;
  }

  private static double gaussian(SplittableRandom rnd) {
    double u = 1.0 - rnd.nextDouble();
    double v = rnd.nextDouble();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  private static int[] tokens(SplittableRandom rnd, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = rnd.nextInt(100_000);
    }
    return t;
  }
}
