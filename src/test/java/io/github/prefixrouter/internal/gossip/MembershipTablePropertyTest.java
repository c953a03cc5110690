package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeSet;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

/**
 * The membership table of a node against a naive model: origins heard of from a third party
 * or speaking for themselves, rounds that suspect, kill and forget them, and a full table that
 * makes room for an origin speaking for itself by dropping a tombstone (the longest dead
 * first) or else a member never heard from directly (the one whose heartbeat last advanced
 * longest ago first, ties to the lowest slot), and for nothing else.
 */
class MembershipTablePropertyTest {

  static final int MAX_PEERS = 4;
  static final int IDS = 9;
  static final long INTERVAL = 100_000_000L;
  static final long SUSPECT = 300_000_000L;
  static final long DEAD = 500_000_000L;
  static final long FORGET = 1_000_000_000L;

  static final class M {
    int slot;
    boolean direct;
    boolean dead;
    long heartbeatNanos;
    long deadSince;
  }

  /**
   * Each op is {@code kind * IDS + id}: kind 0 a third party's update about origin {@code id},
   * 1 the origin's own update, 2 a round after {@code id % 4} intervals.
   */
  @Property(tries = 300)
  void theTableMatchesTheModel(
      @ForAll @Size(max = 120) List<@IntRange(min = 0, max = 3 * IDS - 1) Integer> ops) {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofNanos(INTERVAL))
        .suspectAfter(Duration.ofNanos(SUSPECT)).deadAfter(Duration.ofNanos(DEAD))
        .forgetAfter(Duration.ofNanos(FORGET)).maxPeers(MAX_PEERS).build();
    SimulatedScheduler time = new SimulatedScheduler();
    GossipEngine engine = new GossipEngine(new PeerAddress("me", "sim:me"), 1, config,
        List.of(), time, time, new SplittableRandom(1), () -> EngineLoad.IDLE, (to, p) -> {});
    PeerAddress relayer = new PeerAddress("relayer", "sim:relayer");
    Map<String, M> model = new HashMap<>();
    TreeSet<Integer> free = new TreeSet<>();
    for (int s = 0; s < MAX_PEERS; s++) {
      free.add(s);
    }
    long heartbeat = 0;
    for (int op : ops) {
      int kind = op / IDS;
      String id = "o" + (op % IDS);
      long now = time.nanoTime();
      if (kind == 2) {
        time.advanceBy((op % 4) * INTERVAL);
        engine.runRound();
        now = time.nanoTime();
        for (var it = model.entrySet().iterator(); it.hasNext(); ) {
          M m = it.next().getValue();
          if (m.dead) {
            if (now - m.deadSince > FORGET) {
              free.add(m.slot);
              it.remove();
            }
          } else if (now - m.heartbeatNanos > DEAD) {
            m.dead = true;
            m.deadSince = now;
          }
        }
      } else {
        boolean direct = kind == 1;
        heartbeat++;
        DigestEntry e = new DigestEntry(id, 1, 0, heartbeat, 0, 0, false);
        engine.handle(direct ? new PeerAddress(id, "sim:" + id) : relayer,
            new Ack2(1, List.of(new Update(e, direct ? null : "sim:" + id, 0, List.of()))));
        M m = model.get(id);
        if (m == null) {
          int slot = -1;
          if (!free.isEmpty()) {
            slot = free.pollFirst();
          } else if (direct) {
            M victim = null;
            String victimId = null;
            for (Map.Entry<String, M> en : model.entrySet()) {
              M c = en.getValue();
              if (!c.dead && c.direct) {
                continue;
              }
              if (victim == null || before(c, victim)) {
                victim = c;
                victimId = en.getKey();
              }
            }
            if (victim != null) {
              model.remove(victimId);
              slot = victim.slot;
            }
          }
          if (slot >= 0) {
            m = new M();
            m.slot = slot;
            m.direct = direct;
            m.heartbeatNanos = now;
            model.put(id, m);
          }
        } else {
          m.direct |= direct;
          m.dead = false;
          m.heartbeatNanos = now;
        }
      }
      engine.checkInvariants();
      assertEquals(model.size(), engine.memberCount(), "members after " + ops);
      for (int i = 0; i < IDS; i++) {
        M m = model.get("o" + i);
        GossipEngine.Status s = engine.statusOf("o" + i);
        String what = "o" + i + " after " + ops;
        if (m == null) {
          assertEquals(null, s, what);
        } else {
          assertEquals(m.dead, s == GossipEngine.Status.DEAD, what);
        }
      }
      List<Integer> liveSlots = new ArrayList<>();
      for (M m : model.values()) {
        if (!m.dead) {
          liveSlots.add(m.slot);
        }
      }
      List<Integer> viewSlots = new ArrayList<>();
      for (PeerView p : engine.view().peers()) {
        viewSlots.add(p.slot());
      }
      liveSlots.sort(null);
      viewSlots.sort(null);
      assertEquals(liveSlots, viewSlots, "live slots after " + ops);
    }
  }

  private static boolean before(M a, M b) {
    if (a.dead != b.dead) {
      return a.dead;
    }
    long d = a.dead ? a.deadSince - b.deadSince : a.heartbeatNanos - b.heartbeatNanos;
    return d != 0 ? d < 0 : a.slot < b.slot;
  }
}
