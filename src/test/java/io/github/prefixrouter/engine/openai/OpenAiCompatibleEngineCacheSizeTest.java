package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link OpenAiCompatibleEngine#cacheSize}: the KV-cache size vLLM's {@code /metrics} or
 * SGLang's {@code /get_server_info} publishes, or none, with what was found instead, for every
 * answer it cannot take; within its wait, whatever the server does.
 */
class OpenAiCompatibleEngineCacheSizeTest {

  private static final Duration WAIT = Duration.ofSeconds(5);

  /** A sample of vLLM's cache configuration with these labels. */
  private static String vllm(String labels) {
    return "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        + "# TYPE vllm:cache_config_info gauge\n"
        + "vllm:cache_config_info{" + labels + "} 1.0\n";
  }

  private static final String OTHER_METRICS =
      "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
      + "# TYPE process_resident_memory_bytes gauge\n"
      + "process_resident_memory_bytes 1.2345e+09\n"
      + "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n"
      // a metric whose name begins as the one read
      + "vllm:cache_config_info_created{block_size=\"1\",num_gpu_blocks=\"1\"} 1.7e+09\n";

  private static OpenAiCompatibleEngine.CacheSize size(FakeOpenAiServer server) {
    return size(server, null);
  }

  private static OpenAiCompatibleEngine.CacheSize size(FakeOpenAiServer server, String apiKey) {
    try (OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
        .baseUrl(server.baseUrl()).apiKey(apiKey).build()) {
      return engine.cacheSize(WAIT).get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new AssertionError(e);
    }
  }

  private static FakeOpenAiServer server() {
    return FakeOpenAiServer.start(FakeOpenAiServer.ECHO);
  }

  @Test
  void vllmsBlockSizeTimesItsBlocksInAnyLabelOrder() {
    try (FakeOpenAiServer server = server()) {
      server.serve("/metrics", 200, "text/plain; version=0.0.4", OTHER_METRICS
          + vllm("gpu_memory_utilization=\"0.9\",num_gpu_blocks_override=\"None\","
              + "num_gpu_blocks=\"27222\", cache_dtype = \"a \\\"quoted\\\", value\","
              + "engine=\"0\",block_size=\"16\",num_cpu_blocks=\"None\","));
      OpenAiCompatibleEngine.CacheSize s = size(server);
      assertEquals(16L * 27222, s.tokens(), s.detail());
      assertEquals("vllm:cache_config_info at " + server.baseUrl() + "/metrics (block_size 16 x "
          + "num_gpu_blocks 27222)", s.detail());
    }
  }

  @Test
  void severalEnginesBehindVllmAddUp() {
    try (FakeOpenAiServer server = server()) {
      server.serve("/metrics", 200, "text/plain", vllm("block_size=\"16\",engine=\"0\","
          + "num_gpu_blocks=\"1000\"") + "vllm:cache_config_info{block_size=\"16\",engine=\"1\","
          + "num_gpu_blocks=\"1000\"} 1.0\n");
      OpenAiCompatibleEngine.CacheSize s = size(server);
      assertEquals(32_000, s.tokens(), s.detail());
      assertTrue(s.detail().contains("over 2 samples"), s.detail());
    }
  }

  @Test
  void sglangsMaxTotalNumTokens() {
    try (FakeOpenAiServer server = server()) {
      server.requireApiKey("sk-1"); // SGLang's --api-key guards it
      server.serve("/metrics", 404, "text/plain", ""); // SGLang without --enable-metrics
      server.serve("/get_server_info", 200, "application/json", "{\"max_total_tokens\":null,"
          + "\"internal_states\":[{\"max_total_num_tokens\":5}],\"max_total_num_tokens\":562784}");
      OpenAiCompatibleEngine.CacheSize s = size(server, "sk-1");
      assertEquals(562_784, s.tokens(), s.detail());
      assertEquals("max_total_num_tokens at " + server.baseUrl() + "/get_server_info",
          s.detail());
      assertTrue(server.requests().contains("/get_server_info ok"), server.requests().toString());
      assertTrue(server.requests().contains("/metrics ok"), server.requests().toString());
    }
  }

