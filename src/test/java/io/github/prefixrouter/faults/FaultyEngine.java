package io.github.prefixrouter.faults;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.testing.SimulatedEngine;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.function.Predicate;

/**
 * A {@link SimulatedEngine} with injected faults, and a record of everything it produced.
 *
 * <ul>
 *   <li><b>Failures</b>: with probability {@code failureProbability} a request fails (retryable
 *       {@link EngineException}) shortly after it is submitted.
 *   <li><b>Pauses</b> (a stalled process, a GC pause): while paused, finished results are held
 *       back until the pause ends.
 *   <li><b>Stalls of forwarded work</b>: with probability {@code stallProbability}, a request
 *       forwarded by a peer hangs until the peer cancels it (the future then fails) or
 *       {@code maxStallNanos} pass (it then runs). Bounded, so a lost cancel leaks nothing.
 *   <li><b>Outages</b> ({@link #outage}): for a window, every request fails (retryable
 *       {@link EngineException}), at once (a failed future returned by {@code execute}) or after
 *       a delay.
 * </ul>
 * While its node holds it failing ({@link #watchFailing}), a run may start only as the node's
 * one probe, or when the node has no peer to send it to: a run given while another it was given
 * is still outstanding (neither ended nor cancelled by the node), for which the node would pick
 * a peer ({@link #decide}), fails the invariants.
 * Every successful answer is recorded per request id, so the harness can check that an answer
 * a client got was really produced by the engine of the node that claims to have served it.
 * Every request it is given must carry the cache scope its client submitted it with, and every
 * prefix it was given is recorded with its scope ({@link #ranPrefix}), so the harness can check
 * that the node credits a prefix only to the scope it ran in.
 */
final class FaultyEngine implements InferenceEngine {

  private final String nodeId;
  private final SimulatedEngine inner;
  private final GuardedScheduler scheduler;
  private final SplittableRandom random;
  private final Predicate<String> isLocalRequest;
  private final double failureProbability;
  private final double stallProbability;
  private final long maxStallNanos;
  private final Invariants invariants;
  private final int highWatermark;

  private long pausedUntil;
  private final Map<String, List<Runnable>> stalled = new HashMap<>();
  private int stalledCount;
  private final Map<String, List<int[]>> produced = new HashMap<>();
  /** Chain hashes (scope root first) of every full-block prefix of every prompt given here. */
  private final Set<Long> ranPrefixes = new HashSet<>();
  /**
   * Chain hashes (scope root first) of every full-block prefix of every prompt this engine
   * answered (a result handed to the node): all a self-managed tree may hold.
   */
  private final Set<Long> answeredPrefixes = new HashSet<>();
  /**
   * Hashes prompts into chains that start from their scope's root, as the router does (the
   * plans keep the default salt, 0, so these are the block hashes of the nodes' trees).
   */
  static final BlockHasher HASHER = new BlockHasher(FaultPlan.BLOCK, 0);

  /**
   * Test of the harness itself: corrupt answers to forwarded requests, lose local ones, run
   * forwarded requests in the default scope (a scope lost on the way), report every stored
   * chain as the default scope's (the library's tree then holds scoped chains under the default
   * root), or, in the stale view wiring, a local index that matches every scope's prompts in
   * the default scope's cache. An engine whose outage never ends (its node then holds it
   * failing after the run, as a node stuck in its failing spell would). For self-managed trees:
   * a lease taken on the node's tree for every run and released only when the run succeeds (a
   * lease lost on the failure path), the prompt
   * of every request the node forwards recorded in its tree (credited as if it ran here), or
   * the prompt of every scoped request that ran here recorded in the default scope as well (a
   * scope-blind record); the harness plants these through {@link #onRun} and {@link #onAnswer}.
   */
  enum Sabotage {
    NONE, WRONG_FORWARDED_ANSWER, LOSE_LOCAL_ANSWER, FORWARD_DROPS_SCOPE, SCOPE_BLIND_EVENTS,
    SCOPE_BLIND_INDEX, LEASE_LEAKED_ON_FAILURE, CREDIT_FORWARDED, SCOPE_BLIND_RECORD,
    OUTAGE_NEVER_ENDS
  }

