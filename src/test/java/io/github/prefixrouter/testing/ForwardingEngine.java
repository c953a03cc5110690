package io.github.prefixrouter.testing;

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
public class ForwardingEngine implements InferenceEngine {

  protected final InferenceEngine delegate;

  public ForwardingEngine(InferenceEngine delegate) {
    this.delegate = delegate;
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest r) {
    return delegate.execute(r);
  }

  @Override
  public EngineLoad load() {
    return delegate.load();
  }

  @Override
  public void cancel(String requestId) {
    delegate.cancel(requestId);
  }
}
