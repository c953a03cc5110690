package io.github.prefixrouter.testing;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * An {@link InferenceEngine} passing plain runs, load, cancels, cache events and cache losses to
 * another: a base for an engine that changes one call and keeps the rest, such as one that
 * fails, stalls or records the runs of a test or a simulation. A subclass overrides the calls
 * it changes and reaches the wrapped engine through {@link #delegate}.
 *
 * <p>A streamed run ({@code execute(request, listener)}) is not passed on: it keeps
 * {@link InferenceEngine}'s default, which streams nothing and runs
 * {@link #execute(InferenceRequest)}, so an override of that applies to streamed runs too. A
 * subclass that streams overrides {@code execute(request, listener)} itself.
 *
 * <p>It adds no state, thread or check of its own.
 */
public class ForwardingEngine implements InferenceEngine {

  /** The engine every call but a streamed run goes to. */
  protected final InferenceEngine delegate;

  /**
   * Wraps {@code delegate}.
   *
   * @param delegate the engine every call but a streamed run goes to
   * @throws NullPointerException if {@code delegate} is null
   */
  public ForwardingEngine(InferenceEngine delegate) {
    this.delegate = Objects.requireNonNull(delegate, "delegate");
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

  @Override
  public void setCacheLossListener(Consumer<String> listener) {
    delegate.setCacheLossListener(listener);
  }
}
