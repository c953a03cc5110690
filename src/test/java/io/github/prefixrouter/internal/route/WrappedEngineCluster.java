package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.function.UnaryOperator;

/**
 * A started {@link OracleCluster} (seed 11, nodes 1 ms apart until the test sets another delay)
 * whose engines a test wraps in {@code E}, with what the tests of a node's own engine read: its
 * wrapper, its node and its engine watch, by node index.
 */
class WrappedEngineCluster<E extends InferenceEngine> {
  final OracleCluster c;
  final List<E> engines = new ArrayList<>();

  WrappedEngineCluster(int n, RouterConfig config, UnaryOperator<SimulatedEngine.Builder> tweak,
      Function<InferenceEngine, E> wrap, OracleCluster.Hooks hooks) {
    c = OracleCluster.withWrappedEngines(n, config, 11, tweak, wrap, engines, hooks);
  }

  E engine(int i) {
    return engines.get(i);
  }

  RouterNode node(int i) {
    return c.node("n" + i);
  }

  EngineStallStats watch(int i) {
    return node(i).engineStallStats().orElseThrow();
  }

  /** Runs the simulation to {@code f}'s completion (at most 10 simulated minutes). */
  <T> T await(CompletableFuture<T> f) {
    assertTrue(c.runUntilDone(f).isDone(), "never completed");
    return f.join();
  }

  void advanceBy(long nanos) {
    c.sim.advanceTo(c.sim.nanoTime() + nanos);
  }
}
