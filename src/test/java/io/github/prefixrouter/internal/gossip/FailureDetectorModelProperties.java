package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipEngine.Status;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.List;
import java.util.SplittableRandom;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * The failure detector against a naive model, on simulated time (docs/gossip.md,
 * "Membership"): at each round a peer whose heartbeat has not advanced for more than
 * {@code suspectAfter} is suspect, for more than {@code deadAfter} dead (straight from alive if
 * no round saw it suspect), and a tombstone goes {@code forgetAfter} after the round that
 * declared the death; a newer heartbeat makes the peer alive again, a stale one does not
 * revive a dead peer.
 */
class FailureDetectorModelProperties {

  static final long MS = 1_000_000L;
  static final long SUSPECT = 500 * MS;
  static final long DEAD = 1_000 * MS;
  static final long FORGET = 2_000 * MS;

  /**
   * kind 0: a round; 1: a newer heartbeat from the peer; 2: the heartbeat it sent last. Each
   * comes after {@code advance} nanoseconds, often one of the timeouts or one off it.
   */
  record Op(int kind, long advance) {}

  @Provide
  Arbitrary<List<Op>> ops() {
    Arbitrary<Long> advance = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(2, Arbitraries.of(0L, 1L, 100 * MS)),
        net.jqwik.api.Tuple.of(8, Arbitraries.of(SUSPECT - 1, SUSPECT, SUSPECT + 1, DEAD - 1,
            DEAD, DEAD + 1, FORGET - 1, FORGET, FORGET + 1, DEAD - SUSPECT)),
        net.jqwik.api.Tuple.of(1, Arbitraries.longs().between(0, 3 * FORGET)));
    return Combinators.combine(Arbitraries.integers().between(0, 7), advance)
        .as((k, a) -> new Op(k < 5 ? 0 : k < 7 ? 1 : 2, a))
        .list().ofMaxSize(40);
  }

  @Property
  void suspicionDeathAndForgettingFollowTheHeartbeatsAge(@ForAll("ops") List<Op> ops) {
    SimulatedScheduler time = new SimulatedScheduler();
    GossipConfig config = MembershipTest.config();
    assertEquals(SUSPECT, config.suspectAfter().toNanos());
    assertEquals(DEAD, config.deadAfter().toNanos());
    assertEquals(FORGET, config.forgetAfter().toNanos());
    GossipEngine b = new GossipEngine(new PeerAddress("b", "sim:b"), 1, config, List.of(),
        time, time, new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress a = new PeerAddress("a", "sim:a");

    // the model: the peer's status (null: unknown), its heartbeat, when that last advanced
    // here, and when it died
    Status status = null;
    long heartbeat = 0;
    long heardAt = 0;
    long deadSince = 0;
    heartbeat = 1;
    b.handle(a, heartbeatOf(heartbeat));
    status = Status.ALIVE;
    heardAt = time.nanoTime();
    StringBuilder trace = new StringBuilder("heard at 0");
    for (Op op : ops) {
      time.advanceBy(op.advance());
      long now = time.nanoTime();
      switch (op.kind()) {
        case 0 -> {
          b.runRound();
          trace.append(", round at ").append(now);
          if (status == Status.ALIVE || status == Status.SUSPECT) {
            long age = now - heardAt;
            if (age > DEAD) {
              status = Status.DEAD;
              deadSince = now;
            } else if (age > SUSPECT) {
              status = Status.SUSPECT;
            }
          } else if (status == Status.DEAD && now - deadSince > FORGET) {
            status = null;
          }
        }
        case 1 -> {
          heartbeat++;
          b.handle(a, heartbeatOf(heartbeat));
          trace.append(", heartbeat ").append(heartbeat).append(" at ").append(now);
          status = Status.ALIVE;
          heardAt = now;
        }
        default -> {
          b.handle(a, heartbeatOf(heartbeat));
          trace.append(", stale heartbeat ").append(heartbeat).append(" at ").append(now);
          if (status == null) {
            status = Status.ALIVE; // forgotten: learned anew
            heardAt = now;
          }
        }
      }
      assertEquals(status, b.statusOf("a"), trace::toString);
    }
  }

  private static Ack2 heartbeatOf(long heartbeat) {
    return new Ack2(1, List.of(new Update(
        new DigestEntry("a", 1, 0, heartbeat, 0, 0, false), "sim:a", 0, List.of())));
  }
}
