package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.route.ScopedForwardTest.OnePeer;
import io.github.prefixrouter.internal.route.ScopedForwardTest.RecordingEngine;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.function.UnaryOperator;

/**
 * Two real nodes in simulated time for tests of what a FORWARD carries: n0, whose peer view
 * ({@link #view}) says n1 holds what a test tells it, records the version of every FORWARD it
 * sends; n1, with no cache of its own, serves what reaches it through a transport the test may
 * wrap (a node of an older release, say).
 */
abstract class TwoNodeForwardHarness {

  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net = new InMemoryNetwork(sim, 1);
  final RecordingEngine e0 = new RecordingEngine();
  final RecordingEngine e1 = new RecordingEngine();
  final OnePeer view = new OnePeer();
  RouterNode n0;
  RouterNode n1;
  /** The versions of the FORWARD frames n0 sent, in order. */
  final List<Integer> forwardVersions = new ArrayList<>();

  private Transport counting(Transport t) {
    return new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
        if (payload.length > 1 && payload[0] == ForwardCodec.FORWARD) {
          forwardVersions.add((int) payload[1]);
        }
        return t.request(to, payload, timeout);
      }
    };
  }

  /** Starts n0 with {@code c0} and n1 with {@code c1}, n1's transport wrapped by {@code wrap1}. */
  void startNodes(RouterConfig c0, RouterConfig c1, UnaryOperator<Transport> wrap1) {
    startNodes(c0, c1, UnaryOperator.identity(), wrap1);
  }

  /** The same, n0's transport also wrapped by {@code wrap0} (under the count of FORWARDs). */
  void startNodes(RouterConfig c0, RouterConfig c1, UnaryOperator<Transport> wrap0,
      UnaryOperator<Transport> wrap1) {
    n0 = new RouterNode("n0", c0, counting(wrap0.apply(net.transport("n0"))), e0, sim, sim,
        new SplittableRandom(1), List.of(), new RouterNode.Components(
            new TreeIndex(ConcurrentPrefixTree.selfManaged(1 << 20)),
            new BlockChain(ScopedForwardTest.HASHER), view));
    n1 = new RouterNode("n1", c1, wrap1.apply(net.transport("n1")), e1, sim, sim,
        new SplittableRandom(2), List.of(), new RouterNode.Components(
            RequestLifecycleTest.NO_CACHE, new BlockChain(ScopedForwardTest.HASHER),
            PeerView.NONE));
    n0.start();
    n1.start();
  }

  /** Submits {@code r} to n0 and runs the simulation to its answer. */
  InferenceResponse submit(InferenceRequest r) {
    return submit(r, null);
  }

  /** Submits {@code r} to n0 (streamed to {@code listener} if not null) and runs to its answer. */
  InferenceResponse submit(InferenceRequest r, OutputListener listener) {
    CompletableFuture<InferenceResponse> f = listener == null ? n0.submit(r)
        : n0.submit(r, listener);
    while (!f.isDone() && sim.runNext()) {
      // run the simulation
    }
    return f.join();
  }
}
