package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static io.github.prefixrouter.internal.route.OracleCluster.request;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A peer whose replica overstated its cache for a spell loses this node's trust, so this node
 * stops forwarding to it; once the replica is accurate again, the distrust fades and forwards
 * there resume. Only an answered forward measures a peer's accuracy, so distrust that did not
 * fade would keep the node from ever measuring the peer again. In simulated time, on an oracle
 * view whose belief about the peer the test sets.
 */
class PeerTrustTest {

  static final long SECOND = 1_000_000_000L;

  /** A request a second at n0 for a new 512-token prompt; whether n1 served it. */
  static final class Workload {
    final OracleCluster c;
    int next;

    Workload(OracleCluster c) {
      this.c = c;
    }

    /** The next prompt is in n1's cache (its replica, the oracle, is right) or not. */
    boolean send(boolean n1Holds) {
      int[] t = prompt(10_000 + next, 512);
      if (n1Holds) {
        c.warm("n1", t);
      }
      InferenceResponse a = c.submitAndWait("n0", request("r" + next++, t));
      c.sim.advanceTo(c.sim.nanoTime() + SECOND);
      return "n1".equals(a.servedBy());
    }
  }

  @Test
  void forwardsToAPeerResumeOnceItsReplicaIsAccurateAgain() {
    RouterConfig config = RouterConfig.builder().policy(RoutingPolicy.COST_AWARE)
        .initialPrefillNanosPerToken(200_000).coldPlacement(false).localCaching(false).build();
    // a 50 ms round trip against about 100 ms of prefill: a forward pays only for a peer
    // trusted with about half its estimate or more (three misses in a row take it below)
    OracleCluster c = new OracleCluster(2, config, 5).rtt(Duration.ofMillis(25)).start();
    Workload w = new Workload(c);
    for (int i = 0; i < 5; i++) {
      assertTrue(w.send(true), "n1 holds the prompt: forwarded");
    }

    // a spell in which n0 takes n1 for holding every prompt, and n1 holds none (its engine lost
    // its cache under a replica that still shows it): each forward there comes back a miss
    c.believesWarm("n0", "n1");
    List<Boolean> spell = new ArrayList<>();
    for (int i = 0; i < 60; i++) {
      spell.add(w.send(false));
    }
    assertTrue(spell.subList(0, 2).stream().allMatch(f -> f), "trusted at first: " + spell);
    long late = spell.subList(30, 60).stream().filter(f -> f).count();
    assertTrue(late <= 3, "a peer that keeps missing is forwarded to rarely: " + spell);

    // the replica is right again: n1 holds what n0 believes it holds
    c.believedWarm.get("n0").remove("n1");
    List<Boolean> after = new ArrayList<>();
    for (int i = 0; i < 120; i++) {
      after.add(w.send(true));
    }
    // within the default distrustHalfLife (60 s): about a quarter of it, from where the last
    // miss left the peer
    int first = after.indexOf(true);
    assertTrue(first >= 0 && first < 60,
        "n0 never forwarded to n1 again in the " + after.size() + " s after n1's replica became"
            + " accurate (first forward at " + first + " s): " + after);
    assertEquals(List.of(), after.subList(first + 5, after.size()).stream()
        .filter(f -> !f).toList(), "forwarded again once measured right: " + after);
  }
}
