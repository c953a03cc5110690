package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.testing.Await;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.IntSupplier;
import org.junit.jupiter.api.Test;

/**
 * A node whose {@link OpenAiCompatibleEngine} subscribes to a vLLM-shaped KV-event publisher
 * (JeroMQ): the node's local tree follows what the publisher reports, stored, removed, lost and
 * replayed, through the real subscriber thread, decoder and engine-driven tree.
 */
class VllmKvEventsNodeTest {

  private static final int BLOCK = 16;

  @Test
  void theNodesTreeMirrorsTheEventsVllmPublishes() throws Exception {
    try (FakeVllmPublisher vllm = new FakeVllmPublisher(100)) {
      String replay = vllm.startReplay();
      OpenAiCompatibleEngine engine = OpenAiCompatibleEngine.builder()
          .baseUrl("http://127.0.0.1:9") // never called: the test only routes
          .kvEvents(VllmKvEventSubscriber.builder()
              .endpoint(vllm.endpoint())
              .replayEndpoint(replay)
              .blockSize(BLOCK))
          .build();
      assertTrue(engine.publishesCacheEvents());
      assertNull(engine.kvEventSubscriber(), "nothing subscribes before a node is built on it");

      SimulatedScheduler time = new SimulatedScheduler();
      InMemoryNetwork network = new InMemoryNetwork(time, 1);
      PrefixRouterNode node = PrefixRouterNode.builder()
          .nodeId("a")
          .config(RouterConfig.builder().blockSize(BLOCK).build())
          .transport(network.transport("a"))
          .engine(engine)
          .clock(time).scheduler(time).random(new SplittableRandom(1))
          .seeds(List.of())
          .build();
      // docs/vllm-kv-events.md: the node hands the engine its listener when it is built
      VllmKvEventSubscriber sub = engine.kvEventSubscriber();
      assertTrue(sub != null, "the node handed the engine its listener when it was built");
      node.start();
      try {

        // a subscriber only hears what is published after its subscription reached the PUB
        long seq = 0;
        while (sub.receiverStats().batchesApplied() == 0) {
          vllm.publish(seq++, Batches.batch(Batches.cleared()));
          Thread.sleep(10);
          assertTrue(seq < 2_000, "the subscriber never received a message");
        }
        awaitQuiet(sub);

        int[] system = tokens(1_000, 4 * BLOCK);   // 4 blocks
        int[] question = tokens(9_000, 10);
        int[] prompt = concat(system, question);
        IntSupplier localMatch = () -> local(node.explain(InferenceRequest.of("q", prompt)));
        assertEquals(0, localMatch.getAsInt());

        long[] hashes = {0x1111L, 0x2222L, -0x3333L, 0x4444L};
        vllm.publish(seq++, Batches.batch(Batches.stored(null, hashes, system, BLOCK)));
        Await.until(() -> localMatch.getAsInt() == 4 * BLOCK, "the stored blocks reach the tree");

        // vLLM evicts the third block (and so the fourth, which continues it)
        vllm.publish(seq++, Batches.batch(Batches.removed(-0x3333L)));
        Await.until(() -> localMatch.getAsInt() == 2 * BLOCK, "the removal reaches the tree");

        // a message lost on the way (another prompt's blocks) is fetched by replay
        int[] other = tokens(5_000, 2 * BLOCK);
        vllm.lose(seq++, Batches.batch(Batches.stored(null, new long[] {0x5555L, 0x6666L},
            other, BLOCK)));
        vllm.publish(seq++, Batches.batch(Batches.stored(0x2222L, new long[] {0x7777L},
            java.util.Arrays.copyOfRange(system, 2 * BLOCK, 3 * BLOCK), BLOCK)));
        int[] otherPrompt = concat(other, question);
        Await.until(() -> localMatch.getAsInt() == 3 * BLOCK
                && local(node.explain(InferenceRequest.of("o", otherPrompt))) == 2 * BLOCK,
            "the replayed and the live message both reach the tree");
        assertEquals(1, sub.stats().replaysRequested());
        assertEquals(1, sub.stats().replayedMessages());
        assertEquals(0, sub.receiverStats().gaps());
        assertEquals(0, sub.receiverStats().malformedBatches());

        // vLLM resets its prefix cache
        vllm.publish(seq++, Batches.batch(Batches.cleared()));
        Await.until(() -> localMatch.getAsInt() == 0, "the clear reaches the tree");

        // a hybrid model: its full-attention and sliding-window KV-cache groups report the same
        // prompt; the sliding group's eviction of the early blocks leaves the prefix cached
        vllm.publish(seq++, GroupedEvents.stored(true, 0L, "full_attention", BLOCK, null,
            system, hashes));
        vllm.publish(seq++, GroupedEvents.stored(true, 1L, "sliding_window", BLOCK, null,
            system, hashes[2], hashes[3]));
        vllm.publish(seq++, GroupedEvents.removed(true, 1L, hashes[0], hashes[1]));
        Await.until(() -> sub.receiverStats().otherGroupEvents() == 2,
            "the sliding-window group's events reach the receiver");
        assertEquals(4 * BLOCK, localMatch.getAsInt());
      } finally {
        node.close();
        engine.close();
      }
      Thread reader = findThread(VllmKvEventSubscriber.THREAD_NAME);
      assertFalse(reader != null && reader.isAlive(), "the reader thread ended with close()");
    }
  }

  private static int local(RouteDecision d) {
    return d.candidates().stream().filter(RouteDecision.Candidate::local).findFirst()
        .orElseThrow().matchedTokens();
  }

  /** Waits until no message arrived for a while (the warm-up ones still in flight). */
  private static void awaitQuiet(VllmKvEventSubscriber sub) throws InterruptedException {
    long last = -1;
    while (true) {
      long now = sub.stats().messages();
      if (now == last) {
        return;
      }
      last = now;
      Thread.sleep(200);
    }
  }

  private static Thread findThread(String name) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals(name)).findFirst().orElse(null);
  }

  private static int[] tokens(int first, int n) {
    int[] t = new int[n];
    for (int i = 0; i < n; i++) {
      t[i] = first + i;
    }
    return t;
  }

  private static int[] concat(int[] a, int[] b) {
    int[] c = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, c, a.length, b.length);
    return c;
  }
}
