package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Three routing nodes on real threads, where the fault campaign's single simulated thread cannot
 * find data races, lost wake-ups or ordering bugs. Each node has a real scheduler of its own (a
 * host's, watched, or the one the builder creates and the node owns), an engine that completes
 * on its own small thread pool after short seeded random delays, streams its output in pieces,
 * and sometimes fails (retryable, not retryable, busy) or hangs until cancelled; a transport
 * delivering on threads of its own: the in-memory network on a pool of real timer threads (with
 * jitter, reordering, a little loss and duplication), or the HTTP transport on loopback. Gossip
 * runs; prompts begin with one of many shared prefixes, so requests are forwarded to the node
 * that ran a prefix (and, with hop limit 2, relayed). Submitter threads send requests to random
 * nodes, with and without an {@link OutputListener} (some slow, a few throwing); clients cancel
 * some, time some out and complete some from outside. Part-way one node is stopped (at once,
 * with a grace period, or with a grace period asked for while it stops) and a new instance
 * started at the same address.
 *
 * <p>Checked: every accepted request's future completes, within a bounded wait, exactly once;
 * a rejected submit fails with {@link NodeNotRunningException} and only once its node was told
 * to stop; an answer equals the engine's output for its request (tokens and text); a failure is
 * a {@link RequestFailedException} caused by an engine's failure, or the client's own
 * cancellation or timeout; a listener is called one piece at a time, its pieces always a prefix
 * of the request's output (the whole output on an answer), never after the future completed
 * (unless the client completed it, which the listener contract allows a call in progress to
 * outlast); per node instance, once stopped, {@code requests = servedLocally + forwarded +
 * failed}, the requests match what was submitted less the rejections, nothing is in flight, no
 * output diverged and no inbound message was malformed; no scheduled task and no inbound
 * handler call throws, no engine listener call throws, nothing is logged at ERROR; once
 * {@code stop()} has completed, every request the node accepted has completed, no request is
 * counted and no gossip round runs any more, every timer the node set on its scheduler has run
 * or been cancelled (but gossip's spread digests, no-ops once stopped), and the threads of its
 * transport and of a scheduler it owns end.
 *
 * <p>The default run takes a few rounds of each wiring; {@code -Plong} runs many more
 * ({@link #manyRounds}). {@code -Dstress.seed=N -Dstress.rounds=R} reruns rounds of a seed.
 */
class RealThreadClusterStressTest {

  static final String[] IDS = {"a", "b", "c"};
  /** The node stopped and started again part-way. */
  static final int RESTARTED = 2;
  static final int VOCABULARY = 1000;
  static final byte[] KEY = "real-thread-stress-cluster-key-!".getBytes(StandardCharsets.UTF_8);

  enum Wiring { IN_MEMORY, HTTP }

  @Test
  void inMemoryNetworkOnRealThreads() throws Exception {
    campaign(Wiring.IN_MEMORY, Long.getLong("stress.seed", 1L),
        Integer.getInteger("stress.rounds", 3));
  }

  @Test
  void httpTransportOnLoopback() throws Exception {
    campaign(Wiring.HTTP, Long.getLong("stress.seed", 1L),
        Integer.getInteger("stress.rounds", 2));
  }

  @Test
  @Tag("long")
  void manyRounds() throws Exception {
    for (long seed = 1; seed <= 5; seed++) {
      campaign(Wiring.IN_MEMORY, 100 + seed, 12);
      campaign(Wiring.HTTP, 200 + seed, 6);
    }
  }

  /** Runs {@code rounds} rounds of {@code wiring}, each a fresh cluster, and checks them. */
  static void campaign(Wiring wiring, long seed, int rounds) throws Exception {
    Totals totals = new Totals();
    for (int round = 1; round <= rounds; round++) {
      Round r = new Round(wiring, seed, round, totals);
      long t0 = System.nanoTime();
      List<String> violations = r.run();
      System.out.println("stress " + wiring + " seed " + seed + " round " + round + ": "
          + r.calls.size() + " requests in " + (System.nanoTime() - t0) / 1_000_000 + " ms, "
          + r.cfg);
      if (!violations.isEmpty()) {
        StringBuilder b = new StringBuilder(wiring + " seed " + seed + " round " + round + ": "
            + violations.size() + " violations (rerun with -Dstress.seed=" + seed
            + " -Dstress.rounds=" + round + "):");
        violations.stream().limit(30).forEach(v -> b.append("\n  ").append(v));
        fail(b.toString());
      }
    }
    System.out.println("stress " + wiring + " seed " + seed + ", " + rounds + " rounds: "
        + totals);
    // the run exercised what it claims to
    assertTrue(totals.forwarded.sum() > 0, "nothing was forwarded: " + totals);
    assertTrue(totals.streamedForwarded.sum() > 0, "no streamed forward was answered: " + totals);
    assertTrue(totals.clientAbandoned.sum() > 0, "no client cancelled: " + totals);
    assertTrue(totals.engineFailures.sum() > 0, "no engine failure reached a client: " + totals);
    assertTrue(totals.rejected.sum() + totals.abandonedByStop.sum() > 0,
        "no request met the stopped node: " + totals);
  }

  /** Figures summed over a campaign's rounds. */
  static final class Totals {
    final LongAdder requests = new LongAdder();
    final LongAdder answered = new LongAdder();
    final LongAdder forwarded = new LongAdder();
    final LongAdder streamedForwarded = new LongAdder();
    final LongAdder engineFailures = new LongAdder();
    final LongAdder clientAbandoned = new LongAdder();
    final LongAdder listenerFailures = new LongAdder();
    final LongAdder rejected = new LongAdder();
    final LongAdder abandonedByStop = new LongAdder();
    final LongAdder fallbacks = new LongAdder();
    final LongAdder pushedBack = new LongAdder();
    final Map<String, LongAdder> reasons = new ConcurrentSkipListMap<>();
    final Map<FallbackCause, LongAdder> byCause = new ConcurrentSkipListMap<>();

    @Override
    public String toString() {
      return requests + " requests, " + answered + " answered (" + forwarded + " forwarded, "
          + streamedForwarded + " of them streamed), " + engineFailures + " engine failures, "
          + listenerFailures + " listener failures, "
          + clientAbandoned + " abandoned by their clients, " + rejected + " rejected and "
          + abandonedByStop + " abandoned by a stop, " + fallbacks + " fallbacks " + byCause
          + ", " + pushedBack + " push-backs " + reasons;
    }
  }

  // ================================================================ one round

  static final class Round {
    final Wiring wiring;
    final long seed;
    final int round;
    final Totals totals;
    final SplittableRandom rnd;
    final RouterConfig cfg;
    final ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
    final AtomicReferenceArray<Instance> current = new AtomicReferenceArray<>(IDS.length);
    final List<Instance> instances = Collections.synchronizedList(new ArrayList<>());
    final List<Call> calls = Collections.synchronizedList(new ArrayList<>());
    final int[][] prefixes;
    final long hangNanos;
    ScheduledThreadPoolExecutor netPool;
    InMemoryNetwork net;
    int restartPort;

    Round(Wiring wiring, long seed, int round, Totals totals) {
      this.wiring = wiring;
      this.seed = seed;
      this.round = round;
      this.totals = totals;
      this.rnd = new SplittableRandom(seed * 7919 + round * 104_729L + wiring.ordinal());
      Duration engineTimeout = Duration.ofMillis(600 + rnd.nextInt(600));
      hangNanos = engineTimeout.toNanos() * 2;
      int low = 1 + rnd.nextInt(3);
      cfg = RouterConfig.builder()
          .policy(rnd.nextInt(3) == 0 ? RoutingPolicy.COST_AWARE : RoutingPolicy.LONGEST_PREFIX)
          .hopLimit(rnd.nextInt(3) == 0 ? 2 : 1)
          .initialPrefillNanosPerToken(200_000)
          .watermarks(low, low + 1 + rnd.nextInt(4))
          // over HTTP on a busy core a round trip can take a few hundred milliseconds
          .forwardTimeout(Duration.ofMillis((wiring == Wiring.HTTP ? 300 : 40) + rnd.nextInt(100)),
              Duration.ofMillis(1_000))
          .engineTimeout(engineTimeout)
          // a short stall timeout in some rounds: every run then gets a listener (held output
          // for peers' requests), and hung runs make the engine look stalled
          .engineStallTimeout(rnd.nextBoolean() ? Duration.ofSeconds(30)
              : Duration.ofMillis(150 + rnd.nextInt(300)))
          .streamInterval(Duration.ofMillis(rnd.nextInt(3) == 0 ? 0 : 2 + rnd.nextInt(10)))
          .busyCooldown(Duration.ofMillis(50 + rnd.nextInt(200)))
          .failureCooldown(Duration.ofMillis(50 + rnd.nextInt(200)))
          .gossip(Duration.ofMillis(30 + rnd.nextInt(40)), 2)
          .peerTimeouts(Duration.ofMillis(800), Duration.ofMillis(4_000))
          .build();
      // many prefixes, drawn unevenly: new ones keep coming, so requests keep being forwarded
      // to the node that ran a prefix first (or placed cold)
      prefixes = new int[40 + rnd.nextInt(40)][];
      for (int i = 0; i < prefixes.length; i++) {
        prefixes[i] = OracleCluster.prompt(seed * 1_000 + round * 100 + i,
            64 + 16 * rnd.nextInt(8));
      }
    }

    List<String> run() throws Exception {
      Set<Thread> before = Set.copyOf(Thread.getAllStackTraces().keySet());
      PrintStream err = System.err;
      ErrorLines errorLines = new ErrorLines(err);
      System.setErr(new PrintStream(errorLines, true, StandardCharsets.UTF_8));
      Thread.UncaughtExceptionHandler oldHandler = Thread.getDefaultUncaughtExceptionHandler();
      Thread.setDefaultUncaughtExceptionHandler((t, e) ->
          violations.add("uncaught in thread " + t.getName() + ": " + stackTrace(e)));
      ScheduledThreadPoolExecutor clientTimers = new ScheduledThreadPoolExecutor(1,
          daemons("stress-client-timer"));
      clientTimers.setRemoveOnCancelPolicy(true);
      try {
        if (wiring == Wiring.IN_MEMORY) {
          netPool = new ScheduledThreadPoolExecutor(2, daemons("stress-network"));
          net = new InMemoryNetwork(io.github.prefixrouter.spi.Clock.system(),
              Schedulers.of(netPool), new SplittableRandom(rnd.nextLong()));
          net.setDefaultLink(new InMemoryNetwork.Link(Duration.ofNanos(100_000),
              Duration.ofNanos(900_000), 0.005, 0.02, 0.1));
        }
        startCluster();
        submitPhase(clientTimers);
        awaitCalls();
        for (int i = 0; i < IDS.length; i++) {
          stop(current.get(i), false);
        }
        for (Instance in : List.copyOf(instances)) {
          checkStopped(in);
        }
        checkCalls();
        checkThreadsEnd(before);
      } finally {
        for (Instance in : instances) {
          in.close();
        }
        clientTimers.shutdownNow();
        if (netPool != null) {
          netPool.shutdownNow();
        }
        Thread.setDefaultUncaughtExceptionHandler(oldHandler);
        System.setErr(err);
      }
      for (String line : errorLines.lines()) {
        violations.add("logged at ERROR: " + line);
      }
      return new ArrayList<>(violations);
    }

    // ---------------------------------------------------------------- the cluster

    void startCluster() throws Exception {
      List<PeerAddress> seeds = new ArrayList<>();
      for (int i = 0; i < IDS.length; i++) {
        Instance in = newInstance(i, 0, seeds);
        current.set(i, in);
        if (i == 0) {
          seeds.add(in.address);
        }
      }
      restartPort = wiring == Wiring.HTTP ? port(current.get(RESTARTED).address) : 0;
      // membership converges before the clients start
      boolean converged = waitFor(Duration.ofSeconds(15), () -> {
        for (int i = 0; i < IDS.length; i++) {
          if (current.get(i).node.stats().peersLive() < IDS.length - 1) {
            return false;
          }
        }
        return true;
      });
      if (!converged) {
        violations.add("membership did not converge in 15 s: " + statsOfAll());
      }
    }

    Instance newInstance(int index, int generation, List<PeerAddress> seeds) {
      String id = IDS[index];
      Instance in = new Instance(id, generation);
      in.engine = new StressEngine(id + generation, rnd.nextLong(), hangNanos, violations);
      Transport raw;
      if (wiring == Wiring.IN_MEMORY) {
        raw = net.transport(id);
      } else {
        raw = HttpTransport.builder().nodeId(id)
            .listen("127.0.0.1", generation == 0 ? 0 : restartPort).clusterKey(KEY).build();
      }
      Transport t = new WatchedTransport(raw, id + generation, violations);
      in.transport = t;
      // a node restarted part-way sometimes owns its scheduler (the builder's default)
      boolean owned = generation > 0 && rnd.nextBoolean();
      PrefixRouterNode.Builder b = PrefixRouterNode.builder().nodeId(id).config(cfg)
          .transport(t).engine(in.engine).random(new SplittableRandom(rnd.nextLong()))
          .seeds(seeds);
      if (!owned) {
        in.scheduler = new WatchedScheduler("stress-scheduler-" + id + generation, violations);
        b.scheduler(in.scheduler);
      }
      in.node = (RouterNode) b.build();
      instances.add(in);
      in.node.start();
      in.address = t.localAddress();
      return in;
    }

    // ---------------------------------------------------------------- clients

    void submitPhase(ScheduledThreadPoolExecutor clientTimers) throws Exception {
      int submitters = 6;
      // over HTTP every forward, stream piece and gossip message is an HTTP exchange: fewer
      // requests, further apart, keep the loopback transport from drowning on a busy core
      boolean http = wiring == Wiring.HTTP;
      int perSubmitter = http ? 50 + rnd.nextInt(30) : 90 + rnd.nextInt(60);
      int maxPause = http ? 25 : 12;
      CountDownLatch go = new CountDownLatch(1);
      List<Thread> threads = new ArrayList<>();
      AtomicInteger submittedSoFar = new AtomicInteger();
      for (int s = 0; s < submitters; s++) {
        long clientSeed = rnd.nextLong();
        int client = s;
        Thread t = new Thread(() -> {
          try {
            go.await();
            SplittableRandom r = new SplittableRandom(clientSeed);
            for (int i = 0; i < perSubmitter; i++) {
              submitOne(r, client, i, clientTimers);
              submittedSoFar.incrementAndGet();
              int pause = r.nextInt(maxPause);
              if (pause > 0) {
                Thread.sleep(pause);
              }
            }
          } catch (Throwable e) {
            violations.add("submitter " + client + " threw: " + stackTrace(e));
          }
        }, "stress-submitter-" + s);
        t.setDaemon(true);
        threads.add(t);
        t.start();
      }
      int stopAfter = submitters * perSubmitter * (25 + rnd.nextInt(30)) / 100;
      Thread stopper = new Thread(() -> {
        try {
          while (submittedSoFar.get() < stopAfter) {
            Thread.sleep(2);
          }
          restartOne();
        } catch (Throwable e) {
          violations.add("the restart threw: " + stackTrace(e));
        }
      }, "stress-restarter");
      stopper.setDaemon(true);
      stopper.start();
      go.countDown();
      for (Thread t : threads) {
        t.join(120_000);
        if (t.isAlive()) {
          violations.add(t.getName() + " still submitting after 120 s");
        }
      }
      stopper.join(60_000);
      if (stopper.isAlive()) {
        violations.add("the restart did not end within 60 s");
      }
    }

    void submitOne(SplittableRandom r, int client, int i, ScheduledThreadPoolExecutor timers) {
      int index = r.nextInt(IDS.length);
      Instance in = current.get(index);
      int[] prefix = prefixes[Math.min(prefixes.length - 1,
          (int) (prefixes.length * Math.pow(r.nextDouble(), 1.5)))];
      int[] tokens = OracleCluster.concat(prefix,
          OracleCluster.prompt(r.nextLong(), 8 + r.nextInt(40)));
      String id = "r" + round + "." + client + "." + i;
      InferenceRequest q = new InferenceRequest(id, tokens,
          new GenerationParams(1 + r.nextInt(24), r.nextBoolean() ? 0.0 : 0.7, 1.0, r.nextLong()),
          r.nextInt(5) == 0 ? CacheScope.of("lora-a", "") : CacheScope.DEFAULT);
      Call c = new Call(q, in, expectedOutput(q));
      boolean streamed = r.nextBoolean();
      int action = r.nextInt(100);
      c.clientAction = action < 6 ? ClientAction.CANCEL : action < 8 ? ClientAction.TIMEOUT
          : action < 9 ? ClientAction.COMPLETE : ClientAction.NONE;
      in.submitted.increment();
      CompletableFuture<InferenceResponse> f;
      if (streamed) {
        c.recorder = new Recorder(c, r.nextInt(4) == 0 ? r.nextLong(1_500_000L) : 0,
            r.nextInt(40) == 0 ? 1 + r.nextInt(3) : 0);
        f = in.node.submit(q, c.recorder);
      } else {
        f = in.node.submit(q);
      }
      c.future.set(f);
      calls.add(c);
      f.whenComplete((v, e) -> {
        c.completions.incrementAndGet();
        c.stopRequestedAtCompletion = in.stopRequested;
      });
      long delay = r.nextLong(40_000_000L);
      switch (c.clientAction) {
        case CANCEL -> timers.schedule(() -> f.cancel(true), delay, TimeUnit.NANOSECONDS);
        case TIMEOUT -> f.orTimeout(1 + delay, TimeUnit.NANOSECONDS);
        case COMPLETE -> timers.schedule(
            () -> f.completeExceptionally(new ClientGaveUp()), delay, TimeUnit.NANOSECONDS);
        default -> { }
      }
    }

    /** Stops the node {@link #RESTARTED} part-way, checks it, starts a new one in its place. */
    void restartOne() throws Exception {
      Instance old = current.get(RESTARTED);
      stop(old, true);
      Thread.sleep(rnd.nextInt(100));
      List<PeerAddress> seeds = List.of(current.get(0).address, current.get(1).address);
      for (int attempt = 1; ; attempt++) {
        try {
          current.set(RESTARTED, newInstance(RESTARTED, old.generation + 1, seeds));
          return;
        } catch (java.io.UncheckedIOException e) {
          // the port was taken meanwhile (by an outbound connection's ephemeral port)
          if (attempt == 20) {
            throw e;
          }
          Thread.sleep(50);
        }
      }
    }

    /**
     * Stops {@code in} (part-way: maybe with a grace period), and notes the threads of its
     * transport and of a scheduler it owns (checked by {@link #checkStopped}, once a new instance
     * of its id may have threads of the same names).
     */
    void stop(Instance in, boolean partWay) throws Exception {
      in.stopRequested = true;
      in.stoppedPartWay = partWay;
      int mode = partWay ? rnd.nextInt(5) : 0;
      CompletableFuture<Void> stopped = switch (mode) {
        case 1 -> in.node.stop(Duration.ZERO);
        case 2 -> in.node.stop(Duration.ofMillis(1 + rnd.nextInt(50)));
        case 3 -> in.node.stop(Duration.ofMillis(100 + rnd.nextInt(400)));
        case 4 -> {
          // a host that stops, then (its own deadline nearing) asks for a grace period, while
          // the node may be finishing its stop on another thread
          CompletableFuture<Void> first = in.node.stop();
          Thread.sleep(rnd.nextInt(30));
          CompletableFuture<Void> again = in.node.stop(Duration.ofSeconds(30 + rnd.nextInt(30)));
          if (again != first) {
            violations.add(in + ": stop(grace) returned another future than stop()");
          }
          yield first;
        }
        default -> in.node.stop();
      };
      in.stopMode = mode;
      try {
        stopped.get(30, TimeUnit.SECONDS);
      } catch (TimeoutException e) {
        violations.add(in + ": stop() did not complete within 30 s: " + in.node.stats());
        return;
      }
      // STOPPED: every request it accepted has completed (and a rejected one at once)
      List<Call> mine = new ArrayList<>();
      synchronized (calls) {
        for (Call c : calls) {
          if (c.instance == in) {
            mine.add(c);
          }
        }
      }
      for (Call c : mine) {
        if (!c.future.get().isDone()) {
          violations.add(in + ": stopped before " + c + " completed");
        }
      }
      in.roundsAtStop = rounds(in.node);
      in.finalStats = in.node.stats();
      in.threadsAtStop = threadsNamed("prefix-router-http-" + in.id + "-",
          "prefix-router-" + in.id + "-");
    }

    /** Checks what must hold of a stopped node instance. */
    void checkStopped(Instance in) throws Exception {
      NodeStats s = in.finalStats;
      if (s == null) {
        return; // its stop was reported
      }
      if (s.state() != PrefixRouterNode.State.STOPPED) {
        violations.add(in + ": stopped but in state " + s.state());
      }
      if (s.inFlight() != 0) {
        violations.add(in + ": " + s.inFlight() + " in flight once stopped");
      }
      if (s.requests() != s.servedLocally() + s.forwarded() + s.failed()) {
        violations.add(in + ": requests " + s.requests() + " != servedLocally "
            + s.servedLocally() + " + forwarded " + s.forwarded() + " + failed " + s.failed());
      }
      // no request is counted after STOPPED (gossip's counters may still move: a message the
      // transport was handing over when it closed is applied, and its answer sent, after), and
      // no gossip round runs after it
      NodeStats now = in.node.stats();
      if (now.requests() != s.requests() || now.servedLocally() != s.servedLocally()
          || now.forwarded() != s.forwarded() || now.failed() != s.failed()
          || now.servedForPeers() != s.servedForPeers() || now.inFlight() != 0) {
        violations.add(in + ": requests counted after the stop: " + s + " then " + now);
      }
      if (in.roundsAtStop != rounds(in.node)) {
        violations.add(in + ": " + (rounds(in.node) - in.roundsAtStop)
            + " gossip rounds after the stop");
      }
      if (in.node.outputDivergences() != 0) {
        violations.add(in + ": " + in.node.outputDivergences() + " outputs diverged");
      }
      if (in.node.malformedMessages() != 0) {
        violations.add(in + ": " + in.node.malformedMessages() + " malformed messages");
      }
      // the engine ends every run (cancelled, or its hang given up); then no timer of the node
      // is left but gossip's spread digests (no-ops once stopped, due within an interval): no
      // guard, inactivity or liveness timer of an attempt, no stream flush, no grace period
      if (!waitFor(Duration.ofNanos(hangNanos + 5_000_000_000L),
          () -> in.engine.active.get() == 0)) {
        violations.add(in + ": the engine still runs " + in.engine.active.get() + " requests");
      }
      if (in.scheduler != null) {
        Thread.sleep(50); // callbacks of the engine's last completions
        List<String> left = in.scheduler.outstandingOtherThan("GossipEngine");
        if (!left.isEmpty()) {
          violations.add(in + ": timers still set after stop: " + left);
        }
        if (!waitFor(Duration.ofSeconds(2), () -> in.scheduler.outstanding() == 0)) {
          violations.add(in + ": timers still set 2 s after stop: " + in.scheduler.describe());
        }
      }
      // the threads of its transport, and of a scheduler it owns, end
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
      List<Thread> alive = new ArrayList<>();
      for (Thread t : in.threadsAtStop) {
        t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
        if (t.isAlive()) {
          alive.add(t);
        }
      }
      if (!alive.isEmpty()) {
        violations.add(in + ": threads still alive after stop: " + alive);
      }
    }

    // ---------------------------------------------------------------- checks

    void awaitCalls() {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      List<Call> snapshot;
      synchronized (calls) {
        snapshot = new ArrayList<>(calls);
      }
      for (Call c : snapshot) {
        long left = deadline - System.nanoTime();
        try {
          c.future.get().get(Math.max(1, left), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
          violations.add("hang: " + c + " not completed within 30 s; " + statsOfAll());
        } catch (Exception e) {
          // judged in checkCalls
        }
      }
    }

    void checkCalls() {
      List<Call> snapshot;
      synchronized (calls) {
        snapshot = new ArrayList<>(calls);
      }
      // per instance: what its clients saw
      Map<Instance, long[]> seen = new HashMap<>();
      for (Call c : snapshot) {
        CompletableFuture<InferenceResponse> f = c.future.get();
        long[] k = seen.computeIfAbsent(c.instance, x -> new long[5]);
        // 0 answered, 1 answered and forwarded, 2 NodeNotRunning, 3 client-abandoned,
        // 4 request failed
        if (!f.isDone()) {
          continue; // reported as a hang
        }
        if (c.completions.get() != 1) {
          violations.add(c + ": completed " + c.completions.get() + " times");
        }
        totals.requests.increment();
        Throwable err = null;
        InferenceResponse resp = null;
        try {
          resp = f.join();
        } catch (CancellationException e) {
          err = e;
        } catch (CompletionException e) {
          err = e.getCause();
        }
        Recorder rec = c.recorder;
        if (rec != null) {
          if (rec.concurrent.get() > 0) {
            violations.add(c + ": the listener was called concurrently");
          }
          if (rec.problem != null) {
            violations.add(c + ": " + rec.problem);
          }
          if (rec.afterThrowing.get() > 0) {
            violations.add(c + ": the listener was called " + rec.afterThrowing.get()
                + " times after it threw");
          }
          if (rec.afterCompletion.get() > 0 && c.clientAction == ClientAction.NONE) {
            violations.add(c + ": the listener was called " + rec.afterCompletion.get()
                + " times after the future completed");
          }
        }
        // a listener that threw fails its request with what it threw, unless the request had
        // failed already (the piece was delivered after the failure was queued) or was
        // abandoned by a stop
        if (rec != null && rec.threw && c.clientAction == ClientAction.NONE
            && !(err instanceof RequestFailedException && (err.getCause() instanceof ListenerBoom
                || engineFailure(err.getCause())))
            && !(err instanceof NodeNotRunningException)) {
          violations.add(c + ": its listener threw, but it ended with " + (resp != null
              ? "an answer" : stackTrace(err)));
          continue;
        }
        if (resp != null) {
          k[0]++;
          totals.answered.increment();
          totals.reasons.computeIfAbsent(resp.decision().reason().toString(),
              x -> new LongAdder()).increment();
          if (!Arrays.equals(resp.result().outputTokens(), c.expected)) {
            violations.add(c + ": wrong answer " + Arrays.toString(resp.result().outputTokens())
                + " served by " + resp.servedBy());
          } else if (!resp.result().text().equals(StressEngine.textOf(c.expected))) {
            violations.add(c + ": wrong text " + resp.result().text());
          }
          if (!Arrays.asList(IDS).contains(resp.servedBy())) {
            violations.add(c + ": served by unknown " + resp.servedBy());
          }
          if (resp.forwarded() == resp.servedBy().equals(c.instance.id)) {
            violations.add(c + ": forwarded " + resp.forwarded() + " but served by "
                + resp.servedBy());
          }
          if (resp.forwarded()) {
            k[1]++;
            totals.forwarded.increment();
            if (rec != null) {
              totals.streamedForwarded.increment();
            }
          }
          if (rec != null && rec.problem == null
              && (rec.tokens.size() != c.expected.length
                  || !rec.text.toString().equals(StressEngine.textOf(c.expected)))) {
            violations.add(c + ": answered, but the listener got " + rec.tokens.size() + " of "
                + c.expected.length + " tokens");
          }
          continue;
        }
        if (err instanceof NodeNotRunningException) {
          k[2]++;
          if (!c.stopRequestedAtCompletion) {
            violations.add(c + ": NodeNotRunningException from a node never told to stop");
          }
          continue;
        }
        if (c.clientAction != ClientAction.NONE && (err instanceof CancellationException
            || err instanceof TimeoutException || err instanceof ClientGaveUp)) {
          k[3]++;
          totals.clientAbandoned.increment();
          continue;
        }
        if (err instanceof RequestFailedException && rec != null && rec.threw
            && err.getCause() instanceof ListenerBoom) {
          k[4]++;
          totals.listenerFailures.increment();
          continue;
        }
        if (err instanceof RequestFailedException && engineFailure(err.getCause())) {
          k[4]++;
          totals.engineFailures.increment();
          continue;
        }
        violations.add(c + ": failed with " + stackTrace(err));
      }
      // counters per instance against what its clients saw
      for (Instance in : instances) {
        NodeStats s = in.finalStats;
        if (s == null) {
          continue; // its stop was reported
        }
        totals.fallbacks.add(s.fallbacks().values().stream().mapToLong(Long::longValue).sum());
        s.fallbacks().forEach((cause, n) -> {
          if (n > 0) {
            totals.byCause.computeIfAbsent(cause, x -> new LongAdder()).add(n);
          }
        });
        totals.pushedBack.add(s.pushedBack());
        long[] k = seen.getOrDefault(in, new long[5]);
        long submitted = in.submitted.sum();
        long rejected = submitted - s.requests();
        if (rejected < 0 || rejected > k[2] || (!in.stoppedPartWay && rejected != 0)) {
          violations.add(in + ": " + submitted + " submitted, " + s.requests()
              + " accepted, but " + k[2] + " failed as not running");
        } else {
          totals.rejected.add(rejected);
          totals.abandonedByStop.add(k[2] - rejected);
        }
        long answered = s.servedLocally() + s.forwarded();
        // a client's cancel can lose the race with the node's answer: counted as answered then
        if (answered < k[0] || answered > k[0] + k[3]) {
          violations.add(in + ": " + answered + " answered by the counters, " + k[0]
              + " answers and " + k[3] + " client cancellations seen");
        }
        if (s.forwarded() < k[1] || s.forwarded() > k[1] + k[3]) {
          violations.add(in + ": " + s.forwarded() + " forwarded by the counters, " + k[1]
              + " forwarded answers seen");
        }
        if (s.failed() < k[4] + (k[2] - Math.max(0, rejected))) {
          violations.add(in + ": " + s.failed() + " failed by the counters, " + k[4]
              + " failures and " + (k[2] - rejected) + " abandoned by the stop seen");
        }
      }
    }

    /** Whether {@code t} is an engine's failure a client may see. */
    static boolean engineFailure(Throwable t) {
      return t instanceof EngineException e && !String.valueOf(e.getMessage())
          .contains(StressEngine.CANCELLED) && !String.valueOf(e.getMessage())
          .contains("cannot be for the request");
    }

    void checkThreadsEnd(Set<Thread> before) throws InterruptedException {
      // the JDK server's threads of every transport of the round end too (the HTTP client's
      // selector thread ends only when the client is garbage collected)
      List<Thread> left = new ArrayList<>();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
      for (Thread t : Thread.getAllStackTraces().keySet()) {
        String name = t.getName();
        if (!before.contains(t) && (name.equals("HTTP-Dispatcher")
            || name.equals("idle-timeout-task") || name.startsWith("prefix-router-"))) {
          t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
          if (t.isAlive()) {
            left.add(t);
          }
        }
      }
      if (!left.isEmpty()) {
        violations.add("threads still alive after every node stopped: " + left);
      }
    }

    String statsOfAll() {
      StringBuilder b = new StringBuilder();
      synchronized (instances) {
        for (Instance in : instances) {
          b.append("\n    ").append(in).append(": ").append(in.node.stats())
              .append(", engine runs ").append(in.engine.active.get());
        }
      }
      return b.toString();
    }
  }

  // ================================================================ parts

  enum ClientAction { NONE, CANCEL, TIMEOUT, COMPLETE }

  /** What a client's listener throws, when it throws. */
  static final class ListenerBoom extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ListenerBoom() {
      super("the client's listener failed", null, false, false);
    }
  }

  /** What a client completing its future from outside completes it with. */
  static final class ClientGaveUp extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ClientGaveUp() {
      super("the client gave up", null, false, false);
    }
  }

  /** One node instance: an id and a generation (a restart is a new instance). */
  static final class Instance {
    final String id;
    final int generation;
    RouterNode node;
    Transport transport;
    StressEngine engine;
    WatchedScheduler scheduler;
    PeerAddress address;
    final LongAdder submitted = new LongAdder();
    volatile boolean stopRequested;
    volatile boolean stoppedPartWay;
    volatile int stopMode = -1;
    volatile NodeStats finalStats;
    volatile long roundsAtStop;
    volatile List<Thread> threadsAtStop = List.of();

    Instance(String id, int generation) {
      this.id = id;
      this.generation = generation;
    }

    void close() {
      try {
        if (node != null && node.state() != PrefixRouterNode.State.STOPPED) {
          node.stop(Duration.ZERO).get(10, TimeUnit.SECONDS);
        }
      } catch (Exception e) {
        // reported by the checks; its transport is closed below, so that a failed round
        // leaves no threads to the next
      }
      if (transport != null && (node == null || node.state() != PrefixRouterNode.State.STOPPED)) {
        transport.close();
      }
      if (scheduler != null) {
        scheduler.close();
      }
      if (engine != null) {
        engine.close();
      }
    }

    @Override
    public String toString() {
      return id + "#" + generation;
    }
  }

  /** One request a client submitted. */
  static final class Call {
    final InferenceRequest request;
    final Instance instance;
    final int[] expected;
    final AtomicReference<CompletableFuture<InferenceResponse>> future = new AtomicReference<>();
    final AtomicInteger completions = new AtomicInteger();
    volatile boolean stopRequestedAtCompletion;
    ClientAction clientAction = ClientAction.NONE;
    Recorder recorder;

    Call(InferenceRequest request, Instance instance, int[] expected) {
      this.request = request;
      this.instance = instance;
      this.expected = expected;
    }

    @Override
    public String toString() {
      return "request " + request.id() + " at " + instance
          + (recorder != null ? " (streamed)" : "")
          + (clientAction != ClientAction.NONE ? " (client: " + clientAction + ")" : "");
    }
  }

  /**
   * A client's listener: records breaches of the listener contract as they happen (a call
   * while another runs, a piece that does not continue the request's output, a call after the
   * future completed). Not synchronized, so that concurrent calls are seen.
   */
  static final class Recorder implements OutputListener {
    final Call call;
    final AtomicBoolean inCall = new AtomicBoolean();
    final AtomicInteger concurrent = new AtomicInteger();
    final AtomicInteger afterCompletion = new AtomicInteger();
    /** Written by one call at a time (else {@code concurrent} counts it). */
    final List<Integer> tokens = Collections.synchronizedList(new ArrayList<>());
    final StringBuffer text = new StringBuffer();
    volatile String problem;
    final long workNanos;
    /** The call that throws ({@link ListenerBoom}), counting from 1; 0 for none. */
    final int throwAt;
    final AtomicInteger callCount = new AtomicInteger();
    volatile boolean threw;
    final AtomicInteger afterThrowing = new AtomicInteger();

    Recorder(Call call, long workNanos, int throwAt) {
      this.call = call;
      this.workNanos = workNanos;
      this.throwAt = throwAt;
    }

    @Override
    public void onOutput(int[] piece, String t) {
      if (inCall.getAndSet(true)) {
        concurrent.incrementAndGet();
      }
      if (threw) {
        afterThrowing.incrementAndGet();
      }
      if (callCount.incrementAndGet() == throwAt) {
        threw = true;
        inCall.set(false);
        throw new ListenerBoom();
      }
      try {
        CompletableFuture<InferenceResponse> f = call.future.get();
        if (f != null && f.isDone()) {
          afterCompletion.incrementAndGet();
        }
        for (int token : piece) {
          int at = tokens.size();
          if (at >= call.expected.length || call.expected[at] != token) {
            problem = "piece " + Arrays.toString(piece) + " after " + at
                + " tokens is not a prefix of the output";
          }
          tokens.add(token);
        }
        text.append(t);
        if (!StressEngine.textOf(call.expected).startsWith(text.toString())) {
          problem = "the text so far '" + text + "' is not a prefix of the output's";
        }
        // some clients take a moment over each piece (computing, not blocking): the node's
        // threads meet inside the output's delivery more often
        long until = System.nanoTime() + workNanos;
        while (System.nanoTime() - until < 0) {
          Thread.onSpinWait();
        }
      } finally {
        inCall.set(false);
      }
    }
  }

  static int[] expectedOutput(InferenceRequest q) {
    return SimulatedEngine.expectedOutput(q.tokens(), q.params(), VOCABULARY);
  }

  /**
   * An engine completing on its own pool of two threads after short random delays: its output
   * is {@link SimulatedEngine#expectedOutput} of the request (deterministic), given in up to
   * four pieces; some runs fail (retryable, not retryable, busy) before or between pieces, and
   * some hang until cancelled (or give up after twice the node's engine timeout).
   */
  static final class StressEngine implements InferenceEngine {
    static final String CANCELLED = "cancelled by the node";
    static final int SLOTS = 4;

    final String name;
    final ScheduledThreadPoolExecutor pool;
    private final SplittableRandom rnd;
    final AtomicInteger active = new AtomicInteger();
    final ConcurrentHashMap<String, Set<Run>> runs = new ConcurrentHashMap<>();
    final long hangNanos;
    final ConcurrentLinkedQueue<String> violations;

    StressEngine(String name, long seed, long hangNanos, ConcurrentLinkedQueue<String> violations) {
      this.name = name;
      this.rnd = new SplittableRandom(seed);
      this.hangNanos = hangNanos;
      this.violations = violations;
      this.pool = new ScheduledThreadPoolExecutor(2, daemons("stress-engine-" + name));
      pool.setRemoveOnCancelPolicy(true);
    }

    static String textOf(int[] tokens) {
      char[] c = new char[tokens.length];
      for (int i = 0; i < tokens.length; i++) {
        c[i] = (char) ('a' + tokens[i] % 26);
      }
      return new String(c);
    }

    final class Run {
      final InferenceRequest request;
      final OutputListener listener;
      final int[] out;
      final CompletableFuture<EngineResult> future = new CompletableFuture<>();
      final AtomicBoolean finished = new AtomicBoolean();
      volatile boolean cancelled;
      volatile boolean listenerBroken;
      volatile ScheduledFuture<?> timer;
      int[] cuts;
      int failAt = -1;
      EngineException failure;
      boolean hang;
      long stepNanos;

      Run(InferenceRequest request, OutputListener listener) {
        this.request = request;
        this.listener = listener;
        this.out = expectedOutput(request);
      }
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest request) {
      return execute(request, OutputListener.IGNORE);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest request,
        OutputListener listener) {
      Run run = new Run(request, listener);
      long first;
      synchronized (rnd) {
        int pieces = 1 + rnd.nextInt(4);
        Set<Integer> cut = new java.util.TreeSet<>();
        cut.add(0);
        cut.add(run.out.length);
        for (int i = 1; i < pieces; i++) {
          cut.add(rnd.nextInt(run.out.length + 1));
        }
        run.cuts = cut.stream().mapToInt(Integer::intValue).toArray();
        int roll = rnd.nextInt(1000);
        if (roll < 30) {
          run.failAt = rnd.nextInt(run.cuts.length);
          run.failure = new EngineException("engine " + name + " failed (retryable)", true);
        } else if (roll < 50) {
          run.failAt = rnd.nextInt(run.cuts.length);
          run.failure = new EngineException("engine " + name + " failed (final)", false);
        } else if (roll < 70) {
          run.failAt = 0;
          run.failure = new EngineBusyException("engine " + name + " is busy");
        } else if (roll < 78) {
          run.hang = true;
        }
        first = 200_000L + rnd.nextLong(8_000_000L);
        run.stepNanos = rnd.nextLong(3_000_000L);
      }
      active.incrementAndGet();
      runs.computeIfAbsent(request.id(), k -> ConcurrentHashMap.newKeySet()).add(run);
      try {
        if (run.hang) {
          run.timer = pool.schedule(() -> finish(run, null,
              new EngineException("engine " + name + " gave up a hung run", true)),
              hangNanos, TimeUnit.NANOSECONDS);
        } else {
          run.timer = pool.schedule(() -> step(run, 0), first, TimeUnit.NANOSECONDS);
        }
      } catch (java.util.concurrent.RejectedExecutionException e) {
        finish(run, null, new EngineException("engine " + name + " is shut down", true));
      }
      return run.future;
    }

    /** Gives piece {@code i} of the run's output, or its failure, or its result. */
    private void step(Run run, int i) {
      try {
        if (run.cancelled) {
          finish(run, null, new EngineException(CANCELLED + " (" + run.request.id() + ")", false));
          return;
        }
        if (i == run.failAt) {
          finish(run, null, run.failure);
          return;
        }
        if (i + 1 < run.cuts.length) {
          int[] piece = Arrays.copyOfRange(run.out, run.cuts[i], run.cuts[i + 1]);
          if (!run.listenerBroken) {
            try {
              run.listener.onOutput(piece, textOf(piece));
            } catch (Throwable e) {
              run.listenerBroken = true;
              violations.add("the node's listener given to engine " + name + " threw: "
                  + stackTrace(e));
            }
          }
          run.timer = pool.schedule(() -> step(run, i + 1), run.stepNanos, TimeUnit.NANOSECONDS);
          return;
        }
        finish(run, new EngineResult(run.out, textOf(run.out), run.request.length(), -1,
            -1, -1), null);
      } catch (java.util.concurrent.RejectedExecutionException e) {
        finish(run, null, new EngineException("engine " + name + " is shut down", true));
      } catch (Throwable e) {
        violations.add("engine " + name + " step threw: " + stackTrace(e));
        finish(run, null, new EngineException("engine step threw", true));
      }
    }

    private void finish(Run run, EngineResult result, Throwable failure) {
      if (!run.finished.compareAndSet(false, true)) {
        return;
      }
      Set<Run> same = runs.get(run.request.id());
      if (same != null) {
        same.remove(run);
        runs.computeIfPresent(run.request.id(), (k, v) -> v.isEmpty() ? null : v);
      }
      active.decrementAndGet();
      try {
        if (failure != null) {
          run.future.completeExceptionally(failure);
        } else {
          run.future.complete(result);
        }
      } catch (Throwable e) {
        violations.add("completing a run of engine " + name + " threw into its thread: "
            + stackTrace(e));
      }
    }

    @Override
    public void cancel(String requestId) {
      Set<Run> rs = runs.get(requestId);
      if (rs == null) {
        return;
      }
      for (Run run : rs) {
        run.cancelled = true;
        if (run.hang) {
          ScheduledFuture<?> t = run.timer;
          if (t != null) {
            t.cancel(false);
          }
          try {
            pool.execute(() -> finish(run, null,
                new EngineException(CANCELLED + " (" + requestId + ")", false)));
          } catch (java.util.concurrent.RejectedExecutionException e) {
            finish(run, null, new EngineException(CANCELLED, false));
          }
        }
      }
    }

    @Override
    public EngineLoad load() {
      int a = Math.max(0, active.get());
      return new EngineLoad(Math.max(0, a - SLOTS), Math.min(a, SLOTS));
    }

    void close() {
      pool.shutdownNow();
    }
  }

  /**
   * A host's scheduler on one thread of its own that tracks the timers set on it (outstanding
   * until run or cancelled) and records anything a task throws.
   */
  static final class WatchedScheduler implements Scheduler, AutoCloseable {
    final ScheduledThreadPoolExecutor executor;
    final ConcurrentHashMap<Object, String> outstanding = new ConcurrentHashMap<>();
    final ConcurrentLinkedQueue<String> violations;
    final String name;

    WatchedScheduler(String name, ConcurrentLinkedQueue<String> violations) {
      this.name = name;
      this.violations = violations;
      executor = new ScheduledThreadPoolExecutor(1, daemons(name));
      executor.setRemoveOnCancelPolicy(true);
    }

    @Override
    public Cancellable schedule(long delayNanos, Runnable task) {
      Object key = new Object();
      outstanding.put(key, task.getClass().getName() + " set for " + delayNanos / 1_000_000
          + " ms on " + Thread.currentThread().getName());
      ScheduledFuture<?> f = executor.schedule(() -> {
        outstanding.remove(key);
        try {
          task.run();
        } catch (Throwable e) {
          violations.add("a task on " + name + " threw: " + stackTrace(e));
        }
      }, delayNanos, TimeUnit.NANOSECONDS);
      return () -> {
        boolean c = f.cancel(false);
        if (c) {
          outstanding.remove(key);
        }
        return c;
      };
    }

    int outstanding() {
      return outstanding.size();
    }

    String describe() {
      return outstanding.values().toString();
    }

    /** The timers set and neither run nor cancelled, but those of classes named {@code ok}. */
    List<String> outstandingOtherThan(String ok) {
      List<String> left = new ArrayList<>();
      for (String t : outstanding.values()) {
        if (!t.contains(ok)) {
          left.add(t);
        }
      }
      return left;
    }

    @Override
    public void close() {
      executor.shutdownNow();
    }
  }

  /** A transport whose inbound handler is watched: it must neither throw nor answer null. */
  static final class WatchedTransport extends ForwardingTransport {
    final String name;
    final ConcurrentLinkedQueue<String> violations;

    WatchedTransport(Transport delegate, String name, ConcurrentLinkedQueue<String> violations) {
      super(delegate);
      this.name = name;
      this.violations = violations;
    }

    @Override
    public void start(InboundHandler handler) {
      delegate.start(new InboundHandler() {
        @Override
        public void onMessage(PeerAddress from, byte[] payload) {
          try {
            handler.onMessage(from, payload);
          } catch (Throwable e) {
            violations.add(name + ": onMessage threw into the transport: " + stackTrace(e));
            throw e;
          }
        }

        @Override
        public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
          CompletableFuture<byte[]> f;
          try {
            f = handler.onRequest(from, payload);
          } catch (Throwable e) {
            violations.add(name + ": onRequest threw into the transport: " + stackTrace(e));
            throw e;
          }
          if (f == null) {
            violations.add(name + ": onRequest answered null");
          }
          return f;
        }
      });
    }
  }

  /** Lines written to stderr, passed on, with those the library logs at ERROR kept. */
  static final class ErrorLines extends OutputStream {
    private final PrintStream out;
    private final ByteArrayOutputStream line = new ByteArrayOutputStream();
    private final List<String> errors = new ArrayList<>();

    ErrorLines(PrintStream out) {
      this.out = out;
    }

    @Override
    public synchronized void write(int b) {
      out.write(b);
      if (b == '\n') {
        String s = line.toString(StandardCharsets.UTF_8);
        line.reset();
        if (s.contains(" ERROR io.github.prefixrouter")) {
          errors.add(s);
        }
      } else if (line.size() < 16_384) {
        line.write(b);
      }
    }

    @Override
    public synchronized void write(byte[] b, int off, int len) {
      for (int i = 0; i < len; i++) {
        write(b[off + i]);
      }
    }

    @Override
    public void flush() {
      out.flush();
    }

    synchronized List<String> lines() {
      return new ArrayList<>(errors);
    }
  }

  // ================================================================ helpers

  static ThreadFactory daemons(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  static List<Thread> threadsNamed(String... prefixes) {
    List<Thread> found = new ArrayList<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      for (String p : prefixes) {
        if (t.getName().startsWith(p) && t.isAlive()) {
          found.add(t);
        }
      }
    }
    return found;
  }

  static boolean waitFor(Duration max, BooleanSupplier done) throws InterruptedException {
    long deadline = System.nanoTime() + max.toNanos();
    while (!done.getAsBoolean()) {
      if (System.nanoTime() - deadline > 0) {
        return false;
      }
      Thread.sleep(5);
    }
    return true;
  }

  /** Gossip rounds {@code n} has run. */
  static long rounds(RouterNode n) {
    io.github.prefixrouter.internal.gossip.GossipEngine g = n.gossip();
    return g == null ? -1 : g.counter(io.github.prefixrouter.internal.gossip.GossipCounter.ROUNDS);
  }

  static int port(PeerAddress a) {
    String s = a.address();
    return Integer.parseInt(s.substring(s.lastIndexOf(':') + 1));
  }

  static String stackTrace(Throwable t) {
    if (t == null) {
      return "null";
    }
    java.io.StringWriter w = new java.io.StringWriter();
    t.printStackTrace(new java.io.PrintWriter(w));
    String s = w.toString();
    return s.length() > 4_000 ? s.substring(0, 4_000) + "..." : s;
  }
}
