package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.function.UnaryOperator;

/**
 * One real {@link RouterNode} serving scripted peers on simulated time: the test hands it raw
 * FORWARD and CANCEL frames through its transport's inbound handler, in whatever order it likes,
 * and sees every call the node makes to its engine. Every delivery and engine call gets a step
 * number, so a test can tell what happened before what.
 */
final class ServingHarness {

  /** An engine call: {@code execute} of a request, or {@code cancel} of an id. */
  record Call(long step, long at, boolean execute, String id, InferenceRequest request) {}

  final SimulatedScheduler sim = new SimulatedScheduler();
  final SimulatedEngine engine;
  final RouterNode node;
  final List<Call> calls = new ArrayList<>();
  private Transport.InboundHandler handler;
  private long step;

  ServingHarness(RouterConfig config, UnaryOperator<SimulatedEngine.Builder> tweak) {
    this(config, tweak, e -> e);
  }

  /**
   * The same, the node's engine being {@code wrap} of the simulated one (a test's engine that
   * misbehaves on purpose); the calls are recorded on their way to it.
   */
  ServingHarness(RouterConfig config, UnaryOperator<SimulatedEngine.Builder> tweak,
      Function<SimulatedEngine, InferenceEngine> wrap) {
    engine = tweak.apply(OracleCluster.engineDefaults(sim)).build();
    ForwardingEngine recording = new ForwardingEngine(wrap.apply(engine)) {
      @Override
      public CompletableFuture<EngineResult> execute(InferenceRequest r) {
        calls.add(new Call(++step, sim.nanoTime(), true, r.id(), r));
        return super.execute(r);
      }

      @Override
      public void cancel(String requestId) {
        calls.add(new Call(++step, sim.nanoTime(), false, requestId, null));
        super.cancel(requestId);
      }
    };
    Transport transport = new Transport() {
      @Override
      public void start(InboundHandler h) {
        handler = h;
      }

      @Override
      public PeerAddress localAddress() {
        return InMemoryNetwork.addressOf("s");
      }

      @Override
      public void send(PeerAddress to, byte[] payload) {}

      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
        return CompletableFuture.failedFuture(new AssertionError("the serving node forwarded"));
      }

      @Override
      public void close() {}
    };
    node = new RouterNode("s", config, transport, recording, sim, sim, new SplittableRandom(1),
        List.of(), new RouterNode.Components(RequestLifecycleTest.NO_CACHE, (t, l, o) -> 0,
            PeerView.NONE));
    node.start();
  }

  /** Delivers a FORWARD of {@code r} from {@code sender} (its origin); returns its step. */
  long forward(String sender, InferenceRequest r, List<CompletableFuture<byte[]>> answers) {
    long s = ++step;
    answers.add(handler.onRequest(InMemoryNetwork.addressOf(sender),
        ForwardCodec.forward(r, sender, 1)));
    return s;
  }

  /** Delivers a FORWARD of {@code r} from {@code sender}; returns the future of its answer. */
  CompletableFuture<byte[]> forward(String sender, InferenceRequest r) {
    List<CompletableFuture<byte[]>> one = new ArrayList<>();
    forward(sender, r, one);
    return one.get(0);
  }

  /**
   * Delivers a FORWARD of {@code r} that {@code sender} relays for {@code origin} (it has
   * travelled two hops); returns the future of its answer.
   */
  CompletableFuture<byte[]> relayed(String sender, String origin, InferenceRequest r) {
    ++step;
    return handler.onRequest(InMemoryNetwork.addressOf(sender),
        ForwardCodec.forward(r, origin, 2));
  }

  /**
   * Delivers a CANCEL of {@code id} from {@code sender}, of a request it submitted itself (the
   * CANCEL names it as the origin); returns its step.
   */
  long cancel(String sender, String id) {
    return cancel(sender, sender, id);
  }

  /**
   * Delivers a CANCEL of {@code id} from {@code sender}, naming {@code origin} as the request's
   * origin (a relay's CANCEL of a request it relays for that origin); returns its step.
   */
  long cancel(String sender, String origin, String id) {
    long s = ++step;
    handler.onMessage(InMemoryNetwork.addressOf(sender), ForwardCodec.cancel(id, origin));
    return s;
  }

  /** The steps at which the engine was asked to run {@code r}. */
  List<Long> runsOf(InferenceRequest r) {
    List<Long> steps = new ArrayList<>();
    for (Call c : calls) {
      if (c.execute() && c.request().equals(r)) {
        steps.add(c.step());
      }
    }
    return steps;
  }

  /** The answer {@code f} completed with, decoded. */
  static ForwardCodec.Message decode(CompletableFuture<byte[]> f) {
    try {
      return ForwardCodec.decode(f.join());
    } catch (MalformedMessageException e) {
      throw new AssertionError("the node answered a malformed frame", e);
    }
  }

  /** Whether {@code m} is the answer of a FORWARD stopped by its sender's earlier CANCEL. */
  static boolean stoppedAnswer(ForwardCodec.Message m) {
    return m instanceof ForwardCodec.Failed f && !f.retryable()
        && f.message().contains("CANCEL arrived before this FORWARD");
  }

  /** Runs the simulation for {@code d}. */
  void advance(Duration d) {
    sim.advanceBy(d.toNanos());
  }
}
