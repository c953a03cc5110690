package io.github.prefixrouter.sim;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A cluster routed by a simulator-level baseline: on arrival the baseline picks a target node; if
 * it is not the entry node the request pays one simulated network delay to get there and one to
 * come back; it runs on the target's engine. The baseline sees the cluster through {@link View}.
 */
final class DispatchCluster implements SimCluster {

  /** Picks the node that serves a request. */
  interface Dispatcher {
    int choose(int entry, InferenceRequest request, View view);
  }

  /** What a centralized baseline may know, instantly. */
  interface View {
    int nodes();

    /** Requests routed to the node and not finished there yet. */
    int outstanding(int node);

    /** The node's engine, for exact cache and queue knowledge (SGLang, earliest completion). */
    SimulatedEngine engine(int node);
  }

  private final Scheduler scheduler;
  private final List<RecordingEngine> engines;
  private final SimLink link;
  private final Dispatcher dispatcher;
  private final int[] outstanding;
  private final View view;

  DispatchCluster(
      Scheduler scheduler, List<RecordingEngine> engines, SimLink link, Dispatcher dispatcher) {
    this.scheduler = scheduler;
    this.engines = engines;
    this.link = link;
    this.dispatcher = dispatcher;
    this.outstanding = new int[engines.size()];
    this.view =
        new View() {
          @Override
          public int nodes() {
            return engines.size();
          }

          @Override
          public int outstanding(int node) {
            return outstanding[node];
          }

          @Override
          public SimulatedEngine engine(int node) {
            return engines.get(node).engine();
          }
        };
  }

  @Override
  public CompletableFuture<?> submit(int entry, InferenceRequest request) {
    int target = dispatcher.choose(entry, request, view);
    if (target < 0 || target >= engines.size()) {
      throw new IllegalStateException("dispatcher chose node " + target);
    }
    outstanding[target]++;
    CompletableFuture<EngineResult> answer = new CompletableFuture<>();
    if (target == entry) {
      run(target, request, answer, false);
    } else {
      scheduler.schedule(link.sampleNanos(), () -> run(target, request, answer, true));
    }
    return answer;
  }

  private void run(
      int target, InferenceRequest request, CompletableFuture<EngineResult> answer, boolean remote) {
    engines
        .get(target)
        .execute(request)
        .whenComplete(
            (r, e) -> {
              outstanding[target]--;
              Runnable reply =
                  () -> {
                    if (e != null) {
                      answer.completeExceptionally(e);
                    } else {
                      answer.complete(r);
                    }
                  };
              if (remote) {
                scheduler.schedule(link.sampleNanos(), reply);
              } else {
                reply.run();
              }
            });
  }

  @Override
  public long gossipBytesSent() {
    return 0;
  }
}
