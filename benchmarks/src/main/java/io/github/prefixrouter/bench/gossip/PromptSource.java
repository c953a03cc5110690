package io.github.prefixrouter.bench.gossip;

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
 * The prompts the bandwidth benchmark executes: per subject, a list of full prompts sharing the
 * subject's prefix. Either real MMLU 5-shot prompts tokenized with cl100k_base, or an
 * MMLU-shaped generator (57 subjects, shared prefix log-normal with median 400 tokens clamped
 * to 213..2,434, question median 72 tokens, token ids from a 100k vocabulary).
 */
final class PromptSource {

  final String description;
  final int[][][] prompts; // [subject][question] -> tokens

  private PromptSource(String description, int[][][] prompts) {
    this.description = description;
    this.prompts = prompts;
  }

  static PromptSource synthetic(long seed, int questionsPerSubject) {
    SplittableRandom rnd = new SplittableRandom(seed);
    int[][][] p = new int[57][questionsPerSubject][];
    for (int s = 0; s < 57; s++) {
      int len = (int) Math.round(Math.exp(Math.log(400) + 0.55 * gaussian(rnd)));
      int[] prefix = tokens(rnd, Math.max(213, Math.min(2_434, len)));
      for (int q = 0; q < questionsPerSubject; q++) {
        int ql = (int) Math.round(Math.exp(Math.log(72) + 0.6 * gaussian(rnd)));
        int[] suffix = tokens(rnd, Math.max(12, Math.min(600, ql)));
        int[] full = new int[prefix.length + suffix.length];
        System.arraycopy(prefix, 0, full, 0, prefix.length);
        System.arraycopy(suffix, 0, full, prefix.length, suffix.length);
        p[s][q] = full;
      }
    }
    return new PromptSource("MMLU-shaped generator (57 subjects, seed " + seed + ")", p);
  }

  static PromptSource mmlu(Path dir) throws IOException {
    Encoding enc = Encodings.newDefaultEncodingRegistry().getEncoding(EncodingType.CL100K_BASE);
    List<Path> devs;
    try (Stream<Path> s = Files.list(dir.resolve("dev"))) {
      devs = s.filter(f -> f.getFileName().toString().endsWith("_dev.csv")).sorted().toList();
    }
    List<int[][]> subjects = new ArrayList<>();
    for (Path dev : devs) {
      String file = dev.getFileName().toString();
      String subject = file.substring(0, file.length() - "_dev.csv".length());
      StringBuilder prefix = new StringBuilder("The following are multiple choice questions "
          + "(with answers) about " + subject.replace('_', ' ') + ".\n\n");
      for (CSVRecord r : read(dev)) {
        prefix.append(format(r)).append(' ').append(r.get(5)).append("\n\n");
      }
      List<int[]> qs = new ArrayList<>();
      for (CSVRecord r : read(dir.resolve("test").resolve(subject + "_test.csv"))) {
        qs.add(enc.encodeOrdinary(prefix + format(r)).toArray());
      }
      subjects.add(qs.toArray(new int[0][]));
    }
    return new PromptSource("MMLU 5-shot (" + dir + "), cl100k_base",
        subjects.toArray(new int[0][][]));
  }

  private static String format(CSVRecord r) {
    return r.get(0) + "\nA. " + r.get(1) + "\nB. " + r.get(2) + "\nC. " + r.get(3) + "\nD. "
        + r.get(4) + "\nAnswer:";
  }

  private static List<CSVRecord> read(Path f) throws IOException {
    try (Reader in = Files.newBufferedReader(f, StandardCharsets.UTF_8)) {
      return CSVFormat.DEFAULT.parse(in).getRecords();
    }
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
