package io.github.prefixrouter.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import org.junit.jupiter.api.Test;

/**
 * The library's engines that publish cache events take one listener and refuse a second with
 * the same {@link IllegalStateException}, whose message a node's failed {@code build()} passes
 * on (docs/routing.md, PrefixRouterNode.Builder): one wording, whichever engine it runs on.
 */
class SecondCacheEventListenerTest {

  private static final String REFUSAL = "the cache event listener is already set";

  @Test
  void referenceEngineRefusesASecondListener() {
    try (ReferenceEngine e = ReferenceEngine.builder().cacheCapacityTokens(64).build()) {
      assertRefusesSecond(e);
    }
  }

  @Test
  void openAiCompatibleEngineWithKvEventsRefusesASecondListener() {
    // the subscriber's reader thread is never started: nothing connects
    OpenAiCompatibleEngine e = OpenAiCompatibleEngine.builder().baseUrl("http://127.0.0.1:9")
        .kvEvents(VllmKvEventSubscriber.builder().endpoint("tcp://127.0.0.1:9").blockSize(16)
            .threadFactory(r -> new Thread(() -> {})))
        .build();
    try {
      assertRefusesSecond(e);
      assertNotNull(e.kvEventSubscriber(), "the first listener's subscription stays");
    } finally {
      e.close();
    }
  }

  @Test
  void simulatedEngineRefusesASecondListener() {
    SimulatedScheduler time = new SimulatedScheduler();
    SimulatedEngine e = SimulatedEngine.builder().scheduler(time).clock(time)
        .capacityTokens(1_024).publishesCacheEvents(true).build();
    assertRefusesSecond(e);
  }

  private static void assertRefusesSecond(InferenceEngine e) {
    e.setCacheEventListener(new CacheEventListener() {});
    IllegalStateException second = assertThrows(IllegalStateException.class,
        () -> e.setCacheEventListener(new CacheEventListener() {}), "a second listener");
    assertEquals(REFUSAL, second.getMessage(), e.getClass().getSimpleName());
    assertSame(IllegalStateException.class, second.getClass());
  }
}
