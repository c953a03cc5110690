package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.Supplier;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * What a failure while handling one gossip message does: a message whose handling overflows
 * the stack (a pathological message) is that message's fault, counted and dropped like a
 * runtime exception, and never reaches the transport's thread; an error of the virtual
 * machine itself (out of memory) is the caller's to see. Either way the engine's lock is
 * released and the next message is handled. A round's errors, of any kind, are counted and the
 * rounds go on.
 */
class GossipHandlerErrorsTest {

  final PeerAddress me = new PeerAddress("me", "sim:me");
  final PeerAddress b = new PeerAddress("b", "sim:b");
  final List<PeerAddress> sentTo = new ArrayList<>();
  SimulatedScheduler time;
  GossipEngine engine;
  /** Thrown by the engine's next clock reading, if set. */
  Supplier<Throwable> failure;

  @BeforeEach
  void setUp() {
    time = new SimulatedScheduler();
    Clock clock = () -> {
      Supplier<Throwable> f = failure;
      if (f != null) {
        failure = null;
        throw sneaky(f.get());
      }
      return time.nanoTime();
    };
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100)).build();
    engine = new GossipEngine(me, 10, config, List.of(), clock, time, new SplittableRandom(1),
        () -> EngineLoad.IDLE, (to, p) -> sentTo.add(to));
    engine.handle(b, new Ack2(1, List.of(header(1))));
  }

  static Update header(long hb) {
    return new Update(new DigestEntry("b", 1, 0, hb, 0, 0, false), null, 0, List.of());
  }

  @SuppressWarnings("unchecked")
  static <T extends Throwable> RuntimeException sneaky(Throwable t) throws T {
    throw (T) t;
  }

  Syn syn() {
    return new Syn(1, 1, List.of(new DigestEntry("b", 1, 0, 2, 0, 0, false)));
  }

  @Test
  void aStackOverflowWhileHandlingAMessageIsCountedAndTheMessageDropped() {
    failure = StackOverflowError::new;
    engine.handle(b, syn()); // used to throw the StackOverflowError to the transport's thread
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
    // the lock was released: the next message is handled and answered
    sentTo.clear();
    engine.handle(b, syn());
    assertEquals(List.of(b), sentTo);
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
  }

  @Test
  void anOutOfMemoryErrorWhileHandlingAMessageReachesTheCallerAndReleasesTheLock() {
    failure = () -> new OutOfMemoryError("test");
    assertThrows(OutOfMemoryError.class, () -> engine.handle(b, syn()));
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
    sentTo.clear();
    engine.handle(b, syn());
    assertEquals(List.of(b), sentTo);
  }

  @Test
  void otherErrorsWhileHandlingAMessageAreCountedAndTheMessageDropped() {
    failure = () -> new AssertionError("test");
    engine.handle(b, syn());
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
  }

  @Test
  void anOutOfMemoryErrorInARoundIsCountedAndTheRoundsGoOn() {
    // a round has no caller that would see the error (a scheduled task's future keeps it
    // unread), and rounds that stopped would stop the node's gossip for good
    engine.start();
    time.advanceBy(Duration.ofMillis(200).toNanos());
    long rounds = engine.counter(GossipCounter.ROUNDS);
    failure = () -> new OutOfMemoryError("test");
    time.advanceBy(Duration.ofMillis(200).toNanos());
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
    time.advanceBy(Duration.ofSeconds(1).toNanos());
    assertEquals(rounds + 12, engine.counter(GossipCounter.ROUNDS), 2);
  }

  /** A decoder that throws {@code t} once, then decodes as the engine's own codec does. */
  void decoderFailsOnce(Supplier<Throwable> t) {
    GossipCodec codec = new GossipCodec(GossipConfig.builder().build().messageByteCap(),
        GossipConfig.MAX_PEERS_LIMIT + 1);
    boolean[] failed = {false};
    engine.decoderForTest(p -> {
      if (!failed[0]) {
        failed[0] = true;
        throw sneaky(t.get());
      }
      return codec.decode(p);
    });
  }

  byte[] synBytes() {
    return new GossipCodec(GossipConfig.builder().build().messageByteCap(),
        GossipConfig.MAX_PEERS_LIMIT + 1).encode(syn());
  }

  @Test
  void aRuntimeExceptionOfTheDecoderIsCountedAndTheMessageDropped() {
    decoderFailsOnce(() -> new IllegalStateException("decoder bug"));
    engine.onMessage(b, synBytes()); // used to throw the decoder's exception to the transport
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
    assertEquals(0, engine.counter(GossipCounter.MALFORMED_DROPPED));
    sentTo.clear();
    engine.onMessage(b, synBytes());
    assertEquals(List.of(b), sentTo);
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
  }

  @Test
  void aStackOverflowOfTheDecoderIsCountedAndTheMessageDropped() {
    decoderFailsOnce(StackOverflowError::new);
    engine.onMessage(b, synBytes());
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
    sentTo.clear();
    engine.onMessage(b, synBytes());
    assertEquals(List.of(b), sentTo);
  }

  @Test
  void anOutOfMemoryErrorOfTheDecoderReachesTheCallerCounted() {
    decoderFailsOnce(() -> new OutOfMemoryError("test"));
    assertThrows(OutOfMemoryError.class, () -> engine.onMessage(b, synBytes()));
    assertEquals(1, engine.counter(GossipCounter.INTERNAL_ERRORS));
    sentTo.clear();
    engine.onMessage(b, synBytes());
    assertEquals(List.of(b), sentTo);
  }
}
