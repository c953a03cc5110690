package io.github.prefixrouter.bench.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.OutputFlag;
import io.github.prefixrouter.bench.Stdout;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.workload.PromptSource;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --mmlu}: a given directory is used or is an error, the generator only without one;
 * the dissemination run's verdict.
 */
class GossipBenchmarkMainTest {

  private static Map<?, ?> dissemination(int n, long seed, double loss) {
    StringBuilder json = new StringBuilder();
    GossipBenchmarkMain.dissemination(json, n, 3, seed, loss);
    return (Map<?, ?>) Json.parse(json.toString());
  }

  /**
   * README: results go to benchmarks/target/results, next to the jar, whatever directory the
   * command runs in (the tests run in benchmarks/, where a path relative to the working
   * directory would be benchmarks/benchmarks/target/results).
   */
  @Test
  void theDefaultOutputIsInTheModulesTargetResultsWhereverItRuns() {
    assertEquals(Path.of("target", "results", "gossip.json").toAbsolutePath(),
        GossipBenchmarkMain.Options.parse(new String[0]).out().toAbsolutePath().normalize());
  }

  /**
   * An {@code --out} that is a directory, or lies under a file, is refused before anything
   * runs: it was taken, and writing gossip.json failed with a stack trace after the whole
   * benchmark, its figures lost.
   */
  @Test
  void anOutputFileThatCannotBeWrittenIsRefusedBeforeAnythingRuns(@TempDir Path dir)
      throws Exception {
    OutputFlag.assertCheckedBeforeAnythingRuns(dir, "gossip.json", args -> parse(args).out());
  }

  /**
   * A change that never reaches the other nodes has no time to 99% of them: the target is
   * missed, not met with a worst time of 0 rounds.
   */
  @Test
  void changesThatNeverSpreadMissTheTarget() {
    Map<?, ?> r = dissemination(4, 1, 1.0);
    assertEquals(false, r.get("met"), r.toString());
    assertEquals(Json.NULL, r.get("worstRoundsTo99"), r.toString());
    assertEquals(Json.NULL, r.get("meanRoundsTo99"), r.toString());
    assertEquals(Json.NULL, r.get("worstRoundsTo100"), r.toString());
    assertEquals(5L, ((Number) r.get("changesNotAt99")).longValue(), r.toString());
  }

  @Test
  void changesThatSpreadMeetTheTarget() {
    Map<?, ?> r = dissemination(16, 1, 0);
    assertEquals(true, r.get("met"), r.toString());
    assertEquals(0L, ((Number) r.get("changesNotAt99")).longValue(), r.toString());
    double worst = ((Number) r.get("worstRoundsTo99")).doubleValue();
    assertTrue(worst > 0 && worst <= ((Number) r.get("targetRounds")).doubleValue(), r.toString());
    assertTrue(((Number) r.get("meanRoundsTo99")).doubleValue() <= worst, r.toString());
    // one node: nothing to spread to, reached at once
    assertEquals(true, dissemination(1, 1, 0).get("met"));
  }

