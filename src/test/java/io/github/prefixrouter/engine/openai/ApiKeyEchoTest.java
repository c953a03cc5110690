package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.SecretText;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A server's (or a proxy's) error text that echoes the API key the engine sent never carries it
 * into the error's message, which the client, the forwarding peer and the logs see. Before, the
 * first 300 bytes of the body went into the message as written.
 */
class ApiKeyEchoTest {

  static final String KEY = "sk-Zq9/w\"Xk7pL2mN";
  private static final InferenceRequest REQUEST =
      new InferenceRequest("q", new int[] {1, 2}, GenerationParams.DEFAULT);

  private static void assertNoKey(String message) {
    assertFalse(message.contains(KEY), message);
    // no part of it either, where a cut fell: its end, or its start
    assertFalse(message.contains("Zq9"), message);
    assertFalse(message.contains(KEY.substring(0, 4)), message);
  }

  @ParameterizedTest
  @ValueSource(ints = {400, 401, 403, 404, 429, 500, 502, 503})
  void anErrorAnswerEchoingTheKeyDoesNotShowIt(int status) {
    OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:1").apiKey(KEY).build();
    String[] bodies = {
        "Invalid bearer token " + KEY, // a proxy's plain page
        Json.write(Map.of("error", Map.of("message", "Incorrect API key provided: " + KEY,
            "code", status))), // JSON, the quote escaped
        "{\"detail\":\"bad token sk-Zq9\\/w\\\"Xk7pL2mN\"}", // and the slash too
        "x".repeat(295) + KEY, // the 300-char cut falls inside the key
        "\u00e9".repeat(148) + KEY}; // a cut in bytes would fall inside it too
    for (String body : bodies) {
      EngineException e = assertThrows(EngineException.class,
          () -> engine.parseAnswer(REQUEST, status, body.getBytes(StandardCharsets.UTF_8)));
      assertNoKey(e.getMessage());
      assertTrue(e.getMessage().contains("HTTP " + status), e.getMessage());
    }
    EngineException e = assertThrows(EngineException.class, () -> engine.parseAnswer(REQUEST,
        status, ("token " + KEY + " refused").getBytes(StandardCharsets.UTF_8)));
    assertTrue(e.getMessage().contains("token " + SecretText.MASK + " refused"), e.getMessage());
  }

  /**
   * A key as long as a JWT bearer token is taken out whole too when the body's bytes past the
   * 300 characters shown are many: characters of three UTF-8 bytes before it, so that the key
   * starts within the characters shown and ends far past their 900 bytes.
   */
  @ParameterizedTest
  @ValueSource(ints = {401, 500})
  void aLongKeyEchoedAfterWideCharactersDoesNotShow(int status) {
    String key = "Zq9" + "Xk7pL2mN".repeat(75);
    OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:1").apiKey(key).build();
    String body = "\u20ac".repeat(290) + key + " refused";
    EngineException e = assertThrows(EngineException.class,
        () -> engine.parseAnswer(REQUEST, status, body.getBytes(StandardCharsets.UTF_8)));
    assertFalse(e.getMessage().contains("Zq9"), e.getMessage()); // no part of it
    assertTrue(e.getMessage().contains("\u20ac".repeat(290) + SecretText.MASK.substring(0, 10)),
        e.getMessage());
  }

  @Test
  void aStreamedErrorEchoingTheKeyDoesNotShowIt() {
    for (String data : new String[] {
        Json.write(Map.of("error", Map.of("message", "key " + KEY + " revoked"))),
        "upstream refused " + KEY,
        "x".repeat(295) + KEY}) { // the 300-char cut falls inside the key
      CompletionStream s = new CompletionStream(REQUEST, 1 << 20, KEY, (tokens, text) -> { });
      EngineException e = assertThrows(EngineException.class, () -> s.feed(ByteBuffer.wrap(
          ("event: error\ndata: " + data + "\n\n").getBytes(StandardCharsets.UTF_8))));
      assertNoKey(e.getMessage());
      assertTrue(e.getMessage().contains(SecretText.MASK.substring(0, 4)), e.getMessage());
    }
  }
}
