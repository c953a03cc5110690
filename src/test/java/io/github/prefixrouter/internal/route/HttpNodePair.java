package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * Two routing nodes over the HTTP transport on loopback, in real time: n0 sees n1 as a peer
 * holding every prefix ({@link HttpStreamingTest#onePeerHoldingEverything}), so its requests
 * are forwarded there; n1 has no cache of its own. Each has a {@link SimulatedEngine} on a
 * scheduler of its own. {@link #close()} stops both nodes, then closes the transports and the
 * schedulers.
 */
final class HttpNodePair implements AutoCloseable {

  final Schedulers.ClosableScheduler s0;
  final Schedulers.ClosableScheduler s1;
  final HttpTransport t0;
  final HttpTransport t1;
  final SimulatedEngine e0;
  final SimulatedEngine e1;
  final RouterNode n0;
  final RouterNode n1;

  /**
   * Starts the pair.
   *
   * @param name names the schedulers' threads
   * @param cfg both nodes' configuration
   * @param key the cluster key
   * @param transport0 settings of n0's transport beyond its id, address and key
   * @param transport1 the same for n1
   * @param engine settings of both engines beyond their scheduler, clock and 1 ms prefill
   *     overhead
   */
  HttpNodePair(String name, RouterConfig cfg, byte[] key,
      UnaryOperator<HttpTransport.Builder> transport0,
      UnaryOperator<HttpTransport.Builder> transport1,
      UnaryOperator<SimulatedEngine.Builder> engine) {
    s0 = Schedulers.newSingleThread(name + "-n0");
    s1 = Schedulers.newSingleThread(name + "-n1");
    t0 = transport0.apply(HttpTransport.builder().nodeId("n0").listen("127.0.0.1", 0)
        .clusterKey(key)).build();
    t1 = transport1.apply(HttpTransport.builder().nodeId("n1").listen("127.0.0.1", 0)
        .clusterKey(key)).build();
    e0 = engine.apply(SimulatedEngine.builder().scheduler(s0).clock(Clock.system())
        .prefillOverheadNanos(1_000_000)).build();
    e1 = engine.apply(SimulatedEngine.builder().scheduler(s1).clock(Clock.system())
        .prefillOverheadNanos(1_000_000)).build();
    n1 = new RouterNode("n1", cfg, t1, e1, Clock.system(), s1, new SplittableRandom(2),
        List.of(), new RouterNode.Components(RequestLifecycleTest.NO_CACHE, (t, l, o) -> 0,
            PeerView.NONE));
    n1.start();
    n0 = new RouterNode("n0", cfg, t0, e0, Clock.system(), s0, new SplittableRandom(1),
        List.of(), new RouterNode.Components(RequestLifecycleTest.NO_CACHE,
            (t, l, o) -> l / cfg.blockSize(), HttpStreamingTest.onePeerHoldingEverything(t1)));
    n0.start();
  }

  @Override
  public void close() throws Exception {
    try {
      n0.stop().get(10, TimeUnit.SECONDS);
      n1.stop().get(10, TimeUnit.SECONDS);
    } finally {
      t1.close();
      t0.close();
      s1.close();
      s0.close();
    }
  }
}
