package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.internal.json.Json;
import java.io.ByteArrayOutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Bodies a careless or hostile client sends to the client endpoint, as bytes: each is refused
 * with a 400 that says what is wrong, never repaired into another request.
 */
class ClientEndpointHostileInputTest {

  private static final long NOW = 1_767_225_600L;

  private final StubNode stub = new StubNode();
  private final FakeTokenizer tokenizer = new FakeTokenizer();
  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private ClientEndpoint endpoint;
  private String address;

  private void start() throws Exception {
    when(stub.node.stats()).thenReturn(StatsFixtures.nodeStats());
    endpoint = new ClientEndpoint(stub.node, List::of, 64, Duration.ofSeconds(5), "base",
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        tokenizer, () -> NOW, 7L);
    InetSocketAddress a = endpoint.start("127.0.0.1", 0);
    address = "127.0.0.1:" + a.getPort();
  }

  @AfterEach
  void stop() {
    if (endpoint != null) {
      endpoint.stop();
    }
  }

  private CompletableFuture<HttpResponse<String>> postAsync(String path, byte[] body) {
    return client.sendAsync(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .header("Content-Type", "application/json")
        .POST(HttpRequest.BodyPublishers.ofByteArray(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private HttpResponse<String> post(String path, byte[] body) throws Exception {
    return postAsync(path, body).get(20, TimeUnit.SECONDS);
  }

  /** {@code before}, the raw bytes, then {@code after}: a JSON text with bytes spliced in. */
  private static byte[] spliced(String before, byte[] raw, String after) {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    b.writeBytes(before.getBytes(StandardCharsets.UTF_8));
    b.writeBytes(raw);
    b.writeBytes(after.getBytes(StandardCharsets.UTF_8));
    return b.toByteArray();
  }

  private static Map<?, ?> json(String body) {
    return (Map<?, ?>) Json.parse(body);
  }

  /**
   * JSON must be UTF-8 (RFC 8259, section 8.1): a body that is not (a stray byte, a sequence cut
   * short, an encoded surrogate, an overlong encoding) is refused, not decoded with U+FFFD in
   * place of the bad bytes, which would tokenize and run a prompt the client never sent.
   */
  @Test
  void aBodyThatIsNotUtf8IsRefusedNotRepaired() throws Exception {
    start();
    byte[][] bad = {
        {(byte) 0xFF},                            // never in UTF-8
        {(byte) 0xC3},                            // the first byte of two, cut short
        {(byte) 0xE2, (byte) 0x82},               // two bytes of three
        {(byte) 0xED, (byte) 0xA0, (byte) 0x80},  // a surrogate, encoded (CESU-8)
        {(byte) 0xC0, (byte) 0xAF},               // '/', overlong
        {(byte) 0xF4, (byte) 0x90, (byte) 0x80, (byte) 0x80}}; // above U+10FFFF
    for (byte[] raw : bad) {
      String shown = java.util.HexFormat.of().formatHex(raw);
      HttpResponse<String> text = post(ClientEndpoint.OPENAI_COMPLETIONS,
          spliced("{\"prompt\":\"a", raw, "b\",\"max_tokens\":1}"));
      assertEquals(400, text.statusCode(), shown + " -> " + text.body());
      Map<?, ?> error = (Map<?, ?>) json(text.body()).get("error");
      assertEquals("invalid_json", error.get("code"), text.body());
      assertTrue(((String) error.get("message")).contains("UTF-8"), text.body());

      HttpResponse<String> chat = post(ClientEndpoint.OPENAI_CHAT, spliced(
          "{\"messages\":[{\"role\":\"user\",\"content\":\"", raw, "\"}]}"));
      assertEquals(400, chat.statusCode(), shown + " -> " + chat.body());
      assertEquals("invalid_json", ((Map<?, ?>) json(chat.body()).get("error")).get("code"));

      HttpResponse<String> route = post(ClientEndpoint.COMPLETIONS,
          spliced("{\"prompt\":[1],\"id\":\"q", raw, "\"}"));
      assertEquals(400, route.statusCode(), shown + " -> " + route.body());
      assertTrue(((String) json(route.body()).get("error")).contains("UTF-8"), route.body());
    }
    assertTrue(tokenizer.calls.isEmpty(), "nothing was tokenized");
    assertTrue(stub.requests.isEmpty(), "nothing was submitted");
    assertEquals(0, endpoint.inFlight());

    // well-formed UTF-8 beyond ASCII, and U+FFFD itself, are text like any other
    String prompt = "é€😀\uFFFD";
    CompletableFuture<HttpResponse<String>> ok = postAsync(ClientEndpoint.OPENAI_COMPLETIONS,
        ("{\"prompt\":\"" + prompt + "\",\"max_tokens\":1}").getBytes(StandardCharsets.UTF_8));
    stub.awaitSubmitted(1);
    assertEquals(prompt, tokenizer.calls.get(0).prompt());
    assertArrayEquals(FakeTokenizer.tokens(prompt), stub.requests.get(0).tokens());
    stub.futures.get(0).complete(new InferenceResponse("solo-c1",
        new EngineResult(new int[] {'k'}, "", 5, 0, 1, 1), "solo", false, 1, FallbackCause.NONE,
        StubNode.LOCAL_DECISION));
    assertEquals(200, ok.get(20, TimeUnit.SECONDS).statusCode());
  }

  /**
   * The token route's {@code id} is the client's, which its answer carries back: an id with a
   * control character (a line break that forges a log line where answers are logged, a
   * terminal escape) is refused, as a {@code model} or {@code cache_salt} with one is.
   */
  @Test
  void aRequestIdWithAControlCharacterIsRefused() throws Exception {
    start();
    for (String id : new String[] {"a\\nb", "q\\r", "\\u001b[31mred", "x\\u007f", "\\u0085",
        "\\u0000"}) {
      HttpResponse<String> resp = post(ClientEndpoint.COMPLETIONS,
          ("{\"id\":\"" + id + "\",\"prompt\":[1]}").getBytes(StandardCharsets.UTF_8));
      assertEquals(400, resp.statusCode(), id + " -> " + resp.body());
      String error = (String) json(resp.body()).get("error");
      assertTrue(error.contains("id") && error.contains("control character"), resp.body());
    }
    assertTrue(stub.requests.isEmpty(), "nothing was submitted");
    CompletableFuture<HttpResponse<String>> ok = postAsync(ClientEndpoint.COMPLETIONS,
        "{\"id\":\"é-1 \\u2603\",\"prompt\":[1]}".getBytes(StandardCharsets.UTF_8));
    stub.awaitSubmitted(1);
    stub.futures.get(0).complete(new InferenceResponse(stub.requests.get(0).id(),
        new EngineResult(new int[] {2}, "", 1, 0, 1, 1), "solo", false, 1, FallbackCause.NONE,
        StubNode.LOCAL_DECISION));
    HttpResponse<String> answer = ok.get(20, TimeUnit.SECONDS);
    assertEquals(200, answer.statusCode(), answer.body());
    assertEquals("é-1 ☃", json(answer.body()).get("id"), answer.body());
  }
}
