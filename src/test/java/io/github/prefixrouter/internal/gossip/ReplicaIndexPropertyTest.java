package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import org.junit.jupiter.api.Test;

/** The replica index against a naive model: a set of hashes per slot. */
class ReplicaIndexPropertyTest {

  static final long SEED = 0x2545_F491_4F6C_DD1DL;
  static final int SLOTS = 6;
  static final long PER_SLOT = 40;
  static final long TOTAL = 150;
  /** A total cap below what the slots hold together in most runs. */
  static final long TIGHT_TOTAL = 20;

  /**
   * kind 0 add, 1 remove, 2 clearSlot, 3 query. Hashes come from a small pool (with 0). A clear
   * with an empty chain scans the table; otherwise it names the slot's blocks plus the chain
   * (blocks of other slots, or of nobody) when the chain's length is odd, only the chain (which
   * may leave blocks out) when it is even.
   */
  record Op(int kind, int slot, long hash, List<Long> chain) {}

  @Provide
  Arbitrary<List<Op>> ops() {
    Arbitrary<Long> hash = Arbitraries.longs().between(-3, 60)
        .map(h -> BlockFingerprint.of(h * 0x9E3779B97F4A7C15L)); // the index holds fingerprints
    Arbitrary<Op> op =
        Combinators.combine(
                Arbitraries.integers().between(0, 9),
                Arbitraries.integers().between(0, SLOTS - 1),
                hash,
                hash.list().ofMaxSize(8))
            .as((k, s, h, c) -> new Op(k < 5 ? 0 : k < 7 ? 1 : k < 8 ? 2 : 3, s, h, c));
    return op.list().ofMaxSize(300);
  }

  @Property
  void behavesLikeSetsPerSlot(@ForAll("ops") List<Op> ops) {
    behavesLikeSetsPerSlot(ops, PER_SLOT, TOTAL);
  }

  /**
   * The same with a total cap the slots reach together long before any of them reaches its
   * own: an add past the total is refused whichever slot it is for, and the pairs held never
   * pass it (the bound on all replicas, {@code maxBlocksTotal} in docs/gossip.md).
   */
  @Property
  void theTotalCapHoldsAcrossSlots(@ForAll("ops") List<Op> ops) {
    behavesLikeSetsPerSlot(ops, PER_SLOT, TIGHT_TOTAL);
  }

  private static void behavesLikeSetsPerSlot(List<Op> ops, long perSlotCap, long totalCap) {
    ReplicaIndex index = new ReplicaIndex(SLOTS, perSlotCap, totalCap, SEED);
    Map<Integer, Set<Long>> model = new HashMap<>();
    for (int s = 0; s < SLOTS; s++) {
      model.put(s, new HashSet<>());
    }
    int[] out = new int[SLOTS];
    for (Op op : ops) {
      Set<Long> set = model.get(op.slot());
      switch (op.kind()) {
        case 0 -> {
          int total = model.values().stream().mapToInt(Set::size).sum();
          int expected =
              set.contains(op.hash()) ? 0 : (set.size() >= perSlotCap || total >= totalCap) ? -1 : 1;
          assertEquals(expected, index.add(op.slot(), op.hash()), "add " + op);
          if (expected == 1) {
            set.add(op.hash());
          }
        }
        case 1 -> assertEquals(set.remove(op.hash()), index.remove(op.slot(), op.hash()));
        case 2 -> {
          long[] named = op.chain().stream().mapToLong(Long::longValue).toArray();
          if (named.length == 0) {
            index.clearSlot(op.slot());
          } else if (named.length % 2 == 1) {
            // every block named: no table scan, and the other slots keep theirs
            long scanned = index.clearSlotsScanned();
            long[] all = java.util.stream.LongStream.concat(Arrays.stream(named),
                set.stream().mapToLong(Long::longValue)).toArray();
            index.clearSlot(op.slot(), all);
            assertEquals(scanned, index.clearSlotsScanned());
          } else {
            index.clearSlot(op.slot(), named);
          }
          set.clear();
        }
        default -> {
          long[] chain = op.chain().stream().mapToLong(Long::longValue).toArray();
          java.util.Arrays.fill(out, -7);
          int best = index.leadingBlocks(chain, chain.length, out, SLOTS);
          int modelBest = 0;
          for (int s = 0; s < SLOTS; s++) {
            int k = 0;
            while (k < chain.length && model.get(s).contains(chain[k])) {
              k++;
            }
            assertEquals(k, out[s], "slot " + s + " on " + Arrays.toString(chain));
            modelBest = Math.max(modelBest, k);
          }
          assertEquals(modelBest, best);
        }
      }
      index.checkInvariants();
      for (int s = 0; s < SLOTS; s++) {
        assertEquals(model.get(s).size(), index.blocks(s));
        long[] got = index.blocksOf(s);
        Arrays.sort(got);
        long[] want = model.get(s).stream().mapToLong(Long::longValue).sorted().toArray();
        assertArrayEquals(want, got);
      }
    }
  }