  /** A label's value shown in the refusal is cut at 40 chars, never inside a surrogate pair. */
  @Test
  void aValueShownCutIsNeverCutInsideASurrogatePair() {
    String value = "9".repeat(39) + "\uD83D\uDE00" + "9".repeat(10);
    CacheSizeAnswers.Refused e = assertThrows(CacheSizeAnswers.Refused.class,
        () -> CacheSizeAnswers.fromPrometheus(
            vllm("block_size=\"" + value + "\",num_gpu_blocks=\"100\""), false));
    assertTrue(e.getMessage().endsWith("block_size is not a whole number from 1 up: \""
        + "9".repeat(39) + "...\""), e.getMessage());
  }

  @Test
  void neitherEndpointGivesNone() {
    try (FakeOpenAiServer server = server()) {
      OpenAiCompatibleEngine.CacheSize s = size(server);
      assertEquals(0, s.tokens());
      assertEquals("GET " + server.baseUrl() + "/metrics: HTTP 404; GET " + server.baseUrl()
          + "/get_server_info: HTTP 404", s.detail());
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "block_size=\"16\",num_gpu_blocks=\"None\"|label num_gpu_blocks is not a whole number",
      "block_size=\"16\",num_gpu_blocks=\"0\"|label num_gpu_blocks is not a whole number",
      "block_size=\"16\",num_gpu_blocks=\"-5\"|label num_gpu_blocks is not a whole number",
      "block_size=\"16\",num_gpu_blocks=\"1e5\"|label num_gpu_blocks is not a whole number",
      "block_size=\"16\",num_gpu_blocks=\"27222.0\"|label num_gpu_blocks is not a whole number",
      "block_size=\"16\",num_gpu_blocks=\"99999999999999999999\"|label num_gpu_blocks is not",
      "block_size=\"0\",num_gpu_blocks=\"100\"|label block_size is not a whole number",
      "block_size=\"16\",num_gpu_blocks=\"9223372036854775807\"|is above 68719476736 tokens",
      "block_size=\"65536\",num_gpu_blocks=\"1048577\"|is above 68719476736 tokens",
      "block_size=\"16\"|has no label num_gpu_blocks",
      "num_gpu_blocks=\"100\"|has no label block_size",
      "block_size=\"16\",num_gpu_blocks=\"100|a malformed vllm:cache_config_info line",
      "block_size=16,num_gpu_blocks=\"100\"|a malformed vllm:cache_config_info line",
      "block_size=\"16\",block_size=\"16\",num_gpu_blocks=\"100\"|the label block_size twice",
  })
  void aVllmSampleItCannotTakeGivesNone(String labelsAndWhy) {
    String[] lw = labelsAndWhy.split("\\|");
    try (FakeOpenAiServer server = server()) {
      server.serve("/metrics", 200, "text/plain", OTHER_METRICS + vllm(lw[0]));
      OpenAiCompatibleEngine.CacheSize s = size(server);
      assertEquals(0, s.tokens(), s.detail());
      assertTrue(s.detail().startsWith("GET " + server.baseUrl() + "/metrics: ")
          && s.detail().contains(lw[1]) && s.detail().endsWith("/get_server_info: HTTP 404"),
          s.detail());
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "<html><body><h1>502 Bad Gateway</h1></body></html>",
      "vllm:cache_config_info 1.0",
      "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100\"}",
      "",
  })
  void aMetricsPageWithoutAUsableSampleGivesNone(String page) {
    try (FakeOpenAiServer server = server()) {
      server.serve("/metrics", 200, "text/html", page);
      OpenAiCompatibleEngine.CacheSize s = size(server);
      assertEquals(0, s.tokens(), s.detail());
      assertTrue(s.detail().contains("vllm:cache_config_info"), s.detail());
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "{\"max_total_num_tokens\":0}|not a whole number from 1 up: 0",
      "{\"max_total_num_tokens\":-1}|not a whole number from 1 up: -1",
      "{\"max_total_num_tokens\":\"562784\"}|not a whole number from 1 up: a string",
      "{\"max_total_num_tokens\":1.5}|not a whole number from 1 up: 1.5",
      "{\"max_total_num_tokens\":99999999999999999999}|not a whole number from 1 up",
      "{\"max_total_num_tokens\":68719476737}|is above 68719476736 tokens",
      "{\"max_total_num_tokens\":null}|no max_total_num_tokens",
      "{\"version\":\"0.5.4\"}|no max_total_num_tokens",
      "[562784]|not a JSON object",
      "<html><body>Internal Server Error</body></html>|not JSON",
  })
  void anSglangAnswerItCannotTakeGivesNone(String bodyAndWhy) {
    String[] bw = bodyAndWhy.split("\\|");
    try (FakeOpenAiServer server = server()) {
      server.serve("/get_server_info", 200, "application/json", bw[0]);
      OpenAiCompatibleEngine.CacheSize s = size(server);
      assertEquals(0, s.tokens(), s.detail());
      assertTrue(s.detail().contains("/get_server_info: ") && s.detail().contains(bw[1]),
          s.detail());
    }
  }

