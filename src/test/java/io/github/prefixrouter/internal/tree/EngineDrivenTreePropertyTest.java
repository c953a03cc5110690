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
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.IntRange;

/**
 * Random engine event streams (including unknown parents, unknown hashes, malformed events and
 * duplicates) fed to an engine-driven tree and to a naive model of the engine's cache: a map
 * from engine block hash to (parent hash, tokens), where removing a block removes everything
 * continuing it.
 */
class EngineDrivenTreePropertyTest {

  static final int B = 3;

  sealed interface Op permits Store, Remove, Clear, Match {}

  /** parentPick selects an existing block (mod count), -1 = prompt start, -2 = unknown. */
  record Store(int parentPick, int[] tokens, boolean malformed) implements Op {
    @Override
    public String toString() {
      return "store(" + parentPick + ", " + Arrays.toString(tokens) + (malformed ? ", bad" : "")
          + ")";
    }
  }

  record Remove(int pick, boolean unknown) implements Op {}

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
            Tuple.of(4, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(0, 30),
                    Arbitraries.integers().between(0, 9).map(x -> x == 0))
                .as(Remove::new)),
            Tuple.of(4, symbol.array(int[].class).ofMaxSize(14)
                .map(Match::new)),
            Tuple.of(1, Arbitraries.just(new Clear())));
    return op.list().ofMaxSize(50);
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
              model.blocks.put(hashes[i], new Block(prev, Arrays.copyOfRange(s.tokens(), i * B,
                  (i + 1) * B)));
              prev = hashes[i];
            }
          }
        }
      } else if (op instanceof Remove r) {
        long h = r.unknown() || known.isEmpty() ? 777 : known.get(r.pick() % known.size());
        if (!model.blocks.containsKey(h)) {
          expectUnknownBlocks++;
        }
        engine.onBlocksRemoved(new long[] {h});
        model.remove(h);
      } else if (op instanceof Match m) {
        assertEquals(model.match(m.tokens()), tree.match(m.tokens()), "match");
      } else {
        engine.onAllCleared();
        model.blocks.clear();
      }
      tree.checkInvariants();
      assertEquals(SelfManagedTreePropertyTest.sorted(model.leaves()),
          SelfManagedTreePropertyTest.sorted(SelfManagedTreePropertyTest.asLists(tree.leafSequences())),
          "after " + op);
      assertEquals(model.treeHashes(tree.hasher()), replay.held, "replayed blocks after " + op);
      EngineEventStats stats = tree.engineEventStats();
      assertEquals(expectUnknownParents, stats.unknownParents(), "unknown parents");
      assertEquals(expectUnknownBlocks, stats.unknownBlocks(), "unknown blocks");
      assertEquals(expectMalformed, stats.malformedEvents(), "malformed");
      assertEquals(0, stats.aliasedBlocks(), "aliases");
    }
  }
}
