package io.github.prefixrouter.faults;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.faults.FaultCluster.Outcome;
import io.github.prefixrouter.faults.FaultCluster.Wiring;
import io.github.prefixrouter.faults.FaultyEngine.Sabotage;
import io.github.prefixrouter.internal.gossip.GossipProbe;
import io.github.prefixrouter.internal.route.NodeProbe;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The campaign's invariants must be able to fail: deliberately broken runs are caught. */
class FaultHarnessSelfTest {

  /** Seed 5 forwards plenty of requests under the stale view (see the campaign's figures). */
  private static final long FORWARDING_SEED = 5;

  @Test
  void aWrongAnswerFromAPeerIsCaught() {
    Outcome clean = FaultCluster.run(FORWARDING_SEED, Wiring.STALE_VIEW);
    assertTrue(clean.ok(), () -> String.join("\n", clean.violations()));
    assertTrue(clean.summary().forwarded() > 0, "the seed must forward something");

    Outcome o = FaultCluster.run(FORWARDING_SEED, Wiring.STALE_VIEW,
        Sabotage.WRONG_FORWARDED_ANSWER);
    assertTrue(o.violations().stream().anyMatch(v -> v.contains("a local engine gives")),
        () -> String.join("\n", o.violations()));
  }

  @Test
  void aLostAnswerIsCaught() {
    long seed = 1;
    while (new FaultPlan(seed).config.engineTimeout().toSeconds() < 60) {
      seed++;
    }
    Outcome o = FaultCluster.run(seed, Wiring.LIBRARY, Sabotage.LOSE_LOCAL_ANSWER);
    // without an engine deadline the request hangs; with one it fails although the engine
    // never reported a failure: either way the run is caught
    assertTrue(o.violations().stream().anyMatch(v -> v.contains("never completed")
            || v.contains("never failed")),
        () -> String.join("\n", o.violations()));
  }

  @Test
  void aNodeStillFailingAfterTheRunIsCaught() {
    // seed 5 draws an outage of every engine; its run is clean when they end
    assertTrue(new FaultPlan(5).outage);
    Outcome clean = FaultCluster.run(5, Wiring.LIBRARY);
    assertTrue(clean.ok(), () -> String.join("\n", clean.violations()));
    assertTrue(clean.summary().failingSpells() > 0, "the seed must make an engine failing");

    Outcome o = FaultCluster.run(5, Wiring.LIBRARY, Sabotage.OUTAGE_NEVER_ENDS);
    assertTrue(o.violations().stream().anyMatch(v -> v.contains("the failing spell never ended")),
        () -> String.join("\n", o.violations()));
  }

  /** The first seed from {@code from} whose plan draws scoped requests at this share or more. */
  private static long scopedSeed(long from, double share) {
    long seed = from;
    while (new FaultPlan(seed).scopedShare < share) {
      seed++;
    }
    return seed;
  }

  @Test
  void aScopeLostOnTheWayToAPeerIsCaught() {
    // the first seeds with many scoped requests until one forwards a scoped request
    for (Wiring w : Wiring.values()) {
      boolean caught = false;
      long seed = FORWARDING_SEED;
      for (int tries = 0; tries < 20 && !caught; tries++) {
        seed = scopedSeed(seed + 1, 0.5);
        caught = FaultCluster.run(seed, w, Sabotage.FORWARD_DROPS_SCOPE).violations().stream()
            .anyMatch(v -> v.contains("its client submitted it in"));
      }
      assertTrue(caught, w + ": no seed caught a forwarded request run without its scope");
    }
  }

