package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.spi.Scheduler;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class KvEventsWatchTest {

  static VllmKvEventSubscriber.Stats stats(long connects, long failures, long messages,
      long otherTopic, long replayed) {
    return new VllmKvEventSubscriber.Stats(connects, failures, 0, messages, 0, otherTopic, 0,
        replayed, 0, 0, 0, 0);
  }

  final AtomicReference<VllmKvEventSubscriber.Stats> events =
      new AtomicReference<>(stats(1, 0, 0, 0, 0));
  final AtomicLong served = new AtomicLong();
  final KvEventsWatch watch =
      new KvEventsWatch("tcp://127.0.0.1:5557", "", events::get, served::get);

  @Test
  void aConnectedSubscriberWithoutEventsAfterServedRequestsIsReportedOnce() {
    served.set(KvEventsWatch.REQUESTS - 1);
    assertNull(watch.check(), "too few requests to tell");
    served.set(KvEventsWatch.REQUESTS);
    String w = watch.check();
    assertNotNull(w);
    assertTrue(w.contains("tcp://127.0.0.1:5557") && w.contains("prefix caching"), w);
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

    KvEventsWatch other = new KvEventsWatch("tcp://h:1", "kv", () -> stats(1, 0, 0, 12, 0),
        () -> 100);
    String topic = other.check();
    assertTrue(topic.contains("12 messages of other topics") && topic.contains("--kv-events-topic"),
        topic);
  }

  @Test
  void aServerWithoutEventsOnIsNeverConnectedToAndThatWarningNamesTheFlag() {
    // vLLM binds no publisher unless its --kv-events-config has "enable_kv_cache_events": true
    // (and a "publisher" other than "null"): the node's connection is refused, never made
    served.set(100);
    events.set(stats(0, 7, 0, 0, 0));
    String w = watch.check();
    assertTrue(w.contains("never connected") && w.contains("enable_kv_cache_events"), w);
  }

  @Test
  void aConnectedButSilentPublisherIsNotTakenForAServerWithoutEvents() {
    // connected: a publisher is bound there, so the server's events are on; it sends nothing
    // when it caches nothing (vLLM without prefix caching publishes no store)
    served.set(100);
    String w = watch.check();
    assertTrue(w.contains("is connected") && w.contains("prefix caching")
        && !w.contains("enable_kv_cache_events"), w);
  }

  @Test
  void aConnectedButSilentPublisherIsAskedForTheNodesTopicOnlyWhenTheNodeHasOne() {
    // a publisher sends a subscriber only the topics it subscribed to: with a topic of its own,
    // the node hears nothing of a server publishing on another; with none, it takes every topic
    KvEventsWatch ownTopic = new KvEventsWatch("tcp://h:1", "kv-events",
        () -> stats(1, 0, 0, 0, 0), () -> 100);
    String w = ownTopic.check();
    assertTrue(w.contains("--kv-events-topic 'kv-events'"), w);
    served.set(100);
    String every = watch.check();
    assertTrue(!every.contains("--kv-events-topic"), every);
  }

  @Test
  void aConnectionDroppedForSilenceIsNamedWithItsFlag() {
    // the silence check drops a connection on which nothing arrives while the server answers:
    // with no event ever, that is the server publishing nothing the node takes, which the
    // warning says
    served.set(100);
    events.set(new VllmKvEventSubscriber.Stats(4, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 3));
    String w = watch.check();
    assertTrue(w.contains("dropped and made again 3 times for silence")
        && w.contains("--kv-events-silence") && w.contains("prefix caching"), w);
  }

  @Test
  void aCheckThatThrowsDoesNotEndTheWatch() {
    List<Runnable> tasks = new ArrayList<>();
    Scheduler scheduler = (delay, task) -> {
      tasks.add(task);
      return () -> false;
    };
    AtomicLong calls = new AtomicLong();
    KvEventsWatch failing = new KvEventsWatch("tcp://h:1", "", () -> {
      if (calls.incrementAndGet() == 1) {
        throw new IllegalStateException("stats not ready");
      }
      return stats(1, 0, 0, 0, 0);
    }, () -> 100);
    NodeMain.watchKvEvents(scheduler, failing);
    assertEquals(1, tasks.size());
    try {
      tasks.remove(0).run();
    } catch (RuntimeException e) {
      // the assertion below tells whether the watch survived
    }
    assertEquals(1, tasks.size(), "a check that threw must not end the watch");
    tasks.remove(0).run();
    assertEquals(2, calls.get(), "the next check ran");
    assertEquals(0, tasks.size(), "the watch ends once it has spoken");
  }
}
