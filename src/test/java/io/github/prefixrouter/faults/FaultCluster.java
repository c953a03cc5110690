package io.github.prefixrouter.faults;

import static io.github.prefixrouter.faults.FaultPlan.MS;
import static io.github.prefixrouter.faults.FaultPlan.S;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.EngineStallStats;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.faults.FaultPlan.Fault;
import io.github.prefixrouter.faults.FaultPlan.Kind;
import io.github.prefixrouter.faults.FaultPlan.Submission;
import io.github.prefixrouter.internal.gossip.GossipProbe;
import io.github.prefixrouter.internal.route.ChainHasher;
import io.github.prefixrouter.internal.route.ForwardFrames;
import io.github.prefixrouter.internal.route.LocalPrefixIndex;
import io.github.prefixrouter.internal.route.NodeProbe;
import io.github.prefixrouter.internal.route.PeerSet;
import io.github.prefixrouter.internal.route.PeerView;
import io.github.prefixrouter.internal.route.RouterNode;
import io.github.prefixrouter.internal.tree.BlockEventListener;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.internal.tree.TreeProbe;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.InMemoryNetwork.Link;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;

/**
 * One deterministic fault-injection run: a cluster of real routing nodes on one simulated clock,
 * an {@link InMemoryNetwork} and {@link SimulatedEngine}s, driven through a {@link FaultPlan}
 * (network faults, partitions, crash and restart at the node's address or a new one, slow and
 * failing engines, pauses), then healed and checked against the invariants of
 * {@code docs/reliability.md}.
 *
 * <p>Two wirings of the peer view:
 * <ul>
 *   <li>{@link Wiring#LIBRARY}: nodes built by {@link PrefixRouterNode#builder()} exactly as a
 *       host would (the library's own local tree, replicas and gossip).
 *   <li>{@link Wiring#STALE_VIEW}: the real {@link RouterNode} (planner, forwarding, fallback,
 *       push-back) over a peer view that learns the peers' real caches and loads only through
 *       simulated gossip rounds over the faulty links, so it is stale, lags crashes and restarts,
 *       and keeps listing dead peers until they time out. It stresses forwarding regardless of
 *       how good the gossip layer is.
 * </ul>
 *
 * <p>The nodes the plan draws as self-managed ({@link FaultPlan#selfManaged}) get an engine
 * that publishes no cache events, so their tree records the prompts they executed and applies
 * LRU at their own capacity (in the stale view wiring too: a self-managed tree behind the
 * router's index, where an engine-driven node credits its engine's cache directly).
 */
final class FaultCluster {

  enum Wiring { LIBRARY, STALE_VIEW }

  /** What a run found. */
  record Outcome(FaultPlan plan, Wiring wiring, List<String> violations, Summary summary) {
    boolean ok() {
      return violations.isEmpty();
    }
  }

  /** Figures of a run, for the campaign's report. */
  record Summary(int accepted, int succeeded, int failed, long forwarded, long fallbacks,
      long forwardFrames, long duplicateExecutions, long crashes, long simulatedMillis,
      boolean gossipActive, long convergenceMillis, int scoped, long scopedRejections,
      long unscopedAtOld, int withStops, long stopsRejections, int selfManagedNodes,
      long selfManagedExecutions, long selfManagedEvictions, long otherModelRefusals,
      long engineStalls, long stallReroutes, long stallRefusals, long failingSpells,
      long probes, long failingReroutes, long failingRefusals, long outageFailures,
      int recoveryRequests, long generationsRefuted, long restartsAtNewAddress,
      long forwardsToLeftAddresses, long othersToLeftAddresses) {}

  /** The chain root of each scope the plans draw, for the stale view's hasher. */
  private static final Map<Long, CacheScope> SCOPE_OF_ROOT = new HashMap<>();

  static {
    for (CacheScope sc : FaultPlan.SCOPES) {
      SCOPE_OF_ROOT.put(BlockHasher.scopeRoot(sc), sc);
    }
  }

  private final FaultPlan plan;
  private final Wiring wiring;
  private final SimulatedScheduler sim = new SimulatedScheduler();
  private final GuardedScheduler clock = new GuardedScheduler(sim);
  private final InMemoryNetwork net;
  private final Invariants inv;
  private final RouterConfig config;
  private final int n;
  private final String[] ids;
  private final Instance[] current;
  private final List<Instance> all = new ArrayList<>();
  private final Map<String, Accepted> accepted = new LinkedHashMap<>();
  private final List<Fault> active = new ArrayList<>();
  private final Set<String> cuts = new HashSet<>();
  private final Link[][] links;
  private boolean healed;
  private long crashes;
  /** Restarts that brought a node back at a new address. */
  private long restartsAtNewAddress;
  /** Scoped FORWARDs rejected by a node from before scopes. */
  private long scopedRejections;
  /** FORWARDs with stops (version 4) rejected by a node from before scopes. */
  private long stopsRejections;
  /** Unscoped FORWARDs a node from before scopes was sent (and decoded). */
  private long unscopedAtOld;
  private final SplittableRandom viewRandom;
  /** Blocks the self-managed trees evicted (LRU at their capacity). */
  private long selfManagedEvictions;
  /** Every request submitted, by id (also those whose submission threw). */
  private final Map<String, InferenceRequest> submitted = new HashMap<>();

  private final class Instance {
    final int index;
    final String id;
    final int generation;
    final String key;
    /** Where it listens: its node's first address, or a new one a restart brought it back at. */
    final PeerAddress address;
    final SimulatedEngine simEngine;
    final FaultyEngine engine;
    final WatchedTransport transport;
    final PrefixRouterNode node;
    /** The node's own prefix index (its tree, or in the stale view wiring its engine's cache). */
    final LocalPrefixIndex local;
    /** Whether its engine publishes no cache events, so that its tree is self-managed. */
    final boolean selfManaged;
    /** Its configuration: the cluster's, with a self-managed node's own tree capacity. */
    final RouterConfig nodeConfig;
    /**
     * The library's prefix tree behind {@link #local}: in the library wiring every node's, in
     * the stale view wiring a self-managed node's (an engine-driven one credits its engine's
     * cache directly); else null.
     */
    final ConcurrentPrefixTree tree;
    boolean up = true;
    boolean retired;
    int acceptedHere;