  @Test
  void aScopedChainCreditedToTheDefaultScopeIsCaught() {
    long seed = scopedSeed(1, 0.5);
    Outcome clean = FaultCluster.run(seed, Wiring.LIBRARY);
    assertTrue(clean.ok(), () -> String.join("\n", clean.violations()));
    assertTrue(clean.summary().scoped() > 0);
    // the engine reports every stored chain as the default scope's: the library's tree holds
    // scoped chains under the default root
    Outcome events = FaultCluster.run(seed, Wiring.LIBRARY, Sabotage.SCOPE_BLIND_EVENTS);
    assertTrue(events.violations().stream().anyMatch(v -> v.contains("never ran in that scope")),
        () -> String.join("\n", events.violations()));
    // a local index that looks up every scope in the default scope's cache
    Outcome index = FaultCluster.run(seed, Wiring.STALE_VIEW, Sabotage.SCOPE_BLIND_INDEX);
    assertTrue(index.violations().stream().anyMatch(v -> v.contains("never ran in that scope")),
        () -> String.join("\n", index.violations()));
  }

  /** Seeds tried (from 1) for each planted fault of self-managed trees: all early ones. */
  private static final int EARLY_SEEDS = 12;

  /**
   * The first seed up to {@link #EARLY_SEEDS} whose plan passes {@code eligible}, runs clean,
   * and with {@code sabotage} reports a violation containing {@code expected}; fails if none.
   */
  private static long caughtAtAnEarlySeed(Wiring w, FaultyEngine.Sabotage sabotage,
      java.util.function.Predicate<FaultPlan> eligible, String expected) {
    StringBuilder tried = new StringBuilder();
    for (long seed = 1; seed <= EARLY_SEEDS; seed++) {
      FaultPlan plan = new FaultPlan(seed);
      if (plan.selfManagedCount() == 0 || !eligible.test(plan)) {
        continue;
      }
      Outcome o = FaultCluster.run(seed, w, sabotage);
      if (o.violations().stream().anyMatch(v -> v.contains(expected))) {
        Outcome clean = FaultCluster.run(seed, w);
        assertTrue(clean.ok(), () -> String.join("\n", clean.violations()));
        return seed;
      }
      tried.append(' ').append(seed).append(": ").append(o.violations());
    }
    throw new AssertionError(w + ": " + sabotage + " was not caught at an early seed;" + tried);
  }

  /** Whether some self-managed node's engine may fail or its runs time out. */
  private static boolean failsOnASelfManagedNode(FaultPlan plan) {
    for (int i = 0; i < plan.nodes; i++) {
      if (plan.selfManaged[i] && plan.failureProbability[i] > 0) {
        return true;
      }
    }
    return false;
  }

  @Test
  void aLeaseLostOnTheFailurePathOfASelfManagedNodeIsCaught() {
    // a lease on the node's tree for every run, released only when the run succeeds
    for (Wiring w : Wiring.values()) {
      caughtAtAnEarlySeed(w, FaultyEngine.Sabotage.LEASE_LEAKED_ON_FAILURE,
          FaultHarnessSelfTest::failsOnASelfManagedNode, "pinned by leases after the cluster");
    }
  }

  @Test
  void aSelfManagedNodeCreditingWhatItForwardedIsCaught() {
    for (Wiring w : Wiring.values()) {
      caughtAtAnEarlySeed(w, FaultyEngine.Sabotage.CREDIT_FORWARDED, plan -> true,
          "no prefix of a prompt its engine answered");
    }
  }

  @Test
  void aScopeBlindSelfManagedRecordIsCaught() {
    for (Wiring w : Wiring.values()) {
      caughtAtAnEarlySeed(w, FaultyEngine.Sabotage.SCOPE_BLIND_RECORD,
          plan -> plan.scopedShare > 0, "no prefix of a prompt its engine answered");
    }
  }

  /**
   * A one-block prompt (plus one token, which is never cached): tokens 100 to 114, then
   * {@code last}. The blocks of {@code last} = 40,484 and 76,155 have different hashes whose
   * 32-bit fingerprints are equal (found by trying every {@code last} from 1,000 up).
   */
  private static int[] oneBlockPrompt(int last) {
    int[] p = new int[17];
    for (int i = 0; i < 15; i++) {
      p[i] = 100 + i;
    }
    p[15] = last;
    return p;
  }

