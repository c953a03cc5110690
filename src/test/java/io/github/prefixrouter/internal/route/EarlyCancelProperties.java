package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;

/**
 * Random interleavings of FORWARDs (lost, delivered once or several times), CANCELs (none, one
 * or two, before, during or after the run), answers, engine stalls ended by the engine timeout
 * and gaps longer than the memory of CANCELs, delivered to one serving node by two peers whose
 * request ids overlap (a key is a sender and an id, unique per request here). Checked against a
 * simple model: every FORWARD gets exactly one answer; a FORWARD whose request's latest CANCEL
 * arrived less than the memory's time bound before it is answered as cancelled and its request
 * does not run (no request runs after its CANCEL was received, within that bound); every other
 * FORWARD is answered as it was before CANCELs were remembered.
 */
class EarlyCancelProperties {

  /** One delivery of the script. */
  record Delivery(long at, int request, boolean forward) {}

  @Property
  void noCancelledRequestRunsAndEveryForwardIsAnsweredOnce(
      @ForAll @LongRange(min = 1, max = 1_000_000_000L) long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY)
        .forwardTimeout(Duration.ofMillis(100), Duration.ofSeconds(1))
        .engineTimeout(Duration.ofSeconds(2)).watermarks(1, 2).build();
    ServingHarness s = new ServingHarness(cfg, b -> b.slots(2)
        .random(new SplittableRandom(seed ^ 0x5EED)).stallProbability(0.1));
    long ttl = s.node.earlyCancels().ttlNanos();
    assertEquals(Duration.ofSeconds(3).toNanos(), ttl);

    // requests of distinct keys; the same id may come from both senders
    String[] senders = {"p", "q"};
    List<String> keys = new ArrayList<>();
    for (String sender : senders) {
      for (String id : new String[] {"a", "b", "c", "d"}) {
        keys.add(sender + "/" + id);
      }
    }
    int n = 1 + rnd.nextInt(8);
    List<String> senderOf = new ArrayList<>();
    List<InferenceRequest> requests = new ArrayList<>();
    List<Delivery> script = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      String key = keys.remove(rnd.nextInt(keys.size()));
      senderOf.add(key.substring(0, 1));
      requests.add(new InferenceRequest(key.substring(2), OracleCluster.prompt(rnd.nextLong(),
          16 + rnd.nextInt(48)), GenerationParams.greedy(1 + rnd.nextInt(30))));
      int forwards = pick(rnd, 0.1, 0.6, 0.2, 0.1); // 0: the FORWARD was lost
      int cancels = pick(rnd, 0.4, 0.45, 0.15);
      for (int k = 0; k < forwards + cancels; k++) {
        long at = rnd.nextLong(Duration.ofMillis(600).toNanos());
        if (rnd.nextInt(8) == 0) {
          at += ttl - Duration.ofMillis(300).toNanos() + rnd.nextLong(2 * ttl);
        }
        script.add(new Delivery(at, i, k < forwards));
      }
    }
    script.sort((x, y) -> Long.compare(x.at(), y.at()));

    List<Long> steps = new ArrayList<>();
    List<CompletableFuture<byte[]>> answers = new ArrayList<>();
    List<Delivery> forwardsDelivered = new ArrayList<>();
    long start = s.sim.nanoTime();
    for (Delivery d : script) {
      s.sim.advanceTo(start + d.at());
      if (d.forward()) {
        steps.add(s.forward(senderOf.get(d.request()), requests.get(d.request()), answers));
        forwardsDelivered.add(d);
      } else {
        steps.add(s.cancel(senderOf.get(d.request()), requests.get(d.request()).id()));
      }
    }
    s.advance(Duration.ofMinutes(10)); // stalls end at the engine timeout, queues drain

    // the model: stopped if the request's latest CANCEL before it came less than ttl before
    Set<Long> stoppedSteps = new HashSet<>();
    int expectedStopped = 0;
    int f = 0;
    for (int k = 0; k < script.size(); k++) {
      Delivery d = script.get(k);
      if (!d.forward()) {
        continue;
      }
      long lastCancel = Long.MIN_VALUE;
      boolean cancelled = false;
      for (int j = 0; j < k; j++) {
        Delivery e = script.get(j);
        if (!e.forward() && e.request() == d.request()) {
          lastCancel = e.at();
          cancelled = true;
        }
      }
      boolean stopped = cancelled && d.at() - lastCancel < ttl;
      CompletableFuture<byte[]> answer = answers.get(f++);
      assertTrue(answer.isDone() && !answer.isCompletedExceptionally(),
          "FORWARD " + d + " not answered: " + script);
      ForwardCodec.Message m = ServingHarness.decode(answer);
      assertEquals(requests.get(d.request()).id(), m.requestId());
      assertEquals(stopped, ServingHarness.stoppedAnswer(m), "FORWARD " + d + " answered " + m
          + "; script " + script);
      if (stopped) {
        expectedStopped++;
        stoppedSteps.add(steps.get(k));
      }
    }
    // every run of the engine happened while a FORWARD of its request was being delivered, and
    // none while a stopped one was
    for (ServingHarness.Call c : s.calls) {
      if (!c.execute()) {
        continue;
      }
      int k = steps.size() - 1;
      while (k >= 0 && steps.get(k) > c.step()) {
        k--;
      }
      assertTrue(k >= 0, "a run before any delivery");
      Delivery during = script.get(k);
      assertTrue(during.forward() && requests.get(during.request()).equals(c.request()),
          "a run of " + c.request().id() + " during " + during);
      assertFalse(stoppedSteps.contains(steps.get(k)),
          "request " + c.request().id() + " of " + senderOf.get(during.request())
              + " ran after its CANCEL: " + script);
    }
    assertEquals(expectedStopped, s.node.forwardsCancelledBeforeArrival());
    assertEquals(0, s.node.stats().inFlight());
  }

  /** An index drawn with the given probabilities (summing to 1). */
  private static int pick(SplittableRandom rnd, double... p) {
    double u = rnd.nextDouble();
    for (int i = 0; i < p.length - 1; i++) {
      u -= p[i];
      if (u < 0) {
        return i;
      }
    }
    return p.length - 1;
  }
}
