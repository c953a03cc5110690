package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.function.UnaryOperator;

/**
 * A cluster of real {@link RouterNode}s on simulated time, an {@link InMemoryNetwork} and
 * {@link SimulatedEngine}s, whose peer view is an oracle: it reads the peers' engines directly
 * (exact caches, fresh loads, a configured round trip). This isolates routing from gossip: a
 * test failing here is a routing bug, not a dissemination one.
 *
 * <p>The oracle learns the prompt being routed through the chain hasher (which the planner calls
 * right before asking the view), via a thread-local; everything runs on the test thread. The
 * hasher still computes the prompt's chain, which the planner uses beyond the view (the cold
 * placement of a prompt, local-caching demand per prompt head).
 */
final class OracleCluster {

  final SimulatedScheduler sim;
  final InMemoryNetwork net;
  final RouterConfig config;
  final Map<String, SimulatedEngine> engines = new LinkedHashMap<>();
  final Map<String, RouterNode> nodes = new LinkedHashMap<>();
  final Map<String, Transport> transports = new LinkedHashMap<>();
  final Set<String> dead = new HashSet<>();
  long rttNanos;
  /**
   * What a node believes against the truth: node id to the peers it takes for holding every
   * prompt whole (so a test can make it forward to a relay; see {@link #believesWarm}).
   */
  final Map<String, Set<String>> believedWarm = new LinkedHashMap<>();
  private final ThreadLocal<int[]> routing = new ThreadLocal<>();

  /** Engine defaults: 1 slot, 64k tokens, 2 ms + 200 µs/token prefill, 5 ms/token decode. */
  static SimulatedEngine.Builder engineDefaults(SimulatedScheduler sim) {
    return SimulatedEngine.builder().scheduler(sim).slots(1).capacityTokens(65_536)
        .prefillOverheadNanos(2_000_000).prefillNanosPerToken(200_000)
        .decodeNanosPerToken(5_000_000).vocabularySize(1000);
  }

  /** Optional hooks: engine settings, and wrappers (e.g. Mockito spies) around SPIs. */
  static final class Hooks {
    UnaryOperator<SimulatedEngine.Builder> engineTweak = UnaryOperator.identity();
    UnaryOperator<Transport> transportWrap = UnaryOperator.identity();
    UnaryOperator<InferenceEngine> engineWrap = UnaryOperator.identity();
    /** Wraps the simulated clock the nodes read (their scheduler stays the simulated one). */
    UnaryOperator<Clock> clockWrap = UnaryOperator.identity();
    /** The simulated clock's first reading (any long: a clock's origin is arbitrary). */
    long startNanos;
  }

  final Map<String, InferenceEngine> engineSpis = new LinkedHashMap<>();

  OracleCluster(int n, RouterConfig config, long seed) {
    this(n, config, seed, new Hooks());
  }

  OracleCluster(int n, RouterConfig config, long seed, Hooks hooks) {
    this.sim = new SimulatedScheduler(hooks.startNanos);
    UnaryOperator<SimulatedEngine.Builder> engineTweak = hooks.engineTweak;
    UnaryOperator<Transport> transportWrap = hooks.transportWrap;
    this.config = config;
    this.net = new InMemoryNetwork(sim, seed);
    BlockHasher blockHasher = new BlockHasher(config.blockSize(), config.hashSalt());
    for (int i = 0; i < n; i++) {
      String id = "n" + i;
      SimulatedEngine e = engineTweak.apply(engineDefaults(sim)).build();
      engines.put(id, e);
    }
    for (int i = 0; i < n; i++) {
      String id = "n" + i;
      SimulatedEngine e = engines.get(id);
      Transport t = transportWrap.apply(net.transport(id));
      InferenceEngine spi = hooks.engineWrap.apply(e);
      engineSpis.put(id, spi);
      transports.put(id, t);
      LocalPrefixIndex local = EngineCacheIndex.of(e);
      // the prompt's real chain: the planner places cold prompts by its first block and counts
      // local-caching demand by its head, and reads whatever the array holds if nothing is written
      ChainHasher hasher = (tokens, length, out) -> {
        routing.set(tokens);
        return blockHasher.chain(tokens, length, out);
      };
      RouterNode node = new RouterNode(id, config, t, spi, hooks.clockWrap.apply(sim), sim,
          new SplittableRandom(seed + i), List.of(),
          new RouterNode.Components(local, hasher, new OracleView(id)));
      nodes.put(id, node);
    }
  }

  /**
   * A started cluster of {@code n} nodes, 1 ms apart, whose engines (made with {@code tweak})
   * are wrapped by {@code wrap}; the wrappers are added to {@code wrappers} in node order.
   */
  static <E extends InferenceEngine> OracleCluster withWrappedEngines(int n, RouterConfig config,
      long seed, UnaryOperator<SimulatedEngine.Builder> tweak,
      Function<InferenceEngine, E> wrap, List<E> wrappers) {
    return withWrappedEngines(n, config, seed, tweak, wrap, wrappers, new Hooks());
  }

