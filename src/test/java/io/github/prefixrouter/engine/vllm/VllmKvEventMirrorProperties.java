package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.RandomDistribution;
import net.jqwik.api.Tuple;
import net.jqwik.api.statistics.Statistics;

/**
 * Arbitrary event streams, not only the ones a well-behaved vLLM sends, through the receiver
 * into a real engine-driven tree: stores continuing blocks never stored or already removed
 * (unknown parents), removals of blocks not stored yet or not at all, stores of blocks already
 * held (copies), clears, events of a KV-cache group of unknown kind or of none, and messages
 * delivered in order, lost, replayed again or numbered back (a restart). After every message
 * the tree must hold exactly the blocks of a naive model: a block is held when it was stored
 * continuing a held block (or starting a chain) and not removed since, as often as it was
 * stored, and goes with the blocks continuing it; a group of unknown kind removes only copies
 * its own stores added; a chain start of a group names again, from its first block on, blocks
 * that group's stores gave and its removals did not take back: those are not given again (vLLM
 * announces the blocks a request found so, in its full report mode); a lost message or a
 * restart clears. The receiver must keep nothing for copies that are gone: the groups it tracks
 * are exactly the model's groups with copies left.
 */
class VllmKvEventMirrorProperties {

  static final int B = VllmKvEventTreeTest.B;

  /**
   * An event: {@code kind} 0 a store of {@code blocks} (token pairs, each token 1 or 2)
   * continuing the block at {@code parent} (a token path; empty starts a chain), 1 a removal of
   * the blocks at the paths {@code removed}, 2 a clear; {@code group} -1 for none.
   */
  record Event(int kind, List<Integer> parent, List<Integer> blocks, List<List<Integer>> removed,
      int group) {}

  /** How a message is delivered: 0 live, 1 lost, 2 live and then replayed again, 3 restart. */
  record Msg(List<Event> events, int fate) {}

  static Arbitrary<List<Integer>> path(int minBlocks, int maxBlocks) {
    return Arbitraries.integers().between(1, 2).list()
        .ofMinSize(minBlocks * B).ofMaxSize(maxBlocks * B)
        .filter(p -> p.size() % B == 0);
  }

  @Provide
  Arbitrary<List<Msg>> streams() {
    Arbitrary<Integer> group = Arbitraries.frequencyOf(
        Tuple.of(4, Arbitraries.just(-1)), Tuple.of(1, Arbitraries.just(0)),
        Tuple.of(1, Arbitraries.just(1)));
    Arbitrary<List<Integer>> parent = Arbitraries.frequencyOf(
        Tuple.of(2, Arbitraries.just(List.<Integer>of())), Tuple.of(2, path(1, 1)),
        Tuple.of(1, path(2, 2)));
    Arbitrary<Event> store = Combinators.combine(parent, path(1, 2), group)
        .as((p, b, g) -> new Event(0, p, b, List.of(), g));
    Arbitrary<Event> remove = Combinators.combine(path(1, 3).list().ofMinSize(1).ofMaxSize(3),
            group)
        .as((r, g) -> new Event(1, List.of(), List.of(), r, g));
    Arbitrary<Event> clear = Arbitraries.just(new Event(2, List.of(), List.of(), List.of(), -1));
    Arbitrary<Event> event = Arbitraries.frequencyOf(
        Tuple.of(10, store), Tuple.of(8, remove), Tuple.of(1, clear));
    Arbitrary<Integer> fate = Arbitraries.frequencyOf(
        Tuple.of(20, Arbitraries.just(0)), Tuple.of(2, Arbitraries.just(1)),
        Tuple.of(3, Arbitraries.just(2)), Tuple.of(1, Arbitraries.just(3)));
    Arbitrary<Msg> msg = Combinators.combine(event.list().ofMinSize(1).ofMaxSize(3), fate)
        .as(Msg::new);
    return msg.list().ofMaxSize(40).withSizeDistribution(RandomDistribution.uniform());
  }

  /** A block's hash: a function of its whole token path, never 0 (no parent). */
  static long hash(List<Integer> path) {
    long h = 0x9E3779B97F4A7C15L;
    for (int t : path) {
      h = (h ^ t) * 0xBF58476D1CE4E5B9L;
      h ^= h >>> 31;
    }
    return h == 0 ? 1 : h;
  }

  static List<Integer> extend(List<Integer> path, List<Integer> blocks, int block) {
    return extend(path, blocks, block, block + 1);
  }

  /** {@code path} continued by blocks {@code from} (inclusive) to {@code to} of {@code blocks}. */
  static List<Integer> extend(List<Integer> path, List<Integer> blocks, int from, int to) {
    List<Integer> p = new ArrayList<>(path);
    p.addAll(blocks.subList(from * B, to * B));
    return List.copyOf(p);
  }

  static byte[] encode(Event e) {
    Long group = e.group() < 0 ? null : (long) e.group();
    switch (e.kind()) {
      case 0 -> {
        int n = e.blocks().size() / B;
        long[] hashes = new long[n];
        List<Integer> p = e.parent();
        for (int i = 0; i < n; i++) {
          p = extend(p, e.blocks(), i);
          hashes[i] = hash(p);
        }
        int[] tokens = e.blocks().stream().mapToInt(Integer::intValue).toArray();
        Long parent = e.parent().isEmpty() ? null : hash(e.parent());
        return GroupedEvents.stored(false, group, null, B, parent, tokens, hashes);
      }
      case 1 -> {
        long[] hashes = e.removed().stream().mapToLong(VllmKvEventMirrorProperties::hash)
            .toArray();
        return GroupedEvents.removed(false, group, hashes);
      }
      default -> {
        return Batches.cleared();
      }
    }
  }