  @Test
  void aMissingMmluDirectoryIsAnErrorNamingIt(@TempDir Path tmp) {
    Path missing = tmp.resolve("no-such-mmlu");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GossipBenchmarkMain.prompts(missing, 1));
    assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
  }

  @Test
  void aDirectoryWithoutTheMmluFilesIsAnError(@TempDir Path tmp) throws Exception {
    Files.createDirectories(tmp.resolve("dev"));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> GossipBenchmarkMain.prompts(tmp, 1));
    assertTrue(e.getMessage().contains("not an MMLU directory"), e.getMessage());
  }

  @Test
  void aGivenMmluDirectoryIsLoaded(@TempDir Path tmp) throws Exception {
    Files.createDirectories(tmp.resolve("dev"));
    Files.createDirectories(tmp.resolve("test"));
    Files.writeString(tmp.resolve("dev/x_dev.csv"), "q,a,b,c,d,A\n".repeat(5));
    Files.writeString(tmp.resolve("test/x_test.csv"), "q1,a,b,c,d,B\n");
    PromptSource p = GossipBenchmarkMain.prompts(tmp, 1);
    assertEquals(1, p.subjectCount());
    assertTrue(p.description().startsWith("MMLU 5-shot prompts from"), p.description());
  }

  @Test
  void withoutADirectoryTheGeneratorIsUsed() {
    PromptSource p = GossipBenchmarkMain.prompts(null, 1);
    assertTrue(p.description().startsWith("synthetic MMLU-shaped prompts"), p.description());
  }

  private static GossipBenchmarkMain.Options parse(String... args) {
    return GossipBenchmarkMain.Options.parse(args);
  }

  /** A flag given wins over --quick's settings, before or after it. */
  @Test
  void flagsGivenWinOverQuickWhereverTheyStand() {
    assertArrayEquals(new int[0], parse("--skip-dissemination", "--quick").sizes());
    assertArrayEquals(new int[0], parse("--quick", "--skip-dissemination").sizes());
    assertArrayEquals(new long[] {262_144},
        parse("--capacity-tokens", "262144", "--quick").capacities());
    assertArrayEquals(new long[] {1_048_576},
        parse("--fresh-capacity-tokens", "1048576", "--quick").freshCapacities());
    assertEquals(30, parse("--measure-s", "30", "--quick").measure());
    assertArrayEquals(new int[] {4, 16}, parse("--sizes", "4,16", "--quick").sizes());
    GossipBenchmarkMain.Options quick = parse("--quick");
    assertArrayEquals(new int[] {4, 16, 64, 256}, quick.sizes());
    assertArrayEquals(new long[] {131_072}, quick.capacities());
    assertArrayEquals(new long[0], quick.freshCapacities());
    assertEquals(60, quick.measure());
    GossipBenchmarkMain.Options full = parse();
    assertArrayEquals(new int[] {4, 16, 64, 256, 1_024}, full.sizes());
    assertArrayEquals(new long[] {131_072, 1_048_576}, full.capacities());
    assertEquals(120, full.measure());
  }

  @Test
  void badFlagsAreRefusedWithTheirName() {
    assertEquals("--nodes is given twice", assertThrows(IllegalArgumentException.class,
        () -> parse("--nodes", "4", "--nodes", "8")).getMessage());
    assertEquals("--seed needs a value",
        assertThrows(IllegalArgumentException.class, () -> parse("--seed")).getMessage());
    assertEquals("--rate: not a number: 'fast'", assertThrows(IllegalArgumentException.class,
        () -> parse("--rate", "fast")).getMessage());
    assertEquals("unknown flag --nodse", assertThrows(IllegalArgumentException.class,
        () -> parse("--nodse", "4")).getMessage());
    assertThrows(IllegalArgumentException.class,
        () -> parse("--sizes", "4", "--skip-dissemination"));
  }

  /**
   * Values that run nothing or fail only once the run has begun are refused with the flag's
   * name: {@code --nodes 0} failed with an IndexOutOfBoundsException after the prompts were
   * loaded, {@code --fanout 0} with the gossip configuration's own error, and a negative
   * {@code --rate} or {@code --delay-ms} ran a meaningless simulation.
   */
  @Test
  void countsAndRatesThatRunNothingAreRefusedWithTheirName() {
    for (String[] bad : List.of(new String[] {"--nodes", "0"}, new String[] {"--nodes", "1"},
        new String[] {"--nodes", "-3"}, new String[] {"--fanout", "0"},
        new String[] {"--fanout", "65"}, new String[] {"--rate", "-1"},
        new String[] {"--delay-ms", "-0.5"}, new String[] {"--delay-ms", "NaN"},
        new String[] {"--rate", "Infinity"})) {
      String m = assertThrows(IllegalArgumentException.class, () -> parse(bad),
          String.join(" ", bad)).getMessage();
      assertTrue(m.startsWith(bad[0]), m);
    }
    GossipBenchmarkMain.Options o = parse("--nodes", "2", "--fanout", "64", "--rate", "0",
        "--delay-ms", "0");
    assertEquals(2, o.nodes());
    assertEquals(64, o.fanout());
    assertEquals(0.0, o.rate());
    assertEquals(0.0, o.delayMs());
    assertEquals("--nodes: not a whole number: 'many'", assertThrows(
        IllegalArgumentException.class, () -> parse("--nodes", "many")).getMessage());
  }

  /**
   * Cache capacities and cluster sizes that run nothing or fail only once the run has begun are
   * refused with the flag's name: {@code --capacity-tokens 0} (or negative) failed with the
   * prefix tree's own error after the cases before it had run, a capacity below one block
   * cached nothing, and a cluster size of 0 or 1 in {@code --sizes} disseminated to no one.
   */
  @Test
  void capacitiesAndSizesThatRunNothingAreRefusedWithTheirName() {
    for (String[] bad : List.of(new String[] {"--capacity-tokens", "0"},
        new String[] {"--capacity-tokens", "-131072"},
        new String[] {"--capacity-tokens", "131072,8"},
        new String[] {"--fresh-capacity-tokens", "0"}, new String[] {"--sizes", "4,0"},
        new String[] {"--sizes", "1"}, new String[] {"--sizes", "-4"},
        new String[] {"--sizes", "4,,16"}, new String[] {"--sizes", "3000000000"})) {
      String m = assertThrows(IllegalArgumentException.class, () -> parse(bad),
          String.join(" ", bad)).getMessage();
      assertTrue(m.startsWith(bad[0] + " ") || m.startsWith(bad[0] + ":"), m);
    }
    assertEquals("--capacity-tokens: not a whole number: 'big'", assertThrows(
        IllegalArgumentException.class, () -> parse("--capacity-tokens", "big")).getMessage());
    assertEquals("--capacity-tokens must be at least 16 (one block), not 8", assertThrows(
        IllegalArgumentException.class, () -> parse("--capacity-tokens", "8")).getMessage());
    GossipBenchmarkMain.Options o = parse("--capacity-tokens", "16, 131072", "--sizes", "2,4",
        "--fresh-capacity-tokens", "");
    assertArrayEquals(new long[] {16, 131_072}, o.capacities());
    assertArrayEquals(new int[] {2, 4}, o.sizes());
    assertArrayEquals(new long[0], o.freshCapacities());
  }

  /**
   * A window that is no length is refused with the flag's name: {@code --warmup-s 0} (or a
   * negative value) was taken for the automatic warm-up, 120 s to an hour per case, and a
   * negative {@code --snapshot-mode-measure-s} for its automatic window, where 0 skips it.
   */
  @Test
  void windowsThatAreNoLengthAreRefusedWithTheirName() {
    for (String[] bad : List.of(new String[] {"--warmup-s", "0"},
        new String[] {"--warmup-s", "-1"}, new String[] {"--snapshot-mode-measure-s", "-1"},
        new String[] {"--snapshot-mode-measure-s", "-30"})) {
      String m = assertThrows(IllegalArgumentException.class, () -> parse(bad),
          String.join(" ", bad)).getMessage();
      assertTrue(m.startsWith(bad[0] + " must be"), m);
    }
    GossipBenchmarkMain.Options o = parse("--warmup-s", "1", "--snapshot-mode-measure-s", "0");
    assertEquals(1, o.warmup());
    assertEquals(0, o.snapshotModeMeasure());
    o = parse();
    assertEquals(-1, o.warmup()); // automatic
    assertEquals(-1, o.snapshotModeMeasure());
  }

  /**
   * A cluster larger than a gossip engine holds peers (its default {@code maxPeers}, 4,096) is
   * refused with the flag's name: {@code --nodes} and {@code --sizes} had no upper bound, so a
   * large value ran out of memory building the nodes (or ran for hours on a cluster that could
   * never form) instead of stopping with {@code error: ...} and exit code 2.
   */
  @Test
  void clustersLargerThanAnEngineHoldsAreRefusedWithTheirName() {
    for (String[] bad : List.of(new String[] {"--nodes", "4097"},
        new String[] {"--nodes", "2000000000"}, new String[] {"--sizes", "4,4097"},
        new String[] {"--sizes", "2000000000"})) {
      String m = assertThrows(IllegalArgumentException.class, () -> parse(bad),
          String.join(" ", bad)).getMessage();
      assertTrue(m.startsWith(bad[0] + " ") && m.contains("at most 4096"), m);
    }
    GossipBenchmarkMain.Options o = parse("--nodes", "4096", "--sizes", "2,4096");
    assertEquals(4_096, o.nodes());
    assertArrayEquals(new int[] {2, 4_096}, o.sizes());
  }

  /**
   * {@code --nodes} out of range is refused naming the range enforced, 2 to 4,096, at either
   * end: {@code --nodes 1} was told "at most 2147483647", where {@code --nodes 4097} was refused
   * as above 4096.
   */
  @Test
  void aClusterSizeOutOfRangeIsRefusedNamingTheRangeEnforced() {
    assertEquals("--nodes must be at least 2 (and at most 4096), not 1", assertThrows(
        IllegalArgumentException.class, () -> parse("--nodes", "1")).getMessage(),
        "the range named refusing --nodes 1 is not the one enforced");
    assertEquals("--nodes must be at least 2 (and at most 4096), not 4097", assertThrows(
        IllegalArgumentException.class, () -> parse("--nodes", "4097")).getMessage(),
        "the range named refusing --nodes 4097 is not the one enforced");
  }

  /**
   * A rate, delay or length of simulated time far above any sensible run is refused with the
   * flag's name: they had no upper bound, so {@code --rate 1e9} or {@code --measure-s
   * 2000000000} simulated (practically) forever, and a {@code --delay-ms} above 9.2e12 overflowed
   * its nanoseconds ({@code (long) (delayMs * 1e6)}).
   */
  @Test
  void valuesThatWouldRunForeverAreRefusedWithTheirName() {
    for (String[] bad : List.of(new String[] {"--rate", "10001"},
        new String[] {"--rate", "1e300"}, new String[] {"--delay-ms", "60001"},
        new String[] {"--delay-ms", "1e13"}, new String[] {"--measure-s", "86401"},
        new String[] {"--measure-s", "2000000000"}, new String[] {"--warmup-s", "86401"},
        new String[] {"--snapshot-mode-measure-s", "86401"})) {
      String m = assertThrows(IllegalArgumentException.class, () -> parse(bad),
          String.join(" ", bad)).getMessage();
      assertTrue(m.startsWith(bad[0] + " ") && m.contains("at most"), String.join(" ", bad)
          + ": " + m);
    }
    GossipBenchmarkMain.Options o = parse("--rate", "10000", "--delay-ms", "60000",
        "--measure-s", "86400", "--warmup-s", "86400", "--snapshot-mode-measure-s", "86400");
    assertEquals(10_000, o.rate());
    assertEquals(60_000, o.delayMs());
    assertEquals(86_400, o.measure());
    assertEquals(86_400, o.warmup());
    assertEquals(86_400, o.snapshotModeMeasure());
  }

  /**
   * {@code --message-bytes} takes a list of gossip message caps, as the node's
   * {@code --gossip-message-bytes} spells them (bytes, or a number with k or m), from the
   * smallest cap to the largest; without it a run measures the default 64 KiB alone, as before.
   */
  @Test
  void messageBytesIsAListOfCapsDefaultingTo64KiB() {
    assertArrayEquals(new int[] {65_536}, parse().messageBytes(), "default");
    assertArrayEquals(new int[] {65_536}, parse("--quick").messageBytes(), "--quick");
    assertArrayEquals(new int[] {1_024, 16_384, 65_536, 1 << 20},
        parse("--message-bytes", "1k,16K, 64k,1m").messageBytes());
    assertArrayEquals(new int[] {1_024, 16 << 20, 4_000},
        parse("--message-bytes", "1024,16m,4000").messageBytes());
  }

  /**
   * A cap the gossip layer does not accept, or that is not a size, is refused with the flag's
   * name before anything runs.
   */
  @Test
  void messageBytesOutsideTheCapsRangeOrNotASizeIsRefused() {
    for (String bad : List.of("1023", "512", "0", "-1k", "17m", "16385k", "1g", "", "64k,",
        "64kb", "k", "big", "1.5k", "99999999999999999999")) {
      String m = assertThrows(IllegalArgumentException.class,
          () -> parse("--message-bytes", bad), "--message-bytes '" + bad + "'").getMessage();
      assertTrue(m.startsWith("--message-bytes ") || m.startsWith("--message-bytes:"),
          "'" + bad + "': " + m);
    }
    assertEquals("--message-bytes must be from 1024 to 16777216 bytes, not 17m",
        assertThrows(IllegalArgumentException.class,
            () -> parse("--message-bytes", "1k,17m")).getMessage());
    assertEquals("--message-bytes: 65536 bytes is given twice",
        assertThrows(IllegalArgumentException.class,
            () -> parse("--message-bytes", "64k,65536")).getMessage());
    assertEquals("--message-bytes needs a value", assertThrows(IllegalArgumentException.class,
        () -> parse("--message-bytes")).getMessage());
  }

  /**
   * Each run names the cap its engines ran with, in the JSON and the printed line.
   */
  @Test
  void eachRunReportsItsMessageCap() {
    StringBuilder json = new StringBuilder();
    String line = Stdout.of(() -> GossipBenchmarkMain.dissemination(json, 4, 3, 1, 0, 1_024));
    assertTrue(line.contains("messages of up to 1k"), line);
    Map<?, ?> r = (Map<?, ?>) Json.parse(json.toString());
    assertEquals(1_024L, ((Number) r.get("messageByteCap")).longValue(), json.toString());
    assertEquals(65_536L, ((Number) dissemination(4, 1, 0).get("messageByteCap")).longValue());
  }

  /**
   * {@code --message-size-nodes} lists the clusters of the message-size runs, 16 and 256 nodes
   * unless given (empty: none); a cluster of one, or one larger than a node tracks peers, is
   * refused with the flag's name.
   */
  @Test
  void messageSizeNodesListsClustersWithinANodesPeers() {
    assertArrayEquals(new int[] {16, 256}, parse().messageSizeNodes());
    assertArrayEquals(new int[0], parse("--message-size-nodes", "").messageSizeNodes());
    assertArrayEquals(new int[] {2, 1_023},
        parse("--message-size-nodes", "2,1023").messageSizeNodes());
    for (String bad : List.of("1", "0", "16,1024", "many")) {
      String m = assertThrows(IllegalArgumentException.class,
          () -> parse("--message-size-nodes", bad), bad).getMessage();
      assertTrue(m.startsWith("--message-size-nodes"), bad + ": " + m);
    }
  }

  private static GossipBenchmarkMain.MessageSizeResult find(
      List<GossipBenchmarkMain.MessageSizeResult> rs, int cap) {
    return rs.stream().filter(r -> r.cap() == cap).findFirst().orElseThrow();
  }

  /**
   * A message-size run sends no gossip message above its cap, and the cap shows where the
   * layout says it does: at 1 KiB a burst of block changes takes many more rounds to reach
   * every peer (deltas of one block, an update of about 1 KiB an exchange) than at 64 KiB, and a
   * joining node many more rounds to take its peer's snapshot (chunks of 1 KiB, at most 64
   * outstanding to a peer); the JSON gives each cap's figures over the 64 KiB run's.
   */
  @Test
  void aMessageSizeRunStaysWithinItsCapAndTheSmallCapIsSlower() {
    StringBuilder json = new StringBuilder("[");
    List<GossipBenchmarkMain.MessageSizeResult> rs = new ArrayList<>();
    String text = Stdout.of(() -> rs.addAll(
        GossipBenchmarkMain.messageSizes(json, 4, new int[] {1_024, 65_536}, 1, false)));
    json.append("]");
    GossipBenchmarkMain.MessageSizeResult small = find(rs, 1_024);
    GossipBenchmarkMain.MessageSizeResult dflt = find(rs, 65_536);
    for (GossipBenchmarkMain.MessageSizeResult r : rs) {
      assertTrue(r.largest() > 0 && r.largest() <= r.cap(),
          "largest message " + r.largest() + " B at a cap of " + r.cap());
      assertTrue(r.burstNanos() > 0 && r.joinNanos() > 0, r.toString());
      assertEquals(0, r.missingPairs(), r.toString());
    }
    assertTrue(dflt.largest() > 1_024, "the 64 KiB run sent no message above 1 KiB: " + dflt);
    assertTrue(small.burstNanos() > 10 * dflt.burstNanos(),
        "burst at 1 KiB " + small.burstNanos() + " ns, at 64 KiB " + dflt.burstNanos());
    assertTrue(small.joinNanos() > 3 * dflt.joinNanos(),
        "join at 1 KiB " + small.joinNanos() + " ns, at 64 KiB " + dflt.joinNanos());
    assertTrue(small.droppedInFlight() > 0, "1 KiB chunks beyond 64 in flight: " + small);
    List<?> rows = (List<?>) Json.parse(json.toString());
    Map<?, ?> row = (Map<?, ?>) rows.get(0);
    assertEquals(1_024L, ((Number) row.get("messageByteCap")).longValue(), json.toString());
    Map<?, ?> over = (Map<?, ?>) row.get("over64KiB");
    assertEquals((double) small.burstNanos() / dflt.burstNanos(),
        ((Number) over.get("burstTime")).doubleValue(), 0.001, json.toString());
    assertEquals(1.0, ((Number) ((Map<?, ?>) ((Map<?, ?>) rows.get(1)).get("over64KiB"))
        .get("joinTime")).doubleValue(), json.toString());
    assertTrue(text.contains("N=4, messages of up to 1k:"), text);
  }

  /**
   * With nothing cached (no requests) the ratio over a KV-cache transfer of the blocks cached
   * is over a zero: gossip.json has null there, not Infinity, and stays valid JSON, and the
   * printed line shows "-" for it; a measuring
   * window of 0 s, which would make every rate NaN, is refused.
   */
  @Test
  void ratiosOverAZeroAreNullInTheJson() {
    StringBuilder json = new StringBuilder();
    String line = Stdout.of(() -> GossipBenchmarkMain.bandwidth(json,
        GossipBenchmarkMain.prompts(null, 1), new GossipBenchmarkMain.Case(4096, false), 4, 0, 1,
        1, 1, 3, 1, 1_000_000));
    assertTrue(line.contains("(gossip = - of it)") && !line.contains("Infinity"), line);
    String text = json.toString();
    assertTrue(!text.contains("NaN") && !text.contains("Infinity"), text);
    Map<?, ?> r = (Map<?, ?>) Json.parse(text);
    assertEquals(0.0, ((Number) r.get("kvTransferBytesPerNodePerSecond")).doubleValue(), text);
    assertEquals(Json.NULL, r.get("deltaOverKvTransfer"), text);
    assertEquals("--measure-s must be at least 1, not 0 (every rate is over the measured "
        + "seconds)", assertThrows(IllegalArgumentException.class,
            () -> GossipBenchmarkMain.Options.parse(new String[] {"--measure-s", "0"}))
        .getMessage());
  }
}
