package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.PromptTokenizer.TokenizeException;
import io.github.prefixrouter.server.PromptTokenizer.Tokenized;
import io.github.prefixrouter.testing.AnsweringHttpClient;
import io.github.prefixrouter.testing.ThrowingProxySelector;
import java.net.ProxySelector;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.mockito.ArgumentMatchers;
import org.mockito.MockedStatic;
import org.mockito.Mockito;

/**
 * The tokenizer when an {@link Error} is thrown as a tokenization is sent (here by the host's
 * {@link ProxySelector}, which the JDK's HTTP client asks for every request's route) or as its
 * answer is parsed. What is thrown, a {@link VirtualMachineError} included, fails the
 * tokenization's future at once with a {@link TokenizeException} carrying it, and its share of
 * the answer budget is given back.
 */
class EngineTokenizerErrorTest {

  /** What is thrown: an Error, and VirtualMachineErrors. */
  private static List<Error> errors() {
    return List.of(new InternalError("proxy configuration broken"),
        new OutOfMemoryError("Java heap space"), new StackOverflowError());
  }

  /**
   * A tokenizer whose HTTP client asks a proxy selector that throws {@code thrown}: the client
   * takes the host's default selector as it is built, which is put back right after.
   */
  private static EngineTokenizer tokenizerWhoseProxySelectorThrows(Error thrown) {
    return ThrowingProxySelector.asDefault(thrown, () -> new EngineTokenizer(
        URI.create("http://127.0.0.1:1/tokenize"), null, Duration.ofSeconds(5),
        Duration.ofSeconds(5), 1 << 20));
  }

  /**
   * A tokenization, of a text prompt or a conversation, whose sending the HTTP client fails
   * with an {@link Error} fails its future with a {@link TokenizeException} carrying it, the
   * tokenizer's fault: the tokenizer caught only a RuntimeException there, so the {@link Error}
   * was thrown out of {@code tokenize} (not the future's {@link TokenizeException}
   * {@link PromptTokenizer} promises), its share of the answer budget never closed.
   */
  @Test
  void anErrorAsATokenizationIsSentFailsItsFuture() throws Exception {
    for (Error thrown : errors()) {
      EngineTokenizer t = tokenizerWhoseProxySelectorThrows(thrown);
      try {
        Map<String, Supplier<CompletableFuture<Tokenized>>> calls = Map.of(
            "a text prompt", () -> t.tokenize("m", "hello"),
            "a conversation", () -> t.tokenizeChat("m",
                List.of(Map.of("role", "user", "content", "hello")), Map.of()));
        for (Map.Entry<String, Supplier<CompletableFuture<Tokenized>>> call : calls.entrySet()) {
          String what = call.getKey() + " with " + thrown;
          CompletableFuture<Tokenized> f;
          try {
            f = call.getValue().get();
          } catch (Throwable e) {
            throw new AssertionError("tokenizing threw " + e + " instead of failing its future, "
                + "for " + what, e);
          }
          ExecutionException failed =
              assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS), what);
          TokenizeException te = assertInstanceOf(TokenizeException.class, failed.getCause(), what);
          assertSame(thrown, te.getCause(), what + ": " + te);
          assertFalse(te.invalidRequest(), what + ": the failure is the tokenizer's: " + te);
          assertEquals(0, t.stats().answerBudgetHeldBytes(), what + ": " + t.stats());
        }
      } finally {
        t.close();
      }
    }
  }

  /**
   * A tokenization whose answer's parse throws an {@link Error} (the heap running out as a
   * large answer is parsed) fails at once with a {@link TokenizeException} carrying it, once,
   * the tokenizer's fault, and gives back its share of the answer budget: only a
   * TokenizeException was caught there, so the {@link Error} was lost in the HTTP client's
   * future and the tokenization ended only at the tokenizer's timeout, as no answer (a 504 at
   * the client port), holding its share until then.
   */
  @Test
  void anErrorAsAnAnswerIsParsedFailsItAtOnce() throws Exception {
    OutOfMemoryError thrown = new OutOfMemoryError("Java heap space");
    EngineTokenizer t = AnsweringHttpClient.building(200, "application/json",
        "{\"tokens\":[1,2,3]}", () -> new EngineTokenizer(
            URI.create("http://127.0.0.1:1/tokenize"), null, Duration.ofSeconds(3),
            Duration.ofSeconds(3), 1 << 20));
    try {
      CompletableFuture<Tokenized> f;
      AtomicInteger completions = new AtomicInteger();
      // thread-local: the answer is handled on this thread (see AnsweringHttpClient)
      try (MockedStatic<Json> json = Mockito.mockStatic(Json.class, Mockito.CALLS_REAL_METHODS)) {
        json.when(() -> Json.parse(ArgumentMatchers.anyString(), ArgumentMatchers.anyInt(),
            ArgumentMatchers.anyInt(), ArgumentMatchers.anyLong(), ArgumentMatchers.any()))
            .thenThrow(thrown);
        f = t.tokenize("m", "hello");
        f.whenComplete((tokens, e) -> completions.incrementAndGet());
      }
      ExecutionException failed = assertThrows(ExecutionException.class,
          () -> f.get(10, TimeUnit.SECONDS), "no answer within 10 s");
      TokenizeException te = assertInstanceOf(TokenizeException.class, failed.getCause());
      assertFalse(te.timedOut(), "the tokenization ended only at its timeout, as no answer: "
          + te);
      assertSame(thrown, te.getCause(), "the failure does not carry the Error: " + te);
      assertFalse(te.invalidRequest(), "the failure is the tokenizer's: " + te);
      assertEquals(1, completions.get(), "completed more than once");
      assertEquals(0, t.stats().answerBudgetHeldBytes(), "its share is held: " + t.stats());
    } finally {
      t.close();
    }
  }
}
