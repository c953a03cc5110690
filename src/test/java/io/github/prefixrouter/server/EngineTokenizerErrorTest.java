package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.server.PromptTokenizer.TokenizeException;
import io.github.prefixrouter.server.PromptTokenizer.Tokenized;
import java.io.IOException;
import java.net.Proxy;
import java.net.ProxySelector;
import java.net.SocketAddress;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The tokenizer when an {@link Error} is thrown as a tokenization is sent (here by the host's
 * {@link ProxySelector}, which the JDK's HTTP client asks for every request's route). What is
 * thrown, a {@link VirtualMachineError} included, fails the tokenization's future with a
 * {@link TokenizeException} carrying it, and its share of the answer budget is given back.
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
    ProxySelector host = ProxySelector.getDefault();
    ProxySelector.setDefault(new ProxySelector() {
      @Override
      public List<Proxy> select(URI uri) {
        throw thrown;
      }

      @Override
      public void connectFailed(URI uri, SocketAddress sa, IOException e) {}
    });
    try {
      return new EngineTokenizer(URI.create("http://127.0.0.1:1/tokenize"), null,
          Duration.ofSeconds(5), Duration.ofSeconds(5), 1 << 20);
    } finally {
      ProxySelector.setDefault(host);
    }
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
}
