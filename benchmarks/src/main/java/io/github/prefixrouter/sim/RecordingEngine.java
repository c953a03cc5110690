package io.github.prefixrouter.sim;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.util.concurrent.CompletableFuture;

/** A node's {@link SimulatedEngine}, noting in the run's recorder which node served what. */
final class RecordingEngine extends ForwardingEngine {

  private final int node;
  private final SimulatedEngine engine;
  private final RunRecorder recorder;

  RecordingEngine(int node, SimulatedEngine engine, RunRecorder recorder) {
    super(engine);
    this.node = node;
    this.engine = engine;
    this.recorder = recorder;
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
    return f;
  }
}
