package io.github.prefixrouter.faults;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.route.ChainHasher;
import io.github.prefixrouter.internal.route.EngineCacheIndex;
import io.github.prefixrouter.internal.route.LocalPrefixIndex;
import io.github.prefixrouter.internal.route.PeerSet;
import io.github.prefixrouter.internal.route.PeerView;
import io.github.prefixrouter.internal.route.RouterNode;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.function.UnaryOperator;

/**
 * Real routing nodes whose peer view is scripted by the test: each node sees the peers the test
 * lists, believes each holds what that peer's engine holds now, and never sees overload unless
 * told. Lets hostile-input and flood tests aim traffic precisely. Everything runs on one
 * guarded simulated scheduler over an {@link InMemoryNetwork}.
 */
final class ScriptedCluster {

  static final int VOCABULARY = 1000;

  final SimulatedScheduler sim = new SimulatedScheduler();
  final GuardedScheduler clock = new GuardedScheduler(sim);
  final InMemoryNetwork net;
  final RouterConfig config;
  final Map<String, SimulatedEngine> engines = new LinkedHashMap<>();
  final Map<String, RouterNode> nodes = new LinkedHashMap<>();
  final Map<String, List<String>> sees = new LinkedHashMap<>();
  /** Peers (not necessarily nodes of this cluster) believed to hold what another engine holds. */
  final Map<String, String> pretendsToHold = new LinkedHashMap<>();
  /** Requests each node's transport sent as FORWARD frames: "from>to:id:hops". */
  final List<String> forwardsSent = new ArrayList<>();

  ScriptedCluster(RouterConfig config, long seed, List<String> ids) {
    this(config, seed, ids, UnaryOperator.identity());
  }

  ScriptedCluster(RouterConfig config, long seed, List<String> ids,
      UnaryOperator<SimulatedEngine.Builder> engineTweak) {
    this(config, seed, ids, Map.of(), engineTweak);
  }

  /** Engines of the nodes in {@code tweaks} get their own settings, the others {@code rest}. */
  ScriptedCluster(RouterConfig config, long seed, List<String> ids,
      Map<String, UnaryOperator<SimulatedEngine.Builder>> tweaks,
      UnaryOperator<SimulatedEngine.Builder> rest) {
    this.config = config;
    this.net = new InMemoryNetwork(clock, clock, new SplittableRandom(seed));
    for (String id : ids) {
      SimulatedEngine e = tweaks.getOrDefault(id, rest).apply(SimulatedEngine.builder().scheduler(clock)
          .clock(clock).slots(1).capacityTokens(1 << 16).prefillOverheadNanos(2_000_000)
          .prefillNanosPerToken(200_000).decodeNanosPerToken(5_000_000)
          .vocabularySize(VOCABULARY)).build();
      engines.put(id, e);
      sees.put(id, new ArrayList<>());
    }
    for (String id : ids) {
      SimulatedEngine e = engines.get(id);
      Transport t = new ForwardingTransport(net.transport(id)) {
        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
            Duration timeout) {
          var h = io.github.prefixrouter.internal.route.ForwardFrames.peekForward(payload);
          if (h != null) {
            forwardsSent.add(id + ">" + to.nodeId() + ":" + h.requestId() + ":" + h.hops());
          }
          return delegate.request(to, payload, timeout);
        }
      };
      LocalPrefixIndex local = EngineCacheIndex.of(e);
      ChainHasher hasher = (tokens, length, out) -> {
        int blocks = length / e.blockSize();
        for (int b = 0; b < blocks; b++) {
          out[b] = e.blockIdOf(tokens, b);
        }
        return blocks;
      };
      nodes.put(id, new RouterNode(id, config, t, e, clock, clock,
          new SplittableRandom(seed + id.hashCode()), List.of(),
          new RouterNode.Components(local, hasher, new Scripted(id))));
    }
  }

  ScriptedCluster start() {
    nodes.values().forEach(RouterNode::start);
    return this;
  }

  /** Runs {@code tokens} on {@code id}'s engine directly so it caches the prefix. */
  void warm(String id, int[] tokens) {
    CompletableFuture<?> f = engines.get(id).execute(InferenceRequest.of("warm-" + id + "-"
        + sim.nanoTime() + "-" + tokens.length, tokens));
    clock.runUntil(f::isDone, sim.nanoTime() + 60_000_000_000L, 1_000_000L);
  }

  InferenceResponse await(CompletableFuture<InferenceResponse> f) {
    clock.runUntil(f::isDone, sim.nanoTime() + 600_000_000_000L, 1_000_000L);
    return f.join();
  }

  static int[] prompt(long seed, int length) {
    SplittableRandom r = new SplittableRandom(seed);
    int[] t = new int[length];
    for (int i = 0; i < length; i++) {
      t[i] = r.nextInt(VOCABULARY);
    }
    return t;
  }

  static int[] expected(InferenceRequest r) {
    return SimulatedEngine.expectedOutput(r.tokens(), r.params(), VOCABULARY);
  }

  private final class Scripted implements PeerView {
    private final String self;

    Scripted(String self) {
      this.self = self;
    }

    @Override
    public PeerSet livePeers() {
      List<String> ids = sees.get(self);
      int n = ids.size();
      PeerAddress[] a = new PeerAddress[n];
      int[] slots = new int[n];
      int[] q = new int[n];
      int[] f = new int[n];
      long[] rtt = new long[n];
      for (int i = 0; i < n; i++) {
        a[i] = InMemoryNetwork.addressOf(ids.get(i));
        slots[i] = i;
        rtt[i] = 200_000;
      }
      long[] lastSync = new long[n];
      Arrays.fill(lastSync, clock.nanoTime());
      return new PeerSet(a, slots, q, f, new boolean[n], new boolean[n], rtt, lastSync);
    }

    @Override
    public void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out) {
      for (int i = 0; i < peers.size(); i++) {
        String who = peers.address(i).nodeId();
        SimulatedEngine e = engines.get(pretendsToHold.getOrDefault(who, who));
        long[] held = e == null ? new long[0] : e.cachedBlockIds();
        int m = 0;
        while (m < blocks && Arrays.binarySearch(held, chain[m]) >= 0) {
          m++;
        }
        out[i] = m;
      }
    }
  }
}