    Instance(int index, int generation, PeerAddress address) {
      this.index = index;
      this.id = ids[index];
      this.generation = generation;
      this.key = id + "#" + generation;
      this.address = address;
      long s = plan.seed * 31 + index * 1_000_003L + generation;
      int slow = plan.slowFactor[index];
      selfManaged = plan.selfManaged[index];
      RouterConfig own = selfManaged
          ? config.toBuilder().treeCapacityTokens(plan.treeCapacityTokens[index]).build()
          : config;
      if (plan.steppedBack) { // each restart's generation below the last: peers must be told
        own = own.toBuilder().gossipGeneration(
            STEPPED_BACK_BASE - (generation - 1) * plan.stepBackMicros).build();
      }
      nodeConfig = plan.otherModel == FaultPlan.NO_MODEL_IDS ? own
          : own.toBuilder().modelId(plan.modelIdOf(index)).build();
      simEngine = SimulatedEngine.builder().scheduler(clock).clock(clock)
          .capacityTokens(plan.engineCapacityTokens[index]).blockSize(FaultPlan.BLOCK)
          .slots(plan.engineSlots[index]).prefillOverheadNanos(2 * MS * slow)
          .prefillNanosPerToken(150_000L * slow).decodeNanosPerToken(5 * MS * slow)
          .vocabularySize(plan.vocabularyOf(index)).publishesCacheEvents(!selfManaged).build();
      engine = new FaultyEngine(id, simEngine, clock, s, rid -> id.equals(inv.originOf.get(rid)),
          plan.failureProbability[index], plan.stallProbability[index], plan.maxStallNanos, inv,
          config.highWatermark());
      engine.sabotage = sabotage;
      if (plan.outageFrom[index] >= 0) {
        engine.outage(plan.outageFrom[index], plan.outageUntil[index],
            plan.outageFailNanos[index]);
      }
      Transport wire = net.transport(address);
      if (plan.beforeScopes == index && generation == 1) {
        wire = io.github.prefixrouter.internal.route.BeforeScopesTransport.wrap(wire, () -> true,
            new io.github.prefixrouter.internal.route.BeforeScopesTransport.Observer() {
              @Override
              public void rejected(int version, boolean withStops) {
                scopedRejections++;
                if (withStops) {
                  stopsRejections++;
                }
              }

              @Override
              public void acceptedForward() {
                unscopedAtOld++;
              }
            });
      }
      transport = new WatchedTransport(id, key, wire, inv, clock);
      // seeds: the first two nodes; in runs whose restarts may move nodes, every other node,
      // each at the address it listens at as this instance starts (a list written as the
      // process starts; a seed that moves later stays named at the address it left). No list
      // written once holds when nodes move: two nodes restarted at new addresses, each naming
      // the other where it was, and a third knowing both only where they were, never meet
      // (docs/reliability.md, "restarts at a new address")
      List<PeerAddress> seeds = new ArrayList<>();
      for (int j = 0; j < (plan.newAddressShare > 0 ? n : Math.min(2, n)); j++) {
        if (j != index) {
          seeds.add(current[j] != null ? current[j].address : InMemoryNetwork.addressOf(ids[j]));
        }
      }
      SplittableRandom random = new SplittableRandom(s ^ 0x5DEECE66DL);
      if (wiring == Wiring.LIBRARY) {
        node = PrefixRouterNode.builder().nodeId(id).config(nodeConfig).transport(transport)
            .engine(engine).clock(clock).scheduler(clock).random(random).seeds(seeds).build();
        local = NodeProbe.localIndexOf(node);
        tree = NodeProbe.treeOf(node);
        if (tree == null || (tree.mode() == ConcurrentPrefixTree.Mode.SELF_MANAGED)
            != selfManaged) {
          throw new IllegalStateException(key + ": expected a "
              + (selfManaged ? "self-managed" : "engine-driven") + " tree, got " + tree);
        }
      } else {
        StaleView view = new StaleView(this);
        boolean scopeBlind = sabotage == FaultyEngine.Sabotage.SCOPE_BLIND_INDEX;
        tree = selfManaged ? ConcurrentPrefixTree.builder()
            .capacityTokens(nodeConfig.treeCapacityTokens()).blockSize(FaultPlan.BLOCK)
            .salt(nodeConfig.hashSalt()).build() : null;
        local = selfManaged ? NodeProbe.treeIndex(tree) : new LocalPrefixIndex() {
          @Override
          public int match(int[] tokens) {
            return simEngine.cachedPrefixTokens(tokens);
          }

          @Override
          public int match(long scopeRoot, int[] tokens) {
            return simEngine.cachedPrefixTokens(
                scopeBlind ? CacheScope.DEFAULT : SCOPE_OF_ROOT.get(scopeRoot), tokens);
          }

          @Override
          public void onExecuted(long scopeRoot, int[] tokens) {}

          @Override
          public void onExecuted(int[] tokens) {}

          @Override
          public long cachedTokens() {
            return (long) simEngine.cachedBlocks() * FaultPlan.BLOCK;
          }
        };
        ChainHasher hasher = new ChainHasher() {
          @Override
          public int chain(int[] tokens, int length, long[] out) {
            return extend(BlockHasher.ROOT_PARENT, tokens, 0, length, out);
          }

          @Override
          public int extend(long scopeRoot, int[] tokens, int done, int length, long[] out) {
            CacheScope sc = SCOPE_OF_ROOT.get(scopeRoot);
            int blocks = length / FaultPlan.BLOCK;
            for (int b = 0; b < blocks; b++) {
              out[b] = simEngine.blockIdOf(sc, tokens, b);
            }
            return blocks;
          }
        };
        node = new RouterNode(id, nodeConfig, transport, engine, clock, clock, random, seeds,
            new RouterNode.Components(local, hasher, view));
        clock.schedule(0, view::refresh);
      }
      PrefixRouterNode watched = node;
      engine.watchFailing = () -> NodeProbe.engineFailing(watched);
      engine.watchOutstanding = () -> NodeProbe.engineRunsCounted(watched);
      // a replaced instance's transport is closed: it reaches no peer
      engine.decide = r -> retired ? null : watched.explain(r);
      if (selfManaged) {
        tree.addListener(new BlockEventListener() {
          @Override
          public void onEvicted(long[] blockHashes) {
            selfManagedEvictions += blockHashes.length;
          }
        });
        if (sabotage == FaultyEngine.Sabotage.LEASE_LEAKED_ON_FAILURE) {
          engine.onRun = r -> tree.acquire(BlockHasher.scopeRoot(r.scope()),
              r.tokens())::release;
        } else if (sabotage == FaultyEngine.Sabotage.SCOPE_BLIND_RECORD) {
          engine.onAnswer = r -> {
            if (!r.scope().isDefault()) {
              tree.insert(r.tokens());
            }
          };
        }
      }
    }
  }

