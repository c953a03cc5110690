package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.wire.BodyBudget;
import io.github.prefixrouter.spi.EngineException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The server's failures read the same from a stream and from a plain answer. */
class CompletionStreamErrorTextTest {

  /** The server's error message is cut at 300 chars: never between the halves of a pair. */
  @Test
  void anErrorMessageIsNotCutInsideASurrogatePair() {
    CompletionStream s = new CompletionStream(
        new InferenceRequest("q", new int[] {1}, GenerationParams.DEFAULT), 1 << 20, null,
        (tokens, text) -> { });
    String message = "a".repeat(299) + "\uD83D\uDE00 and more";
    byte[] event = ("event: error\ndata: " + Json.write(Map.of("error", Map.of("message", message)))
        + "\n\n").getBytes(StandardCharsets.UTF_8);
    EngineException e = assertThrows(EngineException.class, () -> s.feed(ByteBuffer.wrap(event)));
    assertDoesNotThrow(() -> Json.write(Map.of("message", e.getMessage())),
        "the message ends in half a pair");
  }

  /**
   * A generation the server ended with finish_reason "abort" or "error" fails a streamed request
   * (retryable), and the same answer to a plain request the same way.
   */
  @ParameterizedTest
  @ValueSource(strings = {"abort", "error"})
  void anAbortedGenerationFailsAPlainRequestAsItFailsAStream(String reason) {
    OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:1").build();
    InferenceRequest r = new InferenceRequest("q", new int[] {1, 2}, GenerationParams.DEFAULT);
    String chunk = "{\"choices\":[{\"index\":0,\"text\":\"par\",\"token_ids\":[5],"
        + "\"finish_reason\":\"" + reason + "\"}],\"usage\":{\"prompt_tokens\":2}}";
    CompletionStream s = new CompletionStream(r, 1 << 20, null, (tokens, text) -> { });
    EngineException streamed = assertThrows(EngineException.class, () -> s.feed(ByteBuffer.wrap(
        ("data: " + chunk + "\n\n").getBytes(StandardCharsets.UTF_8))), "streamed");
    assertTrue(streamed.retryable(), streamed.getMessage());
    assertTrue(streamed.getMessage().contains("finish_reason " + reason), streamed.getMessage());
    EngineException plain = assertThrows(EngineException.class,
        () -> engine.parseAnswer(r, 200, chunk.getBytes(StandardCharsets.UTF_8)), "plain");
    assertTrue(plain.retryable(), plain.getMessage());
    assertTrue(plain.getMessage().contains("finish_reason " + reason), plain.getMessage());
  }

  /**
   * Token ids are integers: one written with a fraction or an exponent (1.0, 1e0, even when its
   * value is whole), with a fraction that is not whole, or out of int range makes the answer
   * misshapen (retryable), streamed or plain, rather than being read as some integer.
   */
  @Test
  void tokenIdsThatAreNotIntegerLiteralsInIntRangeAreMisshapen() {
    OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:1").build();
    InferenceRequest r = new InferenceRequest("q", new int[] {1, 2},
        new GenerationParams(5, 0.0, 1.0, 0L));
    for (String ids : new String[] {"[1.0]", "[1e0]", "[1E2]", "[7, 2.0]", "[1.5]",
        "[2147483648]", "[-2147483649]", "[1e400]"}) {
      String chunk = "{\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":" + ids
          + ",\"finish_reason\":\"length\"}]}";
      CompletionStream s = new CompletionStream(r, 1 << 20, null, (tokens, text) -> { });
      EngineException streamed = assertThrows(EngineException.class, () -> s.feed(ByteBuffer.wrap(
          ("data: " + chunk + "\n\ndata: [DONE]\n\n").getBytes(StandardCharsets.UTF_8))), ids);
      assertTrue(streamed.retryable(), ids);
      EngineException plain = assertThrows(EngineException.class,
          () -> engine.parseAnswer(r, 200, chunk.getBytes(StandardCharsets.UTF_8)), ids);
      assertTrue(plain.retryable(), ids);
    }
    // integer literals in int range, -0 among them, are read as they are
    String chunk = "{\"choices\":[{\"index\":0,\"text\":\"x\",\"token_ids\":"
        + "[-0,2147483647,9]}]}";
    assertArrayEquals(new int[] {0, Integer.MAX_VALUE, 9},
        engine.parseAnswer(r, 200, chunk.getBytes(StandardCharsets.UTF_8)).outputTokens());
  }

  /**
   * An error event whose parse cannot get its heap from the answer budget fails the stream with
   * the budget's refusal (the adapter's {@code AnswerBudgetException}: the node's shortage, tried
   * on a peer, not counted as its engine failing), as a chunk's would. It was taken for an event
   * that is not JSON: a plain failure of the server, its code 503 (overloaded) lost, and counted
   * towards the engine's failures in a row.
   */
  @Test
  void anErrorEventWhoseParseTheBudgetRefusesFailsWithTheRefusal() {
    BodyBudget budget = new BodyBudget(1 << 20, Duration.ZERO, () -> { });
    BodyBudget.Share share = budget.share();
    CompletionStream s = new CompletionStream(
        new InferenceRequest("q", new int[] {1}, GenerationParams.DEFAULT), 1 << 20, null,
        (tokens, text) -> { }, share);
    String data = Json.write(Map.of("error", Map.of("message", "overloaded", "code", 503)));
    s.feed(ByteBuffer.wrap(("event: error\ndata: " + data + "\n")
        .getBytes(StandardCharsets.UTF_8)));
    // the rest of the budget is held elsewhere but for 16 KiB: the blank line ending the event
    // needs none of it, its parse 64 KiB
    BodyBudget.Share others = budget.share();
    others.take(budget.available() - (16 << 10));
    BodyBudget.Refused refused = assertThrows(BodyBudget.Refused.class,
        () -> s.feed(ByteBuffer.wrap("\n".getBytes(StandardCharsets.UTF_8))),
        "the error event was read as a failure of the server, not as the budget's refusal");
    assertTrue(refused.getMessage() != null);
  }
}