  Sabotage sabotage = Sabotage.NONE;
  /**
   * Sabotage only: called with every request this engine is given, before it runs; the
   * returned action (if not null) runs when the request succeeds, never when it fails.
   */
  java.util.function.Function<InferenceRequest, Runnable> onRun;
  /** Sabotage only: called with every request this engine answers, before the node sees it. */
  java.util.function.Consumer<InferenceRequest> onAnswer;
  long executions;
  /** Random failures and outages' failures. */
  long injectedFailures;
  /** Failures of outages. */
  long outageFailures;
  /** Runs given while the node held this engine failing (probes, or with no peer to go to). */
  long probes;
  /** Whether the node holds this engine failing now (read without side effects); null: never. */
  java.util.function.BooleanSupplier watchFailing;
  /**
   * The runs the node counts outstanding on this engine, this one included once it is started
   * (read without side effects); null: the runs this engine holds. A run the node gave up at its
   * engine timeout is not one: it may not cancel it (another execution's run of the same id is
   * on the engine), and no longer waits for it.
   */
  java.util.function.IntSupplier watchOutstanding;
  /** Set once the run is over: no random failure any more (outages are over by then). */
  boolean healthy;
  /**
   * The node's decision for a request now ({@code PrefixRouterNode.explain}), asked only when a
   * run is given to the failing engine while another is outstanding there; null: never.
   */
  java.util.function.Function<InferenceRequest, RouteDecision> decide;
  private long outageFrom = -1;
  private long outageUntil = -1;
  private long outageFailNanos;
  /** Runs given and neither ended nor cancelled, by request id. */
  private final Map<String, Integer> running = new HashMap<>();
  long injectedStalls;
  long cancelsReceived;

  FaultyEngine(String nodeId, SimulatedEngine inner, GuardedScheduler scheduler, long seed,
      Predicate<String> isLocalRequest, double failureProbability, double stallProbability,
      long maxStallNanos, Invariants invariants, int highWatermark) {
    this.nodeId = nodeId;
    this.inner = inner;
    this.scheduler = scheduler;
    this.random = new SplittableRandom(seed);
    this.isLocalRequest = isLocalRequest;
    this.failureProbability = failureProbability;
    this.stallProbability = stallProbability;
    this.maxStallNanos = maxStallNanos;
    this.invariants = invariants;
    this.highWatermark = highWatermark;
  }

  SimulatedEngine inner() {
    return inner;
  }

  /**
   * Fails every request given from {@code fromNanos} until {@code untilNanos}, each
   * {@code failNanos} after it was given (below 0: the failed future is returned at once).
   */
  void outage(long fromNanos, long untilNanos, long failNanos) {
    outageFrom = fromNanos;
    outageUntil = untilNanos;
    outageFailNanos = failNanos;
  }

  /** Holds results back until {@code untilNanos}. */
  void pauseUntil(long untilNanos) {
    pausedUntil = Math.max(pausedUntil, untilNanos);
  }

  /** Outputs this engine produced for {@code requestId} (empty if none). */
  List<int[]> producedFor(String requestId) {
    return produced.getOrDefault(requestId, List.of());
  }

  /**
   * Whether a request of {@code scope} with the prompt {@code tokens} was given to this engine
   * whose first {@code blocks} blocks are those of {@code tokens}.
   */
  boolean ranPrefix(CacheScope scope, int[] tokens, int blocks) {
    if (blocks <= 0) {
      return true;
    }
    long[] chain = HASHER.chain(BlockHasher.scopeRoot(scope),
        java.util.Arrays.copyOf(tokens, blocks * FaultPlan.BLOCK));
    return ranPrefixes.contains(chain[blocks - 1]);
  }

