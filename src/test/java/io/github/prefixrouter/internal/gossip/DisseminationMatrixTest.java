package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * In the spirit of ScaleCube's gossip tests: for each (nodes, loss, one-way delay), a cluster
 * that has formed in simulated time gets a change at one node, and every node must see it
 * within the stated bound of rounds:
 *
 * <pre>bound(N, loss) = ceil((2 * log2(N) + 3) / (1 - loss)^2)</pre>
 *
 * (the loss-free target divided by the chance that a push-pull exchange's two legs both
 * arrive). A round is one gossip interval (1 s, jitter 10%, fanout 3).
 */
class DisseminationMatrixTest {

  static int bound(int n, double loss) {
    double log2 = Math.log(n) / Math.log(2);
    return (int) Math.ceil((2 * log2 + 3) / ((1 - loss) * (1 - loss)));
  }

  @ParameterizedTest(name = "{0} nodes, {1} loss, {2} ms")
  @CsvSource({"4, 0.0, 2", "10, 0.5, 2", "50, 0.1, 100", "256, 0.05, 20"})
  void everyNodeLearnsEveryChangeWithinTheBound(int n, double loss, int delayMillis) {
    int worst = measure(n, loss, delayMillis, n > 100 ? 3 : 5, 7L * n);
    System.out.printf("dissemination: %d nodes, loss %.2f, delay %d ms: %d rounds (bound %d)%n",
        n, loss, delayMillis, worst, bound(n, loss));
    assertTrue(worst <= bound(n, loss),
        n + " nodes: slowest change took " + worst + " rounds, bound " + bound(n, loss));
  }

  @ParameterizedTest(name = "{0} nodes, {1} loss, {2} ms")
  @Tag("long")
  @CsvSource({"4, 0.0, 2", "10, 0.5, 2", "50, 0.1, 100", "256, 0.05, 20", "100, 0.3, 200"})
  void manySeeds(int n, double loss, int delayMillis) {
    for (long seed = 1; seed <= 5; seed++) {
      int worst = measure(n, loss, delayMillis, 10, seed * 1_000 + n);
      assertTrue(worst <= bound(n, loss), "seed " + seed + ": " + worst + " rounds");
    }
  }

  /** Returns the most rounds any of {@code changes} changes took to reach every node. */
  static int measure(int n, double loss, int delayMillis, int changes, long seed) {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofSeconds(1)).fanout(3)
        .suspectAfter(Duration.ofSeconds(20)).deadAfter(Duration.ofSeconds(60))
        .forgetAfter(Duration.ofSeconds(120)).build();
    SimCluster c = SimCluster.of(n, seed, config);
    c.delayNanos = delayMillis * 1_000_000L;
    c.extraDelayNanos = c.delayNanos / 2;
    // form the cluster without loss, then turn loss on
    for (int r = 0; r < 200 && !membershipComplete(c, n); r++) {
      c.runFor(c.interval());
    }
    assertTrue(membershipComplete(c, n), "cluster of " + n + " did not form");
    c.runFor(5 * c.interval());
    c.loss = loss;
    SplittableRandom rnd = new SplittableRandom(seed);
    int worst = 0;
    for (int k = 0; k < changes; k++) {
      GossipEngine origin = c.nodes.get(rnd.nextInt(n));
      long block = rnd.nextLong() | 1;
      origin.localSummary().onStored(new long[] {block});
      int rounds = 0;
      while (!allSee(c, origin, block)) {
        c.runFor(c.interval());
        rounds++;
        if (rounds > 200) {
          break;
        }
      }
      worst = Math.max(worst, rounds);
    }
    return worst;
  }

  static boolean membershipComplete(SimCluster c, int n) {
    for (GossipEngine e : c.nodes) {
      if (e.view().peers().size() != n - 1) {
        return false;
      }
    }
    return true;
  }

  static boolean allSee(SimCluster c, GossipEngine origin, long block) {
    long[] chain = {block};
    for (GossipEngine e : c.nodes) {
      if (e == origin) {
        continue;
      }
      int[] out = new int[e.slotCapacity()];
      if (e.leadingBlocks(chain, 1, out) < 1) {
        return false;
      }
    }
    return true;
  }
}
