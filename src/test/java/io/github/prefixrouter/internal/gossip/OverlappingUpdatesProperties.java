package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Updates that overlap what a replica holds (a peer serving from an older digest, answers
 * crossing in flight, duplicates) against a naive model: the deltas the replica holds already
 * are skipped and counted as redundant, the ones that follow are applied, and an update that
 * starts past the replica's version (a gap) changes nothing. The replica is then the origin's
 * set at the replica's version.
 */
class OverlappingUpdatesProperties {

  /** An origin's change: kind 0 stores, 1 evicts, 2 clears; blocks from a small pool. */
  record Change(int kind, List<Long> blocks) {}

  /** An update of the origin's deltas {@code from+1 .. to} (clamped to the history). */
  record Window(int from, int length) {}

  @Provide
  Arbitrary<List<Change>> changes() {
    Arbitrary<Change> c = Combinators.combine(Arbitraries.integers().between(0, 9),
            Arbitraries.longs().between(1, 40).list().ofMinSize(1).ofMaxSize(5))
        .as((k, b) -> new Change(k < 6 ? 0 : k < 9 ? 1 : 2, b));
    return c.list().ofMinSize(1).ofMaxSize(25);
  }

  @Provide
  Arbitrary<List<Window>> windows() {
    return Combinators.combine(Arbitraries.integers().between(0, 30),
            Arbitraries.integers().between(0, 12))
        .as(Window::new).list().ofMaxSize(15);
  }

  @Property
  void overlappingUpdatesApplyOnlyWhatFollowsTheReplica(
      @ForAll("changes") List<Change> changes, @ForAll("windows") List<Window> windows) {
    LocalSummary origin = new LocalSummary(1, 1 << 20, 1 << 10);
    for (Change c : changes) {
      long[] blocks = c.blocks().stream().mapToLong(Long::longValue).toArray();
      switch (c.kind()) {
        case 0 -> origin.onStored(blocks);
        case 1 -> origin.onEvicted(blocks);
        default -> origin.onCleared();
      }
    }
    List<Delta> history = origin.deltasAfter(0, Integer.MAX_VALUE, Integer.MAX_VALUE);
    int last = history.size();
    assertEquals(origin.version(), last);

    SimulatedScheduler time = new SimulatedScheduler();
    GossipEngine b = new GossipEngine(new PeerAddress("b", "sim:b"), 1, MembershipTest.config(),
        List.of(), time, time, new SplittableRandom(5), () -> EngineLoad.IDLE, (to, p) -> { });
    PeerAddress a = new PeerAddress("a", "sim:a");

    int version = 0; // the model replica's version
    long redundant = 0;
    long heartbeat = 0;
    for (Window w : windows) {
      int from = Math.min(w.from(), last);
      int to = Math.min(from + w.length(), last);
      List<Delta> deltas = history.subList(from, to);
      if (from <= version) {
        redundant += Math.min(to, version) - from;
        version = Math.max(version, to);
      }
      b.handle(a, new Ack2(1, List.of(new Update(
          new DigestEntry("a", 1, to, ++heartbeat, 0, 0, false), "sim:a", from, deltas))));
      assertEquals(version, b.replicaVersion("a")[1], "after deltas " + (from + 1) + ".." + to);
      assertArrayEquals(setAt(history, version), sorted(b.replicaOf("a")),
          "replica at version " + version);
      assertEquals(redundant, b.counter(GossipCounter.DELTAS_REDUNDANT), "deltas redundant");
      assertEquals(version, b.counter(GossipCounter.DELTAS_APPLIED), "deltas applied");
    }
  }

  /** The origin's fingerprints after its first {@code version} deltas, by naive replay. */
  private static long[] setAt(List<Delta> history, int version) {
    Map<Long, Long> byStore = new LinkedHashMap<>();
    long stores = 0;
    for (Delta d : history.subList(0, version)) {
      switch (d.op()) {
        case Delta.STORE -> {
          for (long f : d.hashes()) {
            byStore.put(++stores, f);
          }
        }
        case Delta.EVICT -> {
          for (long s : d.hashes()) {
            byStore.remove(s);
          }
        }
        default -> byStore.clear();
      }
    }
    return sorted(byStore.values().stream().mapToLong(Long::longValue).toArray());
  }

  private static long[] sorted(long[] a) {
    long[] c = a == null ? new long[0] : a.clone();
    Arrays.sort(c);
    return c;
  }
}