  @Test
  void aMetricsPageOfNoEndIsReadOnlyToItsFirstFourMebibytes() {
    try (FakeOpenAiServer server = server()) {
      byte[] line = "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n"
          .getBytes(StandardCharsets.UTF_8);
      server.serve("/metrics", ex -> {
        ex.sendResponseHeaders(200, 0);
        OutputStream o = ex.getResponseBody();
        try {
          for (long sent = 0; sent < (1L << 32); sent += line.length) { // until cut off
            o.write(line);
          }
        } catch (IOException cutOff) {
          // the reader has what it reads
        }
      });
      OpenAiCompatibleEngine.CacheSize s = size(server);
      assertEquals(0, s.tokens(), s.detail());
      assertTrue(s.detail().contains("no vllm:cache_config_info in its first 4194304 bytes"),
          s.detail());
    }
  }

  @Test
  void aSampleWithinTheFirstFourMebibytesOfALargerPageCounts() {
    try (FakeOpenAiServer server = server()) {
      String filler = "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 0.0\n"
          .repeat(100_000); // 5.7 MB
      server.serve("/metrics", 200, "text/plain", vllm("block_size=\"32\",num_gpu_blocks=\"4\"")
          + filler);
      OpenAiCompatibleEngine.CacheSize s = size(server);
      assertEquals(128, s.tokens(), s.detail());
    }
  }

  @Test
  void aServerThatDoesNotAnswerIsGivenUpAtTheWait() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    try (FakeOpenAiServer server = server();
        OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
            .baseUrl(server.baseUrl()).build()) {
      server.serve("/metrics", ex -> { // headers and a part of the body, then nothing
        ex.sendResponseHeaders(200, 0);
        ex.getResponseBody().write("# HELP vllm:cache_config_info".getBytes(
            StandardCharsets.UTF_8));
        ex.getResponseBody().flush();
        await(release);
      });
      server.serve("/get_server_info", ex -> await(release)); // no headers
      long start = System.nanoTime();
      OpenAiCompatibleEngine.CacheSize s =
          engine.cacheSize(Duration.ofMillis(300)).get(30, TimeUnit.SECONDS);
      long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
      assertEquals(0, s.tokens(), s.detail());
      assertEquals("GET " + server.baseUrl() + "/metrics: no answer within 300 ms; GET "
          + server.baseUrl() + "/get_server_info: no answer within 300 ms", s.detail());
      assertTrue(took < 10_000, took + " ms");
      release.countDown();
    } finally {
      release.countDown();
    }
  }

  private static void await(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Test
  void aClosedEngineAsksNothing() throws Exception {
    try (FakeOpenAiServer server = server()) {
      OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
          .baseUrl(server.baseUrl()).build();
      engine.close();
      assertEquals(new OpenAiCompatibleEngine.CacheSize(0, "the engine is closed"),
          engine.cacheSize(WAIT).get(30, TimeUnit.SECONDS));
      assertEquals(java.util.List.of(), server.requests());
      assertThrows(NullPointerException.class, () -> engine.cacheSize(null));
      assertThrows(IllegalArgumentException.class,
          () -> new OpenAiCompatibleEngine.CacheSize(-1, ""));
    }
  }
}
