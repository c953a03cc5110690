package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.engine.vllm.Batches;
import io.github.prefixrouter.engine.vllm.SilentPublisher;
import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.testing.Await;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The adapter with {@code kvEvents} in front of a server that keeps answering while its event
 * stream has gone silent (the connection open, nothing sent on it): the requests it completes
 * tell the subscriber, which drops the connection after {@code silenceLimit} of them and takes
 * the events published on the new one. Before, the subscriber waited on the silent connection
 * for ever and the listener heard nothing more.
 */
class OpenAiCompatibleEngineKvEventSilenceTest {

  private static final int BLOCK = 16;

  private final List<String> heard = new CopyOnWriteArrayList<>();

  private static byte[] stored(long hash) {
    int[] tokens = new int[BLOCK];
    Arrays.fill(tokens, (int) hash);
    return Batches.batch(Batches.stored(null, new long[] {hash}, tokens, BLOCK));
  }

  private static InferenceRequest request(int i) {
    int[] prompt = new int[40]; // 40 tokens and 4 generated: 2 full blocks, none cached
    Arrays.fill(prompt, 1000 + i);
    return new InferenceRequest("r" + i, prompt, new GenerationParams(4, 0.0, 1.0, 1L));
  }

  @Test
  void aSilentStreamIsMadeAgainAfterTheRequestsTheServerCompleted() throws Exception {
    try (SilentPublisher vllm = new SilentPublisher();
        FakeOpenAiServer server = FakeOpenAiServer.start(FakeOpenAiServer.ECHO_NOTHING_CACHED)) {
      OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
          .baseUrl(server.baseUrl())
          .kvEvents(VllmKvEventSubscriber.builder()
              .endpoint(vllm.endpoint())
              .blockSize(BLOCK)
              .reconnectBackoff(Duration.ofMillis(10), Duration.ofMillis(100))
              .silenceLimit(3, Duration.ZERO))
          .build();
      try {
        engine.setCacheEventListener(new CacheEventListener() {
          @Override
          public void onBlocksStored(long parent, long[] hashes, int[] tokenIds) {
            heard.add("stored " + hashes[0]);
          }

          @Override
          public void onAllCleared() {
            heard.add("cleared");
          }
        });
        VllmKvEventSubscriber sub = engine.kvEventSubscriber();
        Await.until(() -> vllm.subscriptions() == 1, "subscribed");
        vllm.send(1, 0, stored(11)); // seq 0: the first message on the connection
        Await.until(() -> heard.contains("stored 11"), "the first event");
        // the stream goes silent; the server answers on
        for (int i = 0; i < 2; i++) {
          engine.execute(request(i)).get(20, TimeUnit.SECONDS);
        }
        assertEquals(0, sub.stats().silenceReconnects(), "2 requests, below 3");
        engine.execute(request(2)).get(20, TimeUnit.SECONDS);
        assertEquals(1, sub.stats().silenceReconnects(), "the 3rd: " + sub.stats());
        Await.until(() -> vllm.subscriptions() == 2, "subscribed again");
        vllm.send(2, 0, stored(22)); // the first on the new one, seq 0 too
        Await.until(() -> heard.contains("stored 22"), "the event published after it: " + heard);
        assertEquals(List.of("stored 11", "stored 22"),
            heard.stream().filter(h -> !h.equals("cleared")).toList());
        assertEquals(2, sub.stats().connects(), sub.stats().toString());
      } finally {
        engine.close();
      }
    }
  }

  /** A server that fails every request stores nothing: its failures are not counted. */
  @Test
  void failedRequestsAreNotCounted() throws Exception {
    assertEquals(0, silenceReconnectsAfterFiveRequests(FakeOpenAiServer.ECHO_NOTHING_CACHED, true));
  }

  /**
   * A server that does not report its cached tokens leaves the check off: a request on a long
   * cached prefix may store no block, and could not be told from one that does.
   */
  @Test
  void answersWithoutCachedTokensAreNotCounted() throws Exception {
    assertEquals(0, silenceReconnectsAfterFiveRequests(FakeOpenAiServer.ECHO, false));
    assertTrue(silenceReconnectsAfterFiveRequests(FakeOpenAiServer.ECHO_NOTHING_CACHED, false) >= 1,
        "the same requests, the cached tokens reported, drop the silent stream");
  }

  /** Silence drops after five requests to a server answering {@code a}, or failing them all. */
  private long silenceReconnectsAfterFiveRequests(FakeOpenAiServer.Answer a,
      boolean failing) throws Exception {
    try (SilentPublisher vllm = new SilentPublisher();
        FakeOpenAiServer server = FakeOpenAiServer.start(a)) {
      if (failing) {
        server.fail(500, "{\"error\":\"down\"}");
      }
      OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
          .baseUrl(server.baseUrl())
          .kvEvents(VllmKvEventSubscriber.builder()
              .endpoint(vllm.endpoint())
              .blockSize(BLOCK)
              .silenceLimit(1, Duration.ZERO))
          .build();
      try {
        engine.setCacheEventListener(new CacheEventListener() {});
        VllmKvEventSubscriber sub = engine.kvEventSubscriber();
        Await.until(() -> sub.stats().connects() == 1, "connected");
        for (int i = 0; i < 5; i++) {
          engine.execute(request(i)).handle((r, e) -> null).get(20, TimeUnit.SECONDS);
        }
        return sub.stats().silenceReconnects();
      } finally {
        engine.close();
      }
    }
  }
}
