package io.github.prefixrouter.engine.reference;

import io.github.prefixrouter.contract.InferenceEngineContractTest;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;

/** The reference engine against the InferenceEngine contract. */
class ReferenceEngineContractTest extends InferenceEngineContractTest {

  /** A small cache, which the kit's eviction checks fill with a few dozen prompts. */
  private static final int CACHE_TOKENS = 2048;

  private final List<ReferenceEngine> engines = new ArrayList<>();

  @Override
  protected InferenceEngine createEngine() {
    ReferenceEngine e = ReferenceEngine.builder().cacheCapacityTokens(CACHE_TOKENS).build();
    engines.add(e);
    return e;
  }

  @Override
  protected long cacheCapacityTokens() {
    return CACHE_TOKENS;
  }

  /** It streams every token as it is decoded. */
  @Override
  protected boolean streamsWholeOutput() {
    return true;
  }

  /** A closed engine fails every request with an {@code EngineException}. */
  @Override
  protected boolean failNextRequest(InferenceEngine engine) {
    ((ReferenceEngine) engine).close();
    return true;
  }

  @AfterEach
  void close() {
    engines.forEach(ReferenceEngine::close);
  }
}
