package io.github.prefixrouter.testing;

import io.github.prefixrouter.contract.InferenceEngineContractTest;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;

/**
 * {@link ForwardingEngine}, the base of the engine wrappers of the tests and the benchmarks,
 * keeps the engine contract around the reference engine: what it passes on, and the default it
 * keeps for a streamed run.
 */
class ForwardingEngineContractTest extends InferenceEngineContractTest {

  private static final int CACHE_TOKENS = 2048;

  private final List<ReferenceEngine> engines = new ArrayList<>();

  @Override
  protected InferenceEngine createEngine() {
    ReferenceEngine e = ReferenceEngine.builder().cacheCapacityTokens(CACHE_TOKENS).build();
    engines.add(e);
    return new ForwardingEngine(e);
  }

  @Override
  protected long cacheCapacityTokens() {
    return CACHE_TOKENS;
  }

  /** A closed engine fails every request with an {@code EngineException}. */
  @Override
  protected boolean failNextRequest(InferenceEngine engine) {
    ((ReferenceEngine) ((ForwardingEngine) engine).delegate).close();
    return true;
  }

  @AfterEach
  void close() {
    engines.forEach(ReferenceEngine::close);
  }
}
