package io.github.prefixrouter.engine.openai;

import static io.github.prefixrouter.testing.HoldingAnswerServer.heapInUse;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.HoldingAnswerServer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The heap that the answers being read and parsed hold at once: the answer budget. */
class OpenAiCompatibleEngineAnswerBudgetTest {

  private static final int BODY = 8 << 20;

  private static InferenceRequest request(String id) {
    return new InferenceRequest(id, new int[] {101, 7, 7, 9000},
        new GenerationParams(3, 0.0, 0.9, 17L));
  }

  /**
   * Many answers read at once hold at most the answer budget together: 32 answers of nearly
   * 8 MiB each, held open by their server, at a budget of 192 MiB (the least for 8 MiB answers).
   * Each answer was capped on its own only, so the engine read all 32 into its heap at once
   * (256 MiB; at 512 requests in flight, the default, 4 GiB); now the answers beyond the budget
   * wait, and fail with a retryable EngineException once no other answer has given any back for
   * 1 s, their connections closed, and the budget is whole again once the others end. (What the
   * kernel's socket buffers hold of the bodies not read is no heap; so the heap is measured,
   * with a margin for the HTTP client's own buffers far below what the answers held before.)
   */
  @Test
  void answersBeingReadAtOnceHoldAtMostTheBudgetTogether() throws Exception {
    holdAtMostTheBudget(32, false);
  }

  /**
   * So do streams: 48 streams each in a line of nearly 8 MiB, not ended, held open by their
   * server, at the least budget for 8 MiB answers. Each stream's line buffer grew to its limit
   * on its own, so the engine held them all (455 MB of heap); now the streams beyond the budget
   * wait for it, and fail alike.
   */
  @Test
  void streamsBeingReadAtOnceHoldAtMostTheBudgetTogether() throws Exception {
    holdAtMostTheBudget(48, true);
  }