  private record Accepted(InferenceRequest request, Instance origin,
      CompletableFuture<InferenceResponse> future) {}

  FaultCluster(FaultPlan plan, Wiring wiring) {
    this.plan = plan;
    this.wiring = wiring;
    this.config = plan.config;
    this.n = plan.nodes;
    this.ids = new String[n];
    for (int i = 0; i < n; i++) {
      ids[i] = "n" + i;
    }
    this.inv = new Invariants(config.hopLimit(), Set.of(ids), config.hopLimit() == 1);
    this.net = new InMemoryNetwork(clock, clock, new SplittableRandom(plan.seed * 7 + 1));
    this.viewRandom = new SplittableRandom(plan.seed * 13 + 5);
    this.links = new Link[n][n];
    this.current = new Instance[n];
  }

  static Outcome run(long seed, Wiring wiring) {
    return run(seed, wiring, FaultyEngine.Sabotage.NONE);
  }

  /** A run whose engines misbehave on purpose: checks that the invariants can fail. */
  static Outcome run(long seed, Wiring wiring, FaultyEngine.Sabotage sabotage) {
    return run(new FaultPlan(seed), wiring, sabotage);
  }

  /** The run of {@code plan}. */
  static Outcome run(FaultPlan plan, Wiring wiring, FaultyEngine.Sabotage sabotage) {
    FaultCluster c = new FaultCluster(plan, wiring);
    c.sabotage = sabotage;
    if (sabotage == FaultyEngine.Sabotage.CREDIT_FORWARDED) {
      c.inv.onForward = c::creditForwarded;
    }
    return c.execute();
  }

  private FaultyEngine.Sabotage sabotage = FaultyEngine.Sabotage.NONE;

  /** Sabotage: a self-managed node records the prompt of a request it forwards. */
  private void creditForwarded(String senderKey, String requestId) {
    InferenceRequest r = submitted.get(requestId);
    for (Instance in : all) {
      if (in.key.equals(senderKey) && in.selfManaged && r != null) {
        in.tree.insert(BlockHasher.scopeRoot(r.scope()), r.tokens(), r.length());
      }
    }
  }

  private Outcome execute() {
    try {
      return doExecute();
    } catch (RuntimeException | Error e) {
      clock.recordEscape("simulation driver", e);
      List<String> v = new ArrayList<>(inv.violations());
      v.addAll(clock.escaped());
      return new Outcome(plan, wiring, v, null);
    }
  }

  private Outcome doExecute() {
    applyNetwork();
    for (int i = 0; i < n; i++) {
      current[i] = new Instance(i, 1, InMemoryNetwork.addressOf(ids[i]));
      all.add(current[i]);
    }
    for (Instance in : current) {
      in.node.start();
    }
    for (Fault f : plan.faults) {
      clock.schedule(f.atNanos(), () -> startFault(f));
    }
    List<Submission> subs = plan.submissions;
    for (int q = 0; q < subs.size(); q++) {
      int k = q;
      clock.schedule(subs.get(q).atNanos(), () -> submit(k, subs.get(k)));
    }
    // gauges within caps, sampled while faults are on
    for (long t = 250 * MS; t < plan.faultPhaseNanos; t += 250 * MS) {
      clock.schedule(t, this::checkGauges);
    }
    // what nodes credit to each scope, while faults are on (cheaper, so less often)
    for (long t = 2 * S; t < plan.faultPhaseNanos; t += 2 * S) {
      clock.schedule(t, this::checkCredits);
    }
    clock.advanceTo(plan.faultPhaseNanos);

    // heal everything
    healed = true;
    active.clear();
    applyNetwork();
    for (int i = 0; i < n; i++) {
      if (!current[i].up) {
        restart(i);
      }
    }
    long healedAt = clock.nanoTime();
    boolean allDone = clock.runUntil(
        () -> accepted.values().stream().allMatch(a -> a.future.isDone()),
        healedAt + 600 * S, 50 * MS);
    if (!allDone) {
      for (Accepted a : accepted.values()) {
        if (!a.future.isDone()) {
          inv.violation("request " + a.request.id() + " accepted by " + a.origin.key
              + " never completed (liveness, 600 s after healing)");
        }
      }
    }
    // every node drains: nothing left in flight (no leaked executions)
    boolean drained = clock.runUntil(() -> all.stream().allMatch(in -> in.retired
            ? in.node.state() == PrefixRouterNode.State.STOPPED
            : in.node.stats().inFlight() == 0),
        clock.nanoTime() + 120 * S, 50 * MS);
    if (!drained) {
      for (Instance in : all) {
        NodeStats st = in.node.stats();
        if (st.inFlight() != 0 || (in.retired && st.state() != PrefixRouterNode.State.STOPPED)) {
          inv.violation("node " + in.key + " did not drain: state " + st.state() + ", inFlight "
              + st.inFlight());
        }
      }
    }
    int recoveryRequests = checkRecovery();
    checkCounters();
    checkGauges();
    checkCredits();
    long convergence = checkConvergence();
    checkLeases();
    int ok = 0;
    int failed = 0;
    for (Accepted a : accepted.values()) {
      if (a.future.isDone()) {
        if (a.future.isCompletedExceptionally()) {
          failed++;
        } else {
          ok++;
        }
      }
    }
    long forwarded = 0;
    long fallbacks = 0;
    long executions = 0;
    long selfManagedExecutions = 0;
    for (Instance in : all) {
      NodeStats st = in.node.stats();
      forwarded += st.forwarded();
      fallbacks += st.totalFallbacks();
      executions += in.engine.executions - in.engine.injectedFailures;
      if (in.selfManaged) {
        selfManagedExecutions += in.engine.executions;
      }
    }
    long otherModelRefusals = all.stream().filter(in -> in.node instanceof RouterNode)
        .mapToLong(in -> ((RouterNode) in.node).otherModelRefusals()).sum();
    long[] watch = new long[3];
    for (Instance in : all) {
      in.node.engineStallStats().ifPresent(ws -> {
        watch[0] += ws.stalls();
        watch[1] += ws.reroutes();
        watch[2] += ws.refusedForPeers();
      });
    }
    long[] failingCounts = new long[5];
    for (Instance in : all) {
      in.node.engineStallStats().ifPresent(ws -> failingCounts[0] += ws.failingSpells());
      failingCounts[1] += in.engine.probes;
      long[] a = NodeProbe.failingAvoidance(in.node);
      failingCounts[2] += a[0];
      failingCounts[3] += a[1];
      failingCounts[4] += in.engine.outageFailures;
    }
    long refuted = 0;
    for (Instance in : all) {
      GossipProbe g = wiring == Wiring.LIBRARY ? NodeProbe.gossipOf(in.node) : null;
      refuted += g == null ? 0 : g.generationsRefuted();
      // every incarnation of a node id runs alone (a crashed one's messages are lost, and
      // replays bring back its frames only): restarts stepping generations back, partitions
      // and replays must never read as another process with the node's id
      if (g != null && g.nodeIdInUseReports() > 0) {
        inv.violation("node " + in.key + " reported its id in use by another process "
            + g.nodeIdInUseReports() + " times, after " + g.generationsRefuted()
            + " refuted generations");
      }
    }
    for (Instance in : current) {
      in.node.stop();
    }
    clock.runUntil(() -> Arrays.stream(current)
        .allMatch(in -> in.node.state() == PrefixRouterNode.State.STOPPED),
        clock.nanoTime() + 120 * S, 50 * MS);
    List<String> v = new ArrayList<>(inv.violations());
    v.addAll(clock.escaped());
    boolean gossip = all.stream().anyMatch(in -> in.node.stats().gossipBytesOut() > 0);
    return new Outcome(plan, wiring, v, new Summary(accepted.size(), ok, failed, forwarded,
        fallbacks, inv.forwardFrames, Math.max(0, executions - ok), crashes,
        clock.nanoTime() / MS, gossip, convergence,
        (int) accepted.values().stream().filter(a -> !a.request.scope().isDefault()).count(),
        scopedRejections, unscopedAtOld,
        (int) accepted.values().stream().filter(a -> a.request.params().hasStops()).count(),
        stopsRejections, plan.selfManagedCount(), selfManagedExecutions, selfManagedEvictions,
        otherModelRefusals, watch[0], watch[1], watch[2], failingCounts[0], failingCounts[1],
        failingCounts[2], failingCounts[3], failingCounts[4], recoveryRequests, refuted,
        restartsAtNewAddress, inv.forwardsToLeftAddresses, inv.othersToLeftAddresses));
  }

