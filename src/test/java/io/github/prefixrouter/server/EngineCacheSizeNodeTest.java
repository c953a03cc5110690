package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * A node in front of a model server without {@code --tree-capacity-tokens} takes its tree's
 * capacity from the server's KV-cache size, as vLLM's {@code /metrics} or SGLang's
 * {@code /get_server_info} publishes it; without either (or with a value it cannot take) it
 * keeps 2^20 tokens and says how to set the flag; a flag given wins and nothing is asked.
 */
class EngineCacheSizeNodeTest {

  /** What vLLM's {@code /metrics} looks like: the cache's block size and blocks in labels. */
  static final String VLLM_METRICS = String.join("\n",
      "# HELP python_gc_objects_collected_total Objects collected during gc",
      "# TYPE python_gc_objects_collected_total counter",
      "python_gc_objects_collected_total{generation=\"0\"} 12735.0",
      "# HELP vllm:num_requests_running Number of requests in model execution batches.",
      "# TYPE vllm:num_requests_running gauge",
      "vllm:num_requests_running{engine=\"0\",model_name=\"Qwen/Qwen2.5-0.5B-Instruct\"} 0.0",
      "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
      "# TYPE vllm:kv_cache_usage_perc gauge",
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"Qwen/Qwen2.5-0.5B-Instruct\"} 0.0",
      "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig",
      "# TYPE vllm:cache_config_info gauge",
      "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",calculate_kv_scales=\"False\","
          + "cpu_offload_gb=\"0\",enable_prefix_caching=\"True\",engine=\"0\","
          + "gpu_memory_utilization=\"0.9\",is_attention_free=\"False\",num_cpu_blocks=\"None\","
          + "num_gpu_blocks=\"27222\",num_gpu_blocks_override=\"None\","
          + "prefix_caching_hash_algo=\"builtin\",sliding_window=\"None\",swap_space=\"4\","
          + "swap_space_bytes=\"4294967296\"} 1.0",
      "# HELP vllm:prompt_tokens_total Number of prefill tokens processed.",
      "# TYPE vllm:prompt_tokens_total counter",
      "vllm:prompt_tokens_total{engine=\"0\",model_name=\"Qwen/Qwen2.5-0.5B-Instruct\"} 0.0",
      "");

  private final ByteArrayOutputStream out = new ByteArrayOutputStream();
  private final ByteArrayOutputStream err = new ByteArrayOutputStream();

