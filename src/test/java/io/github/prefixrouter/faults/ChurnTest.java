package io.github.prefixrouter.faults;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.gossip.GossipProbe;
import io.github.prefixrouter.internal.route.NodeProbe;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * 1,000 join/leave cycles of short-lived nodes (new ids, restarts of one id with new
 * generations, graceful stops and crashes) around three stable nodes built exactly as a host
 * builds them. Afterwards the memory the stable nodes hold for membership and replicas must be
 * back within 10% of where it started, with the same members and replicas as before.
 */
class ChurnTest {

  private static final long MS = 1_000_000L;

  private final SimulatedScheduler sim = new SimulatedScheduler();
  private final GuardedScheduler clock = new GuardedScheduler(sim);
  private final InMemoryNetwork net = new InMemoryNetwork(clock, clock, new SplittableRandom(5));
  private final RouterConfig config = RouterConfig.builder()
      .gossip(Duration.ofMillis(100), 2)
      .peerTimeouts(Duration.ofMillis(300), Duration.ofMillis(600)).build();
  private final List<PeerAddress> seeds = List.of(InMemoryNetwork.addressOf("s0"),
      InMemoryNetwork.addressOf("s1"));

  private PrefixRouterNode node(String id) {
    SimulatedEngine e = SimulatedEngine.builder().scheduler(clock).clock(clock)
        .capacityTokens(4096).prefillOverheadNanos(MS).prefillNanosPerToken(10_000)
        .decodeNanosPerToken(MS).vocabularySize(1000).build();
    PrefixRouterNode n = PrefixRouterNode.builder().nodeId(id).config(config)
        .transport(net.transport(id)).engine(e).clock(clock).scheduler(clock)
        .random(new SplittableRandom(id.hashCode())).seeds(seeds).build();
    n.start();
    return n;
  }

  private void run(PrefixRouterNode n, String reqId, long seed) {
    SplittableRandom r = new SplittableRandom(seed);
    int[] t = new int[64 + r.nextInt(64)];
    for (int i = 0; i < t.length; i++) {
      t[i] = r.nextInt(1000);
    }
    InferenceRequest req = new InferenceRequest(reqId, t, GenerationParams.DEFAULT);
    CompletableFuture<InferenceResponse> f = n.submit(req);
    clock.runUntil(f::isDone, sim.nanoTime() + 60_000 * MS, MS);
    assertArrayEquals(SimulatedEngine.expectedOutput(t, req.params(), 1000),
        f.join().result().outputTokens());
  }

  @Test
  void thousandJoinLeaveCyclesReturnMembershipAndReplicaMemoryToTheirStart() {
    List<PrefixRouterNode> stable = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      stable.add(node("s" + i));
    }
    for (int i = 0; i < 3; i++) {
      run(stable.get(i), "warm" + i, i);
    }
    clock.advanceTo(sim.nanoTime() + 3_000 * MS);
    List<GossipProbe> probes = new ArrayList<>();
    for (PrefixRouterNode s : stable) {
      GossipProbe p = NodeProbe.gossipOf(s);
      assertNotNull(p, "the node must run the library's gossip");
      probes.add(p);
    }
    long[] bytes0 = new long[3];
    int[] members0 = new int[3];
    long[] replica0 = new long[3];
    for (int i = 0; i < 3; i++) {
      bytes0[i] = probes.get(i).retainedBytes();
      members0[i] = probes.get(i).memberCount();
      replica0[i] = stable.get(i).stats().replicaBlocks();
      assertEquals(2, stable.get(i).stats().peersLive());
    }
    int peakMembers = 0;
    SplittableRandom r = new SplittableRandom(77);
    for (int k = 0; k < 1_000; k++) {
      // a quarter of the cycles restart one recurring id (new generation), the rest use new ids
      String id = k % 4 == 0 ? "again" : "t" + k;
      PrefixRouterNode t = node(id);
      run(t, "c" + k, 1_000 + k);
      clock.advanceTo(sim.nanoTime() + (300 + r.nextInt(400)) * MS);
      if (r.nextBoolean()) {
        t.stop();
      } else {
        net.crash(id); // vanishes without a word; its process is reaped a little later
        clock.advanceTo(sim.nanoTime() + 50 * MS);
        t.stop();
      }
      clock.runUntil(() -> t.state() == PrefixRouterNode.State.STOPPED,
          sim.nanoTime() + 10_000 * MS, MS);
      for (GossipProbe p : probes) {
        peakMembers = Math.max(peakMembers, p.memberCount());
        p.checkInvariants();
      }
    }
    // long enough for every departed node to be declared dead and then forgotten
    clock.advanceTo(sim.nanoTime() + 20 * config.peerDeadAfter().toMillis() * MS);
    for (int i = 0; i < 3; i++) {
      GossipProbe p = probes.get(i);
      p.checkInvariants();
      System.out.printf("churn: s%d members %d -> peak %d -> %d, retained bytes %d -> %d,"
              + " replica blocks %d -> %d%n", i, members0[i], peakMembers, p.memberCount(),
          bytes0[i], p.retainedBytes(), replica0[i], stable.get(i).stats().replicaBlocks());
      assertEquals(members0[i], p.memberCount(), "membership back to the stable peers");
      assertEquals(replica0[i], stable.get(i).stats().replicaBlocks());
      assertEquals(2, stable.get(i).stats().peersLive());
      long b = p.retainedBytes();
      assertTrue(b <= bytes0[i] * 1.10, "s" + i + " holds " + b + " bytes, started at "
          + bytes0[i]);
    }
    assertTrue(clock.escaped().isEmpty(), clock.escaped()::toString);
  }
}