  /**
   * After draining, with every outage over and no random failure any more: a node that still
   * holds its engine failing must serve locally again once {@code failureCooldown} has passed
   * since the engine's last failure: it no longer avoids its engine (nothing is outstanding,
   * so a probe is due), and the first request it decides to run here is the probe, whose
   * success ends the failing spell (the failing state is never stuck). Each such node is
   * given, up to 3 times, one every {@code failureCooldown} plus 100 ms, a request it decides
   * ({@code explain}) to run here (the first of the run's prompts, then fresh ones, that it
   * would); they are accepted requests like any other, answered exactly once and checked.
   * Returns how many were submitted.
   */
  private int checkRecovery() {
    for (Instance in : all) {
      in.engine.healthy = true;
    }
    int submittedHere = 0;
    long wait = config.failureCooldown().toNanos() + 100 * MS;
    for (Instance in : current) {
      if (!NodeProbe.engineFailing(in.node)) {
        continue;
      }
      long since = clock.nanoTime();
      int probed = 0;
      for (int k = 0; k < 3 && NodeProbe.engineFailing(in.node); k++) {
        // a run the node no longer waits for may still be held by the engine (paused, or a
        // forwarded run stalled whose cancel came while paused): no probe while it is
        clock.runUntil(() -> outstandingRuns(in) == 0,
            clock.nanoTime() + config.engineTimeout().toNanos() + 60 * S, 50 * MS);
        clock.advanceTo(clock.nanoTime() + wait);
        // a request that arrived meanwhile (a peer's forward, a client's retry) may have taken
        // the probe: it is avoided while that probe runs, so wait for it to end again
        for (int again = 0; again < 10 && outstandingRuns(in) > 0; again++) {
          clock.runUntil(() -> outstandingRuns(in) == 0,
              clock.nanoTime() + config.engineTimeout().toNanos() + 60 * S, 50 * MS);
          clock.advanceTo(clock.nanoTime() + wait);
        }
        if (!NodeProbe.engineFailing(in.node)) {
          break; // that probe succeeded: the spell is over
        }
        InferenceRequest req = null;
        for (int c = 0; c < 40 && req == null; c++) {
          int[] prompt = c < plan.submissions.size() ? plan.prompt(plan.submissions.get(c))
              : freshPrompt(in.index * 1_000L + k * 100L + c);
          InferenceRequest r = new InferenceRequest("recover-" + in.id + "-" + k, prompt,
              new GenerationParams(1, 0.0, 1.0, 0));
          RouteDecision d = in.node.explain(r);
          if (d.reason() == RouteDecision.Reason.LOCAL_ENGINE_FAILING) {
            inv.violation("node " + in.key + " avoids its failing engine " + wait / MS
                + " ms after its last run there ended, with nothing outstanding: no probe is let"
                + " through (" + d + "; " + in.node.engineStallStats().orElse(null) + ")");
            return submittedHere;
          }
          if (d.isLocal()) {
            req = r;
          }
        }
        if (req == null) {
          continue; // nothing it would run here: it cannot be told from a stuck spell
        }
        CompletableFuture<InferenceResponse> f = accept(in, req, null);
        submittedHere++;
        probed++;
        if (f != null && !clock.runUntil(f::isDone, clock.nanoTime() + 120 * S, 10 * MS)) {
          inv.violation("request " + req.id() + " accepted by " + in.key + " never completed"
              + " (liveness, 120 s)");
        }
      }
      if (probed == 3 && NodeProbe.engineFailing(in.node)) {
        inv.violation("node " + in.key + " still holds its engine failing "
            + (clock.nanoTime() - since) / MS + " ms after the run drained, its outages over"
            + " and its engine answering, after 3 requests it ran there " + wait / MS
            + " ms apart: the failing spell never ended");
      }
    }
    return submittedHere;
  }

