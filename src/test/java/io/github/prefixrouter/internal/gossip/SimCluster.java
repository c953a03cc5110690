package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * A cluster of gossip engines on one {@link SimulatedScheduler} with a tiny network model:
 * a fixed one-way delay plus uniform extra delay (which reorders messages), independent loss,
 * duplication, and cuts between pairs of nodes. Everything is drawn from one seed.
 */
final class SimCluster {

  final SimulatedScheduler time = new SimulatedScheduler();
  /** What the engines read: the scheduler's time, or that plus an offset. */
  final Clock clock;
  final SplittableRandom net;
  final GossipConfig config;
  final long seed;
  final Map<String, GossipEngine> byAddress = new HashMap<>();
  final Map<String, EngineLoad> loads = new HashMap<>();
  final List<GossipEngine> nodes = new ArrayList<>();
  final Set<String> cut = new HashSet<>(); // "a|b" pairs, directed
  final Set<String> down = new HashSet<>(); // addresses of stopped nodes

  double loss;
  double duplication;
  long delayNanos;
  long extraDelayNanos;
  long delivered;
  long bytes;
  /**
   * Sends the transport refuses by throwing (as a misbehaving transport, or one whose limit is
   * reached, may): (sender, payload) for which the send throws; null for none.
   */
  java.util.function.BiPredicate<PeerAddress, byte[]> refuse;
  /** Told of every send that did not throw: (sender, payload); null for none. */
  java.util.function.BiConsumer<PeerAddress, byte[]> taken;
  /** Sends lost on the way: (sender, payload) for which the message is dropped; null for none. */
  java.util.function.BiPredicate<PeerAddress, byte[]> drop;

  SimCluster(long seed, GossipConfig config) {
    this(seed, config, 0L);
  }

  /**
   * A cluster whose engines read a clock {@code clockOffset} ahead of the scheduler's time, in
   * wrapping arithmetic: a clock's origin is arbitrary, and its readings may pass
   * {@code Long.MAX_VALUE} and go on from {@code Long.MIN_VALUE}, as {@link System#nanoTime()}'s
   * may. The scheduler's own time starts at 0 as always.
   */
  SimCluster(long seed, GossipConfig config, long clockOffset) {
    this.clock = () -> time.nanoTime() + clockOffset;
    this.seed = seed;
    this.net = new SplittableRandom(seed);
    this.config = config;
  }

  static PeerAddress addressOf(int i) {
    return new PeerAddress("node-" + i, "sim:" + i);
  }

  /** Adds node {@code i} with generation {@code gen}, seeded with the given peers. */
  GossipEngine add(int i, long gen, List<PeerAddress> seeds) {
    return add(i, gen, seeds, config);
  }

  /** As {@link #add(int, long, List)}, with a configuration of its own. */
  GossipEngine add(int i, long gen, List<PeerAddress> seeds, GossipConfig config) {
    return add(addressOf(i), i, gen, seeds, config);
  }

  /**
   * Adds an engine of node id and address {@code self}, its random source drawn from
   * {@code i}: another process with the id of node {@code i} when {@code self} has that id and
   * another address.
   */
  GossipEngine add(PeerAddress self, int i, long gen, List<PeerAddress> seeds,
      GossipConfig config) {
    loads.put(self.address(), EngineLoad.IDLE);
    GossipEngine e =
        new GossipEngine(self, gen, config, seeds, clock, time,
            new SplittableRandom(seed * 31 + i * 1_000_003L + gen),
            () -> loads.get(self.address()),
            (to, payload) -> send(self, to, payload));
    GossipEngine old = byAddress.put(self.address(), e);
    if (old != null) {
      old.stop();
      nodes.remove(old);
    }
    nodes.add(e);
    down.remove(self.address());
    return e;
  }

  /** Builds {@code n} nodes all seeded with node 0, and starts them. */
  static SimCluster of(int n, long seed, GossipConfig config) {
    return of(n, seed, config, 0L);
  }

