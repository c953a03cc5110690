package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class KvEventsWatchTest {

  static VllmKvEventSubscriber.Stats stats(long connects, long failures, long messages,
      long otherTopic, long replayed) {
    return new VllmKvEventSubscriber.Stats(connects, failures, 0, messages, 0, otherTopic, 0,
        replayed, 0, 0, 0);
  }

  final AtomicReference<VllmKvEventSubscriber.Stats> events =
      new AtomicReference<>(stats(1, 0, 0, 0, 0));
  final AtomicLong served = new AtomicLong();
  final KvEventsWatch watch =
      new KvEventsWatch("tcp://127.0.0.1:5557", events::get, served::get);

  @Test
  void aConnectedSubscriberWithoutEventsAfterServedRequestsIsReportedOnce() {
    served.set(KvEventsWatch.REQUESTS - 1);
    assertNull(watch.check(), "too few requests to tell");
    served.set(KvEventsWatch.REQUESTS);
    String w = watch.check();
    assertNotNull(w);
    assertTrue(w.contains("tcp://127.0.0.1:5557") && w.contains("enable_kv_cache_events"), w);
    assertNull(watch.check(), "said once");
  }

  @Test
  void eventsThatArriveLiveOrByReplaySilenceIt() {
    served.set(1_000);
    events.set(stats(1, 0, 1, 0, 0));
    assertNull(watch.check());
    events.set(stats(1, 0, 0, 0, 1));
    assertNull(watch.check());
  }

  @Test
  void theWarningNamesTheLikelyCause() {
    served.set(100);
    events.set(stats(0, 7, 0, 0, 0));
    String never = watch.check();
    assertTrue(never.contains("never connected") && never.contains("7 failed"), never);

    KvEventsWatch other = new KvEventsWatch("tcp://h:1", () -> stats(1, 0, 0, 12, 0), () -> 100);
    String topic = other.check();
    assertTrue(topic.contains("12 messages of other topics") && topic.contains("--kv-events-topic"),
        topic);
  }
}
