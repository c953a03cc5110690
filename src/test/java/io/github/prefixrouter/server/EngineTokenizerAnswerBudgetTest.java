package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.HoldingAnswerServer.heapInUse;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.internal.wire.JdkHttpServers;
import io.github.prefixrouter.server.PromptTokenizer.TokenizeException;
import io.github.prefixrouter.server.PromptTokenizer.Tokenized;
import io.github.prefixrouter.testing.HoldingAnswerServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The heap that the tokenizer's answers being read and parsed hold at once: its answer budget. */
class EngineTokenizerAnswerBudgetTest {

  /** The tokenizer's cap on an answer here, and the length of the answers held open. */
  private static final int BODY = 8 << 20;
  /** The budget documented for that cap: 16 MiB and 9 bytes per byte of it, 88 MiB. */
  private static final long BUDGET = (16L << 20) + 9L * BODY;

  /**
   * Many tokenize answers read at once hold at most the tokenizer's answer budget together: 20
   * answers of nearly 8 MiB each (the budget holds 11 at most), held open by their server, with a
   * cap of 8 MiB. Each answer was capped on its own only, so the tokenizer read them all into its
   * heap at once (207 MB of heap; with the node's 64 MiB cap and 4,096 requests in flight, far
   * more); now the answers beyond
   * the budget wait, and fail as this node's shortage of heap, not the tokenizer's fault (a 503
   * with {@code Retry-After} at the client port), once no other answer has given any back for
   * 1 s, their connections closed, and the budget is whole again
   * once the others end. (What the kernel's socket buffers hold of the bodies not read is no
   * heap; so the heap is measured, with a margin for the HTTP client's own buffers far below
   * what the answers held before.)
   */
  @Test
  void answersBeingReadAtOnceHoldAtMostTheBudgetTogether() throws Exception {
    int n = 20;
    try (HoldingAnswerServer server = new HoldingAnswerServer(BODY, false)) {
      EngineTokenizer t = new EngineTokenizer(server.uri("/tokenize"), null,
          Duration.ofSeconds(5), Duration.ofSeconds(120), BODY);
      try {
        long before = heapInUse();
        List<CompletableFuture<Tokenized>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          fs.add(t.tokenize("m", "prompt " + i));
        }
        // the tokenizer's few threads wait for their shares in turn, so this takes a while
        server.awaitSettled(fs, () -> t.stats().answerBudgetHeldBytes(),
            Duration.ofSeconds(100));
        long held = heapInUse() - before;
        // and the HTTP client's own buffers, under 1 MiB a connection
        assertTrue(held <= BUDGET + (48 << 20), n + " tokenize answers of " + (BODY - 1)
            + " bytes held " + held + " bytes of heap at once, with a budget of " + BUDGET);
        long refused = 0;
        for (CompletableFuture<Tokenized> f : fs) {
          if (f.isDone()) {
            refused++;
            ExecutionException x = assertThrows(ExecutionException.class, f::get);
            TokenizeException te = assertInstanceOf(TokenizeException.class, x.getCause());
            assertFalse(te.invalidRequest(), te.getMessage());
            assertFalse(te.timedOut(), te.getMessage());
            assertTrue(te.budgetRefused(), "a refusal of the answer budget does not say so: "
                + te.getMessage());
            assertTrue(te.getMessage().contains("could not get its share"), te.getMessage());
          }
        }
        assertTrue(refused > 0, "every answer got its share");
        assertTrue(refused < n, "no answer got its share");
      } finally {
        t.close();
      }
      assertEquals(BUDGET, t.answerBudgetAvailable(), "the budget is whole once all ended");
    }
  }

  /** What the fake server answers: status, body, and whether with a Content-Length. */
  private record Answer(int status, String body, boolean withLength) {}

  /** A fake {@code /tokenize} answering what {@code answer} holds. */
  private static HttpServer fakeServer(AtomicReference<Answer> answer) throws IOException {
    HttpServer server = JdkHttpServers.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.setExecutor(Executors.newCachedThreadPool(r -> {
      Thread th = new Thread(r, "fake-tokenize-server");
      th.setDaemon(true);
      return th;
    }));
    server.createContext("/tokenize", ex -> {
      try (ex) {
        ex.getRequestBody().readAllBytes();
        Answer a = answer.get();
        byte[] b = a.body().getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().add("Content-Type", "application/json");
        ex.sendResponseHeaders(a.status(), a.withLength() ? b.length : 0);
        ex.getResponseBody().write(b);
      }
    });
    server.start();
    return server;
  }

  private static URI tokenizeUri(HttpServer server) {
    return URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/tokenize");
  }

  /** The answer of {@code n} token ids of one digit: 6 bytes of parse a character, the most. */
  private static String ones(int n) {
    return "{\"tokens\":[" + "1,".repeat(n - 1) + "1]}";
  }

  /**
   * One answer at its limits alone always gets its share: an answer of token ids of one digit
   * (the ids that take the most heap a character once parsed) of nearly the cap, 1 MiB here,
   * with its Content-Length and without one (read in steps up to the cap, then copied to its
   * length), at the budget for that cap (25 MiB).
   */
  @Test
  void oneAnswerAtTheCapAloneGetsItsShare() throws Exception {
    int cap = 1 << 20;
    int ids = (cap - 16) / 2;
    AtomicReference<Answer> answer = new AtomicReference<>();
    HttpServer server = fakeServer(answer);
    EngineTokenizer t = new EngineTokenizer(tokenizeUri(server), null, Duration.ofSeconds(5),
        Duration.ofSeconds(20), cap);
    try {
      for (boolean withLength : new boolean[] {true, false}) {
        answer.set(new Answer(200, ones(ids), withLength));
        assertTrue(ones(ids).length() <= cap, "within the cap");
        Tokenized tokens = t.tokenize("m", "x").get(20, TimeUnit.SECONDS);
        assertEquals(ids, tokens.tokens().length, "with a Content-Length: " + withLength);
        assertEquals((16L << 20) + 9L * cap, t.answerBudgetAvailable(),
            "the budget is whole once the answer is read, with a Content-Length: " + withLength);
      }
    } finally {
      t.close();
      server.stop(0);
    }
  }

  /**
   * A tokenization gives its share back however it ends: tokens; a failure (an error answer, the
   * request's fault or the server's, one that is not JSON, one above the cap with a
   * Content-Length or without one, one of tiny values refused as it is parsed); the timeout,
   * while its body is read; its caller cancelling its future (as the client endpoint does at its
   * own timeout), while its body is read, which also closes its connection (it used to stay open
   * to the tokenizer's own timeout); {@code close()}, while its body is read.
   */
  @Test
  void aTokenizationGivesItsShareBackHoweverItEnds() throws Exception {
    int cap = 1 << 20;
    long all = (16L << 20) + 9L * cap;
    AtomicReference<Answer> answer = new AtomicReference<>();
    HttpServer server = fakeServer(answer);
    EngineTokenizer t = new EngineTokenizer(tokenizeUri(server), null, Duration.ofSeconds(5),
        Duration.ofSeconds(20), cap);
    try {
      answer.set(new Answer(200, "{\"tokens\":[7,8,9]}", true));
      assertEquals(3, t.tokenize("m", "x").get(20, TimeUnit.SECONDS).tokens().length);
      assertEquals(all, t.answerBudgetAvailable(), "after tokens");
      String tooLarge = ones(cap);
      String tiny = "{\"tokens\":[1],\"pad\":[" + "{},".repeat(cap / 4) + "{}]}";
      for (Answer a : List.of(
          new Answer(500, "{\"error\":{\"message\":\"down\"}}", true),
          new Answer(400, "{\"error\":{\"message\":\"unknown role\"}}", true),
          new Answer(200, "not json", true),
          new Answer(200, tooLarge, true),
          new Answer(200, tooLarge, false),
          new Answer(200, tiny, true))) {
        answer.set(a);
        ExecutionException x = assertThrows(ExecutionException.class,
            () -> t.tokenize("m", "x").get(20, TimeUnit.SECONDS));
        TokenizeException te = assertInstanceOf(TokenizeException.class, x.getCause());
        assertFalse(te.budgetRefused(), "a failure that is no refusal of the answer budget says "
            + "it is: " + te.getMessage());
        assertEquals(all, t.answerBudgetAvailable(), "after a failure: " + a.status() + " "
            + x.getCause().getMessage());
      }
    } finally {
      t.close();
      server.stop(0);
    }
    try (HoldingAnswerServer holding = new HoldingAnswerServer(cap, false)) {
      EngineTokenizer quick = new EngineTokenizer(holding.uri("/tokenize"), null,
          Duration.ofSeconds(5), Duration.ofSeconds(2), cap);
      try {
        CompletableFuture<Tokenized> late = quick.tokenize("m", "x");
        awaitHeld(quick, all);
        ExecutionException x =
            assertThrows(ExecutionException.class, () -> late.get(20, TimeUnit.SECONDS));
        TokenizeException te = assertInstanceOf(TokenizeException.class, x.getCause());
        assertTrue(te.timedOut(), te.getMessage());
        assertFalse(te.budgetRefused(), te.getMessage());
        assertEquals(all, quick.answerBudgetAvailable(), "after the timeout");
      } finally {
        quick.close();
      }
      EngineTokenizer closing = new EngineTokenizer(holding.uri("/tokenize"), null,
          Duration.ofSeconds(5), Duration.ofSeconds(60), cap);
      try {
        CompletableFuture<Tokenized> open = closing.tokenize("m", "x");
        awaitHeld(closing, all);
        closing.close();
        ExecutionException x =
            assertThrows(ExecutionException.class, () -> open.get(20, TimeUnit.SECONDS));
        TokenizeException te = assertInstanceOf(TokenizeException.class, x.getCause());
        assertTrue(te.getMessage().contains("closed"), te.getMessage());
        assertEquals(all, closing.answerBudgetAvailable(), "after close()");
      } finally {
        closing.close();
      }
    }
    try (HoldingAnswerServer holding = new HoldingAnswerServer(cap, false)) {
      EngineTokenizer slow = new EngineTokenizer(holding.uri("/tokenize"), null,
          Duration.ofSeconds(5), Duration.ofSeconds(60), cap);
      try {
        CompletableFuture<Tokenized> abandoned = slow.tokenize("m", "x");
        // cancelled once the server wrote all of the body it sends: cancelled while the server
        // still wrote it, the connection's close would fail that write instead, and the server
        // counts no connection closed after its write
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (holding.written() == 0 || slow.answerBudgetAvailable() == all) {
          assertTrue(System.nanoTime() < until, "no answer body written and held within 20 s: "
              + holding.written() + " written, " + holding.writeFailed() + " cut off");
          Thread.sleep(5);
        }
        abandoned.cancel(true);
        until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (slow.answerBudgetAvailable() != all || holding.closedAfterWrite() == 0) {
          assertTrue(System.nanoTime() < until, "20 s after the caller cancelled, the budget "
              + "had " + slow.answerBudgetAvailable() + " of " + all + " bytes and the "
              + "connection was " + (holding.closedAfterWrite() == 0 ? "open" : "closed"));
          Thread.sleep(5);
        }
      } finally {
        slow.close();
      }
    }
  }

  /**
   * {@link EngineTokenizer#stats()}: the budget, and what the answers being read hold of it now:
   * an answer of nearly 1 MiB held open by its server holds its body's heap (its Content-Length,
   * 1 MiB, the cap, taken as its bytes arrived), and nothing once its caller cancels it.
   */
  @Test
  void theStatsShowTheBudgetAndWhatTheAnswersHoldOfIt() throws Exception {
    int cap = 1 << 20;
    long all = (16L << 20) + 9L * cap;
    try (HoldingAnswerServer holding = new HoldingAnswerServer(cap, false)) {
      EngineTokenizer t = new EngineTokenizer(holding.uri("/tokenize"), null,
          Duration.ofSeconds(5), Duration.ofSeconds(60), cap);
      try {
        assertEquals(new EngineTokenizer.Stats(all, 0, 0), t.stats(), "before any tokenization");
        CompletableFuture<Tokenized> open = t.tokenize("m", "x");
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (t.stats().answerBudgetHeldBytes() != cap) {
          assertTrue(System.nanoTime() < until, "an answer of " + (cap - 1) + " bytes held "
              + "open, 20 s on: " + t.stats());
          Thread.sleep(5);
        }
        assertEquals(new EngineTokenizer.Stats(all, cap, 0), t.stats(), "while it is held");
        open.cancel(true);
        until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (t.stats().answerBudgetHeldBytes() != 0) {
          assertTrue(System.nanoTime() < until, "20 s after the caller cancelled: " + t.stats());
          Thread.sleep(5);
        }
        assertEquals(new EngineTokenizer.Stats(all, 0, 0), t.stats(), "once it ended");
      } finally {
        t.close();
      }
    }
  }

  /** Waits until the tokenizer's answers hold some of its budget of {@code all} bytes. */
  private static void awaitHeld(EngineTokenizer t, long all) throws InterruptedException {
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (t.answerBudgetAvailable() == all) {
      assertTrue(System.nanoTime() < until, "no answer took any of the budget");
      Thread.sleep(5);
    }
  }
}
