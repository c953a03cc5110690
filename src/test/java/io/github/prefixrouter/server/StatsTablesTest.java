package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PeerMessageStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.engine.vllm.VllmKvEventReceiver;
import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.PrometheusTextParser.Family;
import io.github.prefixrouter.server.PrometheusTextParser.Sample;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.lang.reflect.RecordComponent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * Every field of the stats records reaches {@code /metrics} under its own family, and
 * {@code /v1/stats} and {@code /metrics} show the same values. The snapshots are records whose
 * every number differs from every other ({@link StatsFixtures}), so a field left out, or read
 * with another field's getter, shows.
 */
class StatsTablesTest {

  private static final NodeStats NODE = StatsFixtures.nodeStats();
  private static final HttpTransport.Stats TRANSPORT =
      StatsFixtures.distinct(HttpTransport.Stats.class, 100_000);
  private static final ReferenceEngine.Stats ENGINE =
      StatsFixtures.distinct(ReferenceEngine.Stats.class, 200_000);
  private static final StatsTables.KvEventStats KV = new StatsTables.KvEventStats(
      StatsFixtures.distinct(VllmKvEventSubscriber.Stats.class, 300_000),
      StatsFixtures.distinct(VllmKvEventReceiver.Stats.class, 400_000));
  private static final StatsTables.ClientStats CLIENT =
      StatsFixtures.distinct(StatsTables.ClientStats.class, 500_000);

  private static final PeerMessageStats PEER =
      StatsFixtures.distinct(PeerMessageStats.class, 600_000);

  private static final CacheEventStats TREE =
      StatsFixtures.distinct(CacheEventStats.class, 700_000);

  private static final ClusterKeys.Stats KEY_FILE =
      StatsFixtures.distinct(ClusterKeys.Stats.class, 800_000);

  private static final TlsFiles.Stats TLS = StatsFixtures.distinct(TlsFiles.Stats.class, 900_000);

  private static final EngineStallStats WATCH =
      StatsFixtures.distinct(EngineStallStats.class, 1_000_000);

  private static final TlsFiles.Stats CLIENT_TLS =
      StatsFixtures.distinct(TlsFiles.Stats.class, 1_100_000);

  private static final EngineKeyWatch.Stats KEY =
      StatsFixtures.distinct(EngineKeyWatch.Stats.class, 1_300_000);

  private static final OpenAiCompatibleEngine.Stats OPENAI_ENGINE =
      StatsFixtures.distinct(OpenAiCompatibleEngine.Stats.class, 1_500_000);

  private static final EngineTokenizer.Stats TOKENIZER =
      StatsFixtures.distinct(EngineTokenizer.Stats.class, 1_600_000);

  /** Histograms whose every count and sum differs from every other. */
  private static final ClientLatency.Snapshot LATENCY = latency();

  private static ClientLatency.Snapshot latency() {
    Map<String, LatencyHistogram.Snapshot> durations = new java.util.LinkedHashMap<>();
    Map<String, LatencyHistogram.Snapshot> firstOutputs = new java.util.LinkedHashMap<>();
    long n = 1_200_000;
    for (String served : ClientLatency.SERVED) {
      for (Map<String, LatencyHistogram.Snapshot> m : List.of(durations, firstOutputs)) {
        long[] cumulative = new long[LatencyHistogram.BOUNDS_SECONDS.length + 1];
        for (int i = 0; i < cumulative.length; i++) {
          cumulative[i] = n++;
        }
        m.put(served, new LatencyHistogram.Snapshot(cumulative, n++ + 0.5));
      }
    }
    return new ClientLatency.Snapshot(durations, firstOutputs);
  }

  private static final List<StatsTable.Section<?>> ALL = List.of(
      StatsTables.NODE.section(null, NODE),
      StatsTables.GOSSIP.section("gossip", NODE.gossip()),
      StatsTables.PEER_MESSAGES.section("peer_messages", PEER),
      StatsTables.ENGINE_WATCH.section("engine_watch", WATCH),
      StatsTables.ENGINE_KEY.section("engine_key", KEY),
      StatsTables.LOCAL_TREE.section("local_tree", TREE),
      StatsTables.TRANSPORT.section("transport", TRANSPORT),
      StatsTables.CLUSTER_KEY_FILE.section("cluster_key_file", KEY_FILE),
      StatsTables.PEER_TLS.section("tls", TLS),
      StatsTables.CLIENT_TLS.section("client_tls", CLIENT_TLS),
      StatsTables.REFERENCE_ENGINE.section("engine", ENGINE),
      StatsTables.OPENAI_ENGINE.section("engine", OPENAI_ENGINE),
      StatsTables.KV_EVENTS.section("kv_events", KV),
      StatsTables.TOKENIZER.section("tokenizer", TOKENIZER),
      StatsTables.CLIENT.section("client", CLIENT),
      StatsTables.CLIENT_LATENCY.section(null, LATENCY));

