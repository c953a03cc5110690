package io.github.prefixrouter.bench.tree;

import io.github.prefixrouter.bench.Flags;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.ToIntFunction;

/**
 * Side-by-side match time of two builds of the prefix tree (for example the previous commit's
 * core jar and the working tree's classes) on the tree benchmark's workloads:
 *
 * <pre>
 * java -cp benchmarks/target/benchmarks.jar io.github.prefixrouter.bench.tree.TreeAbMain \
 *     [--mmlu DIR] [--rounds N] [--workload NAME] OLD_CLASSPATH NEW_CLASSPATH
 * </pre>
 *
 * <p>Each build is loaded in its own class loader, so both run in one JVM on the same queries.
 * Every JVM holds four trees, {@code old}, {@code new}, {@code old'} and {@code new'} (the
 * primes are second copies of the same build), and times passes over all queries in rotating
 * order. Where a tree was built in the JVM changes its match time by up to 35% for identical
 * code (measured on MMLU; up to 10% on the random workloads), more than the changes usually
 * judged, so the tool runs four JVMs, one per row of a Latin square of build orders, and
 * reports for each workload the median per-round ratio of {@code new} (both copies) to {@code
 * old} (both copies), averaged over the four JVMs, with {@code old'} against {@code old} as the
 * A/A control: a difference smaller than the control's distance from 1 is not resolved.
 */
public final class TreeAbMain {

  /** The four trees of each JVM: build index 0 and 2 are the old build, 1 and 3 the new. */
  static final String[] NAMES = {"old", "new", "old'", "new'"};

  /** Row r of the Latin square: the order in which the JVM builds the four trees. */
  static int[] buildOrder(int row) {
    int[][] square = {{0, 1, 2, 3}, {1, 3, 0, 2}, {3, 2, 1, 0}, {2, 0, 3, 1}};
    return square[row].clone();
  }

  /** A tree of one build, loaded by that build's class loader: match through a plain interface. */
  public static final class Subject implements ToIntFunction<int[]> {
    private final ConcurrentPrefixTree tree = ConcurrentPrefixTree.selfManaged(Long.MAX_VALUE);

    public Subject(int[][] cached) {
      for (int[] c : cached) {
        tree.insert(c.clone());
      }
    }

    @Override
    public int applyAsInt(int[] query) {
      return tree.match(query);
    }
  }

  static final String USAGE = "usage: TreeAbMain [--mmlu DIR] [--rounds N] [--workload NAME]"
      + " OLD_CLASSPATH NEW_CLASSPATH";

  /**
   * The settings of a run: {@code workload} null for all of them, {@code row} -1 in the parent
   * (the children get {@code --row}).
   */
  record Options(String mmlu, int rounds, String workload, int row, String oldCp,
      String newCp) {}

  /**
   * Parses the command line: the flags, then the two class paths.
   *
   * @throws IllegalArgumentException for an unknown flag (anything else that starts with
   *     {@code --}), a flag given twice or without its value, a {@code --rounds} below 1, a
   *     {@code --workload} that is not one of {@link TreeWorkload#NAMES}, or other than two
   *     class paths
   */
  static Options options(String[] args) {
    List<String> cps = new ArrayList<>();
    Flags given = Flags.parse(args, Set.of(),
        Set.of("--mmlu", "--rounds", "--workload", "--row"), cps);
    String workload = given.string("--workload", null);
    if (workload != null && !Arrays.asList(TreeWorkload.NAMES).contains(workload)) {
      throw new IllegalArgumentException("--workload: unknown workload '" + workload
          + "' (one of " + String.join(", ", TreeWorkload.NAMES) + ")");
    }
    int rounds = whole(given, "--rounds", 400);
    if (rounds < 1) {
      throw new IllegalArgumentException("--rounds must be at least 1, not " + rounds);
    }
    int row = whole(given, "--row", -1);
    if (given.has("--row") && (row < 0 || row > 3)) {
      throw new IllegalArgumentException("--row must be 0 to 3, not " + row);
    }
    if (cps.size() != 2) {
      throw new IllegalArgumentException("two class paths are needed, OLD and NEW; got "
          + cps.size() + (cps.isEmpty() ? "" : ": " + String.join(" ", cps)));
    }
    return new Options(given.string("--mmlu", null), rounds, workload, row, cps.get(0), cps.get(1));
  }