  /**
   * Whether {@code chainHash}, a block hash chained from a scope's root
   * ({@link #HASHER}), is that of a full-block prefix of a prompt this engine answered in that
   * scope.
   */
  boolean answeredBlock(long chainHash) {
    return answeredPrefixes.contains(chainHash);
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest given) {
    return execute(given, OutputListener.IGNORE);
  }

  /** Streams as the simulated engine does; the pieces of a sabotaged answer are not. */
  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest given, OutputListener listener) {
    executions++;
    boolean foreign = !isLocalRequest.test(given.id());
    InferenceRequest request = sabotage == Sabotage.FORWARD_DROPS_SCOPE && foreign
        ? new InferenceRequest(given.id(), given.tokens(), given.params()) : given;
    CacheScope submitted = invariants.scopeOf.get(request.id());
    if (submitted != null && !submitted.equals(request.scope())) {
      invariants.violation("node " + nodeId + " ran request " + request.id() + " in scope "
          + request.scope() + "; its client submitted it in scope " + submitted);
    }
    for (long h : HASHER.chain(BlockHasher.scopeRoot(request.scope()), request.tokens())) {
      ranPrefixes.add(h);
    }
    if (foreign && invariants.checkWatermarks()) {
      EngineLoad l = load();
      if (l.queueDepth() >= highWatermark) {
        invariants.violation("node " + nodeId + " accepted forwarded request " + request.id()
            + " with queue depth " + l.queueDepth() + " >= high watermark " + highWatermark);
      }
    }
    CompletableFuture<EngineResult> out = new CompletableFuture<>();
    Runnable onSuccess = onRun == null ? null : onRun.apply(request);
    if (onSuccess != null) {
      out.whenComplete((res, err) -> {
        if (err == null) {
          onSuccess.run();
        }
      });
    }
    if (watchFailing != null && watchFailing.getAsBoolean()) {
      probes++;
      int held = running.values().stream().mapToInt(Integer::intValue).sum();
      int others = watchOutstanding == null ? held
          : Math.min(held, Math.max(0, watchOutstanding.getAsInt() - 1));
      // another run while one is outstanding only if the node had nowhere else to send it
      // (a peer the request was already sent to, or its origin, is not one: a relay does not
      // send it back; nor is any once the request has had its 3 forwards)
      RouteDecision d = others > 0 && decide != null
          && invariants.forwardFramesOf(request.id()) < 3 ? decide.apply(request) : null;
      Set<String> tried = new HashSet<>(invariants.forwardTargetsOf(request.id()));
      tried.add(invariants.originOf.getOrDefault(request.id(), ""));
      if (d != null && d.candidates().stream().anyMatch(c -> !c.local()
          && c.skipped() == RouteDecision.SkipReason.NONE && !tried.contains(c.nodeId()))) {
        invariants.violation("node " + nodeId + " gave " + (foreign ? "forwarded" : "its")
            + " request " + request.id() + " to its failing engine while " + others
            + " other run(s) " + running.keySet() + " were outstanding there, with a peer to"
            + " send it to (already at " + tried + "): at most one probe at a time (" + d
            + ")");
      }
    }
    running.merge(request.id(), 1, Integer::sum);
    out.whenComplete((res, err) -> running.computeIfPresent(request.id(),
        (k, v) -> v == 1 ? null : v - 1));
    long now = scheduler.nanoTime();
    if (outageFrom >= 0 && now >= outageFrom
        && (now < outageUntil || sabotage == Sabotage.OUTAGE_NEVER_ENDS)) {
      injectedFailures++;
      outageFailures++;
      EngineException down = new EngineException("engine of " + nodeId + " is down (outage)",
          true);
      if (outageFailNanos < 0) {
        out.completeExceptionally(down);
      } else {
        scheduler.schedule(outageFailNanos, () -> out.completeExceptionally(down));
      }
      return out;
    }
    boolean fails = random.nextDouble() < failureProbability;
    if (fails && !healthy) {
      injectedFailures++;
      scheduler.schedule(1_000_000L, () -> out.completeExceptionally(
          new EngineException("injected engine failure on " + nodeId, true)));
      return out;
    }
    Runnable run = () -> inner.execute(request, listener).whenComplete((res, err) ->
        deliver(request, out, res, err));
    if (foreign && random.nextDouble() < stallProbability) {
      injectedStalls++;
      stalledCount++;
      boolean[] released = new boolean[1];
      Runnable release = () -> {
        if (!released[0]) {
          released[0] = true;
          stalledCount--;
        }
      };
      stalled.computeIfAbsent(request.id(), k -> new ArrayList<>()).add(() -> {
        if (!released[0]) {
          release.run();
          out.completeExceptionally(new EngineException("request " + request.id()
              + " cancelled while stalled on " + nodeId, false));
        }
      });
      scheduler.schedule(maxStallNanos, () -> {
        if (!released[0]) {
          release.run();
          run.run();
        }
      });
      return out;
    }
    if (sabotage == Sabotage.LOSE_LOCAL_ANSWER && !foreign) {
      return out;
    }
    run.run();
    return out;
  }

  private void deliver(InferenceRequest request, CompletableFuture<EngineResult> out,
      EngineResult res, Throwable err) {
    long now = scheduler.nanoTime();
    Runnable complete = () -> {
      if (err != null) {
        out.completeExceptionally(err);
      } else {
        EngineResult r = res;
        if (sabotage == Sabotage.WRONG_FORWARDED_ANSWER && !isLocalRequest.test(request.id())) {
          int[] o = res.outputTokens();
          o[0] ^= 1;
          r = new EngineResult(o, res.text(), res.promptTokens(), res.cachedPromptTokens(),
              res.prefillNanos(), res.decodeNanos());
        }
        produced.computeIfAbsent(request.id(), k -> new ArrayList<>()).add(r.outputTokens());
        for (long h : HASHER.chain(BlockHasher.scopeRoot(request.scope()),
            request.tokens())) {
          answeredPrefixes.add(h);
        }
        if (onAnswer != null) {
          onAnswer.accept(request);
        }
        out.complete(r);
      }
    };
    if (pausedUntil > now) {
      scheduler.schedule(pausedUntil - now, complete);
    } else {
      complete.run();
    }
  }

  @Override
  public EngineLoad load() {
    EngineLoad l = inner.load();
    return new EngineLoad(l.queueDepth(), l.inFlight() + stalledCount);
  }

  @Override
  public void cancel(String requestId) {
    cancelsReceived++;
    running.remove(requestId);
    List<Runnable> s = stalled.remove(requestId);
    if (s != null) {
      s.forEach(Runnable::run);
    }
    inner.cancel(requestId);
  }

  @Override
  public boolean publishesCacheEvents() {
    return inner.publishesCacheEvents();
  }

  @Override
  public void setCacheEventListener(CacheEventListener listener) {
    if (sabotage != Sabotage.SCOPE_BLIND_EVENTS) {
      inner.setCacheEventListener(listener);
      return;
    }
    inner.setCacheEventListener(new CacheEventListener() {
      @Override
      public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
        listener.onBlocksStored(parentBlockHash, blockHashes, tokenIds);
      }

      @Override
      public void onBlocksStored(CacheScope scope, long parentBlockHash, long[] blockHashes,
          int[] tokenIds) {
        listener.onBlocksStored(CacheScope.DEFAULT, parentBlockHash, blockHashes, tokenIds);
      }

      @Override
      public void onBlocksRemoved(long[] blockHashes) {
        listener.onBlocksRemoved(blockHashes);
      }

      @Override
      public void onAllCleared() {
        listener.onAllCleared();
      }
    });
  }
}
