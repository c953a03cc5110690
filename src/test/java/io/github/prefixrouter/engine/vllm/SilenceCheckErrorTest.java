package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.engine.openai.FakeOpenAiServer;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.Await;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * The engine adapter tells the KV-event subscriber of each request the server answered
 * ({@link VllmKvEventSubscriber#requestCompleted}) before it hands the answer on: whatever that
 * call throws, an {@link Error} included, the caller still gets the answer.
 */
class SilenceCheckErrorTest {

  @Test
  void anErrorInTheSilenceCheckStillDeliversTheAnswer() throws Exception {
    AtomicBoolean broken = new AtomicBoolean();
    try (SilentPublisher vllm = new SilentPublisher();
        FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO_NOTHING_CACHED)) {
      VllmKvEventSubscriber.Builder events = VllmKvEventSubscriber.builder()
          .endpoint(vllm.endpoint())
          .blockSize(16)
          .silenceLimit(1, Duration.ZERO)
          .clock(() -> {
            if (broken.get()) {
              throw new StackOverflowError("the silence check's clock");
            }
            return System.nanoTime();
          });
      OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
          .baseUrl(server.baseUrl())
          .kvEvents(events)
          .build();
      try {
        engine.setCacheEventListener(new CacheEventListener() {});
        VllmKvEventSubscriber sub = engine.kvEventSubscriber();
        Await.until(() -> sub.stats().connects() == 1, "connected");
        broken.set(true);
        int[] prompt = new int[40];
        Arrays.fill(prompt, 7);
        EngineResult r = engine.execute(
                new InferenceRequest("r", prompt, new GenerationParams(4, 0.0, 1.0, 1L)))
            .get(20, TimeUnit.SECONDS);
        assertEquals(40, r.promptTokens(), "the server's answer");
        assertEquals(0, engine.load().total(), "the request has ended");
      } finally {
        engine.close();
      }
    }
  }
}
