package io.github.prefixrouter.bench.gossip;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.BiConsumer;

/**
 * A simulated network on a {@link SimulatedScheduler}: one-way delay plus uniform jitter, and
 * optionally the HTTP transport's bound on the messages outstanding to one peer.
 */
final class SimNet {

  final SimulatedScheduler time = new SimulatedScheduler();
  final SplittableRandom rnd;
  final long delayNanos;
  final long jitterNanos;
  final double loss;
  private final Map<String, BiConsumer<PeerAddress, byte[]>> handlers = new HashMap<>();
  /** Messages outstanding from one address to another at most; 0 for no bound. */
  private final int maxInFlightPerPeer;
  private final Map<String, Integer> inFlight = new HashMap<>();
  /** The largest payload sent (dropped ones included) since the last {@link #resetLargest}. */
  int largest;
  /** Messages dropped because {@code maxInFlightPerPeer} were outstanding to their peer. */
  long droppedInFlight;

  SimNet(long seed, long delayNanos, long jitterNanos, double loss) {
    this(seed, delayNanos, jitterNanos, loss, 0);
  }

  /**
   * A network that, like {@code HttpTransport} with its {@code maxInFlightPerPeer}, drops a
   * message sent while {@code maxInFlightPerPeer} messages from the same sender to the same
   * peer are outstanding; a message is outstanding from its send until the answer to it would
   * be back, one more one-way delay after its delivery.
   */
  SimNet(long seed, long delayNanos, long jitterNanos, double loss, int maxInFlightPerPeer) {
    this.rnd = new SplittableRandom(seed);
    this.delayNanos = delayNanos;
    this.jitterNanos = jitterNanos;
    this.loss = loss;
    this.maxInFlightPerPeer = maxInFlightPerPeer;
  }

  /** Starts measuring {@link #largest} afresh. */
  void resetLargest() {
    largest = 0;
  }

  void register(PeerAddress at, BiConsumer<PeerAddress, byte[]> handler) {
    handlers.put(at.address(), handler);
  }

  void send(PeerAddress from, PeerAddress to, byte[] payload) {
    largest = Math.max(largest, payload.length);
    String link = null;
    if (maxInFlightPerPeer > 0) {
      link = from.address() + ">" + to.address();
      int n = inFlight.getOrDefault(link, 0);
      if (n >= maxInFlightPerPeer) {
        droppedInFlight++;
        return;
      }
      inFlight.put(link, n + 1);
    }
    if (loss > 0 && rnd.nextDouble() < loss) {
      release(link, delayNanos);
      return;
    }
    long d = delayNanos + (jitterNanos > 0 ? rnd.nextLong(jitterNanos + 1) : 0);
    String held = link;
    time.schedule(d, () -> {
      BiConsumer<PeerAddress, byte[]> h = handlers.get(to.address());
      if (h != null) {
        h.accept(from, payload);
      }
      release(held, delayNanos);
    });
  }

  /** Frees {@code link}'s slot (if it holds one) {@code after} nanoseconds from now. */
  private void release(String link, long after) {
    if (link != null) {
      time.schedule(after, () -> inFlight.computeIfPresent(link, (k, n) -> n <= 1 ? null : n - 1));
    }
  }
}
