package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.ThrowingProxySelector;
import java.net.ProxySelector;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The adapter when the JDK's HTTP client throws an {@link Error} as a request or a health probe
 * is made (here the host's {@link ProxySelector}, which the client asks for every request's
 * route as it is sent), as a request is built, or as its answer is parsed. What is thrown, a
 * {@link VirtualMachineError} included, is no answer of the server: a probe's status is -1, a
 * request fails with an {@link EngineException} and gives its slot back.
 */
class OpenAiCompatibleEngineErrorTest {

  /** What the proxy selectors throw: an Error, and VirtualMachineErrors. */
  private static List<Error> errors() {
    return List.of(new InternalError("proxy configuration broken"),
        new OutOfMemoryError("Java heap space"), new StackOverflowError());
  }

  /**
   * An engine whose HTTP client asks a proxy selector that throws {@code thrown}: the client
   * takes the host's default selector as it is built, which is put back right after.
   */
  private static OpenAiCompatibleEngine engineWhoseProxySelectorThrows(Error thrown) {
    return ThrowingProxySelector.asDefault(thrown, () -> OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:1").model("m").requestTimeout(Duration.ofSeconds(5)).slots(1)
        .maxInFlight(1).build());
  }

  private static InferenceRequest request(String id) {
    return new InferenceRequest(id, new int[] {101, 7, 7, 9000},
        new GenerationParams(3, 0.0, 0.9, 17L));
  }

  /**
   * A failed request, {@code what}, gave back its slot, its share of the answer budget
   * ({@code budget} whole again) and its load.
   */
  private static void assertGivenBack(OpenAiCompatibleEngine e, long budget, String what) {
    OpenAiCompatibleEngine.Stats st = e.stats();
    assertEquals(0, st.inFlight(), what + ": its slot is held: " + st);
    assertEquals(budget, e.answerBudgetAvailable(), what + ": its share is held: " + st);
    assertEquals(0, e.load().total(), what + ": load " + e.load());
  }

  /**
   * {@code healthStatus()} and {@code health()} complete, with -1 and false, whatever the HTTP
   * client throws as a probe is sent: the probe caught only a RuntimeException there, so an
   * {@link Error} was thrown out of the call whose future "never completes exceptionally" (and
   * out of {@code NodeMain}'s start, which waits for it).
   */
  @Test
  void anErrorAsAHealthProbeIsSentIsNoAnswer() throws Exception {
    for (Error thrown : errors()) {
      try (OpenAiCompatibleEngine e = engineWhoseProxySelectorThrows(thrown)) {
        CompletableFuture<Integer> status;
        CompletableFuture<Boolean> healthy;
        try {
          status = e.healthStatus();
          healthy = e.health();
        } catch (Throwable t) {
          throw new AssertionError("the health probe threw " + t + " instead of completing "
              + "with -1, no answer", t);
        }
        assertEquals(-1, status.get(10, TimeUnit.SECONDS), "status with " + thrown);
        assertFalse(healthy.get(10, TimeUnit.SECONDS), "healthy with " + thrown);
      }
    }
  }