  private void holdAtMostTheBudget(int n, boolean streamed) throws Exception {
    long budget = OpenAiCompatibleEngine.Builder.minAnswerBudget(BODY);
    try (HoldingAnswerServer server = new HoldingAnswerServer(BODY, streamed)) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl(server.baseUrl())
          .requestTimeout(Duration.ofSeconds(60)).answerBudget(budget).build();
      try {
        long before = heapInUse();
        List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          fs.add(streamed ? e.execute(request("r" + i), (tokens, text) -> { })
              : e.execute(request("r" + i)));
        }
        server.awaitSettled(fs, () -> e.stats().answerBudgetHeldBytes(), Duration.ofSeconds(60));
        long held = heapInUse() - before;
        // and the HTTP client's own buffers, under 1 MiB a connection
        assertTrue(held <= budget + (48 << 20), n + " answers of " + (BODY - 1)
            + " bytes held " + held + " bytes of heap at once, with a budget of " + budget);
        long refused = 0;
        for (CompletableFuture<EngineResult> f : fs) {
          if (f.isDone()) {
            refused++;
            ExecutionException x = assertThrows(ExecutionException.class, f::get);
            EngineException ee = assertInstanceOf(EngineException.class, x.getCause());
            assertTrue(ee.retryable(), ee.getMessage());
            assertTrue(ee.getMessage().contains("answerBudget"), ee.getMessage());
          }
        }
        assertTrue(refused < n, "no answer got its share");
      } finally {
        e.close();
      }
      assertEquals(budget, e.answerBudgetAvailable(), "the budget is whole once all ended");
    }
  }

  /**
   * An answer refused its share of the budget is the node's own shortage of heap, not a failure
   * of its engine: a healthy server whose answers of 1 MiB, held open, fill the budget (the least
   * for them, 38 MiB) while more arrive, as heavy legitimate load near the size limit does. The
   * refused requests fail (the node has no peer to try them on) with the retryable failure naming
   * {@code answerBudget}, and the node neither counts them towards
   * {@code engineFailureLimit} (3) nor takes its engine for failing and routes around it. They
   * were counted: three in a row and the node declared its own healthy engine failing.
   */
  @Test
  void budgetRefusalsAreNoFailuresOfTheEngineForTheNode() throws Exception {
    int bytes = 1 << 20;
    int n = 48; // some 38 fit the budget at once
    try (HoldingAnswerServer server = new HoldingAnswerServer(bytes, false)) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl(server.baseUrl())
          .maxResponseBytes(bytes)
          .answerBudget(OpenAiCompatibleEngine.Builder.minAnswerBudget(bytes))
          .requestTimeout(Duration.ofSeconds(60)).build();
      RouterConfig config = RouterConfig.defaults();
      PrefixRouterNode node = LoneNode.started(e, config);
      try {
        List<CompletableFuture<InferenceResponse>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          fs.add(node.submit(request("r" + i)));
        }
        // settled: the requests beyond the budget refused, each of the others holding its whole
        // answer
        server.awaitSettled(fs, () -> e.stats().answerBudgetHeldBytes(), Duration.ofSeconds(60));
        int refused = 0;
        for (CompletableFuture<InferenceResponse> f : fs) {
          if (f.isDone()) {
            refused++;
            ExecutionException x = assertThrows(ExecutionException.class, f::get);
            RequestFailedException failed =
                assertInstanceOf(RequestFailedException.class, x.getCause());
            EngineException ee = assertInstanceOf(EngineException.class, failed.getCause());
            assertTrue(ee.retryable(), ee.getMessage());
            assertTrue(ee.getMessage().contains("answerBudget"), ee.getMessage());
          }
        }
        assertTrue(refused >= config.engineFailureLimit() && refused < n,
            refused + " of " + n + " requests refused their share");
        EngineStallStats s = node.engineStallStats().orElseThrow();
        assertEquals(0, s.failedInARow(), refused + " requests refused their share of the answer "
            + "budget were counted as failures of the engine in a row: " + s);
        assertEquals(0, s.failing(), "the node took its healthy engine for failing after "
            + refused + " budget refusals: " + s);
        RouteDecision d = node.explain(request("next"));
        assertNotEquals(RouteDecision.Reason.LOCAL_ENGINE_FAILING, d.reason(),
            "the node's decisions route around its healthy engine after budget refusals: " + d);
      } finally {
        e.close(); // ends the answers held: the node's stop waits for them
        node.close();
      }
    }
  }

  /**
   * An answer gives its share back however its request ends: answered (plain or streamed),
   * cancelled while its body is read, timed out while its body is read, failed by close().
   */
  @Test
  void anAnswerGivesItsShareBackHoweverItsRequestEnds() throws Exception {
    try (FakeOpenAiServer fake = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(fake.baseUrl()).build();
      try {
        e.execute(request("ok")).get(20, TimeUnit.SECONDS);
        assertEquals(OpenAiCompatibleEngine.DEFAULT_ANSWER_BUDGET, e.answerBudgetAvailable());
        fake.streams(true);
        e.execute(request("streamed"), (tokens, text) -> { }).get(20, TimeUnit.SECONDS);
        assertEquals(OpenAiCompatibleEngine.DEFAULT_ANSWER_BUDGET, e.answerBudgetAvailable(),
            "after a stream");
      } finally {
        e.close();
      }
    }
    try (HoldingAnswerServer server = new HoldingAnswerServer(BODY, false)) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl(server.baseUrl())
          .requestTimeout(Duration.ofSeconds(2)).build();
      long all = OpenAiCompatibleEngine.DEFAULT_ANSWER_BUDGET;
      try {
        CompletableFuture<EngineResult> cancelled = e.execute(request("c"));
        awaitHeld(e, all);
        e.cancel("c");
        assertThrows(ExecutionException.class, () -> cancelled.get(20, TimeUnit.SECONDS));
        assertEquals(all, e.answerBudgetAvailable(), "after a cancel");

        CompletableFuture<EngineResult> late = e.execute(request("t"));
        awaitHeld(e, all);
        ExecutionException x =
            assertThrows(ExecutionException.class, () -> late.get(20, TimeUnit.SECONDS));
        assertInstanceOf(io.github.prefixrouter.spi.EngineTimeoutException.class, x.getCause());
        assertEquals(all, e.answerBudgetAvailable(), "after a timeout");

        CompletableFuture<EngineResult> open = e.execute(request("x"));
        awaitHeld(e, all);
        e.close();
        assertThrows(ExecutionException.class, () -> open.get(20, TimeUnit.SECONDS));
        assertEquals(all, e.answerBudgetAvailable(), "after close()");
      } finally {
        e.close();
      }
    }
  }

  /** Waits until the engine's answers hold some of its budget of {@code all} bytes. */
  private static void awaitHeld(OpenAiCompatibleEngine e, long all) throws InterruptedException {
    long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    while (e.answerBudgetAvailable() == all) {
      assertTrue(System.nanoTime() < until, "no answer took any of the budget");
      Thread.sleep(5);
    }
  }

  /**
   * An error event's parse takes its heap from the stream's share too, and gives it back: at a
   * budget its parse cannot get, the event (an overload, of 100 KB of tiny values that parse
   * to about 4 MB) fails the stream with the budget's refusal, which the adapter makes its
   * {@code AnswerBudgetException} (it was read as text that is not JSON, a failure of the
   * server); the share holds nothing of it afterwards. It was parsed outside the budget.
   */
  @Test
  void anErrorEventsParseTakesItsHeapFromTheShare() {
    io.github.prefixrouter.internal.wire.BodyBudget budget =
        new io.github.prefixrouter.internal.wire.BodyBudget(2 << 20, Duration.ZERO, () -> { });
    io.github.prefixrouter.internal.wire.BodyBudget.Share share = budget.share();
    CompletionStream s = new CompletionStream(request("e"), BODY, null, (tokens, text) -> { },
        share);
    String data = "{\"error\":{\"message\":\"overloaded\",\"code\":503},\"pad\":["
        + "{},".repeat(33_000) + "{}]}";
    byte[] event = ("event: error\ndata: " + data + "\n\n").getBytes(StandardCharsets.UTF_8);
    assertThrows(io.github.prefixrouter.internal.wire.BodyBudget.Refused.class,
        () -> s.feed(java.nio.ByteBuffer.wrap(event)));
    assertTrue(share.held() < 512 << 10, "the share holds " + share.held());
  }
}