  private static Map<String, Family> metrics(StatsTable.Section<?>... sections) {
    PrometheusText out = new PrometheusText();
    for (StatsTable.Section<?> s : sections) {
      s.metrics(out);
    }
    return PrometheusTextParser.parse(out.toString());
  }

  private static List<Sample> samples(Map<String, Family> families) {
    return families.values().stream().flatMap(f -> f.samples.stream()).toList();
  }

  /** The families among {@code families} with an unlabelled sample of this value. */
  private static List<String> familiesWithValue(Map<String, Family> families, double value) {
    return families.values().stream()
        .filter(f -> f.samples.stream().anyMatch(s -> s.labels().isEmpty() && s.value() == value))
        .map(f -> f.name).toList();
  }

  /**
   * Checks that each component of {@code stats} (a record of numbers), but those named in
   * {@code skip}, is the value of exactly one family of {@code m}, named with {@code prefix}, and
   * adds that family to {@code used}.
   */
  private static void eachComponentHasAFamily(Object stats, Map<String, Family> m, String prefix,
      Set<String> used, String... skip) throws Exception {
    for (RecordComponent rc : stats.getClass().getRecordComponents()) {
      if (List.of(skip).contains(rc.getName())) {
        continue;
      }
      double v = ((Number) rc.getAccessor().invoke(stats)).doubleValue();
      List<String> f = familiesWithValue(m, v);
      assertEquals(1, f.size(), stats.getClass().getSimpleName() + "." + rc.getName()
          + " is in " + f);
      assertTrue(f.get(0).startsWith(prefix), f.get(0));
      used.add(f.get(0));
    }
  }

  @Test
  void everyNodeStatsComponentAppearsInMetrics() throws Exception {
    Map<String, Family> m = metrics(StatsTables.NODE.section(null, NODE));
    Set<String> used = new HashSet<>();
    for (RecordComponent rc : NodeStats.class.getRecordComponents()) {
      Object v = rc.getAccessor().invoke(NODE);
      String what = "NodeStats." + rc.getName() + " = " + v;
      if (v instanceof Number n) {
        List<String> f = familiesWithValue(m, n.doubleValue());
        assertEquals(1, f.size(), what + " is in these families: " + f);
        assertTrue(used.add(f.get(0)), what + ": family " + f + " shows two components");
      } else if (v instanceof String id) {
        Family f = m.get("prefix_router_node_info");
        assertEquals(1.0, f.value("node", id), what);
        used.add(f.name);
      } else if (v instanceof PrefixRouterNode.State state) {
        Family f = m.get("prefix_router_node_state");
        assertEquals(PrefixRouterNode.State.values().length, f.samples.size(), what);
        for (PrefixRouterNode.State s : PrefixRouterNode.State.values()) {
          assertEquals(s == state ? 1.0 : 0.0, f.value("state", s.name()), what);
        }
        used.add(f.name);
      } else if (v instanceof Map<?, ?> fallbacks) {
        Family f = m.get("prefix_router_fallbacks_total");
        assertEquals("counter", f.type);
        Set<FallbackCause> causes = EnumSet.allOf(FallbackCause.class);
        causes.remove(FallbackCause.NONE);
        assertEquals(causes.stream().map(Enum::name).collect(Collectors.toSet()),
            f.samples.stream().map(s -> s.labels().get("cause")).collect(Collectors.toSet()), what);
        fallbacks.forEach((c, n) ->
            assertEquals(((Long) n).doubleValue(), f.value("cause", ((Enum<?>) c).name()), what));
        used.add(f.name);
      } else if (v instanceof GossipStats) {
        continue; // a section of its own: everyGossipStatsComponentAppearsInMetrics
      } else {
        throw new AssertionError("a component this test does not know: " + what);
      }
    }
    // hit_rate, a method rather than a component, is a gauge of its own
    assertEquals(NODE.hitRate(), m.get("prefix_router_cache_hit_ratio").value());
    used.add("prefix_router_cache_hit_ratio");
    assertEquals(used, m.keySet(), "families that show no component");
  }

