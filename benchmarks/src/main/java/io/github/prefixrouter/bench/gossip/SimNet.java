package io.github.prefixrouter.bench.gossip;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.BiConsumer;

/** A simulated network on a {@link SimulatedScheduler}: one-way delay plus uniform jitter. */
final class SimNet {

  final SimulatedScheduler time = new SimulatedScheduler();
  final SplittableRandom rnd;
  final long delayNanos;
  final long jitterNanos;
  final double loss;
  private final Map<String, BiConsumer<PeerAddress, byte[]>> handlers = new HashMap<>();

  SimNet(long seed, long delayNanos, long jitterNanos, double loss) {
    this.rnd = new SplittableRandom(seed);
    this.delayNanos = delayNanos;
    this.jitterNanos = jitterNanos;
    this.loss = loss;
  }

  void register(PeerAddress at, BiConsumer<PeerAddress, byte[]> handler) {
    handlers.put(at.address(), handler);
  }

  void send(PeerAddress from, PeerAddress to, byte[] payload) {
    if (loss > 0 && rnd.nextDouble() < loss) {
      return;
    }
    long d = delayNanos + (jitterNanos > 0 ? rnd.nextLong(jitterNanos + 1) : 0);
    time.schedule(d, () -> {
      BiConsumer<PeerAddress, byte[]> h = handlers.get(to.address());
      if (h != null) {
        h.accept(from, payload);
      }
    });
  }
}
