package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.concurrent.CompletableFuture;

/**
 * A wrapper around a node's engine for the tests that change how it runs: every run, plain or
 * streamed, is counted in {@link #calls} and goes to {@link #run}; load and cancels go to the
 * wrapped engine unless a subclass says otherwise.
 */
abstract class CountingEngine implements InferenceEngine {
  final InferenceEngine delegate;
  int calls;
  /** Run once, on the node's thread, when the engine's load is read as a run starts. */
  Runnable inRunStart;

  CountingEngine(InferenceEngine delegate) {
    this.delegate = delegate;
  }

  /** Runs {@code r}, giving its output to {@code l} as the subclass decides. */
  abstract CompletableFuture<EngineResult> run(InferenceRequest r, OutputListener l);

  @Override
  public final CompletableFuture<EngineResult> execute(InferenceRequest r) {
    return execute(r, OutputListener.IGNORE);
  }

  @Override
  public final CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
    calls++;
    return run(r, l);
  }

  @Override
  public EngineLoad load() {
    Runnable r = inRunStart;
    if (r != null && StackWalker.getInstance().walk(st -> st.anyMatch(
        f -> f.getClassName().equals(RouterNode.class.getName())
            && f.getMethodName().equals("runLocal")))) {
      inRunStart = null;
      r.run();
    }
    return delegate.load();
  }

  @Override
  public void cancel(String requestId) {
    delegate.cancel(requestId);
  }
}