  /** Runs the node's engine watch counts outstanding on its engine. */
  private static int outstandingRuns(Instance in) {
    return in.node.engineStallStats().map(EngineStallStats::outstanding).orElse(0);
  }

  /** A prompt of one block nobody was given before (another vocabulary range's tokens). */
  private static int[] freshPrompt(long seed) {
    SplittableRandom r = new SplittableRandom(seed ^ 0x2545F4914F6CDD1DL);
    int[] t = new int[FaultPlan.BLOCK + 1];
    for (int i = 0; i < t.length; i++) {
      t[i] = r.nextInt(FaultPlan.VOCABULARY);
    }
    return t;
  }

  // ---------------------------------------------------------------- workload

  private void submit(int k, Submission s) {
    List<Instance> ups = new ArrayList<>();
    for (Instance in : current) {
      if (in.up) {
        ups.add(in);
      }
    }
    Instance at = ups.get(s.nodePick() % ups.size());
    String id = "r" + k;
    GenerationParams params = new GenerationParams(s.maxTokens(), s.temperature(), 1.0,
        s.sampleSeed());
    int[] prompt = plan.prompt(s);
    if (s.stops().any()) {
      // a stop token id from the output the request has without stops, so that it ends there
      List<Integer> ids = s.stops().tokenAt() < 0 ? List.of() : List.of(SimulatedEngine
          .expectedOutput(prompt, params, plan.vocabularyOf(at.index))[s.stops().tokenAt()]);
      params = params.withStops(
          s.stops().string() ? List.of(FaultPlan.STOP_STRING) : List.of(), ids);
    }
    InferenceRequest req = new InferenceRequest(id, prompt, params,
        FaultPlan.SCOPES[s.scope()]);
    // every other client streams: its pieces must add up to the answer it gets
    accept(at, req, k % 2 == 0 ? new Stream() : null);
  }

  /** Submits {@code req} to {@code at}, and checks its answer; null if submit threw. */
  private CompletableFuture<InferenceResponse> accept(Instance at, InferenceRequest req,
      Stream stream) {
    String id = req.id();
    inv.originOf.put(id, at.id);
    inv.scopeOf.put(id, req.scope());
    submitted.put(id, req);
    CompletableFuture<InferenceResponse> f;
    try {
      f = stream != null ? at.node.submit(req, stream) : at.node.submit(req);
    } catch (RuntimeException e) {
      clock.recordEscape("submit to " + at.key, e);
      return null;
    }
    if (stream != null) {
      stream.future = f;
    }
    at.acceptedHere++;
    accepted.put(id, new Accepted(req, at, f));
    f.whenComplete((resp, err) -> {
      checkAnswer(req, at, resp, err);
      if (stream != null) {
        stream.check(req, resp, inv, plan.vocabularyOf(at.index));
      }
    });
    return f;
  }

  /** The output a streaming client received. */
  private static final class Stream implements io.github.prefixrouter.OutputListener {
    CompletableFuture<InferenceResponse> future;
    int[] tokens = new int[0];
    final StringBuilder text = new StringBuilder();
    int late;

    @Override
    public void onOutput(int[] t, String s) {
      if (future != null && future.isDone()) {
        late++;
      }
      int n = tokens.length;
      tokens = Arrays.copyOf(tokens, n + t.length);
      System.arraycopy(t, 0, tokens, n, t.length);
      text.append(s);
    }

    void check(InferenceRequest req, InferenceResponse resp, Invariants inv, int vocabulary) {
      if (late > 0) {
        inv.violation("request " + req.id() + ": " + late + " pieces after its completion");
      }
      int[] expected = SimulatedEngine.expectedOutput(req.tokens(), req.params(), vocabulary);
      if (tokens.length > expected.length
          || !Arrays.equals(tokens, Arrays.copyOf(expected, tokens.length))) {
        inv.violation("request " + req.id() + ": the stream " + Arrays.toString(tokens)
            + " is not a prefix of the output " + Arrays.toString(expected));
      }
      if (resp != null && (!Arrays.equals(tokens, resp.result().outputTokens())
          || !text.toString().equals(resp.result().text()))) {
        inv.violation("request " + req.id() + ": the stream " + Arrays.toString(tokens)
            + " is not the answer " + Arrays.toString(resp.result().outputTokens()));
      }
    }
  }

  private void checkAnswer(InferenceRequest req, Instance origin, InferenceResponse resp,
      Throwable err) {
    String id = req.id();
    if (err != null) {
      Throwable t = err instanceof CompletionException && err.getCause() != null
          ? err.getCause() : err;
      if (!(t instanceof RequestFailedException)) {
        inv.violation("request " + id + " at " + origin.key + " failed with untyped " + t);
      } else if (origin.engine.injectedFailures == 0
          && !(config.engineTimeout().toSeconds() < 60
              && String.valueOf(t.getMessage()).contains("engineTimeout"))) {
        // engines here never stall for more than seconds: only a short engine deadline may
        // legitimately expire
        inv.violation("request " + id + " at " + origin.key + " failed although its local engine"
            + " never failed: " + t.getMessage());
      }
      return;
    }
    // the origin's model's answer: a node of another model never serves the request
    int[] expected = SimulatedEngine.expectedOutput(req.tokens(), req.params(),
        plan.vocabularyOf(origin.index));
    int[] got = resp.result().outputTokens();
    if (!Arrays.equals(expected, got)) {
      inv.violation("request " + id + " answered by " + resp.servedBy() + " with "
          + Arrays.toString(got) + ", a local engine gives " + Arrays.toString(expected));
    }
    if (!id.equals(resp.requestId())) {
      inv.violation("request " + id + " answered as " + resp.requestId());
    }
    if (resp.result().promptTokens() != req.length()) {
      inv.violation("request " + id + ": answer reports " + resp.result().promptTokens()
          + " prompt tokens, prompt has " + req.length());
    }
    boolean provenance = false;
    for (Instance in : all) {
      if (in.id.equals(resp.servedBy())) {
        for (int[] out : in.engine.producedFor(id)) {
          provenance |= Arrays.equals(out, got);
        }
      }
    }
    if (!provenance) {
      inv.violation("request " + id + ": no engine of " + resp.servedBy()
          + " produced the answer the client got");
    }
    if (resp.forwarded() == resp.servedBy().equals(origin.id)) {
      inv.violation("request " + id + " at " + origin.id + ": forwarded=" + resp.forwarded()
          + " but servedBy=" + resp.servedBy());
    }
    if (resp.attempts() < 1 || resp.attempts() > 4) {
      inv.violation("request " + id + ": " + resp.attempts() + " attempts (at most 3 forwards"
          + " and one local run)");
    }
    if (resp.fallbackCause() != FallbackCause.NONE && resp.attempts() < 2) {
      inv.violation("request " + id + ": fell back (" + resp.fallbackCause() + ") in one attempt");
    }
    if (config.hopLimit() == 1 && inv.forwardsFor.getOrDefault(id, 0) > 3) {
      inv.violation("request " + id + ": FORWARD frames sent to " + inv.forwardsFor.get(id)
          + " peers");
    }
  }

