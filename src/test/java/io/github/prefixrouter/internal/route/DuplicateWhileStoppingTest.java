package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.StreamedDuplicateTest.answer;
import static io.github.prefixrouter.internal.route.StreamedDuplicateTest.decode;
import static io.github.prefixrouter.internal.route.StreamedDuplicateTest.generating;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.PrefixRouterNode.State;
import io.github.prefixrouter.internal.route.StreamedDuplicateTest.Served;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.spi.Transport;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * A duplicate FORWARD (same sender, origin, id and request) that arrives while the node stops
 * joins the execution it repeats, as it does while the node runs: the stop answers every
 * request it accepted, and refused BUSY the duplicate's sender would run the request a second
 * time elsewhere while it still runs here. What the stop refuses is new work: another request,
 * or the same one from another sender.
 */
class DuplicateWhileStoppingTest {

  static final long MS = 1_000_000L;

  private static boolean busy(CompletableFuture<byte[]> f) {
    return f.isDone() && decode(f.join()) instanceof ForwardCodec.Busy;
  }

  @Test
  void aDuplicateArrivingWhileTheNodeStopsGetsTheAnswerOfTheRequestItRepeats() {
    Served s = new Served();
    RouterNode n0 = s.c.node("n0");
    InferenceRequest r = generating("r", 1, 200); // 5 ms a token: a second
    CompletableFuture<byte[]> first = s.forward(r, 0);
    s.c.sim.advanceBy(100 * MS);
    assertEquals(1, s.c.engine("n0").stats().requests());
    CompletableFuture<Void> stopped = n0.stop();
    assertEquals(State.STOPPING, n0.state());

    CompletableFuture<byte[]> again = s.forward(r, 0); // the network delivered it twice
    s.c.sim.advanceBy(20 * MS);
    assertFalse(again.isDone(), () -> "the duplicate was answered before the request it"
        + " repeats: " + decode(again.join()));
    s.runUntilIdle();

    int[] out = expected(r);
    assertArrayEquals(out, answer(first));
    assertArrayEquals(out, answer(again));
    assertEquals(1, s.c.engine("n0").stats().requests(), "the duplicate ran again");
    assertEquals(0, n0.stats().refusedForPeers());
    assertEquals(1, n0.stats().servedForPeers());
    assertTrue(stopped.isDone());
    assertEquals(State.STOPPED, n0.state());
  }

  @Test
  void aStreamedDuplicateWhileTheNodeStopsGetsTheWholeStreamUnderItsTag() {
    Served s = new Served();
    InferenceRequest r = generating("r", 2, 200);
    CompletableFuture<byte[]> first = s.forward(r, 11);
    s.c.sim.advanceBy(300 * MS);
    assertTrue(s.assembled(11).length > 0, "nothing streamed before the stop");
    s.c.node("n0").stop();
    CompletableFuture<byte[]> again = s.forward(r, 22);
    s.runUntilIdle();

    int[] out = expected(r);
    assertArrayEquals(out, answer(first));
    assertArrayEquals(out, answer(again));
    assertTrue(s.assembled(22).length > 0, "nothing streamed under the duplicate's tag");
    assertArrayEquals(java.util.Arrays.copyOf(out, s.assembled(22).length), s.assembled(22));
    assertEquals(1, s.c.engine("n0").stats().requests(), "the duplicate ran again");
    assertEquals(State.STOPPED, s.c.node("n0").state());
  }

  @Test
  void aDuplicateThatJoinedIsAbandonedWithItsRequestWhenTheGracePeriodEnds() {
    Served s = new Served();
    RouterNode n0 = s.c.node("n0");
    InferenceRequest r = generating("r", 3, 2_000); // ten seconds
    CompletableFuture<byte[]> first = s.forward(r, 0);
    s.c.sim.advanceBy(100 * MS);
    n0.stop(Duration.ofMillis(500));
    CompletableFuture<byte[]> again = s.forward(r, 0);
    s.c.sim.advanceBy(100 * MS);
    assertFalse(again.isDone(), () -> "answered before the grace period ended: "
        + decode(again.join()));
    s.runUntilIdle();

    for (CompletableFuture<byte[]> f : java.util.List.of(first, again)) {
      assertTrue(f.isDone(), "unanswered");
      ForwardCodec.Message m = decode(f.join());
      assertTrue(assertInstanceOf(ForwardCodec.Failed.class, m).retryable(), String.valueOf(m));
    }
    assertEquals(1, s.c.engine("n0").stats().requests());
    assertEquals(1, s.c.engine("n0").stats().cancelled());
    assertEquals(State.STOPPED, n0.state());
  }

  @Test
  void whileTheNodeStopsOtherRequestsAreStillRefusedBusy() {
    Served s = new Served();
    RouterNode n0 = s.c.node("n0");
    InferenceRequest r = generating("r", 4, 200);
    CompletableFuture<byte[]> first = s.forward(r, 0);
    s.c.sim.advanceBy(100 * MS);
    n0.stop();
    // another request; the same id with another prompt; the same request from another sender
    CompletableFuture<byte[]> other = s.forward(generating("r2", 5, 200), 0);
    CompletableFuture<byte[]> reused = s.forward(generating("r", 6, 200), 0);
    Transport q = s.c.net.transport("q");
    q.start((from, p) -> CompletableFuture.completedFuture(new byte[0]));
    CompletableFuture<byte[]> fromQ = q.request(InMemoryNetwork.addressOf("n0"),
        ForwardCodec.forward(r, "p", 1), Duration.ofSeconds(60));
    s.c.sim.advanceBy(20 * MS);
    assertTrue(busy(other), "another request was not refused");
    assertTrue(busy(reused), "another request of the same id was not refused");
    assertTrue(busy(fromQ), "the request from another sender was not refused");
    s.runUntilIdle();
    assertArrayEquals(expected(r), answer(first));
    assertEquals(1, s.c.engine("n0").stats().requests());
    assertEquals(3, n0.stats().refusedForPeers());
    assertEquals(State.STOPPED, n0.state());
  }
}
