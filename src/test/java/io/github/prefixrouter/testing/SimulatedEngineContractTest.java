package io.github.prefixrouter.testing;

import io.github.prefixrouter.contract.InferenceEngineContractTest;
import io.github.prefixrouter.spi.InferenceEngine;
import java.time.Duration;
import java.util.function.BooleanSupplier;

/** The simulated engine keeps the engine contract. */
class SimulatedEngineContractTest extends InferenceEngineContractTest {

  private final SimulatedScheduler sim = new SimulatedScheduler();

  @Override
  protected InferenceEngine createEngine() {
    return SimulatedEngine.builder().scheduler(sim).slots(2).capacityTokens(4096).build();
  }

  @Override
  protected long cacheCapacityTokens() {
    return 4096;
  }

  @Override
  protected boolean streamsWholeOutput() {
    return true; // the last piece goes with the result
  }

  @Override
  protected boolean failNextRequest(InferenceEngine engine) {
    ((SimulatedEngine) engine).failNext(1);
    return true;
  }

  @Override
  protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
    return SimulatedTime.await(sim, condition, max);
  }
}
