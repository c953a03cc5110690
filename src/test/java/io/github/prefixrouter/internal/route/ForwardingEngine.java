package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.concurrent.CompletableFuture;

/**
 * An engine passing plain runs, load and cancels to another; tests override the run they
 * change. Nothing else is passed on: a streamed run keeps {@link InferenceEngine}'s default
 * (it streams nothing and runs {@link #execute(InferenceRequest)}, so an override of that
 * applies to streamed runs too), and so do the cache events (none).
 */
class ForwardingEngine implements InferenceEngine {

  final InferenceEngine e;

  ForwardingEngine(InferenceEngine e) {
    this.e = e;
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest r) {
    return e.execute(r);
  }

  @Override
  public EngineLoad load() {
    return e.load();
  }

  @Override
  public void cancel(String requestId) {
    e.cancel(requestId);
  }
}