  /**
   * As {@link #of(int, long, GossipConfig)}, the engines' clock {@code clockOffset} ahead of
   * the scheduler's time ({@link #SimCluster(long, GossipConfig, long)}).
   */
  static SimCluster of(int n, long seed, GossipConfig config, long clockOffset) {
    SimCluster c = new SimCluster(seed, config, clockOffset);
    for (int i = 0; i < n; i++) {
      c.add(i, 1, List.of(addressOf(0))).start();
    }
    return c;
  }

  void crash(GossipEngine e) {
    e.stop();
    down.add(e.self().address());
  }

  void send(PeerAddress from, PeerAddress to, byte[] payload) {
    if (refuse != null && refuse.test(from, payload)) {
      throw new IllegalStateException("send refused");
    }
    if (taken != null) {
      taken.accept(from, payload);
    }
    if (down.contains(from.address())) {
      return;
    }
    if (cut.contains(from.address() + "|" + to.address())) {
      return;
    }
    if (drop != null && drop.test(from, payload)) {
      return;
    }
    if (loss > 0 && net.nextDouble() < loss) {
      return;
    }
    int copies = duplication > 0 && net.nextDouble() < duplication ? 2 : 1;
    for (int k = 0; k < copies; k++) {
      long d = delayNanos + (extraDelayNanos > 0 ? net.nextLong(extraDelayNanos + 1) : 0);
      byte[] copy = payload.clone();
      time.schedule(d, () -> {
        GossipEngine target = byAddress.get(to.address());
        if (target != null && !down.contains(to.address())
            && target.self().nodeId().equals(to.nodeId())) {
          delivered++;
          bytes += copy.length;
          target.onMessage(from, copy);
        }
      });
    }
  }

  void heal() {
    loss = 0;
    duplication = 0;
    extraDelayNanos = 0;
    cut.clear();
  }

  void runFor(long nanos) {
    time.advanceBy(nanos);
  }

  long interval() {
    return config.intervalNanos();
  }

  /**
   * True if every live node's replica of every other live node equals that node's own set, with
   * the same store numbers.
   */
  boolean converged() {
    return firstDivergence() == null;
  }

  String firstDivergence() {
    for (GossipEngine owner : nodes) {
      if (down.contains(owner.self().address())) {
        continue;
      }
      long[] own = owner.localSummary().snapshot().hashes();
      java.util.Arrays.sort(own);
      long ver = owner.localSummary().version();
      for (GossipEngine peer : nodes) {
        if (peer == owner || down.contains(peer.self().address())) {
          continue;
        }
        long[] rep = peer.replicaOf(owner.self().nodeId());
        if (rep == null) {
          return peer.self().nodeId() + " does not know " + owner.self().nodeId();
        }
        java.util.Arrays.sort(rep);
        long[] v = peer.replicaVersion(owner.self().nodeId());
        if (v[0] != owner.generation() || v[1] != ver || !java.util.Arrays.equals(own, rep)) {
          return peer.self().nodeId() + " has " + owner.self().nodeId() + " at gen " + v[0]
              + " v" + v[1] + " (" + rep.length + " blocks), owner at gen "
              + owner.generation() + " v" + ver + " (" + own.length + " blocks)";
        }
        // and the same store numbers, so that later evictions naming them resolve alike
        LocalSummary.Snapshot mine = owner.localSummary().snapshot();
        long[][] theirs = peer.replicaStores(owner.self().nodeId());
        if (!java.util.Arrays.equals(mine.stores(), theirs[0])
            || !java.util.Arrays.equals(mine.hashes(), theirs[1])
            || mine.storeCount() != theirs[2][0]) {
          return peer.self().nodeId() + " holds other store numbers for "
              + owner.self().nodeId();
        }
      }
    }
    return null;
  }

  /** Runs whole intervals until converged; returns the intervals taken, or -1 past max. */
  int runUntilConverged(int maxIntervals) {
    for (int r = 0; r <= maxIntervals; r++) {
      if (converged()) {
        return r;
      }
      runFor(interval());
    }
    return -1;
  }
}