  private static int whole(Flags given, String flag, int dflt) {
    // the default given as a string, so that --help shows it
    String v = given.string(flag, dflt < 0 ? null : String.valueOf(dflt));
    try {
      return v == null ? dflt : Integer.parseInt(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(flag + ": not a whole number: '" + v + "'");
    }
  }

  public static void main(String[] args) throws Exception {
    Options o = Flags.parseOrExit(args, TreeAbMain::options, USAGE);
    if (o.row() >= 0) {
      child(o.mmlu(), o.rounds(), o.workload(), o.row(), o.oldCp(), o.newCp());
    } else {
      parent(args);
    }
  }

  /** Runs the four rows in fresh JVMs (same java, same affinity) and averages their ratios. */
  private static void parent(String[] args) throws IOException, InterruptedException {
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Map<String, double[][]> byWorkload = new LinkedHashMap<>(); // workload -> row -> [new, A/A]
    for (int row = 0; row < 4; row++) {
      List<String> cmd = new ArrayList<>(List.of(java, "-cp",
          System.getProperty("java.class.path"), TreeAbMain.class.getName(), "--row",
          Integer.toString(row)));
      cmd.addAll(Arrays.asList(args));
      Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
      try (BufferedReader r = new BufferedReader(
          new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        String line;
        while ((line = r.readLine()) != null) {
          System.out.println("  row " + row + ": " + line);
          if (line.startsWith("RESULT ")) {
            String[] f = line.split(" ");
            double[][] rows = byWorkload.computeIfAbsent(f[1], w -> new double[4][]);
            rows[row] = new double[] {Double.parseDouble(f[2]), Double.parseDouble(f[3])};
          }
        }
      }
      if (p.waitFor() != 0) {
        throw new IllegalStateException("row " + row + " failed");
      }
    }
    System.out.println();
    System.out.println("new/old match time (median per-round ratio, mean of 4 build orders);"
        + " A/A control old'/old");
    for (Map.Entry<String, double[][]> e : byWorkload.entrySet()) {
      double b = 0;
      double aa = 0;
      StringBuilder rows = new StringBuilder();
      for (double[] x : e.getValue()) {
        b += x[0] / 4;
        aa += x[1] / 4;
        rows.append(String.format(Locale.ROOT, " %.3f", x[0]));
      }
      System.out.printf(Locale.ROOT, "%-12s new/old %.3f (rows%s)   A/A %.3f%n", e.getKey(), b,
          rows, aa);
    }
  }

  private static void child(String mmlu, int rounds, String only, int row, String oldCp,
      String newCp) throws Exception {
    TreeWorkload.useMmluOrExit(mmlu);
    URL self = TreeAbMain.class.getProtectionDomain().getCodeSource().getLocation();
    int[] order = buildOrder(row);
    for (String w : TreeWorkload.NAMES) {
      if (only != null && !only.equals(w)) {
        continue;
      }
      TreeWorkload wl = TreeWorkload.get(w);
      @SuppressWarnings("unchecked")
      ToIntFunction<int[]>[] trees = new ToIntFunction[4];
      for (int k : order) {
        trees[k] = load(k % 2 == 0 ? oldCp : newCp, self, wl.cached);
      }
      for (int[] q : wl.queries) {
        int expected = trees[0].applyAsInt(q);
        for (int k = 1; k < 4; k++) {
          if (trees[k].applyAsInt(q) != expected) {
            throw new IllegalStateException(NAMES[k] + " disagrees with old on " + w);
          }
        }
      }
      double[] newOld = new double[rounds];
      double[] aa = new double[rounds];
      long[] t = new long[4];
      int sink = 0;
      for (int r = 0; r < rounds; r++) {
        for (int j = 0; j < 4; j++) {
          int k = (j + r) % 4;
          long t0 = System.nanoTime();
          for (int[] q : wl.queries) {
            sink += trees[k].applyAsInt(q);
          }
          t[k] = System.nanoTime() - t0;
        }
        newOld[r] = (double) (t[1] + t[3]) / (t[0] + t[2]);
        aa[r] = (double) t[2] / t[0];
      }
      double b = median(Arrays.copyOfRange(newOld, rounds / 4, rounds)); // first quarter: warmup
      double a = median(Arrays.copyOfRange(aa, rounds / 4, rounds));
      System.out.printf(Locale.ROOT, "RESULT %s %.4f %.4f (build order %s; %d)%n", w, b, a,
          orderNames(order), sink & 1);
    }
  }

  private static ToIntFunction<int[]> load(String classpath, URL self, int[][] cached)
      throws Exception {
    List<URL> urls = new ArrayList<>();
    for (String part : classpath.split(java.io.File.pathSeparator)) {
      urls.add(Path.of(part).toUri().toURL());
    }
    urls.add(self); // the Subject class; the tree's classes come from the build's own path first
    URLClassLoader loader = new URLClassLoader(urls.toArray(URL[]::new),
        ClassLoader.getPlatformClassLoader());
    Object s = loader.loadClass(Subject.class.getName()).getConstructor(int[][].class)
        .newInstance((Object) cached);
    @SuppressWarnings("unchecked")
    ToIntFunction<int[]> f = (ToIntFunction<int[]>) s;
    return f;
  }

  static double median(double[] x) {
    double[] s = x.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  private static String orderNames(int[] order) {
    StringBuilder sb = new StringBuilder();
    for (int k : order) {
      sb.append(sb.length() == 0 ? "" : ",").append(NAMES[k]);
    }
    return sb.toString();
  }
}
