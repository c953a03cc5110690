package io.github.prefixrouter.server;

import io.github.prefixrouter.contract.InferenceEngineContractTest;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.function.BooleanSupplier;

/**
 * The engine {@code NodeMain} hands its node, {@link EngineKeyWatch} around the model server's
 * engine, keeps the engine contract: the watch passes every call through, futures, streamed
 * output, cancels and cache events included (here around a simulated engine).
 */
class EngineKeyWatchContractTest extends InferenceEngineContractTest {

  private final SimulatedScheduler sim = new SimulatedScheduler();

  @Override
  protected InferenceEngine createEngine() {
    SimulatedEngine engine =
        SimulatedEngine.builder().scheduler(sim).slots(2).capacityTokens(4096).build();
    return new EngineKeyWatch(engine, "http://engine.invalid:8000", true);
  }

  @Override
  protected long cacheCapacityTokens() {
    return 4096;
  }

  @Override
  protected boolean streamsWholeOutput() {
    return true; // the simulated engine's last piece goes with the result
  }

  @Override
  protected boolean failNextRequest(InferenceEngine engine) {
    ((SimulatedEngine) ((EngineKeyWatch) engine).watched()).failNext(1);
    return true;
  }

  @Override
  protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
    long deadline = sim.nanoTime() + max.toNanos();
    while (!condition.getAsBoolean()) {
      if (sim.nanoTime() >= deadline) {
        return false;
      }
      sim.advanceTo(Math.min(deadline, sim.nanoTime() + 1_000_000L));
    }
    return true;
  }
}
