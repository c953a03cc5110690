package io.github.prefixrouter.sim;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.util.concurrent.CompletableFuture;

/**
 * A node's {@link SimulatedEngine}, noting in the run's recorder which node served what. An
 * engine that reports no timings ({@link EngineProfile#reportsTimings()} false) gives its runs'
 * results without their prefill and decode time, as the library's adapter for OpenAI-compatible
 * servers does; the recorder still sees the engine's own result.
 */
final class RecordingEngine extends ForwardingEngine {

  private final int node;
  private final SimulatedEngine engine;
  private final RunRecorder recorder;
  private final boolean reportsTimings;

  RecordingEngine(int node, SimulatedEngine engine, RunRecorder recorder) {
    this(node, engine, recorder, true);
  }

  RecordingEngine(int node, SimulatedEngine engine, RunRecorder recorder, boolean reportsTimings) {
    super(engine);
    this.node = node;
    this.engine = engine;
    this.recorder = recorder;
    this.reportsTimings = reportsTimings;
  }

  SimulatedEngine engine() {
    return engine;
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request) {
    CompletableFuture<EngineResult> f = engine.execute(request);
    f.whenComplete(
        (r, e) -> {
          if (r != null) {
            recorder.executed(request.id(), node, r);
          }
        });
    if (reportsTimings) {
      return f;
    }
    return f.thenApply(
        r -> new EngineResult(
            r.outputTokens(), r.text(), r.promptTokens(), r.cachedPromptTokens(), -1, -1));
  }
}