  /**
   * An engine-driven node whose engine has cached the two blocks of {@link #oneBlockPrompt}
   * that share a fingerprint, once its summary has caught up.
   */
  private static final class SharedFingerprintNode {
    final SimulatedScheduler sim = new SimulatedScheduler();
    final SimulatedEngine engine = SimulatedEngine.builder().scheduler(sim).clock(sim)
        .blockSize(FaultPlan.BLOCK).publishesCacheEvents(true).build();
    final PrefixRouterNode node = PrefixRouterNode.builder().nodeId("n0")
        .transport(new InMemoryNetwork(sim, 1).transport("n0")).engine(engine)
        .clock(sim).scheduler(sim).random(new SplittableRandom(1)).seeds(List.of()).build();
    final ConcurrentPrefixTree tree = NodeProbe.treeOf(node);

    SharedFingerprintNode() {
      node.start();
      var a = node.submit(InferenceRequest.of("a", oneBlockPrompt(40_484)));
      var b = node.submit(InferenceRequest.of("b", oneBlockPrompt(76_155)));
      sim.advanceBy(5_000_000_000L);
      a.join();
      b.join();
    }

    long[] advertised() {
      return NodeProbe.gossipOf(node).ownBlocks();
    }

    void stop() {
      node.stop();
      sim.runUntilIdle(100_000);
    }
  }

  @Test
  void twoBlocksSharingAFingerprintAreOneAdvertisedFingerprint() {
    // the summary publishes a fingerprint once, however many blocks share it (gossip.md): a
    // node whose engine caches two such blocks rightly advertises one fingerprint
    SharedFingerprintNode n = new SharedFingerprintNode();
    long[] held = n.tree.blockHashes();
    assertEquals(2, n.engine.cachedBlocks());
    assertEquals(2, held.length, "the tree mirrors the engine's two blocks");
    assertNotEquals(held[0], held[1]);
    assertEquals(1, GossipProbe.fingerprintsOf(held).length, "the two share a fingerprint");
    assertEquals(1, n.advertised().length);
    assertNull(FaultCluster.ownDivergence("n0#1", n.advertised(), n.tree, n.engine));
    n.stop();
  }

  @Test
  void anAdvertisedSetOrTreeThatMissesABlockIsCaught() {
    SharedFingerprintNode n = new SharedFingerprintNode();
    String summary = FaultCluster.ownDivergence("n0#1", new long[0], n.tree, n.engine);
    assertNotNull(summary);
    assertTrue(summary.contains("n0#1 advertises 0 fingerprints"), summary);
    // the tree loses a block the engine still caches (a removal the engine never sent)
    n.tree.engineEvents().onBlocksRemoved(
        new long[] {n.engine.blockIdOf(oneBlockPrompt(76_155), 0)});
    String tree = FaultCluster.ownDivergence("n0#1", n.advertised(), n.tree, n.engine);
    assertNotNull(tree);
    assertTrue(tree.contains("n0#1's tree holds 1 blocks, its engine caches 2 blocks"), tree);
    // and holds another block in its place: as many blocks, not the same ones
    n.tree.engineEvents().onBlocksStored(CacheEventListener.NO_PARENT, new long[] {12_345L},
        Arrays.copyOf(oneBlockPrompt(7), FaultPlan.BLOCK));
    String other = FaultCluster.ownDivergence("n0#1", n.advertised(), n.tree, n.engine);
    assertNotNull(other);
    assertTrue(other.contains("which its tree does not hold"), other);
    n.stop();
  }

  @Test
  void anExceptionThrownByAScheduledTaskIsRecorded() {
    GuardedScheduler g = new GuardedScheduler(new SimulatedScheduler());
    g.schedule(5, () -> {
      throw new IllegalStateException("boom");
    });
    g.schedule(10, () -> { });
    g.advanceTo(20);
    assertEquals(1, g.escaped().size());
    assertTrue(g.escaped().get(0).contains("boom"));
  }

  @Test
  void theSameSeedReplaysTheSameRun() {
    Outcome a = FaultCluster.run(11, Wiring.STALE_VIEW);
    Outcome b = FaultCluster.run(11, Wiring.STALE_VIEW);
    assertEquals(a.summary(), b.summary());
  }
}
