package io.github.prefixrouter.internal.gossip;

import static io.github.prefixrouter.internal.gossip.GenerationRefutationTest.claim;
import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.PeerAddress;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Two processes started with one node id used to raise each other's gossip generation for as
 * long as both ran, each logging a warning at every refutation and nothing saying what was
 * wrong. A node now takes its id to be in use by another process once it has refuted a higher
 * generation of itself {@value GossipEngine#ID_IN_USE_REFUTATIONS} times within {@value
 * GossipEngine#ID_IN_USE_WINDOW} rounds, logs that once at error and reports it ({@link
 * GossipEngine#nodeIdInUse()}) until no such generation has come for that long; a node
 * restarted below the generations its peers know (its clock stepped back) refutes once or twice
 * and is not reported.
 */
class NodeIdInUseTest {

  private static final long OLD = 1_000_000;
  private static final String REPORT = "node id node-1 is in use by another process";

  /** Three nodes at generation {@link #OLD}, their replicas converged. */
  private static SimCluster cluster() {
    SimCluster c = GenerationRefutationTest.cluster(23, 3);
    assertTrue(c.runUntilConverged(50) >= 0, c.firstDivergence());
    return c;
  }

  /** Another process with node 1's id, at another address, started at {@code generation}. */
  private static GossipEngine twin(SimCluster c, long generation) {
    GossipEngine e = c.add(new PeerAddress("node-1", "sim:1b"), 101, generation,
        List.of(SimCluster.addressOf(0)), c.config);
    e.start();
    return e;
  }

  @Test
  void twoProcessesWithOneNodeIdEachReportItOnceAndKeepGossiping() {
    SimCluster c = cluster();
    GossipEngine first = c.nodes.get(1);
    GossipEngine[] second = new GossipEngine[1];
    List<String> reports = logged(REPORT, () -> {
      second[0] = twin(c, OLD + 5); // started later, its clock ahead
      c.runFor(60 * c.interval());
      for (GossipEngine e : List.of(first, second[0])) {
        assertTrue(e.nodeIdInUse(), "after 60 rounds: "
            + e.counter(GossipCounter.GENERATIONS_REFUTED) + " refutations");
      }
      c.runFor(400 * c.interval()); // the conflict goes on: still reported, never again logged
    });
    for (GossipEngine e : List.of(first, second[0])) {
      assertTrue(e.nodeIdInUse());
      // still refuting, at the pace of one every 32 rounds after the first three
      long refuted = e.counter(GossipCounter.GENERATIONS_REFUTED);
      assertTrue(refuted >= 3 + 400 / 40 && refuted <= 3 + 460 / 32 + 1, "refuted " + refuted);
    }
    assertEquals(2, reports.size(), "one report per process: " + reports);
    assertEquals(1, first.counter(GossipCounter.NODE_ID_IN_USE_REPORTS));
    assertEquals(1, second[0].counter(GossipCounter.NODE_ID_IN_USE_REPORTS));
    for (String line : reports) {
      assertTrue(line.contains("ERROR"), line);
    }
    // the peers see the id's generations change, and report nothing of their own
    for (int i : new int[] {0, 2}) {
      assertFalse(c.nodes.get(i).nodeIdInUse());
      assertEquals(0, c.nodes.get(i).counter(GossipCounter.GENERATIONS_REFUTED));
    }
  }

  @Test
  void theReportEndsOnceTheOtherProcessStops() {
    SimCluster c = cluster();
    GossipEngine first = c.nodes.get(1);
    GossipEngine second = twin(c, OLD + 5);
    c.runFor(60 * c.interval());
    assertTrue(first.nodeIdInUse());
    c.crash(second);
    c.nodes.remove(second);
    List<String> ended = logged("no longer seems in use", () -> {
      c.runFor(GossipEngine.ID_IN_USE_WINDOW * c.interval());
      // the other process's last generation may still be refuted once, up to 32 rounds on
      c.runFor(40 * c.interval());
    });
    assertFalse(first.nodeIdInUse());
    assertEquals(1, ended.size(), ended.toString());
    long refuted = first.counter(GossipCounter.GENERATIONS_REFUTED);
    c.runFor(200 * c.interval());
    assertEquals(refuted, first.counter(GossipCounter.GENERATIONS_REFUTED));
    assertFalse(first.nodeIdInUse());
    assertTrue(c.runUntilConverged(50) >= 0, c.firstDivergence());
  }

  /**
   * Peers that knew two earlier runs of node 1, the second at a generation far above the first
   * (more than a refutation draws above a claim), tell a run restarted below both of them: it
   * refutes twice, as it must, and is not reported.
   */
  @Test
  void aRunRestartedBelowTwoEarlierRunsIsNotReported() {
    SimCluster c = cluster();
    GossipEngine node0 = c.nodes.get(0);
    GossipEngine node2 = c.nodes.get(2);
    String n0 = SimCluster.addressOf(0).address();
    String n1 = SimCluster.addressOf(1).address();
    String n2 = SimCluster.addressOf(2).address();
    c.crash(c.nodes.get(1));
    // a second run, far above the first, that only node 0 hears of
    for (String[] pair : new String[][] {{n0, n2}, {n2, n0}, {n1, n2}, {n2, n1}}) {
      c.cut.add(pair[0] + "|" + pair[1]);
    }
    long secondRun = OLD + 4 * GossipEngine.GENERATION_REFUTATION_SPREAD;
    GossipEngine second = c.add(1, secondRun, List.of(SimCluster.addressOf(0)));
    second.start();
    c.runFor(10 * c.interval());
    assertEquals(secondRun, node0.replicaVersion("node-1")[0]);
    assertEquals(OLD, node2.replicaVersion("node-1")[0]);
    c.crash(second);

    // the third run, its clock stepped back, hears node 2 (the first run) before node 0
    c.cut.clear();
    c.cut.add(n0 + "|" + n1);
    c.cut.add(n1 + "|" + n0);
    c.cut.add(n0 + "|" + n2);
    c.cut.add(n2 + "|" + n0);
    GossipEngine third = c.add(1, OLD / 2, List.of(SimCluster.addressOf(2)));
    List<String> reports = logged(REPORT, () -> {
      third.start();
      c.runFor(10 * c.interval());
      assertEquals(1, third.counter(GossipCounter.GENERATIONS_REFUTED), "the first run's");
      assertTrue(third.generation() < secondRun, "generation " + third.generation());
      c.heal();
      c.runFor(300 * c.interval());
    });
    assertEquals(2, third.counter(GossipCounter.GENERATIONS_REFUTED), "and the second run's");
    assertTrue(third.generation() > secondRun);
    assertFalse(third.nodeIdInUse());
    assertEquals(List.of(), reports);
    assertTrue(c.runUntilConverged(50) >= 0, c.firstDivergence());
  }

  /**
   * The rule's edges: three refutations at once are not a report; a fourth within {@value
   * GossipEngine#ID_IN_USE_WINDOW} rounds of the first is; refutations further apart never are,
   * however many.
   */
  @Test
  void theFourthRefutationWithinTheWindowIsAReportAndNoEarlierOne() {
    SimCluster c = cluster();
    GossipEngine me = c.nodes.get(1);
    for (int i = 0; i < GossipEngine.FREE_GENERATION_REFUTATIONS; i++) {
      claim(me, c.nodes.get(0), me.generation() + 10);
    }
    assertEquals(3, me.counter(GossipCounter.GENERATIONS_REFUTED));
    assertFalse(me.nodeIdInUse());
    c.runFor(33 * c.interval());
    assertFalse(me.nodeIdInUse());
    claim(me, c.nodes.get(0), me.generation() + 10);
    assertEquals(4, me.counter(GossipCounter.GENERATIONS_REFUTED));
    assertTrue(me.nodeIdInUse());

    SimCluster d = cluster();
    GossipEngine other = d.nodes.get(1);
    List<String> reports = logged(REPORT, () -> {
      for (int i = 0; i < 8; i++) {
        claim(other, d.nodes.get(0), other.generation() + 10);
        d.runFor(45 * d.interval()); // 4 refutations span 135 rounds: more than the window
      }
    });
    assertEquals(8, other.counter(GossipCounter.GENERATIONS_REFUTED));
    assertFalse(other.nodeIdInUse());
    assertEquals(List.of(), reports);
  }
}