  /**
   * The node's {@link GossipStats}, in {@code gossip}: every component under a family of its
   * own, named for gossip (but the suspect peers' gauge, next to {@code prefix_router_peers_live}),
   * {@code nodeIdInUse} as a gauge of 1 for true.
   */
  @Test
  void everyGossipStatsComponentAppearsInMetrics() throws Exception {
    GossipStats g = NODE.gossip();
    Map<String, Family> m = metrics(StatsTables.GOSSIP.section("gossip", g));
    Set<String> used = new HashSet<>();
    for (RecordComponent rc : GossipStats.class.getRecordComponents()) {
      Object v = rc.getAccessor().invoke(g);
      if (v instanceof Boolean inUse) {
        Family f = m.get("prefix_router_gossip_node_id_in_use");
        assertEquals("gauge", f.type);
        assertEquals(inUse ? 1.0 : 0.0, f.value(), rc.getName());
        assertEquals(inUse ? 1 : 0,
            StatsTables.GOSSIP.json(g).get("node_id_in_use"), rc.getName());
        used.add(f.name);
        continue;
      }
      List<String> f = familiesWithValue(m, ((Number) v).doubleValue());
      assertEquals(1, f.size(), rc.getName() + " is in " + f);
      assertTrue(f.get(0).startsWith("prefix_router_gossip_")
          || f.get(0).equals("prefix_router_peers_suspect"), f.get(0));
      used.add(f.get(0));
    }
    assertEquals(used, m.keySet());
    assertEquals(g.generationsRefuted(),
        m.get("prefix_router_gossip_generations_refuted_total").value());
    // false shows as 0
    GossipStats free = new GossipStats(1, false, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    assertEquals(0.0, metrics(StatsTables.GOSSIP.section("gossip", free))
        .get("prefix_router_gossip_node_id_in_use").value());
  }

  @Test
  void everyHttpTransportStatsComponentAppearsInMetrics() throws Exception {
    Map<String, Family> m = metrics(StatsTables.TRANSPORT.section("transport", TRANSPORT));
    Set<String> used = new HashSet<>();
    // clusterKeys: one sample per key id, labelled with it
    Family keys = m.get("prefix_router_transport_cluster_key_info");
    assertEquals(2, keys.samples.size());
    assertEquals(1.0, keys.value("key", "0a1b2c3d"));
    assertEquals(0.0, keys.value("key", "4e5f6a7b"));
    used.add(keys.name);
    eachComponentHasAFamily(TRANSPORT, m, "prefix_router_transport_", used, "clusterKeys");
    assertEquals(used, m.keySet());
  }

  /**
   * The families of {@code section}, checked to be one per component of {@code stats}, each
   * named with {@code prefix}, and nothing else.
   */
  private static <T> Map<String, Family> onlyAFamilyPerComponent(StatsTable<T> table, T stats,
      String prefix) throws Exception {
    Map<String, Family> m = metrics(table.section("engine", stats));
    Set<String> used = new HashSet<>();
    eachComponentHasAFamily(stats, m, prefix, used);
    assertEquals(used, m.keySet());
    return m;
  }

  /**
   * The reference engine's counters are all in {@code /metrics}: its generated tokens and the
   * blocks its cache stored and evicted were in its stats and nowhere else.
   */
  @Test
  void everyReferenceEngineStatsComponentAppearsInMetrics() throws Exception {
    onlyAFamilyPerComponent(StatsTables.REFERENCE_ENGINE, ENGINE, "prefix_router_engine_");
  }

  /**
   * The OpenAI-compatible adapter's {@link OpenAiCompatibleEngine.Stats}, in {@code engine}:
   * every component under a family of its own, named for the engine, none of them a family of
   * the reference engine's table, which has the same key.
   */
  @Test
  void everyOpenAiEngineStatsComponentAppearsInMetrics() throws Exception {
    Map<String, Family> m = onlyAFamilyPerComponent(StatsTables.OPENAI_ENGINE, OPENAI_ENGINE,
        "prefix_router_engine_");
    Set<String> reference =
        metrics(StatsTables.REFERENCE_ENGINE.section("engine", ENGINE)).keySet();
    for (String name : m.keySet()) {
      assertTrue(!reference.contains(name), name + " is the reference engine's family too");
    }
    assertEquals(OPENAI_ENGINE.answerBudgetRefused(),
        m.get("prefix_router_engine_answer_budget_refused_total").value());
  }

  @Test
  void everyCacheEventStatsComponentOfTheLocalTreeAppearsInMetrics() throws Exception {
    Map<String, Family> m = metrics(StatsTables.LOCAL_TREE.section("local_tree", TREE));
    Set<String> used = new HashSet<>();
    eachComponentHasAFamily(TREE, m, "prefix_router_tree_", used);
    assertEquals(used, m.keySet());
    assertEquals(TREE.overflowBlocks(),
        m.get("prefix_router_tree_mirror_overflow_blocks_total").value());
  }

  /**
   * docs/vllm-kv-events.md: the {@code kv_events} part has the counters of both the subscriber
   * and the receiver, each under its own family.
   */
  @Test
  void everyKvEventStatsComponentAppearsInMetrics() throws Exception {
    Map<String, Family> m = metrics(StatsTables.KV_EVENTS.section("kv_events", KV));
    Set<String> used = new HashSet<>();
    for (Object stats : List.of(KV.subscriber(), KV.receiver())) {
      eachComponentHasAFamily(stats, m, "prefix_router_kv_events_", used);
    }
    assertEquals(used, m.keySet());
  }

  /**
   * The client endpoint's histograms, in {@code /metrics} only: a series per {@code served},
   * each with every bucket of {@link LatencyHistogram#BOUNDS_SECONDS} and {@code +Inf}, its sum
   * and its count, as the snapshot has them.
   */
  @Test
  void theLatencyHistogramsAppearInMetricsOnly() {
    Map<String, Family> m = metrics(StatsTables.CLIENT_LATENCY.section(null, LATENCY));
    assertEquals(Set.of("prefix_router_client_request_duration_seconds",
        "prefix_router_client_time_to_first_output_seconds"), m.keySet());
    Map<String, Map<String, LatencyHistogram.Snapshot>> expected = Map.of(
        "prefix_router_client_request_duration_seconds", LATENCY.durations(),
        "prefix_router_client_time_to_first_output_seconds", LATENCY.firstOutputs());
    List<Double> bounds = new ArrayList<>();
    for (double b : LatencyHistogram.BOUNDS_SECONDS) {
      bounds.add(b);
    }
    bounds.add(Double.POSITIVE_INFINITY);
    for (Family f : m.values()) {
      assertEquals("histogram", f.type, f.name);
      assertEquals(ClientLatency.SERVED.size() * (bounds.size() + 2), f.samples.size(), f.name);
      for (String served : ClientLatency.SERVED) {
        PrometheusTextParser.Histogram h = f.histogram("served", served);
        LatencyHistogram.Snapshot s = expected.get(f.name).get(served);
        assertEquals(bounds, h.le(), f.name);
        assertEquals(Arrays.stream(s.cumulative()).asDoubleStream().boxed().toList(),
            h.cumulative(), f.name + "{" + served + "}");
        assertEquals(s.sumSeconds(), h.sum(), f.name + "{" + served + "}");
        assertEquals(s.count(), h.count(), f.name + "{" + served + "}");
      }
    }
    assertEquals(Map.of(), StatsTables.CLIENT_LATENCY.json(LATENCY));
  }

  /** docs/deployment.md states the histograms' buckets as {@link LatencyHistogram} has them. */
  @Test
  void theDeploymentGuideStatesTheBuckets() throws Exception {
    String doc = java.nio.file.Files.readString(java.nio.file.Path.of("docs", "deployment.md"))
        .replace("\n", " ");
    String bounds = Arrays.stream(LatencyHistogram.BOUNDS_SECONDS)
        .mapToObj(b -> b == Math.rint(b) ? String.valueOf((long) b) : String.valueOf(b))
        .collect(Collectors.joining(", "));
    String stated = "Both have the same buckets (`le`, seconds): " + bounds + " and `+Inf`";
    assertTrue(doc.contains(stated), "docs/deployment.md does not say: " + stated);
  }

  /**
   * Each key of {@code /v1/stats} reads the component of its name, and its value is a sample of
   * {@code /metrics}; the families are all different, across sections too.
   */
  @Test
  void v1StatsAndMetricsShowTheSameValues() throws Exception {
    Map<String, Family> all = metrics(ALL.toArray(StatsTable.Section<?>[]::new));
    List<Double> sampleValues = samples(all).stream().map(Sample::value).toList();
    for (StatsTable.Section<?> section : ALL) {
      Map<String, Object> json = section.json();
      // the JSON survives a round trip: every value is one Json writes
      assertEquals(json.keySet(), ((Map<?, ?>) Json.parse(Json.write(json))).keySet());
      int fields = (int) section.table().fields().stream().filter(f -> f.key() != null).count();
      assertEquals(fields, json.size(), section.key() + ": a key twice");
      for (Map.Entry<String, Object> e : json.entrySet()) {
        String where = (section.key() == null ? "" : section.key() + ".") + e.getKey();
        Object v = e.getValue();
        if (v instanceof Number n) {
          assertTrue(sampleValues.contains(n.doubleValue()), where + " = " + n + " not in /metrics");
          Object component = component(section.snapshot(), e.getKey());
          if (component instanceof Boolean b) { // a gauge of 1 or 0
            component = b ? 1 : 0;
          }
          if (component != null) {
            assertEquals(((Number) component).doubleValue(), n.doubleValue(), where);
          }
        } else if (v instanceof Map<?, ?> map) {
          map.forEach((k, n) -> assertTrue(sampleValues.contains(((Number) n).doubleValue()),
              where + "." + k));
        }
      }
    }
  }

  /** The component named {@code key} in snake case, of the snapshot or its parts; null if none. */
  private static Object component(Object snapshot, String key) throws Exception {
    List<Object> records = new ArrayList<>(List.of(snapshot));
    if (snapshot instanceof StatsTables.KvEventStats kv) {
      records = List.of(kv.subscriber(), kv.receiver());
    }
    for (Object r : records) {
      for (RecordComponent rc : r.getClass().getRecordComponents()) {
        if (StatsFixtures.snake(rc.getName()).equals(key)) {
          return rc.getAccessor().invoke(r);
        }
      }
    }
    assertTrue(snapshot instanceof NodeStats && Set.of("hit_rate").contains(key)
        || Arrays.asList("node_id", "state", "fallbacks").contains(key), "no component " + key);
    return null;
  }

  @Test
  void theNamesFollowPrometheusConventions() {
    Map<String, Family> all = metrics(ALL.toArray(StatsTable.Section<?>[]::new));
    for (Family f : all.values()) {
      assertTrue(f.name.startsWith("prefix_router_"), f.name);
      assertTrue(f.type.equals("counter") == f.name.endsWith("_total"), f.name + " " + f.type);
      assertTrue(!f.help.isBlank() && f.help.endsWith("."), f.name + ": " + f.help);
      for (Sample s : f.samples) {
        assertTrue(!s.labels().containsKey("node") || f.name.equals("prefix_router_node_info"),
            "the node's id is a label of the info family alone: " + s);
      }
    }
    // tokens and bytes say so in their names
    for (String name : all.keySet()) {
      if (name.contains("bytes")) {
        assertTrue(name.endsWith("_bytes_total") || name.endsWith("_bytes"), name);
      }
    }
  }

  /** The sections above are every table of {@link StatsTables}: what {@code /metrics} writes. */
  @Test
  void theSectionsCheckedHereAreEveryTable() throws Exception {
    Set<Object> checked = new HashSet<>();
    for (StatsTable.Section<?> section : ALL) {
      checked.add(section.table());
    }
    int tables = 0;
    for (java.lang.reflect.Field f : StatsTables.class.getDeclaredFields()) {
      if (java.lang.reflect.Modifier.isStatic(f.getModifiers())
          && StatsTable.class.isAssignableFrom(f.getType())) {
        f.setAccessible(true);
        tables++;
        assertTrue(checked.contains(f.get(null)), "StatsTables." + f.getName()
            + " is not among the sections checked against docs/deployment.md");
      }
    }
    assertEquals(checked.size(), tables);
  }

  /**
   * docs/deployment.md lists every family, with its type, its key in {@code /v1/stats}
   * ({@code —} for none) and its meaning, which is the family's {@code # HELP} text, and no
   * family the code does not have.
   */
  @Test
  void theDeploymentGuideListsEveryFamily() throws Exception {
    String doc = java.nio.file.Files.readString(java.nio.file.Path.of("docs", "deployment.md"));
    Set<String> names = new HashSet<>();
    for (StatsTable.Section<?> section : ALL) {
      for (StatsTable.Field<?> f : section.table().fields()) {
        String name = f.family() + (f.label() == null ? "" : "{" + f.label() + "}");
        names.add(name);
        String key = f.key() == null ? "—" : "`" + f.key() + "`";
        String row = "| `" + name + "` | " + f.type().text() + " | " + key + " | ";
        assertTrue(doc.contains(row),
            "docs/deployment.md lacks the row of " + name + " (" + f.type().text() + ", key "
                + key + ")");
        int at = doc.indexOf(row) + row.length();
        assertEquals(f.help(), doc.substring(at, doc.indexOf(" |\n", at)),
            "the meaning docs/deployment.md gives " + name + " is not its HELP text");
      }
    }
    for (String line : doc.split("\n")) {
      if (line.startsWith("| `prefix_router_")) {
        String name = line.substring(3, line.indexOf('`', 3));
        assertTrue(names.contains(name), "docs/deployment.md has a row of " + name
            + ", which is no family");
      }
    }
  }
}
