package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Transport;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * A forwarded request's output goes back at most once per {@code streamInterval}, the first
 * piece at once (docs/routing.md, "Streaming"), on a scripted clock and scheduler.
 */
class StreamSenderTest {

  static final long MS = 1_000_000L;

  /** Records what is sent; nothing else is used. */
  static final class Sent implements Transport {
    final List<ForwardCodec.Stream> messages = new ArrayList<>();

    @Override
    public void start(InboundHandler handler) {}

    @Override
    public PeerAddress localAddress() {
      return new PeerAddress("n1", "addr-n1");
    }

    @Override
    public void send(PeerAddress to, byte[] payload) {
      try {
        messages.add((ForwardCodec.Stream) ForwardCodec.decode(payload));
      } catch (Exception e) {
        throw new AssertionError(e);
      }
    }

    @Override
    public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
      throw new UnsupportedOperationException();
    }

    @Override
    public void close() {}
  }

  /** Holds the timers it is given, to be run by the test. */
  static final class Timers implements Scheduler {
    final List<Long> delays = new ArrayList<>();
    final List<Runnable> tasks = new ArrayList<>();

    @Override
    public Cancellable schedule(long delayNanos, Runnable task) {
      delays.add(delayNanos);
      tasks.add(task);
      return () -> true;
    }
  }

  @Test
  void theFirstPieceGoesAtOnceAndLaterOnesAtMostOncePerInterval() {
    for (long origin : new long[] {MS, 0, -5 * MS, Long.MAX_VALUE - MS}) {
      Sent t = new Sent();
      Timers timers = new Timers();
      AtomicLong now = new AtomicLong(origin);
      StreamSender s = new StreamSender(t, timers, now::get, new PeerAddress("n0", "addr-n0"),
          "r1", 7, 20 * MS);
      s.onOutput(new int[] {1, 2}, "ab");
      assertEquals(1, t.messages.size(), "the first piece at once, clock at " + origin);
      assertEquals(0, timers.tasks.size());
      assertArrayEquals(new int[] {1, 2}, t.messages.get(0).tokens());

      now.addAndGet(5 * MS);
      s.onOutput(new int[] {3}, "c");
      s.onOutput(new int[] {4}, "d");
      assertEquals(1, t.messages.size(), "within the interval: gathered");
      assertEquals(List.of(15 * MS), timers.delays, "sent when the interval is over");
      now.addAndGet(15 * MS);
      timers.tasks.get(0).run();
      assertEquals(2, t.messages.size());
      ForwardCodec.Stream second = t.messages.get(1);
      assertArrayEquals(new int[] {3, 4}, second.tokens());
      assertEquals(2, second.tokenOffset());
      assertEquals("cd", second.text());
      assertEquals(2, second.charOffset());

      now.addAndGet(30 * MS); // longer than the interval since the last message
      s.onOutput(new int[] {5}, "e");
      assertEquals(3, t.messages.size(), "a piece after a quiet interval goes at once");
      assertEquals(1, timers.tasks.size());
    }
  }
}
