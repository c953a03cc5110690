package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.RandomDistribution;
import net.jqwik.api.Tuple;

/**
 * A hybrid model's vLLM, three KV-cache groups (0 full attention, 1 sliding window, 2 Mamba
 * with blocks twice the node's), each storing and evicting its own copies of blocks, and
 * announcing again blocks it holds (its full report mode), reporting its kind on some stores
 * or none; against a model of what the mirror must hold on behalf of each group. The listener
 * counts copies per hash; after every event it must hold exactly the model's, and it must never
 * be told to remove a copy it does not hold.
 */
class VllmKvEventGroupProperties {

  static final int B = 4;
  static final String[] KINDS = {"full_attention", "sliding_window", "mamba"};
  /** The block the stores continue (none of the hashes stored). */
  static final Long PARENT = 99L;

  /**
   * One engine action. Store: {@code group} caches {@code hashes} (a sliding window may skip
   * its first block: {@code aligned} false, tokens for one block more than hashes), continuing
   * a block; remove: {@code group} evicts the copy at {@code pick} (mod its copies) of those it
   * holds; clear: the engine drops everything; announce: {@code group} names again, as a chain
   * start, up to three of the blocks it holds, from the one at {@code pick} on.
   */
  record Action(int op, int group, List<Long> hashes, boolean aligned, boolean withKind,
      int pick) {}

  @Provide
  Arbitrary<List<Action>> runs() {
    Arbitrary<Action> action = Combinators.combine(
            Arbitraries.frequencyOf(Tuple.of(10, Arbitraries.just(0)),
                Tuple.of(10, Arbitraries.just(1)), Tuple.of(1, Arbitraries.just(2)),
                Tuple.of(4, Arbitraries.just(3))),
            Arbitraries.integers().between(0, 2),
            Arbitraries.longs().between(1, 6).list().ofMinSize(1).ofMaxSize(3),
            Arbitraries.integers().between(0, 3).map(x -> x > 0),
            Arbitraries.integers().between(0, 3).map(x -> x == 0),
            Arbitraries.integers().between(0, 100))
        .as(Action::new);
    return action.list().ofMaxSize(60).withSizeDistribution(RandomDistribution.uniform());
  }

  /** Counts the copies of each hash the listener was given; records removals of absent ones. */
  static final class CopyCounter implements CacheEventListener {
    final Map<Long, Integer> copies = new TreeMap<>();
    final List<Long> absentRemovals = new ArrayList<>();

    @Override
    public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
      for (long h : blockHashes) {
        copies.merge(h, 1, Integer::sum);
      }
    }

    @Override
    public void onBlocksStored(
        CacheScope scope, long parentBlockHash, long[] blockHashes, int[] tokenIds) {
      onBlocksStored(parentBlockHash, blockHashes, tokenIds);
    }

    @Override
    public void onBlocksRemoved(long[] blockHashes) {
      for (long h : blockHashes) {
        Integer n = copies.get(h);
        if (n == null) {
          absentRemovals.add(h);
        } else if (n == 1) {
          copies.remove(h);
        } else {
          copies.put(h, n - 1);
        }
      }
    }

    @Override
    public void onAllCleared() {
      copies.clear();
    }
  }

  @Property
  void theMirrorHoldsWhatTheGroupsThatHoldWholePrefixesHold(
      @ForAll("runs") List<Action> run, @ForAll boolean maps) {
    CopyCounter mirror = new CopyCounter();
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(mirror, B);
    // the model: the engine's copies per group, those the mirror holds for each group, and
    // those each group gave the mirror and did not take back (a block it names again as a chain
    // start, given already, is not given again)
    List<List<Long>> held = List.of(new ArrayList<>(), new ArrayList<>(), new ArrayList<>());
    List<Map<Long, Integer>> mirrored = List.of(new HashMap<>(), new HashMap<>(),
        new HashMap<>());
    List<Map<Long, Integer>> given = List.of(new HashMap<>(), new HashMap<>(),
        new HashMap<>());
    Set<Integer> kindKnown = new HashSet<>();
    long seq = 0;
    for (Action a : run) {
      int g = a.group();
      Map<Long, Integer> mine = mirrored.get(g);
      Map<Long, Integer> gave = given.get(g);
      boolean partial = g != 0 && kindKnown.contains(g);
      if (a.op() == 0 || a.op() == 3) { // store, or announce again
        boolean announce = a.op() == 3;
        List<Long> named = a.hashes();
        if (announce) {
          List<Long> distinct = new ArrayList<>(new TreeSet<>(held.get(g)));
          if (distinct.isEmpty()) {
            continue;
          }
          named = new ArrayList<>();
          for (int i = 0; i < Math.min(3, distinct.size()); i++) {
            named.add(distinct.get((a.pick() + i) % distinct.size()));
          }
        }
        boolean aligned = g != 1 || a.aligned(); // only a sliding window skips blocks
        int blockSize = g == 2 ? 2 * B : B;
        int blocks = named.size() + (aligned ? 0 : 1);
        long[] hashes = named.stream().mapToLong(Long::longValue).toArray();
        receiver.onMessage(seq++, GroupedEvents.stored(maps, (long) g,
            a.withKind() ? KINDS[g] : null, blockSize, announce ? null : PARENT,
            new int[blocks * blockSize], hashes));
        if (!announce) {
          held.get(g).addAll(named);
        }
        if (a.withKind() && kindKnown.add(g) && g != 0) {
          mine.clear(); // a partial group gives back what it had added
          gave.clear();
          partial = true;
        }
        if (!partial && aligned && blockSize == B) {
          int from = 0;
          while (announce && from < named.size() && gave.containsKey(named.get(from))) {
            from++; // given already: not again
          }
          for (long h : named.subList(from, named.size())) {
            mine.merge(h, 1, Integer::sum);
            if (!announce || !gave.containsKey(h)) {
              gave.merge(h, 1, Integer::sum);
            }
          }
        }
      } else if (a.op() == 1) { // remove
        List<Long> copies = held.get(g);
        if (copies.isEmpty()) {
          continue;
        }
        long h = copies.remove(a.pick() % copies.size());
        receiver.onMessage(seq++, GroupedEvents.removed(maps, (long) g, h));
        if (!partial && mine.containsKey(h)) {
          mine.computeIfPresent(h, (k, n) -> n == 1 ? null : n - 1);
          gave.computeIfPresent(h, (k, n) -> n == 1 ? null : n - 1);
        }
      } else { // the engine drops its whole cache
        receiver.onMessage(seq++, Batches.batch(Batches.cleared()));
        held.forEach(List::clear);
        mirrored.forEach(Map::clear);
        given.forEach(Map::clear);
      }
      Map<Long, Integer> expected = new TreeMap<>();
      mirrored.forEach(m -> m.forEach((h, n) -> expected.merge(h, n, Integer::sum)));
      assertEquals(expected, mirror.copies, "after " + a);
      assertTrue(mirror.absentRemovals.isEmpty(), "removed copies never given: "
          + mirror.absentRemovals);
    }
  }
}
