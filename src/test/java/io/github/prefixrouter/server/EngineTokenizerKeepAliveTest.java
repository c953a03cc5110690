package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.testing.RawConnections;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The tokenizer against a server that closes a pooled connection as idle just as the next
 * {@code POST /tokenize} is written to it (uvicorn, which serves vLLM and SGLang, closes a
 * connection idle for 5 s; the JDK client keeps it 20 s): the server never saw that request,
 * which is sent again on a new connection instead of failing as the tokenizer's fault.
 */
class EngineTokenizerKeepAliveTest {

  private static final String ANSWER = "{\"tokens\":[1,2,3],\"count\":3}";

  @ParameterizedTest(name = "reset: {0}")
  @ValueSource(booleans = {false, true})
  void aTokenizationTheServerClosedItsPooledConnectionOnIsSentAgain(boolean reset)
      throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 4, InetAddress.getLoopbackAddress())) {
      EngineTokenizer tokenizer = tokenizerFor(raw);
      try {
        raw.setSoTimeout(10_000);
        CompletableFuture<PromptTokenizer.Tokenized> first = tokenizer.tokenize("m", "hi");
        try (Socket conn = raw.accept()) {
          RawConnections.readRequest(conn);
          answer(conn);
          assertArrayEquals(new int[] {1, 2, 3}, first.get(20, TimeUnit.SECONDS).tokens());
          CompletableFuture<PromptTokenizer.Tokenized> second = tokenizer.tokenize("m", "ho");
          RawConnections.readRequest(conn);
          if (reset) {
            conn.setSoLinger(true, 0);
          }
          conn.close();
          try (Socket again = RawConnections.acceptSentAgain(raw, second, "tokenization")) {
            RawConnections.readRequest(again);
            answer(again);
            assertArrayEquals(new int[] {1, 2, 3}, second.get(20, TimeUnit.SECONDS).tokens());
          }
        }
        assertEquals(1, tokenizer.stats().connectionRetries(),
            "the second try is counted: " + tokenizer.stats());
      } finally {
        tokenizer.close();
      }
    }
  }

  /**
   * A server that closes every connection as a tokenization arrives, without answering (one
   * that crashes as it takes each request): the tokenization is sent again once, not more, and
   * then fails as the tokenizer's fault; the second try is counted.
   */
  @Test
  void aTokenizationIsSentAgainOnlyOnce() throws Exception {
    try (ServerSocket raw = new ServerSocket(0, 4, InetAddress.getLoopbackAddress())) {
      EngineTokenizer tokenizer = tokenizerFor(raw);
      try {
        raw.setSoTimeout(10_000);
        CompletableFuture<PromptTokenizer.Tokenized> f = tokenizer.tokenize("m", "hi");
        for (int i = 0; i < 2; i++) {
          try (Socket conn = raw.accept()) {
            RawConnections.readRequest(conn);
          }
        }
        ExecutionException x = assertThrows(ExecutionException.class,
            () -> f.get(20, TimeUnit.SECONDS));
        PromptTokenizer.TokenizeException err =
            assertInstanceOf(PromptTokenizer.TokenizeException.class, x.getCause());
        assertFalse(err.invalidRequest(), err.toString());
        raw.setSoTimeout(1_000);
        assertThrows(SocketTimeoutException.class, raw::accept, "a third try");
        assertEquals(1, tokenizer.stats().connectionRetries(), tokenizer.stats().toString());
      } finally {
        tokenizer.close();
      }
    }
  }

  /**
   * A tokenizer that posts to {@code raw}'s port without an API key: 2 s to connect, 30 s for
   * an answer, and answers of 1 MiB at most.
   */
  private static EngineTokenizer tokenizerFor(ServerSocket raw) {
    return new EngineTokenizer(
        URI.create("http://127.0.0.1:" + raw.getLocalPort() + "/tokenize"), null,
        Duration.ofSeconds(2), Duration.ofSeconds(30), 1 << 20);
  }

  private static void answer(Socket conn) throws IOException {
    byte[] b = ANSWER.getBytes(StandardCharsets.UTF_8);
    conn.getOutputStream().write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + "Content-Length: " + b.length + "\r\n\r\n" + ANSWER).getBytes(StandardCharsets.UTF_8));
    conn.getOutputStream().flush();
  }
}
