package io.github.prefixrouter.internal.route;

import static io.github.prefixrouter.internal.route.OracleCluster.expected;
import static io.github.prefixrouter.internal.route.OracleCluster.prompt;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.route.ScopedForwardTest.OnePeer;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/**
 * Host code the node calls while it holds the answer to an accepted request (the engine's
 * {@code load}, {@code execute} or {@code cancel}, the client's {@link OutputListener}, a
 * function depending on the future {@code submit} returned or, for a peer's request, the
 * transport's handling of the answer, the transport's {@code send} of a CANCEL or a STREAM)
 * that waits for the node's stop on that thread ({@code close()}, or {@code stop().join()}): the stop waits
 * for that answer, which comes only once the call returns, so the wait would never end. It fails
 * fast with an {@link IllegalStateException} naming the call, the request is still answered
 * exactly once, and the node stops. Each test runs the node's call bounded, so that a wait that
 * never ends fails the test instead of hanging the build.
 */
class StopWaitInsideCallbackTest {

  static final Duration BOUND = Duration.ofSeconds(10);

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);
  final AtomicReference<PrefixRouterNode> self = new AtomicReference<>();
  /** What each wait for the stop inside a call threw, in order (null: it returned). */
  final List<Throwable> waits = new ArrayList<>();

  /**
   * An engine that holds every run until the test completes it ({@link #answer}); its
   * {@code execute} and {@code cancel} first run the hooks the test sets.
   */
  static final class HeldEngine implements InferenceEngine {
    volatile Consumer<InferenceRequest> onExecute = r -> { };
    volatile Consumer<String> onCancel = id -> { };
    volatile Runnable onLoad = () -> { };
    final List<CompletableFuture<EngineResult>> runs = new ArrayList<>();
    final List<OutputListener> listeners = new ArrayList<>();
    final AtomicInteger cancels = new AtomicInteger();

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return execute(r, OutputListener.IGNORE);
    }

    @Override
    public synchronized CompletableFuture<EngineResult> execute(InferenceRequest r,
        OutputListener listener) {
      onExecute.accept(r);
      CompletableFuture<EngineResult> f = new CompletableFuture<>();
      runs.add(f);
      listeners.add(listener);
      return f;
    }

    @Override
    public EngineLoad load() {
      onLoad.run();
      return EngineLoad.IDLE;
    }

    @Override
    public void cancel(String requestId) {
      cancels.incrementAndGet();
      onCancel.accept(requestId);
    }

    /** Completes run {@code i} with the whole answer to {@code r}. */
    void answer(int i, InferenceRequest r) {
      CompletableFuture<EngineResult> f;
      synchronized (this) {
        f = runs.get(i);
      }
      f.complete(new EngineResult(expected(r), "", r.length(), 0, 1_000, 1_000));
    }
  }

  final HeldEngine engine = new HeldEngine();

  /** A node running every request on {@link #engine}, over {@code transport}. */
  RouterNode localNode(Transport transport) {
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LOCAL_ONLY).build();
    RouterNode node = new RouterNode("n0", cfg, transport, engine, sim, sim,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            RequestLifecycleTest.NO_CACHE, (t, l, o) -> 0, PeerView.NONE));
    self.set(node);
    node.start();
    return node;
  }

  RouterNode localNode() {
    return localNode(net.transport("n0"));
  }

  /** Closes the node, recording what the close threw. */
  void closeRecording() {
    try {
      self.get().close();
      waits.add(null);
    } catch (Throwable e) {
      waits.add(e);
    }
  }

  /** The only wait recorded failed with an IllegalStateException naming {@code call}. */
  void failedFastNaming(String call) {
    assertEquals(1, waits.size(), "waits recorded: " + waits);
    IllegalStateException e = assertInstanceOf(IllegalStateException.class, waits.get(0),
        "the wait for the stop inside " + call + " did not fail fast");
    assertTrue(e.getMessage().contains(call), e.getMessage());
  }

  /** The node stopped, having answered every request it accepted, each once. */
  void stoppedWithEveryRequestAnswered(PrefixRouterNode node) {
    assertEquals(PrefixRouterNode.State.STOPPED, node.state());
    assertTrue(node.stop().isDone(), "the stop's future is not complete");
    assertEquals(0, node.stats().inFlight(), "requests still in flight in a stopped node");
    sim.advanceBy(Duration.ofMinutes(10).toNanos());
    assertEquals(0, sim.pendingTasks(), "timers left by a stopped node");
  }

  /** A request of 16 output tokens. */
  static InferenceRequest request(String id, int[] prompt) {
    return new InferenceRequest(id, prompt, GenerationParams.greedy(16));
  }

  static Throwable failure(CompletableFuture<?> f) {
    assertTrue(f.isDone(), "not answered");
    return assertThrows(CompletionException.class, f::join).getCause();
  }

  // ------------------------------------------------------------------ InferenceEngine.execute

  @Test
  void aCloseInsideTheEnginesExecuteFailsFastAndTheRequestIsAnswered() {
    RouterNode node = localNode();
    engine.onExecute = r -> closeRecording();
    InferenceRequest r = request("q1", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = assertTimeoutPreemptively(BOUND,
        () -> node.submit(r),
        "submit() never returned: the close() the engine's execute called waits for ever");
    failedFastNaming("InferenceEngine.execute");
    assertEquals(PrefixRouterNode.State.STOPPING, node.state());
    engine.answer(0, r);
    assertArrayEquals(expected(r), f.join().result().outputTokens());
    stoppedWithEveryRequestAnswered(node);
  }

  /** An engine that lets the failure through fails the request with it. */
  @Test
  void aStopJoinedInsideTheEnginesExecuteFailsTheRequestAndTheNodeStops() {
    RouterNode node = localNode();
    engine.onExecute = r -> self.get().stop().join();
    CompletableFuture<InferenceResponse> f = assertTimeoutPreemptively(BOUND,
        () -> node.submit(request("q1", prompt(1, 64))),
        "submit() never returned: the stop the engine's execute joined waits for ever");
    RequestFailedException e = assertInstanceOf(RequestFailedException.class, failure(f));
    assertInstanceOf(IllegalStateException.class, e.getCause());
    assertTrue(e.getCause().getMessage().contains("InferenceEngine.execute"),
        e.getCause().getMessage());
    stoppedWithEveryRequestAnswered(node);
  }

  /**
   * With a peer to go to, the failure the engine let through is a failure of this engine as
   * any other exception that is no EngineException: the request is tried on the peer, which
   * answers it, once, and the node stops then.
   */
  @Test
  void aStopJoinedInsideTheEnginesExecuteWithAPeerIsAnsweredByThePeerAndTheNodeStops() {
    ScopedForwardTest.RecordingEngine peerEngine = new ScopedForwardTest.RecordingEngine();
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    RouterNode n0 = new RouterNode("n0", cfg, net.transport("n0"), engine, sim, sim,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            new TreeIndex(ConcurrentPrefixTree.selfManaged(1 << 20)),
            new BlockChain(ScopedForwardTest.HASHER), new OnePeer()));
    RouterNode n1 = new RouterNode("n1", cfg, net.transport("n1"), peerEngine, sim, sim,
        new SplittableRandom(2), List.of(), new RouterNode.Components(
            RequestLifecycleTest.NO_CACHE, new BlockChain(ScopedForwardTest.HASHER),
            PeerView.NONE));
    self.set(n0);
    n0.start();
    n1.start();
    AtomicInteger executes = new AtomicInteger();
    engine.onExecute = r -> {
      executes.incrementAndGet();
      self.get().stop().join();
    };
    InferenceRequest r = request("q1", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = assertTimeoutPreemptively(BOUND,
        () -> n0.submit(r),
        "submit() never returned: the stop the engine's execute joined waits for ever");
    assertEquals(1, executes.get(), "n0's engine was not given the request");
    sim.advanceBy(Duration.ofMillis(10).toNanos()); // the FORWARD and its RESULT
    InferenceResponse resp = f.join();
    assertEquals("n1", resp.servedBy(), resp.toString());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    assertEquals(1, peerEngine.ran.size());
    stoppedWithEveryRequestAnswered(n0);
  }

  // --------------------------------------------------------------------- InferenceEngine.load

  @Test
  void aCloseInsideTheEnginesLoadWhileRoutingFailsFastAndTheRequestIsAnswered() {
    RouterNode node = localNode();
    engine.onLoad = () -> {
      if (waits.isEmpty()) {
        closeRecording();
      }
    };
    InferenceRequest r = request("q1", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = assertTimeoutPreemptively(BOUND,
        () -> node.submit(r),
        "submit() never returned: the close() the engine's load called waits for ever");
    failedFastNaming("routing request q1 (inside InferenceEngine.load)");
    engine.answer(0, r);
    assertArrayEquals(expected(r), f.join().result().outputTokens());
    stoppedWithEveryRequestAnswered(node);
  }

  // ------------------------------------------------------------------- InferenceEngine.cancel

  @Test
  void aCloseInsideTheEnginesCancelOfAnAbandonedRequestFailsFast() {
    RouterNode node = localNode();
    engine.onCancel = id -> closeRecording();
    CompletableFuture<InferenceResponse> f = node.submit(request("q1", prompt(1, 64)));
    assertTimeoutPreemptively(BOUND, () -> f.cancel(false),
        "cancel() never returned: the close() the engine's cancel called waits for ever");
    assertEquals(1, engine.cancels.get());
    failedFastNaming("InferenceEngine.cancel");
    assertThrows(CancellationException.class, f::join);
    stoppedWithEveryRequestAnswered(node);
  }

  @Test
  void aCloseInsideTheEnginesCancelAtTheEndOfAGracePeriodFailsFast() {
    RouterNode node = localNode();
    engine.onCancel = id -> closeRecording();
    CompletableFuture<InferenceResponse> f = node.submit(request("q1", prompt(1, 64)));
    CompletableFuture<Void> stop = node.stop(Duration.ofSeconds(1));
    assertTimeoutPreemptively(BOUND, () -> sim.advanceBy(Duration.ofSeconds(2).toNanos()),
        "the grace period's end never returned: the close() the engine's cancel called waits"
            + " for ever");
    failedFastNaming("InferenceEngine.cancel");
    assertInstanceOf(io.github.prefixrouter.NodeNotRunningException.class, failure(f));
    assertTrue(stop.isDone(), "the stop's future is not complete");
    stoppedWithEveryRequestAnswered(node);
  }

  // ------------------------------------------------------------------- OutputListener.onOutput

  @Test
  void aCloseInsideTheClientsOutputListenerFailsFastAndTheRequestIsAnswered() {
    RouterNode node = localNode();
    InferenceRequest r = request("q1", prompt(1, 64));
    int[] out = expected(r);
    List<int[]> pieces = new ArrayList<>();
    CompletableFuture<InferenceResponse> f = node.submit(r, (tokens, text) -> {
      pieces.add(tokens);
      if (pieces.size() == 1) {
        closeRecording();
      }
    });
    OutputListener engineSide = engine.listeners.get(0);
    assertTimeoutPreemptively(BOUND, () -> engineSide.onOutput(Arrays.copyOf(out, 3), ""),
        "the engine's piece never returned: the close() the output listener called waits for"
            + " ever");
    failedFastNaming("OutputListener.onOutput");
    engine.answer(0, r);
    assertArrayEquals(out, f.join().result().outputTokens());
    int[] streamed = pieces.stream().flatMapToInt(Arrays::stream).toArray();
    assertArrayEquals(out, streamed, "the listener did not get the whole output once");
    stoppedWithEveryRequestAnswered(node);
  }

  /** A listener that lets the failure through fails the request, as a listener that throws. */
  @Test
  void aStopJoinedInsideTheClientsOutputListenerFailsTheRequestAndTheNodeStops() {
    RouterNode node = localNode();
    InferenceRequest r = request("q1", prompt(1, 64));
    CompletableFuture<InferenceResponse> f =
        node.submit(r, (tokens, text) -> self.get().stop().join());
    OutputListener engineSide = engine.listeners.get(0);
    assertTimeoutPreemptively(BOUND,
        () -> engineSide.onOutput(Arrays.copyOf(expected(r), 3), ""),
        "the engine's piece never returned: the stop the output listener joined waits for ever");
    RequestFailedException e = assertInstanceOf(RequestFailedException.class, failure(f));
    assertInstanceOf(IllegalStateException.class, e.getCause());
    assertTrue(e.getCause().getMessage().contains("OutputListener.onOutput"),
        e.getCause().getMessage());
    assertEquals(1, engine.cancels.get(), "the abandoned run was not cancelled");
    stoppedWithEveryRequestAnswered(node);
  }

  // --------------------------------------------------- a function depending on submit's future

  @Test
  void aCloseInAFunctionDependingOnTheAnswerFailsFastAndTheNodeStops() {
    RouterNode node = localNode();
    InferenceRequest r = request("q1", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r);
    CompletableFuture<Void> after = f.thenRun(this::closeRecording);
    assertTimeoutPreemptively(BOUND, () -> engine.answer(0, r),
        "the engine's answer never returned: the close() a function depending on the request's"
            + " future called waits for ever");
    failedFastNaming("the future submit returned");
    assertArrayEquals(expected(r), f.join().result().outputTokens());
    assertTrue(after.isDone());
    stoppedWithEveryRequestAnswered(node);
  }

  /** The same with a listener: the answer is given on the thread delivering its output. */
  @Test
  void aCloseInAFunctionDependingOnAStreamedAnswerFailsFastAndTheNodeStops() {
    RouterNode node = localNode();
    InferenceRequest r = request("q1", prompt(1, 64));
    CompletableFuture<InferenceResponse> f = node.submit(r, (tokens, text) -> { });
    f.whenComplete((v, t) -> closeRecording());
    assertTimeoutPreemptively(BOUND, () -> engine.answer(0, r),
        "the engine's answer never returned: the close() a function depending on the request's"
            + " future called waits for ever");
    failedFastNaming("the future submit returned");
    assertArrayEquals(expected(r), f.join().result().outputTokens());
    stoppedWithEveryRequestAnswered(node);
  }

  // ----------------------------------------------------------- Transport.send of a CANCEL

  @Test
  void aCloseInsideTheTransportsSendOfACancelFailsFastAndTheNodeStops() {
    AtomicInteger cancelsSent = new AtomicInteger();
    List<CompletableFuture<byte[]>> forwards = new ArrayList<>();
    Transport t = new ForwardingTransport(net.transport("n0")) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        CompletableFuture<byte[]> f = new CompletableFuture<>(); // the peer never answers
        forwards.add(f);
        return f;
      }

      @Override
      public void send(PeerAddress to, byte[] payload) {
        if (payload.length > 0 && payload[0] == ForwardCodec.CANCEL) {
          cancelsSent.incrementAndGet();
          closeRecording();
        }
      }
    };
    OnePeer view = new OnePeer();
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    RouterNode node = new RouterNode("n0", cfg, t, engine, sim, sim, new SplittableRandom(1),
        List.of(), new RouterNode.Components(
            new TreeIndex(ConcurrentPrefixTree.selfManaged(1 << 20)),
            new BlockChain(ScopedForwardTest.HASHER), view));
    self.set(node);
    node.start();
    int[] tokens = prompt(3, 320);
    view.holds(CacheScope.DEFAULT, tokens);
    CompletableFuture<InferenceResponse> f = node.submit(InferenceRequest.of("q1", tokens));
    assertEquals(1, forwards.size(), "the request was not forwarded");
    assertTimeoutPreemptively(BOUND, () -> f.cancel(false),
        "cancel() never returned: the close() the transport's send of the CANCEL called waits"
            + " for ever");
    assertEquals(1, cancelsSent.get());
    failedFastNaming("Transport.send of its CANCEL");
    assertThrows(CancellationException.class, f::join);
    stoppedWithEveryRequestAnswered(node);
  }

  // ------------------------------------------------------------- a peer's forwarded request

  /**
   * n0, whose view says n1 holds {@code tokens}, forwards to n1, which runs it on
   * {@link #engine}; n1's transport runs {@code onAnswer} when n1 answers a request (as the
   * transport's own handling of the answer would), and {@code onStream} as n1 sends a STREAM.
   */
  RouterNode servingNode(int[] tokens, Runnable onAnswer, Runnable onStream) {
    Transport t1 = new AnswerWatchingTransport(net.transport("n1"), (b, e) -> onAnswer.run()) {
      @Override
      public void send(PeerAddress to, byte[] payload) {
        if (payload.length > 0 && payload[0] == ForwardCodec.STREAM) {
          onStream.run();
        }
        super.send(to, payload);
      }
    };
    RouterConfig cfg = RouterConfig.builder().policy(RoutingPolicy.LONGEST_PREFIX).build();
    OnePeer view = new OnePeer();
    view.holds(CacheScope.DEFAULT, tokens);
    RouterNode n0 = new RouterNode("n0", cfg, net.transport("n0"),
        new ScopedForwardTest.RecordingEngine(), sim, sim, new SplittableRandom(1), List.of(),
        new RouterNode.Components(new TreeIndex(ConcurrentPrefixTree.selfManaged(1 << 20)),
            new BlockChain(ScopedForwardTest.HASHER), view));
    RouterNode n1 = new RouterNode("n1", cfg, t1, engine, sim, sim, new SplittableRandom(2),
        List.of(), new RouterNode.Components(RequestLifecycleTest.NO_CACHE,
            new BlockChain(ScopedForwardTest.HASHER), PeerView.NONE));
    self.set(n1);
    n0.start();
    n1.start();
    return n0;
  }

  @Test
  void aCloseInsideTheTransportsHandlingOfAnAnswerFailsFastAndThePeerGetsIt() {
    int[] tokens = prompt(3, 320);
    RouterNode n0 = servingNode(tokens, this::closeRecording, () -> { });
    InferenceRequest r = request("q1", tokens);
    CompletableFuture<InferenceResponse> f = n0.submit(r);
    sim.advanceBy(Duration.ofMillis(10).toNanos()); // the FORWARD reaches n1
    assertEquals(1, engine.runs.size(), "the request did not reach n1's engine");
    assertTimeoutPreemptively(BOUND, () -> engine.answer(0, r),
        "the engine's answer never returned: the close() the transport's handling of n1's"
            + " answer called waits for ever");
    failedFastNaming("the transport's handling of the answer");
    PrefixRouterNode n1 = self.get();
    sim.advanceBy(Duration.ofMillis(10).toNanos()); // the RESULT reaches n0
    InferenceResponse resp = f.join();
    assertEquals("n1", resp.servedBy());
    assertArrayEquals(expected(r), resp.result().outputTokens());
    stoppedWithEveryRequestAnswered(n1);
  }

  @Test
  void aCloseInsideTheTransportsSendOfAStreamFailsFastAndThePeerGetsTheAnswer() {
    int[] tokens = prompt(3, 320);
    AtomicInteger streams = new AtomicInteger();
    RouterNode n0 = servingNode(tokens, () -> { }, () -> {
      if (streams.incrementAndGet() == 1) {
        closeRecording();
      }
    });
    InferenceRequest r = request("q1", tokens);
    CompletableFuture<InferenceResponse> f = n0.submit(r, (t, text) -> { });
    sim.advanceBy(Duration.ofMillis(10).toNanos()); // the FORWARD reaches n1
    assertEquals(1, engine.runs.size(), "the request did not reach n1's engine");
    OutputListener engineSide = engine.listeners.get(0);
    assertTimeoutPreemptively(BOUND,
        () -> engineSide.onOutput(Arrays.copyOf(expected(r), 3), ""),
        "the engine's piece never returned: the close() the transport's send of a STREAM"
            + " called waits for ever");
    failedFastNaming("streaming the output of request q1 to peer n0 (inside Transport.send)");
    PrefixRouterNode n1 = self.get();
    engine.answer(0, r);
    sim.advanceBy(Duration.ofMillis(10).toNanos()); // the RESULT reaches n0
    assertArrayEquals(expected(r), f.join().result().outputTokens());
    stoppedWithEveryRequestAnswered(n1);
  }

  // -------------------------------------------------------------------- no wait refused wrongly

  /**
   * A wait for the stop on a thread that holds no answer waits as before, though that thread
   * ran the engine's execute and cancel, the listener and the answer's functions of requests
   * before: here the stop waits for a request the engine answers on another thread.
   */
  @Test
  void aWaitOnAThreadDoneWithItsCallsWaitsForTheStop() throws Exception {
    RouterNode node = localNode();
    InferenceRequest r0 = request("q0", prompt(1, 64));
    InferenceRequest r1 = request("q1", prompt(2, 64));
    InferenceRequest r2 = request("q2", prompt(3, 64));
    // on this thread: an execute and a cancel (r0), an execute, a piece delivered to the
    // listener and the answer with a function depending on it (r1), an execute (r2)
    CompletableFuture<InferenceResponse> f0 = node.submit(r0);
    f0.cancel(false);
    AtomicInteger pieces = new AtomicInteger();
    CompletableFuture<InferenceResponse> f1 =
        node.submit(r1, (tokens, text) -> pieces.incrementAndGet());
    engine.listeners.get(1).onOutput(Arrays.copyOf(expected(r1), 3), "");
    AtomicInteger after = new AtomicInteger();
    f1.thenRun(after::incrementAndGet);
    engine.answer(1, r1);
    assertEquals(1, after.get());
    CompletableFuture<InferenceResponse> f2 = node.submit(r2);
    // r2 is answered on another thread once the node is stopping
    Thread answering = new Thread(() -> {
      while (node.state() != PrefixRouterNode.State.STOPPING) {
        Thread.onSpinWait();
      }
      engine.answer(2, r2);
    });
    answering.start();
    node.close(); // the engine answers r2, so this returns (before, it did too)
    answering.join();
    assertArrayEquals(expected(r2), f2.join().result().outputTokens());
    assertTrue(pieces.get() >= 1);
    stoppedWithEveryRequestAnswered(node);
  }
}
