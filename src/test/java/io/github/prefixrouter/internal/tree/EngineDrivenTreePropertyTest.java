package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.RandomDistribution;
import net.jqwik.api.Tuple;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.constraints.IntRange;

/**
 * Random engine event streams (including unknown parents, unknown hashes, malformed events,
 * duplicate stores of held blocks and their removals) fed to an engine-driven tree and to a
 * naive model of the engine's cache: a map from engine block hash to (parent hash, tokens) and a
 * multiset of the held hashes (how many copies of each block the engine holds), where removing
 * a copy only lowers the count and removing the last copy removes the block and everything
 * continuing it.
 */
class EngineDrivenTreePropertyTest {

  static final int B = 3;

  sealed interface Op permits Store, Restore, Remove, Clear, Match {}

  /** parentPick selects an existing block (mod count), -1 = prompt start, -2 = unknown. */
  record Store(int parentPick, int[] tokens, boolean malformed) implements Op {
    @Override
    public String toString() {
      return "store(" + parentPick + ", " + Arrays.toString(tokens) + (malformed ? ", bad" : "")
          + ")";
    }
  }

  /**
   * Stores held blocks again, as an engine does that computed them for two requests at once:
   * the block picked (mod count) and up to {@code len - 1} of its ancestors, in one event.
   */
  record Restore(int pick, int len) implements Op {}

  /** kind 0: a held block, 1: an unknown hash, 2: a block held in several copies if any. */
  record Remove(int pick, int kind) implements Op {}

  record Clear() implements Op {}

  record Match(int[] tokens) implements Op {
    @Override
    public String toString() {
      return "match" + Arrays.toString(tokens);
    }
  }

  record Block(long parent, int[] tokens) {}

  /** The engine: hashes derive from content (like vLLM's), with its own salt. */
  static final class EngineModel {
    final BlockHasher engineHasher = new BlockHasher(B, 0xE0E0L);
    final Map<Long, Block> blocks = new HashMap<>();
    /** The multiset of held hashes: copies of each block (a key for every block). */
    final Map<Long, Integer> copies = new HashMap<>();

    void store(long h, Block b) {
      blocks.put(h, b);
      copies.merge(h, 1, Integer::sum);
    }

    /** Removes one copy of h; true if the block stays because another copy is held. */
    boolean removeCopy(long h) {
      Integer c = copies.get(h);
      if (c != null && c > 1) {
        copies.put(h, c - 1);
        return true;
      }
      remove(h);
      return false;
    }

    void clear() {
      blocks.clear();
      copies.clear();
    }

    int[] path(long h) {
      List<int[]> parts = new ArrayList<>();
      for (long x = h; x != CacheEventListener.NO_PARENT; x = blocks.get(x).parent()) {
        parts.add(0, blocks.get(x).tokens());
      }
      int[] out = new int[parts.size() * B];
      for (int i = 0; i < parts.size(); i++) {
        System.arraycopy(parts.get(i), 0, out, i * B, B);
      }
      return out;
    }

    void remove(long h) {
      blocks.remove(h);
      boolean changed = true;
      while (changed) {
        changed = blocks.values().removeIf(
            b -> b.parent() != CacheEventListener.NO_PARENT && !blocks.containsKey(b.parent()));
      }
      copies.keySet().retainAll(blocks.keySet());
    }

    int match(int[] q) {
      int best = 0;
      for (long h : blocks.keySet()) {
        int[] p = path(h);
        if (p.length > best && p.length <= q.length
            && Arrays.equals(p, 0, p.length, q, 0, p.length)) {
          best = p.length;
        }
      }
      return best;
    }

    Set<Long> treeHashes(BlockHasher h) {
      Set<Long> out = new HashSet<>();
      for (long e : blocks.keySet()) {
        long[] chain = h.chain(path(e));
        out.add(chain[chain.length - 1]);
      }
      return out;
    }

    Set<List<Integer>> leaves() {
      Set<Long> parents = new HashSet<>();
      for (Block b : blocks.values()) {
        parents.add(b.parent());
      }
      Set<List<Integer>> out = new HashSet<>();
      for (long h : blocks.keySet()) {
        if (!parents.contains(h)) {
          out.add(Arrays.stream(path(h)).boxed().toList());
        }
      }
      return out;
    }
  }