  /** One message of several events: the events of one-event batches spliced into one batch. */
  static byte[] batch(List<Event> events) {
    List<byte[]> parts = new ArrayList<>();
    for (Event e : events) {
      byte[] one = encode(e);
      // a store or removal comes as a one-event batch [ts, [event]]: the event follows the
      // batch's array header, the 9-byte float and the events' array header
      parts.add(e.kind() == 2 ? one : Arrays.copyOfRange(one, 1 + 9 + 1, one.length));
    }
    return Batches.batch(parts.toArray(new byte[0][]));
  }

  /** The mirror as the naive model sees it: token paths of held blocks, copies per path. */
  static final class Model {
    final Map<List<Integer>, Integer> held = new HashMap<>();
    /** Per group of unknown kind, the copies its stores added, per path. */
    final Map<Integer, Map<List<Integer>, Integer>> tracked = new HashMap<>();
    /**
     * Per group, the copies of each path it gave and did not take back (a chain start naming
     * one again gives none).
     */
    final Map<Integer, Map<List<Integer>, Integer>> given = new HashMap<>();

    void clear() {
      held.clear();
      tracked.clear();
      given.clear();
    }

    void apply(Event e) {
      switch (e.kind()) {
        case 0 -> {
          int n = e.blocks().size() / B;
          List<Integer> p = e.parent();
          boolean chainStart = p.isEmpty();
          Map<List<Integer>, Integer> mine = e.group() < 0 ? null
              : given.computeIfAbsent(e.group(), g -> new HashMap<>());
          int from = 0;
          while (chainStart && mine != null && from < n
              && mine.containsKey(extend(p, e.blocks(), 0, from + 1))) {
            from++; // named again
          }
          p = extend(p, e.blocks(), 0, from);
          boolean parentHeld = p.isEmpty() || held.containsKey(p);
          for (int i = from; i < n; i++) {
            p = extend(p, e.blocks(), i);
            if (parentHeld) {
              held.merge(p, 1, Integer::sum);
            }
            if (e.group() >= 0) {
              tracked.computeIfAbsent(e.group(), g -> new HashMap<>()).merge(p, 1, Integer::sum);
              if (!chainStart || !mine.containsKey(p)) {
                mine.merge(p, 1, Integer::sum);
              }
            }
          }
          if (mine != null && mine.isEmpty()) {
            given.remove(e.group());
          }
        }
        case 1 -> {
          List<List<Integer>> applied = new ArrayList<>();
          if (e.group() < 0) {
            applied.addAll(e.removed());
          } else {
            Map<List<Integer>, Integer> mine = tracked.getOrDefault(e.group(), new HashMap<>());
            for (List<Integer> r : e.removed()) {
              Integer c = mine.get(r);
              if (c != null) {
                if (c == 1) {
                  mine.remove(r);
                } else {
                  mine.put(r, c - 1);
                }
                applied.add(r);
              }
            }
            if (mine.isEmpty()) {
              tracked.remove(e.group());
            }
            Map<List<Integer>, Integer> gave = given.getOrDefault(e.group(), new HashMap<>());
            for (List<Integer> r : applied) {
              gave.computeIfPresent(r, (k, c) -> c == 1 ? null : c - 1);
            }
            if (gave.isEmpty()) {
              given.remove(e.group());
            }
          }
          for (List<Integer> r : applied) {
            Integer c = held.get(r);
            if (c == null) {
              continue;
            }
            if (c > 1) {
              held.put(r, c - 1);
            } else {
              held.keySet().removeIf(
                  q -> q.size() >= r.size() && q.subList(0, r.size()).equals(r));
            }
          }
        }
        default -> clear();
      }
    }
  }

  @Property
  void theTreeHoldsWhatTheNaiveModelHolds(@ForAll("streams") List<Msg> stream) {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
    Model model = new Model();
    long seq = 100; // the publisher's next number
    long expected = -1; // the number the receiver expects next, -1 before the first message
    int unknownParents = 0;
    for (Msg m : stream) {
      byte[] payload = batch(m.events());
      if (m.fate() == 1) {
        seq++;
        continue;
      }
      long at = seq;
      if (m.fate() == 3) {
        at = seq - 1 - (seq % 3); // numbered back: the publisher restarted
      }
      receiver.onMessage(at, payload);
      if (expected >= 0 && at != expected) {
        // messages lost, or a restart: the mirror is cleared (a restart numbered exactly as the
        // receiver expects, after losses, cannot be seen)
        model.clear();
      }
      expected = at + 1;
      for (Event e : m.events()) {
        if (e.kind() == 0 && !e.parent().isEmpty() && !model.held.containsKey(e.parent())) {
          unknownParents++;
        }
        model.apply(e);
      }
      seq = at + 1;
      if (m.fate() == 2) {
        receiver.onReplayed(at, payload); // already applied: ignored
      }
      VllmKvEventTreeTest.assertHolds(tree, model.held.keySet());
      assertEquals(model.tracked.size(), receiver.trackedGroups(),
          "groups with copies tracked: " + model.tracked);
      assertEquals(model.given.size(), receiver.holders(),
          "groups with copies given: " + model.given);
    }
    assertEquals(0, receiver.stats().malformedBatches());
    int heldBefore = model.held.size();
    // a clear leaves nothing behind, in the receiver or in the tree
    receiver.onMessage(seq, Batches.batch(Batches.cleared()));
    assertEquals(0, receiver.trackedGroups());
    assertEquals(0, receiver.holders());
    assertEquals(0, tree.sizeTokens());
    Statistics.label("unknown parents").collect(Math.min(unknownParents, 3));
    Statistics.label("blocks held before the last clear").collect(Math.min(heldBefore, 5));
  }
}
