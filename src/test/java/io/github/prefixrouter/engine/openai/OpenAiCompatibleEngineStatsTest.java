package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.AnswerBudgetException;
import io.github.prefixrouter.internal.EngineInFlightLimitException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.HoldingAnswerServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link OpenAiCompatibleEngine#stats()}: the adapter's own limits, what they hold now and what
 * they refused, as the node's {@code engine} section shows them.
 */
class OpenAiCompatibleEngineStatsTest {

  private static InferenceRequest request(String id) {
    return new InferenceRequest(id, new int[] {101, 7, 7, 9000},
        new GenerationParams(3, 0.0, 0.9, 17L));
  }

  /**
   * Two requests held at the server at a limit of 2 are outstanding; each of three more is
   * refused at once and counted once; once the two are answered nothing is outstanding, and the
   * refusals stay counted. Nothing of this touches the answer budget.
   */
  @Test
  void requestsOutstandingAndThoseRefusedAtMaxInFlightAreCounted() throws Exception {
    try (FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      server.hold();
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(server.baseUrl())
          .slots(1).maxInFlight(2).requestTimeout(Duration.ofSeconds(60)).build();
      try {
        assertEquals(new OpenAiCompatibleEngine.Stats(0, 2, 0, 256L << 20, 0, 0), e.stats(),
            "a new engine");
        List<CompletableFuture<EngineResult>> held = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
          held.add(e.execute(request("h" + i)));
        }
        assertTrue(server.awaitArrived(2, Duration.ofSeconds(20)), "the held requests");
        for (int i = 0; i < 3; i++) {
          CompletableFuture<EngineResult> f = e.execute(request("r" + i));
          ExecutionException x = assertThrows(ExecutionException.class,
              () -> f.get(20, TimeUnit.SECONDS));
          assertInstanceOf(EngineInFlightLimitException.class, x.getCause());
          assertEquals(i + 1, e.stats().inFlightRefused(),
              "refusals at maxInFlight counted after " + (i + 1) + " of them: " + e.stats());
        }
        assertEquals(new OpenAiCompatibleEngine.Stats(2, 2, 3, 256L << 20, 0, 0), e.stats(),
            "two requests held at the server, three refused at the limit of 2");
        server.release();
        for (CompletableFuture<EngineResult> f : held) {
          f.get(20, TimeUnit.SECONDS);
        }
        assertEquals(new OpenAiCompatibleEngine.Stats(0, 2, 3, 256L << 20, 0, 0), e.stats(),
            "the held requests answered");
      } finally {
        server.release();
        e.close();
      }
    }
  }

  /**
   * 48 answers of 1 MiB held open by their server, at the least budget for them (38 MiB), plain
   * or streamed: the answers read hold the budget, those beyond it are refused their share, each
   * counted once, and every request outstanding is one whose answer is held; once the engine is
   * closed the answers hold nothing and the refusals stay counted (a failure at the close is no
   * refusal of the budget).
   */
  @ParameterizedTest
  @ValueSource(booleans = {false, true})
  void answersRefusedTheirShareAreCountedAndTheHeldBytesGoBackToZero(boolean streamed)
      throws Exception {
    int bytes = 1 << 20;
    int n = 48;
    long budget = OpenAiCompatibleEngine.Builder.minAnswerBudget(bytes);
    try (HoldingAnswerServer server = new HoldingAnswerServer(bytes, streamed)) {
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
          .baseUrl(server.baseUrl())
          .maxResponseBytes(bytes)
          .answerBudget(budget)
          .requestTimeout(Duration.ofSeconds(60)).build();
      long refused = 0;
      try {
        List<CompletableFuture<EngineResult>> fs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
          fs.add(streamed ? e.execute(request("r" + i), (tokens, text) -> { })
              : e.execute(request("r" + i)));
        }
        server.awaitSettled(fs, () -> e.stats().answerBudgetHeldBytes(), Duration.ofSeconds(60));
        for (CompletableFuture<EngineResult> f : fs) {
          if (f.isDone()) {
            refused++;
            ExecutionException x = assertThrows(ExecutionException.class, f::get);
            assertInstanceOf(AnswerBudgetException.class, x.getCause());
          }
        }
        assertTrue(refused > 0 && refused < n, refused + " of " + n + " refused their share");
        OpenAiCompatibleEngine.Stats s = e.stats();
        assertEquals(refused, s.answerBudgetRefused(),
            refused + " requests refused their share of the answer budget: " + s);
        assertEquals(n - refused, s.inFlight(), "the requests whose answers are held: " + s);
        assertEquals(budget, s.answerBudgetBytes(), s.toString());
        assertTrue(s.answerBudgetHeldBytes() > (n - refused) * (bytes / 2L)
            && s.answerBudgetHeldBytes() <= budget,
            "the held answers hold the budget: " + s);
        assertEquals(0, s.inFlightRefused(), s.toString());
      } finally {
        e.close();
      }
      assertEquals(new OpenAiCompatibleEngine.Stats(0, 512, 0, budget, 0, refused), e.stats(),
          "once every answer ended");
    }
  }
}
