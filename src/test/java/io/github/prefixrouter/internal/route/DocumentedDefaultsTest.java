package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.gossip.GossipConfig;
import io.github.prefixrouter.testing.DocTables;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The defaults the docs state are the code's: the configuration tables of docs/routing.md
 * ({@link RouterConfig#defaults()}) and docs/gossip.md ({@link GossipConfig}'s builder), and
 * the settings docs/gossip.md says a node maps its {@code RouterConfig} onto. A default changed
 * in the code, or mistyped in a doc, fails here with the row.
 *
 * <p>A default cell is read up to its first {@code ":"} or {@code " ("} (what follows explains
 * it); its values are separated by {@code ", "} (routing.md) or {@code " / "} (gossip.md), each
 * a duration ({@code 500 µs}, {@code 20 ms}, {@code 1 s}, {@code 10 min}), a number
 * ({@code 1,024}, {@code 0.05}, {@code 2^20}, {@code 1 MiB}), {@code on}/{@code off},
 * {@code true}/{@code false}, {@code empty} or an enum constant.
 */
class DocumentedDefaultsTest {

  @Test
  void routingMdConfigurationTableShowsRouterConfigDefaults() throws IOException {
    RouterConfig c = RouterConfig.defaults();
    Map<String, List<Object>> expected = new LinkedHashMap<>();
    expected.put("blockSize", List.of(c.blockSize()));
    expected.put("treeCapacityTokens", List.of(c.treeCapacityTokens()));
    expected.put("mirrorLimitTokens", List.of(0)); // automatic, checked below
    expected.put("treeMode", List.of(c.treeMode().name()));
    expected.put("hashSalt", List.of(c.hashSalt()));
    expected.put("policy", List.of(c.policy().name()));
    expected.put("forwardMargin(ratio, min)", List.of(c.forwardMarginRatio(),
        c.forwardMarginMin()));
    expected.put("initialPrefillNanosPerToken",
        List.of(Duration.ofNanos(c.initialPrefillNanosPerToken())));
    expected.put("forwardOverhead", List.of(c.forwardOverhead()));
    expected.put("forwardTimeout(min, max)", List.of(c.forwardTimeoutMin(),
        c.forwardTimeoutMax()));
    expected.put("engineTimeout", List.of(c.engineTimeout()));
    expected.put("engineStallTimeout", List.of(c.engineStallTimeout()));
    expected.put("engineFailureLimit", List.of(c.engineFailureLimit()));
    expected.put("hopLimit", List.of(c.hopLimit()));
    expected.put("watermarks(low, high)", List.of(c.lowWatermark(), c.highWatermark()));
    expected.put("busyCooldown", List.of(c.busyCooldown()));
    expected.put("streamInterval", List.of(c.streamInterval()));
    expected.put("failureCooldown", List.of(c.failureCooldown()));
    expected.put("coldPlacement", List.of(c.coldPlacement()));
    expected.put("coldPlacementLoadBound", List.of(c.coldPlacementLoadBound()));
    expected.put("coldPlacementSlack", List.of(c.coldPlacementSlack()));
    expected.put("localCaching", List.of(c.localCaching()));
    expected.put("stalenessHalfLife", List.of(c.stalenessHalfLife()));
    expected.put("distrustHalfLife", List.of(c.distrustHalfLife()));
    expected.put("gossip(interval, fanout)", List.of(c.gossipInterval(), c.gossipFanout()));
    expected.put("peerTimeouts(suspect, dead)", List.of(c.peerSuspectAfter(),
        c.peerDeadAfter()));
    expected.put("maxPeers", List.of(c.maxPeers()));
    expected.put("gossipMessageBytes", List.of(c.gossipMessageBytes()));
    expected.put("gossipGeneration", List.of(c.gossipGeneration()));
    expected.put("modelId", List.of(c.modelId()));

    Map<String, String> rows = table("routing.md", "## Configuration");
    assertEquals(expected.keySet(), rows.keySet(), "the rows of docs/routing.md's table");
    for (Map.Entry<String, List<Object>> e : expected.entrySet()) {
      assertValues("routing.md", e.getKey(), e.getValue(), rows.get(e.getKey()), ", ");
    }
    // the automatic mirror limit the row explains
    assertTrue(rows.get("mirrorLimitTokens")
            .startsWith("0: 4 × `treeCapacityTokens`, at least 2^24"),
        rows.get("mirrorLimitTokens"));
    assertEquals(Math.max(4 * c.treeCapacityTokens(), 1L << 24), c.mirrorLimitTokens());
    assertEquals(1L << 24, RouterConfig.MIN_AUTOMATIC_MIRROR_LIMIT_TOKENS);
  }

  @Test
  void gossipMdConfigurationTableShowsGossipConfigDefaults() throws IOException {
    GossipConfig g = GossipConfig.builder().build();
    Map<String, List<Object>> expected = new LinkedHashMap<>();
    expected.put("interval", List.of(g.interval()));
    expected.put("jitter", List.of(g.jitter()));
    expected.put("fanout", List.of(g.fanout()));
    expected.put("suspectAfter / deadAfter / forgetAfter",
        List.of(g.suspectAfter(), g.deadAfter(), g.forgetAfter()));
    expected.put("maxPeers", List.of(g.maxPeers()));
    expected.put("maxBlocksPerPeer / maxBlocksTotal",
        List.of(g.maxBlocksPerPeer(), g.maxBlocksTotal()));
    expected.put("deltaLogMaxHashes", List.of(g.deltaLogMaxHashes()));
    expected.put("relayLogMaxHashesPerOrigin / relayLogMaxHashesTotal",
        List.of(g.relayLogMaxHashesPerOrigin(), g.relayLogMaxHashesTotal()));
    expected.put("messageByteCap", List.of(g.messageByteCap()));
    expected.put("snapshotBytesPerExchange", List.of(g.snapshotBytesPerExchange()));
    expected.put("snapshotChunksPerExchange", List.of(g.snapshotChunksPerExchange()));
    expected.put("highWatermark / lowWatermark", List.of(g.highWatermark(), g.lowWatermark()));
    expected.put("rttSmoothing", List.of(g.rttSmoothing()));
    expected.put("maxGenerationJump / maxSequenceJump",
        List.of(g.maxGenerationJump(), g.maxSequenceJump()));
    expected.put("fullSnapshotsOnly", List.of(g.fullSnapshotsOnly()));

    Map<String, String> rows = table("gossip.md", "## Configuration");
    assertEquals(expected.keySet(), rows.keySet(), "the rows of docs/gossip.md's table");
    for (Map.Entry<String, List<Object>> e : expected.entrySet()) {
      assertValues("gossip.md", e.getKey(), e.getValue(), rows.get(e.getKey()), " / ");
    }
  }

  /** "A node built with PrefixRouterNode maps its RouterConfig onto these settings instead". */
  @Test
  void gossipMdStatesWhatANodeMapsItsRouterConfigOnto() throws IOException {
    GossipConfig g = GossipPeerView.gossipConfig(RouterConfig.defaults());
    String doc = Files.readString(Path.of("docs", "gossip.md")).replaceAll("\\s+", " ");
    String stated = render(g.interval()) + " rounds, a fanout of " + g.fanout()
        + ", suspect / dead / forget after " + render(g.suspectAfter()) + " / "
        + render(g.deadAfter()) + " / " + render(g.forgetAfter()) + ", "
        + String.format("%,d", g.maxPeers()) + " peers and watermarks of " + g.highWatermark()
        + " / " + g.lowWatermark() + " unless set";
    assertTrue(doc.contains(stated), "docs/gossip.md should say: " + stated);
  }

  /**
   * The defaults README.md states in its prose (Design, Routing decision): the hop limit, the
   * engine stall timeout, the failing engine's limit and cool-down, the stream interval and the
   * prefix hash cache's size.
   */
  @Test
  void readmeStatesTheDefaults() throws IOException {
    RouterConfig c = RouterConfig.defaults();
    String readme = Files.readString(Path.of("README.md")).replaceAll("\\s+", " ");
    for (String stated : List.of(
        "reaches a high watermark; hop limit " + c.hopLimit() + ";",
        "no output and no answer of any request for " + render(c.engineStallTimeout()) + ")",
        "failed " + c.engineFailureLimit() + " requests in a row",
        "one request at most every " + render(c.failureCooldown()) + " until one succeeds",
        "at most one per `streamInterval`, " + render(c.streamInterval()) + ")",
        "`PrefixHashCache`: at most " + PrefixHashCache.SETS * PrefixHashCache.WAYS
            + " entries of up to " + String.format("%,d",
                PrefixHashCache.MAX_ENTRY_BLOCKS * c.blockSize()) + " tokens")) {
      assertTrue(readme.contains(stated), "README.md should say: " + stated);
    }
  }

  /** The rows of the first table after {@code heading}: first column to second. */
  static Map<String, String> table(String doc, String heading) throws IOException {
    return DocTables.firstTwoColumns(doc, heading);
  }

  private static void assertValues(String doc, String row, List<Object> expected, String cell,
      String separator) {
    String head = cell;
    for (String end : List.of(":", " (")) {
      int k = head.indexOf(end);
      if (k >= 0) {
        head = head.substring(0, k);
      }
    }
    String[] parts = head.split(Pattern.quote(separator));
    List<Object> actual = new ArrayList<>();
    for (String p : parts) {
      actual.add(parse(p.trim().replace("`", "")));
    }
    assertEquals(expected.size(), actual.size(), doc + " row " + row + ": " + cell);
    for (int k = 0; k < expected.size(); k++) {
      Object want = expected.get(k);
      Object got = actual.get(k);
      boolean same = want instanceof Number w && got instanceof Number h
          ? w.doubleValue() == h.doubleValue() : want.equals(got);
      if (!same) {
        fail("docs/" + doc + ", row " + row + ": the default cell says " + cell
            + ", the code's default is " + (want instanceof Duration d ? render(d) : want));
      }
    }
  }

  private static final Pattern NUMBER =
      Pattern.compile("(\\d[\\d,]*(?:\\.\\d+)?)(?: (µs|ms|s|min|MiB))?");

  private static Object parse(String v) {
    switch (v) {
      case "on", "true" -> {
        return true;
      }
      case "off", "false" -> {
        return false;
      }
      case "empty" -> {
        return "";
      }
      default -> { }
    }
    if (v.matches("[A-Z][A-Z_]*")) {
      return v;
    }
    Matcher pow = Pattern.compile("2\\^(\\d+)").matcher(v);
    if (pow.matches()) {
      return 1L << Integer.parseInt(pow.group(1));
    }
    Matcher m = NUMBER.matcher(v);
    if (!m.matches()) {
      fail("cannot read the default " + v);
    }
    String digits = m.group(1).replace(",", "");
    String unit = m.group(2);
    if (unit == null) {
      return digits.contains(".") ? (Object) Double.parseDouble(digits)
          : (Object) Long.parseLong(digits);
    }
    if (unit.equals("MiB")) {
      return Long.parseLong(digits) << 20;
    }
    long n = Long.parseLong(digits);
    return switch (unit) {
      case "µs" -> Duration.ofNanos(n * 1_000);
      case "ms" -> Duration.ofMillis(n);
      case "s" -> Duration.ofSeconds(n);
      default -> Duration.ofMinutes(n);
    };
  }

  /** A duration as the docs write it: in the largest unit that divides it. */
  static String render(Duration d) {
    long n = d.toNanos();
    if (n % 60_000_000_000L == 0 && n >= 600_000_000_000L) {
      return n / 60_000_000_000L + " min";
    }
    if (n % 1_000_000_000L == 0) {
      return n / 1_000_000_000L + " s";
    }
    if (n % 1_000_000L == 0) {
      return n / 1_000_000L + " ms";
    }
    return n / 1_000 + " µs";
  }
}