  /**
   * The same against the naive model with 200 slots (four 64-slot bitmap words, so shared
   * blocks have holders in several words), chains pulled lazily: every count equals the naive
   * per-slot scan, and the query never pulls more than a chunk past the longest match.
   */
  @Property
  void wideSlotsAndLazyChainsBehaveLikeNaiveScan(@ForAll("wideOps") List<Op> ops) {
    int slots = 200;
    ReplicaIndex index = new ReplicaIndex(slots, 1_000, 10_000, SEED);
    List<Set<Long>> model = new ArrayList<>();
    for (int s = 0; s < slots; s++) {
      model.add(new HashSet<>());
    }
    int[] out = new int[slots];
    for (Op op : ops) {
      Set<Long> set = model.get(op.slot());
      switch (op.kind()) {
        case 0 -> assertEquals(set.add(op.hash()) ? 1 : 0, index.add(op.slot(), op.hash()));
        case 1 -> assertEquals(set.remove(op.hash()), index.remove(op.slot(), op.hash()));
        case 2 -> {
          index.clearSlot(op.slot());
          set.clear();
        }
        default -> {
          long[] chain = op.chain().stream().mapToLong(Long::longValue).toArray();
          int[] pulled = {0};
          BlockChainSource lazy = new BlockChainSource() {
            @Override
            public int ensure(int blocks) {
              pulled[0] = Math.max(pulled[0], Math.min(blocks, chain.length));
              return pulled[0];
            }

            @Override
            public long[] hashes() {
              return chain;
            }
          };
          Arrays.fill(out, -7);
          int best = index.leadingBlocks(lazy, out, slots);
          int modelBest = 0;
          for (int s = 0; s < slots; s++) {
            int k = 0;
            while (k < chain.length && model.get(s).contains(chain[k])) {
              k++;
            }
            assertEquals(k, out[s], "slot " + s);
            modelBest = Math.max(modelBest, k);
          }
          assertEquals(modelBest, best);
          assertTrue(pulled[0] <= Math.max(ReplicaIndex.FIRST_CHUNK, best + ReplicaIndex.CHUNK),
              "pulled " + pulled[0] + " blocks for a longest match of " + best);
        }
      }
      index.checkInvariants();
    }
    for (int s = 0; s < slots; s++) {
      assertEquals(model.get(s).size(), index.blocks(s));
    }
  }

  /**
   * Slots spread over four bitmap words; chains are prefixes of a few base chains (as prompts
   * sharing prefixes are), up to 60 blocks so the lazy pulls take several chunks.
   */
  @Provide
  Arbitrary<List<Op>> wideOps() {
    Arbitrary<Integer> slot = Arbitraries.oneOf(Arbitraries.integers().between(0, 3),
        Arbitraries.integers().between(60, 70), Arbitraries.integers().between(125, 131),
        Arbitraries.integers().between(190, 199));
    Arbitrary<Integer> base = Arbitraries.integers().between(0, 2);
    Arbitrary<Integer> depth = Arbitraries.integers().between(0, 59);
    Arbitrary<Op> op = Combinators.combine(Arbitraries.integers().between(0, 19), slot, base, depth)
        .as((k, s, b, d) -> {
          long h = baseHash(b, d);
          List<Long> chain = new ArrayList<>();
          for (int i = 0; i <= d; i++) {
            chain.add(baseHash(b, i));
          }
          // adds dominate so long shared prefixes build up; removals punch holes in them
          int kind = k < 14 ? 0 : k < 16 ? 1 : k < 17 ? 2 : 3;
          if (kind == 0) {
            return new Op(0, s, h, List.of());
          }
          return new Op(kind, s, h, chain);
        });
    // adds of a whole prefix at once, like a stored prompt
    Arbitrary<List<Op>> prefixAdds = Combinators.combine(slot, base, depth).as((s, b, d) -> {
      List<Op> l = new ArrayList<>();
      for (int i = 0; i <= d; i++) {
        l.add(new Op(0, s, baseHash(b, i), List.of()));
      }
      return l;
    });
    return Arbitraries.oneOf(op.map(List::of), prefixAdds).list().ofMaxSize(80)
        .map(ls -> ls.stream().flatMap(List::stream).toList());
  }

