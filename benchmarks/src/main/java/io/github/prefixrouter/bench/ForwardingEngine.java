package io.github.prefixrouter.bench;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.concurrent.CompletableFuture;

/**
 * An engine passing runs, load, cancels and cache events to another; a benchmark overrides what
 * it changes. A streamed run ({@code execute(request, listener)}) is not passed on: it keeps
 * {@link InferenceEngine}'s default, which streams nothing and runs
 * {@link #execute(InferenceRequest)}.
 */
public class ForwardingEngine implements InferenceEngine {

  protected final InferenceEngine delegate;

  public ForwardingEngine(InferenceEngine delegate) {
    this.delegate = delegate;
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request) {
    return delegate.execute(request);
  }

  @Override
  public EngineLoad load() {
    return delegate.load();
  }

  @Override
  public void cancel(String requestId) {
    delegate.cancel(requestId);
  }

  @Override
  public boolean publishesCacheEvents() {
    return delegate.publishesCacheEvents();
  }

  @Override
  public void setCacheEventListener(CacheEventListener listener) {
    delegate.setCacheEventListener(listener);
  }
}