  /**
   * A request, streamed or not, whose sending the HTTP client fails with an {@link Error}
   * fails with a retryable {@link EngineException} carrying it, and gives back its slot and its
   * share of the answer budget: the adapter caught only a RuntimeException there, so the
   * {@link Error} was thrown out of {@code execute} with the request counted in flight for
   * good and its future never completed (at {@code maxInFlight} every later request was
   * refused busy).
   */
  @Test
  void anErrorAsARequestIsSentFailsItAndGivesItsSlotBack() throws Exception {
    OutputListener streaming = (tokens, text) -> { };
    for (Error thrown : errors()) {
      try (OpenAiCompatibleEngine e = engineWhoseProxySelectorThrows(thrown)) {
        long budget = e.stats().answerBudgetBytes();
        int n = 0;
        for (OutputListener listener : List.of(OutputListener.IGNORE, streaming, streaming)) {
          String what = (listener == OutputListener.IGNORE ? "a plain request" : "a stream")
              + " with " + thrown;
          CompletableFuture<EngineResult> f = executeOrFail(e, request("r" + n++), listener, what);
          ExecutionException failed =
              assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS), what);
          assertTrue(failed.getCause() instanceof EngineException, what + ": " + failed.getCause());
          EngineException err = (EngineException) failed.getCause();
          assertSame(thrown, err.getCause(), what + ": " + err);
          assertTrue(err.retryable(), what + ": the failure is the node's, not the request's");
          OpenAiCompatibleEngine.Stats st = e.stats();
          assertEquals(0, st.inFlightRefused(), what + ": refused at maxInFlight 1: " + st);
          assertGivenBack(e, budget, what);
        }
      }
    }
  }

  /**
   * A request whose body or HTTP request cannot be built for an {@link Error} (the heap running
   * out as its JSON is written) fails with an {@link EngineException} carrying it, and gives its
   * slot back: only a RuntimeException was caught there, so the {@link Error} was thrown out of
   * {@code execute} with the request counted in flight for good.
   */
  @Test
  void anErrorAsARequestIsBuiltFailsItAndGivesItsSlotBack() throws Exception {
    OutOfMemoryError thrown = new OutOfMemoryError("Java heap space");
    try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder()
        .baseUrl("http://127.0.0.1:1").slots(1).maxInFlight(1).build()) {
      int n = 0;
      for (OutputListener listener : List.of(OutputListener.IGNORE, (tokens, text) -> { })) {
        String what = listener == OutputListener.IGNORE ? "a plain request" : "a stream";
        CompletableFuture<EngineResult> f;
        // thread-local: only this thread's calls of Json.write throw
        try (org.mockito.MockedStatic<io.github.prefixrouter.internal.json.Json> json =
            org.mockito.Mockito.mockStatic(io.github.prefixrouter.internal.json.Json.class,
                org.mockito.Mockito.CALLS_REAL_METHODS)) {
          json.when(() -> io.github.prefixrouter.internal.json.Json.write(
              org.mockito.ArgumentMatchers.any())).thenThrow(thrown);
          f = executeOrFail(e, request("b" + n++), listener, what);
        }
        ExecutionException failed =
            assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS), what);
        assertTrue(failed.getCause() instanceof EngineException, what + ": " + failed.getCause());
        assertSame(thrown, failed.getCause().getCause(), what + ": " + failed.getCause());
        assertEquals(0, e.stats().inFlight(), what + ": its slot is held: " + e.stats());
        assertEquals(0, e.load().total(), what + ": load " + e.load());
      }
    }
  }

  /**
   * A request, plain or streamed (answered in one JSON body), whose answer's parse throws an
   * {@link Error} (the heap running out as a large answer is parsed) fails at once with a
   * retryable {@link EngineException} carrying it, once, and gives back its slot and its share
   * of the answer budget: only a RuntimeException was caught there, so the {@link Error} was
   * lost in the HTTP client's future. A plain request then ended only at its
   * {@code requestTimeout}, as a non-retryable {@link EngineTimeoutException}; a streamed one,
   * whose deadline was already off, never.
   */
  @Test
  void anErrorAsAnAnswerIsParsedFailsItAtOnce() throws Exception {
    OutOfMemoryError thrown = new OutOfMemoryError("Java heap space");
    OutputListener streaming = (tokens, text) -> { };
    try (OpenAiCompatibleEngine e = io.github.prefixrouter.testing.AnsweringHttpClient.building(
        200, "application/json", FakeOpenAiServer.answer(4, "[5,6,7]"),
        () -> OpenAiCompatibleEngine.builder().baseUrl("http://127.0.0.1:1").model("m")
            .requestTimeout(Duration.ofSeconds(3)).slots(1).maxInFlight(1).build())) {
      long budget = e.stats().answerBudgetBytes();
      int n = 0;
      for (OutputListener listener : List.of(OutputListener.IGNORE, streaming)) {
        String what = listener == OutputListener.IGNORE ? "a plain request" : "a stream";
        CompletableFuture<EngineResult> f;
        java.util.concurrent.atomic.AtomicInteger completions =
            new java.util.concurrent.atomic.AtomicInteger();
        // thread-local: the answer is handled on this thread (see AnsweringHttpClient)
        try (org.mockito.MockedStatic<io.github.prefixrouter.internal.json.Json> json =
            org.mockito.Mockito.mockStatic(io.github.prefixrouter.internal.json.Json.class,
                org.mockito.Mockito.CALLS_REAL_METHODS)) {
          json.when(() -> io.github.prefixrouter.internal.json.Json.parse(
              org.mockito.ArgumentMatchers.anyString(), org.mockito.ArgumentMatchers.anyInt(),
              org.mockito.ArgumentMatchers.anyInt(), org.mockito.ArgumentMatchers.anyLong(),
              org.mockito.ArgumentMatchers.any())).thenThrow(thrown);
          f = e.execute(request("p" + n++), listener);
          f.whenComplete((r, x) -> completions.incrementAndGet());
        }
        ExecutionException failed = assertThrows(ExecutionException.class,
            () -> f.get(10, TimeUnit.SECONDS), what + ": no answer within 10 s");
        assertFalse(failed.getCause() instanceof io.github.prefixrouter.spi.EngineTimeoutException,
            what + ": ended only at its requestTimeout: " + failed.getCause());
        assertTrue(failed.getCause() instanceof EngineException, what + ": " + failed.getCause());
        EngineException err = (EngineException) failed.getCause();
        assertSame(thrown, err.getCause(), what + ": the failure does not carry the Error: " + err);
        assertTrue(err.retryable(), what + ": the failure is the node's, not the request's");
        assertEquals(1, completions.get(), what + ": completed more than once");
        assertGivenBack(e, budget, what);
      }
    }
  }

  /**
   * {@code close()} fails the requests in flight and ends the HTTP client's selector thread
   * even when the KV-event subscriber's {@code close()}, which it calls first, throws; what was
   * thrown is thrown on once everything is closed. The subscriber's throw left close() at once:
   * a request in flight waited for its {@code requestTimeout}, holding its slot, and the
   * selector thread ran on (with it, the client's timeouts: a request whose headers never come
   * would never have ended).
   */
  @Test
  void closeEndsEverythingWhenTheKvEventSubscriberThrows() throws Exception {
    OutOfMemoryError thrown = new OutOfMemoryError("Java heap space");
    io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber subscriber =
        org.mockito.Mockito.mock(io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber.class);
    org.mockito.Mockito.doThrow(thrown).when(subscriber).close();
    io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber.Builder events = org.mockito.Mockito
        .mock(io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber.Builder.class,
            org.mockito.Mockito.RETURNS_SELF);
    org.mockito.Mockito.doReturn(subscriber).when(events).build();
    try (FakeOpenAiServer fake = FakeOpenAiServer.start(FakeOpenAiServer.ECHO)) {
      fake.hold();
      java.util.Set<Thread> before = io.github.prefixrouter.internal.wire.SelectorThreads.now();
      OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(fake.baseUrl())
          .requestTimeout(Duration.ofSeconds(30)).kvEvents(events).build();
      List<Thread> selectors = io.github.prefixrouter.internal.wire.SelectorThreads.since(before);
      e.setCacheEventListener(org.mockito.Mockito.mock(
          io.github.prefixrouter.spi.CacheEventListener.class));
      try {
        CompletableFuture<EngineResult> f = e.execute(request("c"));
        assertTrue(fake.awaitArrived(1, Duration.ofSeconds(10)), "the request did not arrive");
        Throwable closing = null;
        try {
          e.close();
        } catch (Throwable t) {
          closing = t;
        }
        ExecutionException failed = assertThrows(ExecutionException.class,
            () -> f.get(5, TimeUnit.SECONDS),
            "the request in flight was not failed by close(), the subscriber's close having thrown");
        assertTrue(failed.getCause().getMessage().contains("closed"), failed.getCause().toString());
        assertEquals(0, e.stats().inFlight(), "its slot is held: " + e.stats());
        assertEquals(List.of(),
            io.github.prefixrouter.internal.wire.SelectorThreads.aliveAfterWaiting(selectors),
            "the HTTP client's selector thread is alive after close()");
        assertSame(thrown, closing, "close() did not throw on what the subscriber threw");
      } finally {
        fake.release();
      }
    }
  }

  /**
   * A streamed request whose result cannot be built once choice 0 gave its
   * {@code finish_reason} (an {@link Error}: the heap running out as the output is copied; here
   * the request's prompt length, read for the usage the stream does not carry, throws it) fails
   * at once, once, with a retryable {@link EngineException} carrying it, and gives back its slot
   * and share. The {@code Error} leaves the body's {@code onNext}, and the JDK's HTTP client ends
   * the body with it; the stream being finished, {@code onError} builds the result again in
   * {@code onComplete}, which caught only a RuntimeException: the {@code Error} went back to the
   * client, the body had ended (the request's deadline off), and the request was never
   * answered, its slot held for good. The result is built when it is needed: as the body ends,
   * or, for a body held open after the {@code finish_reason}, on the timer that completes the
   * request 1 s later, where the {@code Error} would be lost as well.
   */
  @Test
  void anErrorAsAFinishedStreamsResultIsBuiltFailsItAtOnce() throws Exception {
    anErrorAsAFinishedStreamsResultIsBuiltFailsItAtOnce(false);
    anErrorAsAFinishedStreamsResultIsBuiltFailsItAtOnce(true);
  }

  private static void anErrorAsAFinishedStreamsResultIsBuiltFailsItAtOnce(boolean heldOpen)
      throws Exception {
    OutOfMemoryError thrown = new OutOfMemoryError("Java heap space");
    java.util.concurrent.CountDownLatch firstPiece = new java.util.concurrent.CountDownLatch(1);
    try (ScriptedOpenAiServer server = ScriptedOpenAiServer.start()) {
      server.behaviour.set((ex, body) -> {
        java.io.OutputStream out = OpenAiCompatibleEngineStreamingTest.startStream(ex);
        OpenAiCompatibleEngineStreamingTest.send(out,
            OpenAiCompatibleEngineStreamingTest.chunk("a", "[1]", null));
        try { // the finishing chunk in a read of its own, once the body is being read
          firstPiece.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        OpenAiCompatibleEngineStreamingTest.send(out,
            OpenAiCompatibleEngineStreamingTest.chunk("b", "[2]", "stop"));
        if (heldOpen) {
          server.awaitRelease();
        }
      });
      // read each time the result is built
      java.util.concurrent.atomic.AtomicInteger lengths =
          new java.util.concurrent.atomic.AtomicInteger();
      InferenceRequest request = org.mockito.Mockito.spy(request("s"));
      org.mockito.Mockito.doAnswer(i -> {
        lengths.incrementAndGet();
        throw thrown;
      }).when(request).length();
      try (OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl(server.base())
          .model("m").requestTimeout(Duration.ofSeconds(30)).slots(1).maxInFlight(1).build()) {
        long budget = e.stats().answerBudgetBytes();
        java.util.concurrent.atomic.AtomicInteger completions =
            new java.util.concurrent.atomic.AtomicInteger();
        CompletableFuture<EngineResult> f = executeOrFail(e, request,
            (tokens, text) -> firstPiece.countDown(), "a stream");
        f.whenComplete((r, x) -> completions.incrementAndGet());
        ExecutionException failed = assertThrows(ExecutionException.class,
            () -> f.get(10, TimeUnit.SECONDS), () -> "a finished stream whose result could not "
                + "be built" + (heldOpen ? ", held open," : "") + ": no answer within 10 s (the "
                + "result was built " + lengths + " times)");
        assertTrue(failed.getCause() instanceof EngineException, failed.getCause().toString());
        EngineException err = (EngineException) failed.getCause();
        assertSame(thrown, err.getCause(), "the failure does not carry the Error: " + err);
        assertTrue(err.retryable(), "the failure is the node's, not the request's");
        assertEquals(1, completions.get(), "completed more than once");
        assertGivenBack(e, budget, "a finished stream whose result could not be built");
      }
    }
  }

  /**
   * {@code e.execute(request, listener)}; an assertion failure naming {@code what} if execute
   * throws instead of failing its future.
   */
  private static CompletableFuture<EngineResult> executeOrFail(OpenAiCompatibleEngine e,
      InferenceRequest request, OutputListener listener, String what) {
    try {
      return e.execute(request, listener);
    } catch (Throwable t) {
      throw new AssertionError("execute threw " + t + " instead of failing its future, "
          + "for " + what, t);
    }
  }
}
