package io.github.prefixrouter.bench.tree;

import io.github.prefixrouter.workload.MmluPrompts;
import io.github.prefixrouter.workload.PromptSource;
import io.github.prefixrouter.workload.RandomSequences;
import io.github.prefixrouter.workload.SyntheticMmluPrompts;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;

/**
 * One benchmark workload: the sequences cached before measuring, the match queries, and the
 * sequences inserted by the insert benchmark, each with its string key for the baselines.
 *
 * <ul>
 *   <li>{@code mmlu}: 2,000 cached prompts (subject {@code k mod 57}, question {@code k / 57}),
 *       1,000 queries that are other questions of the same subjects (so they match their
 *       subject's shared prefix, like a new request), 2,000 further prompts to insert. Real
 *       MMLU prompts when a directory is given (system property {@value #MMLU_PROPERTY}), else
 *       the synthetic generator (seed 1).
 *   <li>{@code random-512} / {@code random-4096}: 2,000 / 250 cached random sequences; each
 *       query is a cached sequence whose tail from a uniformly chosen cut in [len/2, len] is
 *       replaced by fresh random tokens (a quarter match fully); as many fresh sequences to
 *       insert.
 * </ul>
 */
final class TreeWorkload {

  static final String MMLU_PROPERTY = "prefixrouter.mmlu";
  static final String[] NAMES = {"mmlu", "random-512", "random-4096"};

  final String name;
  final String description;
  final int[][] cached;
  final String[] cachedKeys;
  final int[][] queries;
  final String[] queryKeys;
  final int[][] inserts;
  final String[] insertKeys;
  /** Distinct tokens of the cached set: what a prefix tree holds after inserting it. */
  final long distinctCachedTokens;
  /**
   * Order-0 empirical entropy of those distinct tokens, in bits per token: what a code that
   * spends the same bits on every occurrence of a token id needs at least. For the random
   * workloads (independent, uniform ids) no exact representation of the tokens can be smaller
   * on average; for text, codes that look at context can be.
   */
  final double entropyBitsPerToken;

  private static final Map<String, TreeWorkload> CACHE = new ConcurrentHashMap<>();
  private static volatile PromptSource mmlu;

  private TreeWorkload(String name, String description, int[][] cached, int[][] queries,
      int[][] inserts) {
    this.name = name;
    this.description = description;
    this.cached = cached;
    this.queries = queries;
    this.inserts = inserts;
    this.cachedKeys = keys(cached);
    this.queryKeys = keys(queries);
    this.insertKeys = keys(inserts);
    io.github.prefixrouter.internal.tree.ConcurrentPrefixTree t =
        io.github.prefixrouter.internal.tree.ConcurrentPrefixTree.selfManaged(Long.MAX_VALUE);
    Map<Integer, Integer> counts = new java.util.HashMap<>();
    for (int[] c : cached) {
      // the tokens this insert adds are those past what the tree already holds of it
      for (int i = t.match(c); i < c.length; i++) {
        counts.merge(c[i], 1, Integer::sum);
      }
      t.insert(c);
    }
    this.distinctCachedTokens = t.sizeTokens();
    long counted = counts.values().stream().mapToLong(Integer::longValue).sum();
    if (counted != distinctCachedTokens) {
      throw new IllegalStateException(
          "counted " + counted + " added tokens, the tree holds " + distinctCachedTokens);
    }
    this.entropyBitsPerToken = entropyBits(counts.values(), distinctCachedTokens);
  }

  /**
   * Order-0 empirical entropy, in bits per token, of a multiset of tokens given by its counts:
   * {@code -sum p log2 p} with {@code p = count / total}.
   */
  static double entropyBits(Iterable<Integer> counts, long total) {
    double h = 0;
    for (int c : counts) {
      double p = (double) c / total;
      h -= p * Math.log(p);
    }
    return h / Math.log(2);
  }

  private static String[] keys(int[][] seqs) {
    return Arrays.stream(seqs).map(TokenStrings::encode).toArray(String[]::new);
  }

  static TreeWorkload get(String name) {
    return CACHE.computeIfAbsent(name, TreeWorkload::build);
  }

  /**
   * Loads the MMLU data set in {@code dir} for the {@code mmlu} workload of this JVM and sets
   * {@value #MMLU_PROPERTY} to its absolute path, for forked JVMs to load the same.
   *
   * @throws IllegalArgumentException if {@code dir} cannot be loaded (missing, not an MMLU
   *     directory, or a bad file, named in the message); nothing is changed then
   * @throws java.io.UncheckedIOException if it cannot be read
   */
  static synchronized void useMmlu(Path dir) {
    PromptSource loaded = MmluPrompts.load(dir, 100);
    System.setProperty(MMLU_PROPERTY, dir.toAbsolutePath().toString());
    mmlu = loaded;
  }

  /**
   * {@link #useMmlu} for a main's {@code --mmlu DIR}, if given (null: the generator): a
   * directory that cannot be loaded prints {@code error: --mmlu DIR: ...} and exits with code 2.
   */
  static void useMmluOrExit(String dir) {
    if (dir == null) {
      return;
    }
    try {
      useMmlu(Path.of(dir));
    } catch (IllegalArgumentException | UncheckedIOException e) {
      System.err.println("error: --mmlu " + dir + ": " + e.getMessage());
      System.exit(2);
    }
  }

  static synchronized PromptSource mmluSource() {
    if (mmlu == null) {
      String dir = System.getProperty(MMLU_PROPERTY);
      mmlu = dir == null || dir.isEmpty()
          ? SyntheticMmluPrompts.create(1, 100)
          : MmluPrompts.load(Path.of(dir), 100);
    }
    return mmlu;
  }

  /** Total tokens in the cached sequences (shared prefixes counted once per sequence). */
  long cachedTokensWithRepeats() {
    long n = 0;
    for (int[] s : cached) {
      n += s.length;
    }
    return n;
  }

  private static TreeWorkload build(String name) {
    return switch (name) {
      case "mmlu" -> mmluWorkload();
      case "random-512" -> randomWorkload(name, 2_000, 512);
      case "random-4096" -> randomWorkload(name, 250, 4_096);
      default -> throw new IllegalArgumentException("unknown workload " + name);
    };
  }

  private static TreeWorkload mmluWorkload() {
    PromptSource p = mmluSource();
    int subjects = p.subjectCount();
    int[][] all = new int[5_000][];
    for (int k = 0; k < all.length; k++) {
      int s = k % subjects;
      all[k] = p.prompt(s, (k / subjects) % p.promptCount(s));
    }
    return new TreeWorkload("mmlu", p.description(), Arrays.copyOfRange(all, 0, 2_000),
        Arrays.copyOfRange(all, 2_000, 3_000), Arrays.copyOfRange(all, 3_000, 5_000));
  }

  private static TreeWorkload randomWorkload(String name, int count, int length) {
    int[][] cached = RandomSequences.create(11, count, length);
    int[][] inserts = RandomSequences.create(12, count, length);
    SplittableRandom r = new SplittableRandom(13);
    int[][] queries = new int[Math.min(count, 1_000)][];
    for (int i = 0; i < queries.length; i++) {
      int[] q = cached[r.nextInt(count)].clone();
      int cut = r.nextInt(4) == 0 ? length : length / 2 + r.nextInt(length / 2);
      for (int k = cut; k < length; k++) {
        q[k] = r.nextInt(SyntheticMmluPrompts.VOCABULARY);
      }
      queries[i] = q;
    }
    return new TreeWorkload(name, count + " random sequences of " + length + " tokens", cached,
        queries, inserts);
  }
}