  // ---------------------------------------------------------------- checks

  private void checkGauges() {
    // what the peers' trees can hold: an engine-driven tree mirrors its engine's cache, a
    // self-managed one holds up to its own capacity, which the plan may set above the engine's
    long maxReplica = 0;
    for (int i = 0; i < n; i++) {
      long tokens = plan.selfManaged[i]
          ? Math.max(plan.engineCapacityTokens[i], plan.treeCapacityTokens[i])
          : plan.engineCapacityTokens[i];
      maxReplica += tokens / FaultPlan.BLOCK;
    }
    for (Instance in : all) {
      if (in.retired) {
        continue;
      }
      NodeStats st = in.node.stats();
      if (st.peersLive() < 0 || st.peersLive() > n - 1) {
        inv.violation("node " + in.key + " counts " + st.peersLive() + " live peers in a cluster"
            + " of " + n);
      }
      if (st.replicaBlocks() < 0 || st.replicaBlocks() > maxReplica) {
        inv.violation("node " + in.key + " replicates " + st.replicaBlocks() + " blocks, more"
            + " than all peers' caches and trees can hold (" + maxReplica + ")");
      }
      if (st.localCachedTokens() > Math.max(in.nodeConfig.treeCapacityTokens(),
          plan.engineCapacityTokens[in.index])) {
        inv.violation("node " + in.key + " local tree holds " + st.localCachedTokens()
            + " tokens, above its capacity");
      }
      if (in.selfManaged) {
        // LRU at the capacity: above it only while leases pin more than it
        long size = in.tree.sizeTokens();
        long pinned = TreeProbe.pinnedTokens(in.tree);
        if (size > Math.max(in.nodeConfig.treeCapacityTokens(), pinned)) {
          inv.violation("node " + in.key + " self-managed tree holds " + size + " tokens, above"
              + " its capacity " + in.nodeConfig.treeCapacityTokens() + " with " + pinned
              + " pinned by leases");
        }
      }
      GossipProbe g = wiring == Wiring.LIBRARY ? NodeProbe.gossipOf(in.node) : null;
      if (g != null) {
        try {
          g.checkInvariants();
        } catch (RuntimeException e) {
          inv.violation("node " + in.key + " gossip invariant: " + e.getMessage());
        }
      }
      if (st.inFlight() < 0) {
        inv.violation("node " + in.key + " has negative inFlight " + st.inFlight());
      }
    }
  }

  private void checkCredits() {
    for (Instance in : all) {
      if (!in.retired) {
        checkCredits(in);
      }
    }
  }

  /**
   * A node credits a prefix to a scope only if its engine ran a prompt of that scope beginning
   * with it: for every request submitted so far, the node's own index may match its prompt in
   * its scope only as far as the engine was given that prefix in that scope. A scoped chain
   * under the default root, or under another scope's, breaks this (the prompts of all scopes
   * share their topics' prefixes, and each has a private suffix). The library's tree must also
   * pass its own invariant check.
   */
  private void checkCredits(Instance in) {
    if (in.local == null) {
      return;
    }
    for (Accepted a : accepted.values()) {
      CacheScope sc = a.request.scope();
      int[] t = a.request.tokens();
      int m;
      try {
        m = in.local.match(BlockHasher.scopeRoot(sc), t);
      } catch (RuntimeException e) {
        inv.violation("node " + in.key + ": local match threw " + e);
        return;
      }
      if (!in.engine.ranPrefix(sc, t, m / FaultPlan.BLOCK)) {
        inv.violation("node " + in.key + " credits " + m + " tokens of request "
            + a.request.id() + "'s prompt to scope " + sc + ", a prefix its engine never ran"
            + " in that scope");
      }
    }
    ConcurrentPrefixTree tree = in.tree;
    if (tree != null) {
      try {
        tree.checkInvariants();
      } catch (RuntimeException | AssertionError e) {
        inv.violation("node " + in.key + " tree invariant: " + e.getMessage());
      }
    }
    if (in.selfManaged) {
      // a self-managed tree learns only from the node: every block it holds must be a
      // full-block prefix of a prompt its engine answered in that block's scope (not one the
      // node forwarded, nor one of another scope, nor one whose run failed)
      long[] held = tree.blockHashes();
      int foreign = 0;
      long first = 0;
      for (long h : held) {
        if (!in.engine.answeredBlock(h)) {
          if (foreign++ == 0) {
            first = h;
          }
        }
      }
      if (foreign > 0) {
        inv.violation("node " + in.key + " self-managed tree holds " + foreign + " of its "
            + held.length + " blocks (first " + Long.toHexString(first) + ") that are no"
            + " prefix of a prompt its engine answered in that scope");
      }
    }
  }

  /**
   * After draining: no self-managed tree still has a lease out (every lease taken for a run is
   * released, whether the run succeeded, failed, timed out, was cancelled or abandoned, or its
   * node stopped or crashed). Old incarnations included: their engines may still be finishing
   * runs, so this waits for them (bounded) before it reports.
   */
  private void checkLeases() {
    List<Instance> managed = all.stream().filter(in -> in.selfManaged).toList();
    if (managed.isEmpty()) {
      return;
    }
    boolean free = clock.runUntil(() -> managed.stream()
            .allMatch(in -> TreeProbe.pinnedTokens(in.tree) == 0),
        clock.nanoTime() + 60 * S, 50 * MS);
    if (!free) {
      for (Instance in : managed) {
        long pinned = TreeProbe.pinnedTokens(in.tree);
        if (pinned != 0) {
          inv.violation("node " + in.key + " self-managed tree has " + pinned + " tokens pinned"
              + " by leases after the cluster drained: a lease taken for a run was never"
              + " released");
        }
      }
    }
  }

