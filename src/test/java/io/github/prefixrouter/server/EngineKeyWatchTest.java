package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/** What the watch of the engine's key logs, request by request. */
class EngineKeyWatchTest {

  private static final InferenceRequest REQUEST =
      new InferenceRequest("r", new int[] {1, 2}, new GenerationParams(2, 0.0, 1.0, 0L));

  /** An engine failing or answering each request as scripted. */
  private static final class Scripted implements InferenceEngine {
    final Deque<CompletableFuture<EngineResult>> next = new ArrayDeque<>();

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest request) {
      return next.removeFirst();
    }
  }

  private static CompletableFuture<EngineResult> failed(EngineException e) {
    return CompletableFuture.failedFuture(e);
  }

  @Test
  void onlyAChangeOfTheKeysStandingIsLogged() {
    Scripted engine = new Scripted();
    EngineKeyWatch watch = new EngineKeyWatch(engine, "http://s:8000", false);
    EngineResult ok = new EngineResult(new int[] {5}, "", 2, -1, -1, -1);
    List<CompletableFuture<EngineResult>> script = List.of(
        failed(new EngineException("refused", true, 401, null)),
        failed(new EngineException("refused", true, 401, null)),
        failed(new EngineException("unreachable", true)), // says nothing of the key
        failed(new EngineException("proxy", true, 502, null)), // nor does a proxy's 502
        failed(new EngineBusyException("busy", 429)),
        failed(new EngineException("forbidden", true, 403, null)), // another refusal
        CompletableFuture.completedFuture(ok),
        CompletableFuture.completedFuture(ok),
        failed(new EngineException("refused", true, 401, null)));
    engine.next.addAll(script);
    List<String> lines = logged("credentials", () -> {
      for (CompletableFuture<EngineResult> f : script) {
        assertSame(f, watch.execute(REQUEST), "the engine's own future");
      }
    });
    assertEquals(4, lines.size(), lines.toString());
    assertTrue(lines.get(0).contains("WARN") && lines.get(0).contains("(HTTP 401)")
        && lines.get(0).contains("without an API key")
        && lines.get(0).contains("--engine-api-key-file FILE or env PREFIX_ROUTER_ENGINE_API_KEY"),
        lines.get(0));
    assertTrue(lines.get(1).contains("WARN") && lines.get(1).contains("(HTTP 403)"), lines.get(1));
    assertTrue(lines.get(2).contains("INFO") && lines.get(2).contains("again"), lines.get(2));
    assertTrue(lines.get(3).contains("WARN") && lines.get(3).contains("(HTTP 401)"), lines.get(3));
  }

  /**
   * The node sets its listener of cache losses on the engine it is given, which {@code NodeMain}
   * wraps in the watch: the adapter within must get it, or a server restart is never told.
   */
  @Test
  void theCacheLossListenerReachesTheEngineWatched() {
    java.util.concurrent.atomic.AtomicReference<java.util.function.Consumer<String>> set =
        new java.util.concurrent.atomic.AtomicReference<>();
    InferenceEngine engine = new InferenceEngine() {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest request) {
        return new CompletableFuture<>();
      }

      @Override
      public void setCacheLossListener(java.util.function.Consumer<String> listener) {
        set.set(listener);
      }
    };
    java.util.function.Consumer<String> listener = why -> { };
    new EngineKeyWatch(engine, "http://s:8000", false).setCacheLossListener(listener);
    assertSame(listener, set.get());
  }

  @Test
  void theStandingRefusalIsTheStartsUntilACompletionIsAnswered() {
    Scripted engine = new Scripted();
    EngineResult ok = new EngineResult(new int[] {5}, "", 2, -1, -1, -1);
    assertEquals(0, new EngineKeyWatch(engine, "http://s:8000", true, 502).refusedStatus(),
        "a failed health check says nothing of the key");
    assertEquals(0, new EngineKeyWatch(engine, "http://s:8000", true, -1).refusedStatus());
    EngineKeyWatch watch = new EngineKeyWatch(engine, "http://s:8000", true, 403);
    assertEquals(403, watch.refusedStatus(), "refused at the start's health check");
    engine.next.add(failed(new EngineException("unreachable", true)));
    watch.execute(REQUEST);
    assertEquals(403, watch.refusedStatus(), "a failure that says nothing of the key");
    engine.next.add(failed(new EngineException("refused", true, 401, null)));
    List<String> lines = logged("credentials", () -> watch.execute(REQUEST));
    assertEquals(1, lines.size(), "a completion's refusal is logged as before: " + lines);
    assertEquals(401, watch.refusedStatus());
    engine.next.add(CompletableFuture.completedFuture(ok));
    watch.execute(REQUEST);
    assertEquals(0, watch.refusedStatus());

    EngineKeyWatch answered = new EngineKeyWatch(engine, "http://s:8000", true, 401);
    engine.next.add(CompletableFuture.completedFuture(ok));
    List<String> none = logged("credentials", () -> answered.execute(REQUEST));
    assertEquals(0, answered.refusedStatus(), "answered: the key is accepted");
    assertEquals(List.of(), none, "the start's refusal was logged at the start");
  }
}