  private static long baseHash(int base, int depth) {
    return BlockFingerprint.of((base * 1_000L + depth + 1) * 0x9E3779B97F4A7C15L);
  }

  @Test
  void memoryReturnsToStartAfterFillingAndClearing() {
    ReplicaIndex index = new ReplicaIndex(4, 1 << 20, 1 << 22, SEED);
    long start = index.retainedBytes();
    for (int s = 0; s < 4; s++) {
      for (long h = 1; h <= 50_000; h++) {
        index.add(s, BlockFingerprint.of(h * 0x9E3779B97F4A7C15L + s));
      }
    }
    for (int s = 0; s < 4; s++) {
      index.clearSlot(s);
    }
    assertEquals(0, index.pairs());
    assertEquals(start, index.retainedBytes());
  }

  /**
   * Bytes per replicated (peer, block) pair for distinct blocks (the worst case: no sharing) and
   * for a workload where 8 peers share half of their blocks. Target: at most 32 bytes.
   */
  @Test
  void onlyFingerprintsAreHeld() {
    ReplicaIndex index = new ReplicaIndex(2, 100, 100, SEED);
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> index.add(0, 1L << 32));
    org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
        () -> index.add(0, -1));
    assertEquals(1, index.add(0, 0xFFFF_FFFFL));
    assertTrue(index.contains(0, 0xFFFF_FFFFL));
    // a 64-bit value whose low half matches is another block, held by nobody
    assertTrue(!index.contains(0, 0x1_FFFF_FFFFL));
    assertTrue(!index.remove(0, 0x1_FFFF_FFFFL));
    int[] out = new int[2];
    assertEquals(0, index.leadingBlocks(new long[] {0x1_FFFF_FFFFL}, 1, out, 2));
    assertEquals(1, index.leadingBlocks(new long[] {0xFFFF_FFFFL}, 1, out, 2));
    assertEquals(java.util.List.of(0xFFFF_FFFFL),
        java.util.Arrays.stream(index.blocksOf(0)).boxed().toList());
    index.checkInvariants();
  }

  @Test
  void bytesPerReplicatedBlockWithinBudget() {
    List<String> report = new ArrayList<>();
    for (int n : new int[] {10_000, 100_000, 400_000}) {
      ReplicaIndex distinct = new ReplicaIndex(8, 1 << 20, 1 << 23, SEED);
      for (int i = 0; i < n; i++) {
        distinct.add(i % 8, BlockFingerprint.of((i + 1) * 0x9E3779B97F4A7C15L));
      }
      double perPair = (double) distinct.retainedBytes() / distinct.pairs();
      report.add("distinct " + n + ": " + perPair);
      // right after a resize the table is 3/8 full: 8 B / 0.375 = 21.3 B per lone block
      assertTrue(perPair <= 22, report::toString);
      ReplicaIndex shared = new ReplicaIndex(8, 1 << 20, 1 << 23, SEED);
      for (int s = 0; s < 8; s++) {
        for (int i = 0; i < n / 8; i++) {
          long h = i < n / 16 ? (i + 1) * 0x9E3779B97F4A7C15L : ((long) s << 40 | i) * 31 + 7;
          shared.add(s, BlockFingerprint.of(h));
        }
      }
      double sharedPerPair = (double) shared.retainedBytes() / shared.pairs();
      report.add("shared " + n + ": " + sharedPerPair);
      assertTrue(sharedPerPair <= 32, report::toString);
    }
    System.out.println("bytes per replicated block: " + report);
  }
}