  private void checkCounters() {
    for (Instance in : all) {
      NodeStats st = in.node.stats();
      if (st.requests() != in.acceptedHere) {
        inv.violation("node " + in.key + " counts " + st.requests() + " requests, clients had "
            + in.acceptedHere + " accepted");
      }
      long answered = st.servedLocally() + st.forwarded() + st.failed();
      if (answered != st.requests()) {
        inv.violation("node " + in.key + ": servedLocally " + st.servedLocally() + " + forwarded "
            + st.forwarded() + " + failed " + st.failed() + " != requests " + st.requests());
      }
      if (st.pushedBack() != st.fallbacks().get(FallbackCause.BUSY)) {
        inv.violation("node " + in.key + ": pushedBack " + st.pushedBack()
            + " != BUSY fallbacks " + st.fallbacks().get(FallbackCause.BUSY));
      }
      long sent = inv.forwardsSentBy.getOrDefault(in.key, 0L);
      if (config.hopLimit() == 1 && sent != st.forwarded() + st.totalFallbacks()) {
        inv.violation("node " + in.key + " sent " + sent + " forwards but counts "
            + st.forwarded() + " answered + " + st.totalFallbacks() + " fallbacks "
            + st.fallbacks() + ": a fallback went uncounted or was counted twice");
      }
      long fromResponses = 0;
      for (Accepted a : accepted.values()) {
        if (a.origin == in && a.future.isDone() && !a.future.isCompletedExceptionally()
            && a.future.join().forwarded()) {
          fromResponses++;
        }
      }
      if (fromResponses != st.forwarded()) {
        inv.violation("node " + in.key + " counts " + st.forwarded() + " forwarded, clients got "
            + fromResponses + " forwarded answers");
      }
    }
  }

  /**
   * After healing and draining, with the library's gossip: every live node must see every
   * other live node alive and hold, for each, exactly the owner's current advertised block set
   * at the owner's (generation, version); and each owner's advertised set must mirror its
   * engine's cache block for block. Returns the simulated milliseconds convergence took, or -1
   * if this wiring has no gossip to check.
   */
  private long checkConvergence() {
    if (wiring != Wiring.LIBRARY || NodeProbe.gossipOf(current[0].node) == null) {
      return -1;
    }
    long start = clock.nanoTime();
    long rounds = 4L * (32 - Integer.numberOfLeadingZeros(n)) + 10;
    long bound = config.peerDeadAfter().toNanos() + rounds * config.gossipInterval().toNanos();
    boolean ok = clock.runUntil(() -> divergence() == null, start + bound,
        config.gossipInterval().toNanos());
    if (!ok) {
      inv.violation("replicas did not converge within " + bound / MS + " ms after healing: "
          + divergence());
      return -1;
    }
    return (clock.nanoTime() - start) / MS;
  }

  /** The first difference between a replica and its owner, or null if all agree. */
  private String divergence() {
    for (Instance owner : current) {
      GossipProbe o = NodeProbe.gossipOf(owner.node);
      long[] own = o.ownBlocks();
      String wrong = ownDivergence(owner.key, own, owner.tree,
          owner.selfManaged ? null : owner.simEngine);
      if (wrong != null) {
        return wrong;
      }
      for (Instance holder : current) {
        if (holder == owner) {
          continue;
        }
        GossipProbe h = NodeProbe.gossipOf(holder.node);
        long[] rep = h.replicaOf(owner.id);
        long[] ver = h.replicaVersion(owner.id);
        if (rep == null || ver == null) {
          return holder.key + " has no live replica of " + owner.key;
        }
        if (ver[0] != o.generation() || ver[1] != o.ownVersion() || !Arrays.equals(rep, own)) {
          return holder.key + " holds " + owner.key + " at generation " + ver[0] + " version "
              + ver[1] + " (" + rep.length + " blocks); the owner is at " + o.generation()
              + "/" + o.ownVersion() + " (" + own.length + " blocks)";
        }
      }
      if (owner.node.stats().peersLive() != n - 1) {
        return owner.key + " sees " + owner.node.stats().peersLive() + " live peers of "
            + (n - 1);
      }
    }
    return null;
  }

  /**
   * What an owner's own side gets wrong, or null: an engine-driven tree ({@code engine} not
   * null) must hold exactly the blocks its engine caches, and the node must advertise exactly
   * the distinct fingerprints of its tree's blocks. Blocks are counted in the tree, not in the
   * advertised set: the summary publishes a fingerprint once however many held blocks share it
   * (gossip.md, "Block fingerprints"), so a node whose engine caches two blocks whose hashes
   * fold to one 32-bit fingerprint rightly advertises one fingerprint fewer than it caches
   * blocks.
   */
  static String ownDivergence(String key, long[] advertised, ConcurrentPrefixTree tree,
      SimulatedEngine engine) {
    long[] blocks = tree.blockHashes();
    if (engine != null) {
      long[] cached = engine.cachedBlockIds();
      if (blocks.length != cached.length) {
        return key + "'s tree holds " + blocks.length + " blocks, its engine caches "
            + cached.length + " blocks";
      }
      for (long id : cached) {
        if (TreeProbe.engineCopies(tree, id) == 0) {
          return key + "'s engine caches block " + id + ", which its tree does not hold";
        }
      }
    }
    long[] held = GossipProbe.fingerprintsOf(blocks);
    if (!Arrays.equals(advertised, held)) {
      return key + " advertises " + advertised.length + " fingerprints, the "
          + blocks.length + " blocks of its " + (engine == null ? "self-managed " : "")
          + "tree have " + held.length;
    }
    return null;
  }

  // ---------------------------------------------------------------- faults