  @Provide
  Arbitrary<List<Op>> ops() {
    // a binary alphabet makes blocks that share their first tokens and diverge mid-block; the
    // two ids share their low 16 bits
    Arbitrary<Integer> symbol = Arbitraries.of(65_537, 131_073);
    Arbitrary<int[]> blocks =
        Arbitraries.integers().between(1, 4).flatMap(n ->
            symbol.array(int[].class).ofSize(n * B));
    Arbitrary<Op> op =
        Arbitraries.frequencyOf(
            Tuple.of(10, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(-2, 30), blocks,
                    Arbitraries.integers().between(0, 19).map(x -> x == 0))
                .as(Store::new)),
            Tuple.of(5, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(0, 30), Arbitraries.integers().between(1, 3))
                .as(Restore::new)),
            Tuple.of(6, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(0, 30),
                    Arbitraries.integers().between(0, 9).map(x -> x == 0 ? 1 : x < 6 ? 2 : 0))
                .as(Remove::new)),
            Tuple.of(4, symbol.array(int[].class).ofMaxSize(14)
                .map(Match::new)),
            Tuple.of(1, Arbitraries.just(new Clear())));
    // uniform sizes: jqwik's default bias gives most tries fewer than ten events, too few to
    // store a block, store it again and remove a copy
    return op.list().ofMaxSize(50).withSizeDistribution(RandomDistribution.uniform());
  }

  @Property
  void mirrorsTheEngine(@ForAll("ops") List<Op> ops, @ForAll @IntRange(min = 0, max = 3) int salt) {
    ConcurrentPrefixTree tree =
        ConcurrentPrefixTree.builder().mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(B)
            .salt(salt).build();
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    tree.addListener(replay);
    CacheEventListener engine = tree.engineEvents();
    EngineModel model = new EngineModel();
    long expectUnknownParents = 0;
    long expectUnknownBlocks = 0;
    long expectMalformed = 0;
    long expectDuplicates = 0;
    boolean copyKeptABlock = false;
    for (Op op : ops) {
      List<Long> known = new ArrayList<>(model.blocks.keySet());
      known.sort(null);
      if (op instanceof Store s) {
        long parent;
        if (s.parentPick() == -2 || (s.parentPick() >= 0 && known.isEmpty())) {
          parent = 12345; // not an engine hash in practice
        } else if (s.parentPick() == -1) {
          parent = CacheEventListener.NO_PARENT;
        } else {
          parent = known.get(s.parentPick() % known.size());
        }
        int n = s.tokens().length / B;
        long[] hashes = new long[n];
        long p = parent == CacheEventListener.NO_PARENT ? BlockHasher.ROOT_PARENT : parent;
        for (int i = 0; i < n; i++) {
          p = model.engineHasher.hashBlock(p, s.tokens(), i * B);
          hashes[i] = p;
        }
        if (s.malformed()) {
          engine.onBlocksStored(parent, hashes, Arrays.copyOf(s.tokens(), s.tokens().length - 1));
          expectMalformed++;
        } else {
          engine.onBlocksStored(parent, hashes, s.tokens());
          if (parent != CacheEventListener.NO_PARENT && !model.blocks.containsKey(parent)) {
            expectUnknownParents++;
          } else {
            long prev = parent;
            for (int i = 0; i < n; i++) {
              if (model.blocks.containsKey(hashes[i])) {
                expectDuplicates++;
              }
              model.store(hashes[i], new Block(prev, Arrays.copyOfRange(s.tokens(), i * B,
                  (i + 1) * B)));
              prev = hashes[i];
            }
          }
        }
      } else if (op instanceof Restore r && !known.isEmpty()) {
        List<Long> chain = new ArrayList<>();
        for (long x = known.get(r.pick() % known.size());
            x != CacheEventListener.NO_PARENT && chain.size() < r.len();
            x = model.blocks.get(x).parent()) {
          chain.add(0, x);
        }
        long[] hashes = chain.stream().mapToLong(Long::longValue).toArray();
        int[] tokens = new int[hashes.length * B];
        for (int i = 0; i < hashes.length; i++) {
          System.arraycopy(model.blocks.get(hashes[i]).tokens(), 0, tokens, i * B, B);
        }
        engine.onBlocksStored(model.blocks.get(hashes[0]).parent(), hashes, tokens);
        for (long h : hashes) {
          model.store(h, model.blocks.get(h));
          expectDuplicates++;
        }
      } else if (op instanceof Remove r) {
        List<Long> candidates = known;
        if (r.kind() == 2) {
          List<Long> multi = known.stream().filter(h -> model.copies.get(h) > 1).toList();
          candidates = multi.isEmpty() ? known : multi;
        }
        long h = r.kind() == 1 || candidates.isEmpty()
            ? 777 : candidates.get(r.pick() % candidates.size());
        if (!model.blocks.containsKey(h)) {
          expectUnknownBlocks++;
        }
        engine.onBlocksRemoved(new long[] {h});
        copyKeptABlock |= model.removeCopy(h);
      } else if (op instanceof Restore) {
        // nothing held: nothing to store again
      } else if (op instanceof Match m) {
        assertEquals(model.match(m.tokens()), tree.match(m.tokens()), "match");
      } else {
        engine.onAllCleared();
        model.clear();
      }
      tree.checkInvariants();
      assertEquals(SelfManagedTreePropertyTest.sorted(model.leaves()),
          SelfManagedTreePropertyTest.sorted(SelfManagedTreePropertyTest.asLists(tree.leafSequences())),
          "after " + op);
      assertEquals(model.treeHashes(tree.hasher()), replay.held, "replayed blocks after " + op);
      for (Map.Entry<Long, Integer> e : model.copies.entrySet()) {
        assertEquals((long) e.getValue(), tree.engineCopies(e.getKey()),
            "copies of " + e.getKey() + " after " + op);
      }
      EngineEventStats stats = tree.engineEventStats();
      assertEquals(expectUnknownParents, stats.unknownParents(), "unknown parents");
      assertEquals(expectUnknownBlocks, stats.unknownBlocks(), "unknown blocks");
      assertEquals(expectMalformed, stats.malformedEvents(), "malformed");
      assertEquals(expectDuplicates, stats.duplicateBlocks(), "duplicates");
      assertEquals(0, stats.aliasedBlocks(), "aliases");
    }
    // the generator must exercise what this test is for: a removal that leaves another copy
    // (23% to 31% of tries had one in five runs of 200)
    Statistics.label("a removed copy kept its block").collect(copyKeptABlock);
    Statistics.label("a removed copy kept its block")
        .coverage(c -> c.check(true).percentage(pct -> pct >= 12));
  }
}