  /** As above, on {@code h} (whose engine settings and wrapper the other arguments replace). */
  static <E extends InferenceEngine> OracleCluster withWrappedEngines(int n, RouterConfig config,
      long seed, UnaryOperator<SimulatedEngine.Builder> tweak,
      Function<InferenceEngine, E> wrap, List<E> wrappers, Hooks h) {
    h.engineTweak = tweak;
    h.engineWrap = e -> {
      E w = wrap.apply(e);
      wrappers.add(w);
      return w;
    };
    return new OracleCluster(n, config, seed, h).rtt(Duration.ofMillis(1)).start();
  }

  OracleCluster rtt(Duration oneWayDelay) {
    net.setDefaultLink(InMemoryNetwork.Link.delay(oneWayDelay));
    rttNanos = 2 * oneWayDelay.toNanos();
    return this;
  }

  OracleCluster start() {
    nodes.values().forEach(RouterNode::start);
    return this;
  }

  RouterNode node(String id) {
    return nodes.get(id);
  }

  SimulatedEngine engine(String id) {
    return engines.get(id);
  }

  /** Runs {@code tokens} on {@code id}'s engine directly, so it caches the prefix. */
  void warm(String id, int[] tokens) {
    var f = engines.get(id).execute(InferenceRequest.of("warm-" + id + "-" + sim.nanoTime(),
        tokens));
    sim.runUntilIdle(1_000_000);
    f.join();
  }

  /** Submits and runs the simulation until the answer is there (or 10 simulated minutes). */
  InferenceResponse submitAndWait(String at, InferenceRequest r) {
    return runUntilDone(nodes.get(at).submit(r)).join();
  }

  /** Runs the simulation until {@code f} is done, or for 10 simulated minutes; returns it. */
  <T> CompletableFuture<T> runUntilDone(CompletableFuture<T> f) {
    long deadline = sim.nanoTime() + Duration.ofMinutes(10).toNanos();
    while (!f.isDone() && sim.nanoTime() < deadline && sim.runNext()) {
      // keep going
    }
    return f;
  }

  /** From now on {@code node}'s view says {@code peer} holds every prompt it routes, whole. */
  OracleCluster believesWarm(String node, String peer) {
    believedWarm.computeIfAbsent(node, k -> new HashSet<>()).add(peer);
    return this;
  }

  /** A node dies: the network drops its traffic and the oracle stops listing it. */
  void crash(String id) {
    net.crash(id);
    dead.add(id);
  }

  static int[] prompt(long seed, int length) {
    SplittableRandom r = new SplittableRandom(seed);
    int[] t = new int[length];
    for (int i = 0; i < length; i++) {
      t[i] = r.nextInt(1000);
    }
    return t;
  }

  static int[] concat(int[] a, int[] b) {
    int[] r = new int[a.length + b.length];
    System.arraycopy(a, 0, r, 0, a.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }

  static int[] expected(InferenceRequest r) {
    return SimulatedEngine.expectedOutput(r.tokens(), r.params(), 1000);
  }

  static InferenceRequest request(String id, int[] tokens) {
    return new InferenceRequest(id, tokens, GenerationParams.DEFAULT);
  }

  private final class OracleView implements PeerView {
    private final String self;

    OracleView(String self) {
      this.self = self;
    }

    @Override
    public PeerSet livePeers() {
      List<String> ids = new ArrayList<>();
      for (String id : engines.keySet()) {
        if (!id.equals(self) && !dead.contains(id)) {
          ids.add(id);
        }
      }
      int n = ids.size();
      PeerAddress[] a = new PeerAddress[n];
      int[] slots = new int[n];
      int[] q = new int[n];
      int[] f = new int[n];
      boolean[] over = new boolean[n];
      long[] rtt = new long[n];
      boolean[] suspect = new boolean[n];
      long[] sync = new long[n];
      for (int i = 0; i < n; i++) {
        a[i] = InMemoryNetwork.addressOf(ids.get(i));
        EngineLoad l = engines.get(ids.get(i)).load();
        q[i] = l.queueDepth();
        f[i] = l.inFlight();
        over[i] = l.queueDepth() >= config.highWatermark();
        rtt[i] = rttNanos;
        sync[i] = sim.nanoTime();
      }
      return new PeerSet(a, slots, q, f, over, suspect, rtt, sync);
    }

    @Override
    public void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out) {
      int[] tokens = routing.get();
      Set<String> believed = believedWarm.getOrDefault(self, Set.of());
      for (int i = 0; i < peers.size(); i++) {
        String peer = peers.address(i).nodeId();
        SimulatedEngine e = engines.get(peer);
        out[i] = believed.contains(peer) ? blocks
            : Math.min(blocks, e.cachedPrefixTokens(tokens) / config.blockSize());
      }
    }
  }
}