  private NodeMain.Running launch(String... args) {
    List<String> a = new ArrayList<>(List.of("--id", "c", "--listen", "127.0.0.1:0"));
    a.addAll(List.of(args));
    NodeMain.Launch l = NodeMain.launch(a.toArray(new String[0]),
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX),
        new PrintStream(out, true, StandardCharsets.UTF_8),
        new PrintStream(err, true, StandardCharsets.UTF_8));
    assertNotNull(l.running(), "status " + l.status() + ": " + out.toString(StandardCharsets.UTF_8)
        + err.toString(StandardCharsets.UTF_8));
    return l.running();
  }

  /** The tree capacity of a node started with {@code args}, and the lines it logged of it. */
  private long capacity(List<String> lines, String... args) {
    AtomicReference<Long> capacity = new AtomicReference<>();
    lines.addAll(logged("tree capacity", () -> {
      try (NodeMain.Running r = launch(args)) {
        capacity.set(r.config.treeCapacityTokens());
      }
    }));
    return capacity.get();
  }

  @Test
  void vllmsMetricsGiveTheCapacity() {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      server.serve("/metrics", 200, "text/plain; version=0.0.4; charset=utf-8", VLLM_METRICS);
      List<String> lines = new ArrayList<>();
      assertEquals(16L * 27222, capacity(lines, "--engine", server.baseUrl()));
      assertEquals(1, lines.size(), lines.toString());
      assertTrue(lines.get(0).contains("435552") && lines.get(0).contains(server.baseUrl()
          + "/metrics") && lines.get(0).contains("vllm:cache_config_info"), lines.get(0));
    }
  }

  @Test
  void sglangsServerInfoGivesTheCapacity() {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      server.serve("/get_server_info", 200, "application/json", "{\"model_path\":\"m\","
          + "\"max_total_tokens\":null,\"api_key\":null,\"max_total_num_tokens\":562784,"
          + "\"max_req_input_len\":32762,\"internal_states\":[{\"avg_spec_accept_length\":null}],"
          + "\"version\":\"0.5.4\"}");
      List<String> lines = new ArrayList<>();
      // the base URL given with /v1, as the completions' base may be
      assertEquals(562_784, capacity(lines, "--engine", server.baseUrl() + "/v1"));
      assertEquals(1, lines.size(), lines.toString());
      assertTrue(lines.get(0).contains("562784") && lines.get(0).contains(server.baseUrl()
          + "/get_server_info"), lines.get(0));
    }
  }

  @Test
  void withoutEitherTheNodeKeepsTheDefaultAndSaysHowToSetIt() {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      List<String> lines = new ArrayList<>();
      assertEquals(1L << 20, capacity(lines, "--engine", server.baseUrl()));
      assertEquals(1, lines.size(), lines.toString());
      assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("--tree-capacity-tokens")
          && lines.get(0).contains("1048576") && lines.get(0).contains("404"), lines.get(0));
    }
  }

  @Test
  void aCapacityGivenWinsAndNothingIsAsked() {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      server.serve("/metrics", 200, "text/plain", VLLM_METRICS);
      List<String> lines = new ArrayList<>();
      assertEquals(50_000, capacity(lines, "--engine", server.baseUrl(),
          "--tree-capacity-tokens", "50000"));
      assertEquals(List.of(), lines);
      assertFalse(server.requests().stream().anyMatch(r -> r.startsWith("/metrics")
          || r.startsWith("/get_server_info")), server.requests().toString());
    }
  }

  @Test
  void aServerThatDoesNotAnswerHoldsTheStartOnlyUntilTheDeadline() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      com.sun.net.httpserver.HttpHandler stall = ex -> {
        try { // headers sent, the body never
          ex.sendResponseHeaders(200, 0);
          ex.getResponseBody().write("# HELP".getBytes(StandardCharsets.UTF_8));
          ex.getResponseBody().flush();
          release.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      };
      server.serve("/metrics", stall);
      server.serve("/get_server_info", ex -> {
        try { // no headers
          release.await(60, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      });
      List<String> lines = new ArrayList<>();
      long start = System.nanoTime();
      assertEquals(1L << 20, capacity(lines, "--engine", server.baseUrl()));
      long seconds = TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - start);
      assertTrue(seconds < 30, "the start took " + seconds + " s");
      assertEquals(1, lines.size(), lines.toString());
      assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("--tree-capacity-tokens"),
          lines.get(0));
    } finally {
      release.countDown();
    }
  }

  @Test
  void aSizeBelowTheBlockSizeIsNoneAndOneAboveAMirrorLimitGivenIsBoundedByIt() {
    RouterConfig c = RouterConfig.builder().blockSize(16).build();
    List<String> lines = logged("tree capacity", () -> assertEquals(1L << 20, NodeMain
        .withTreeCapacity(c, new OpenAiCompatibleEngine.CacheSize(8, "max_total_num_tokens at x"),
            "http://e").treeCapacityTokens()));
    assertEquals(1, lines.size(), lines.toString());
    assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("below the block size (16)")
        && lines.get(0).contains("--tree-capacity-tokens"), lines.get(0));

    RouterConfig limited = RouterConfig.builder().mirrorLimitTokens(1L << 24).build();
    AtomicReference<RouterConfig> sized = new AtomicReference<>();
    lines = logged("tree capacity", () -> sized.set(NodeMain.withTreeCapacity(limited,
        new OpenAiCompatibleEngine.CacheSize(1L << 25, "vllm:cache_config_info at x"),
        "http://e")));
    assertEquals(1L << 24, sized.get().treeCapacityTokens());
    assertEquals(1L << 24, sized.get().mirrorLimitTokens());
    assertTrue(lines.get(0).contains("WARN")
        && lines.get(0).contains("--mirror-limit-tokens 16777216"), lines.get(0));

    // an automatic mirror limit follows the size
    RouterConfig auto = NodeMain.withTreeCapacity(RouterConfig.defaults(),
        new OpenAiCompatibleEngine.CacheSize(1L << 25, "x"), "http://e");
    assertEquals(1L << 25, auto.treeCapacityTokens());
    assertEquals(1L << 27, auto.mirrorLimitTokens());
  }
}