  private void startFault(Fault f) {
    if (healed) {
      return;
    }
    switch (f.kind()) {
      case CRASH -> {
        int x = f.sideA().get(0);
        long up = Arrays.stream(current).filter(in -> in.up).count();
        if (!current[x].up || up <= 1) {
          return;
        }
        crash(x);
        clock.schedule(f.forNanos(), () -> {
          if (!healed && !current[x].up) {
            restart(x);
          }
        });
        return;
      }
      case PAUSE -> {
        current[f.sideA().get(0)].engine.pauseUntil(clock.nanoTime() + f.forNanos());
        return;
      }
      case REPLAY -> {
        // the network delivers old frames of one node again, seconds after they were sent:
        // stale digests and deltas, forwards of requests long answered, old cancels
        // (after a restart, frames of the previous incarnation: an old generation's gossip)
        Instance in = current[f.sideA().get(0)];
        Instance from = in;
        for (Instance old : all) {
          if (old.index == in.index) {
            from = old; // the earliest incarnation
            break;
          }
        }
        if (in.up) {
          from.transport.replay(viewRandom, 5 + (int) (f.forNanos() / S) * 5,
              in.transport.inner());
        }
        return;
      }
      default -> {
        active.add(f);
        applyNetwork();
        clock.schedule(f.forNanos(), () -> {
          if (active.remove(f)) {
            applyNetwork();
          }
        });
      }
    }
  }

  /**
   * The gossip generation of a node's first instance in a run whose restarts step generations
   * back ({@link FaultPlan#steppedBack}): far above the simulated clock's microseconds, and far
   * enough above 1 for every restart.
   */
  static final long STEPPED_BACK_BASE = 1_000_000_000_000_000L;

  private void crash(int x) {
    crashes++;
    Instance in = current[x];
    in.up = false;
    net.crash(in.id);
  }

  private void restart(int x) {
    Instance old = current[x];
    checkCredits(old);
    old.retired = true;
    old.transport.inner().close();
    old.node.stop();
    // back at the address it had, or at a new one (a pod rescheduled with a new IP address):
    // its old address, its transport closed, then refuses what is sent there
    PeerAddress address = old.address;
    if (plan.restartsAtNewAddress(x, old.generation)) {
      address = new PeerAddress(old.id, "mem:" + old.id + "~" + old.generation);
      restartsAtNewAddress++;
      inv.leftAddresses.add(old.address.address());
    }
    Instance fresh = new Instance(x, old.generation + 1, address);
    current[x] = fresh;
    all.add(fresh);
    fresh.node.start();
  }

  /** Recomputes every link and cut from the base link and the active faults. */
  private void applyNetwork() {
    net.heal();
    cuts.clear();
    Link base = healed
        ? new Link(plan.baseLink.delay(), Duration.ZERO, 0, 0, 0)
        : plan.baseLink;
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) {
        links[i][j] = base;
      }
    }
    for (Fault f : active) {
      for (int a : f.sideA()) {
        for (int b : f.sideB()) {
          switch (f.kind()) {
            case PARTITION -> {
              cuts.add(a + ">" + b);
              cuts.add(b + ">" + a);
            }
            case ONE_WAY_CUT -> cuts.add(a + ">" + b);
            case DELAY_SPIKE -> {
              links[a][b] = withDelay(links[a][b], f.spikeDelayNanos());
              links[b][a] = withDelay(links[b][a], f.spikeDelayNanos());
            }
            case LOSS_BURST -> links[a][b] = links[a][b].withLoss(f.lossBurst());
            default -> { }
          }
        }
      }
    }
    for (int i = 0; i < n; i++) {
      for (int j = 0; j < n; j++) {
        if (i != j) {
          net.setLink(ids[i], ids[j], links[i][j]);
          if (cuts.contains(i + ">" + j)) {
            net.partitionOneWay(ids[i], ids[j]);
          }
        }
      }
    }
  }

  private static Link withDelay(Link l, long extraNanos) {
    return new Link(l.delay().plusNanos(extraNanos), l.jitter(), l.loss(), l.duplicate(),
        l.reorder());
  }

  // ---------------------------------------------------------------- stale peer view

  /**
   * A peer view fed by simulated gossip: every interval (jittered) the node hears from each
   * peer whose messages can reach it now (not crashed, not cut, not lost on the link), and then
   * learns that peer's real cache, load and incarnation as of that moment, and the address it
   * listens at (a restart may have moved it). Peers it has not heard from for
   * {@code peerDeadAfter} disappear.
   */
  private final class StaleView implements PeerView {
    private final Instance self;
    private final TreeMap<String, Known> known = new TreeMap<>();

    private record Known(long heardAt, long[] blockIds, int queue, int inFlight,
        boolean overloaded, long generation, PeerAddress address) {}

    StaleView(Instance self) {
      this.self = self;
    }

    void refresh() {
      if (self.retired) {
        return;
      }
      if (self.up) {
        long now = clock.nanoTime();
        for (int p = 0; p < n; p++) {
          Instance peer = current[p];
          if (p == self.index || !peer.up || cuts.contains(p + ">" + self.index)
              || viewRandom.nextDouble() < links[p][self.index].loss()) {
            continue;
          }
          EngineLoad l = peer.engine.load();
          known.put(peer.id, new Known(now, peer.simEngine.cachedBlockIds(), l.queueDepth(),
              l.inFlight(), l.queueDepth() >= config.highWatermark(), peer.generation,
              peer.address));
        }
      }
      long interval = config.gossipInterval().toNanos();
      clock.schedule(interval / 2 + viewRandom.nextLong(interval), this::refresh);
    }

    @Override
    public PeerSet livePeers() {
      long now = clock.nanoTime();
      known.values().removeIf(k -> now - k.heardAt() >= config.peerDeadAfter().toNanos());
      int size = known.size();
      PeerAddress[] a = new PeerAddress[size];
      int[] slots = new int[size];
      int[] q = new int[size];
      int[] f = new int[size];
      boolean[] over = new boolean[size];
      long[] rtt = new long[size];
      long[] lastSync = new long[size];
      long[] generation = new long[size];
      int i = 0;
      for (Map.Entry<String, Known> e : known.entrySet()) {
        Known k = e.getValue();
        a[i] = k.address();
        slots[i] = i;
        q[i] = k.queue();
        f[i] = k.inFlight();
        over[i] = k.overloaded();
        rtt[i] = 2 * plan.baseLink.delay().toNanos();
        lastSync[i] = k.heardAt();
        generation[i] = k.generation();
        i++;
      }
      return new PeerSet(a, slots, q, f, over, new boolean[size], rtt, lastSync, generation);
    }

    @Override
    public void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out) {
      for (int i = 0; i < peers.size(); i++) {
        Known k = known.get(peers.address(i).nodeId());
        int m = 0;
        if (k != null) {
          while (m < blocks && Arrays.binarySearch(k.blockIds(), chain[m]) >= 0) {
            m++;
          }
        }
        out[i] = m;
      }
    }
  }
}
