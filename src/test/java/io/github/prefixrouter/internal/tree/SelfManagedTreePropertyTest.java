package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.statistics.Statistics;

/**
 * Random operation sequences on a self-managed tree, checked after every operation against a
 * deliberately naive model: a map from every cached (scope, prefix) (as a list: the scope's
 * marker, then the tokens) to its last-use time and lease count, with eviction by scanning for
 * the oldest unleased prefix that nothing continues, over all scopes at once (one capacity).
 * Operations are drawn in three scopes: the default, an adapter and a salt.
 */
class SelfManagedTreePropertyTest {

  sealed interface Op permits Insert, Match, Acquire, AcquireLeaf, Release, EvictTo, Clear {}

  /** The scopes drawn: index 0 is the default. */
  static final long[] SCOPES = {
    BlockHasher.ROOT_PARENT,
    BlockHasher.scopeRoot("lora-a", ""),
    BlockHasher.scopeRoot("", "tenant-1"),
  };

  record Insert(int scope, int[] tokens) implements Op {
    @Override
    public String toString() {
      return "insert" + (scope == 0 ? "" : "@" + scope) + Arrays.toString(tokens);
    }
  }

  record Match(int scope, int[] tokens) implements Op {
    @Override
    public String toString() {
      return "match" + (scope == 0 ? "" : "@" + scope) + Arrays.toString(tokens);
    }
  }

  record Acquire(int scope, int[] tokens) implements Op {
    @Override
    public String toString() {
      return "acquire" + (scope == 0 ? "" : "@" + scope) + Arrays.toString(tokens);
    }
  }

  /**
   * Leases a whole cached sequence that nothing continues (the {@code pick}-th of its scope's,
   * in order), so that its leaf leaves the LRU heap from wherever it sits in it.
   */
  record AcquireLeaf(int scope, int pick) implements Op {}

  record Release(int which) implements Op {}

  record EvictTo(int target) implements Op {}

  record Clear() implements Op {}

  /** The naive reference model. */
  static final class Model {
    final long capacity;
    final Map<List<Integer>, Long> lastUse = new HashMap<>();
    final Map<List<Integer>, Integer> leases = new HashMap<>();
    long clock;
    int epoch;

    Model(long capacity) {
      this.capacity = capacity;
    }

    /** A key's first element: the scope's marker (no token id is below -1000). */
    static int marker(int scope) {
      return Integer.MIN_VALUE + scope;
    }

    static List<Integer> prefix(int scope, int[] s, int k) {
      List<Integer> p = new ArrayList<>(k + 1);
      p.add(marker(scope));
      for (int i = 0; i < k; i++) {
        p.add(s[i]);
      }
      return p;
    }

    int match(int scope, int[] q) {
      int k = 0;
      while (k < q.length && lastUse.containsKey(prefix(scope, q, k + 1))) {
        k++;
      }
      return k;
    }

    void insert(int scope, int[] s) {
      long now = ++clock;
      for (int k = 1; k <= s.length; k++) {
        lastUse.put(prefix(scope, s, k), now);
      }
      evict(capacity);
    }

    int[] acquire(int scope, int[] q) {
      int m = match(scope, q);
      if (m > 0) {
        long now = ++clock;
        for (int k = 1; k <= m; k++) {
          lastUse.put(prefix(scope, q, k), now);
          leases.merge(prefix(scope, q, k), 1, Integer::sum);
        }
      }
      return Arrays.copyOf(q, m);
    }

    void release(int scope, int[] pinned, int leaseEpoch) {
      if (leaseEpoch == epoch) {
        for (int k = 1; k <= pinned.length; k++) {
          leases.merge(prefix(scope, pinned, k), -1, Integer::sum);
        }
        evict(capacity);
      }
    }

    void evict(long target) {
      while (lastUse.size() > target) {
        Set<List<Integer>> continued = new HashSet<>();
        for (List<Integer> p : lastUse.keySet()) {
          continued.add(p.subList(0, p.size() - 1));
        }
        List<Integer> victim = null;
        for (Map.Entry<List<Integer>, Long> e : lastUse.entrySet()) {
          List<Integer> p = e.getKey();
          if (continued.contains(p) || leases.getOrDefault(p, 0) > 0) {
            continue;
          }
          if (victim == null || e.getValue() < lastUse.get(victim)) {
            victim = p;
          }
        }
        if (victim == null) {
          return;
        }
        lastUse.remove(victim);
      }
    }

    void clear() {
      lastUse.clear();
      leases.clear();
      epoch++;
    }

    /** The cached sequences of a scope that nothing continues, without the marker. */
    Set<List<Integer>> leaves(int scope) {
      Set<List<Integer>> continued = new HashSet<>();
      for (List<Integer> p : lastUse.keySet()) {
        continued.add(p.subList(0, p.size() - 1));
      }
      Set<List<Integer>> out = new HashSet<>();
      for (List<Integer> p : lastUse.keySet()) {
        if (p.get(0) == marker(scope) && !continued.contains(p)) {
          out.add(new ArrayList<>(p.subList(1, p.size())));
        }
      }
      return out;
    }

    /** The scopes other than the default that hold something. */
    int scopesHeld() {
      Set<Integer> held = new HashSet<>();
      for (List<Integer> p : lastUse.keySet()) {
        if (p.get(0) != marker(0)) {
          held.add(p.get(0));
        }
      }
      return held.size();
    }

    /** Every cached full block's hash, chained from its scope's root. */
    Set<Long> blockHashes(BlockHasher h) {
      Set<Long> out = new HashSet<>();
      for (List<Integer> p : lastUse.keySet()) {
        int tokens = p.size() - 1;
        if (tokens % h.blockSize() == 0) {
          long root = SCOPES[p.get(0) - marker(0)];
          long[] chain = h.chain(root, p.subList(1, p.size()).stream()
              .mapToInt(Integer::intValue).toArray());
          out.add(chain[chain.length - 1]);
        }
      }
      return out;
    }
  }

  record ModelLease(int scope, int[] pinned, int epoch) {}

  @Provide
  Arbitrary<List<Op>> ops() {
    // a small alphabet and short prompts so that prompts share prefixes often; the three ids
    // share their low 16 bits (below 2^16, below 2^17, above)
    Arbitrary<int[]> prompt =
        Arbitraries.of(1, 65_537, 131_073).array(int[].class).ofMinSize(1).ofMaxSize(12);
    return opsOf(prompt, 60);
  }

  /**
   * First tokens whose home is the last slot of a child table of 4, 8 and 16 slots, and first
   * tokens whose home is slot 0 of all three: together they make probe sequences wrap around
   * the end of a table, and removals move children back across it.
   */
  static final List<Integer> AT_TABLE_ENDS = List.of(
      ChildTableTest.keyWithHome(15, 16, 0), ChildTableTest.keyWithHome(15, 16, 1),
      ChildTableTest.keyWithHome(15, 16, 2), ChildTableTest.keyWithHome(0, 16, 0),
      ChildTableTest.keyWithHome(0, 16, 1));

  /**
   * Many first tokens and short prompts, so that nodes get many children and their child tables
   * grow, shrink and turn back into dense arrays; the ids include negative ones, ids whose
   * home slots coincide in small tables, and ids at the ends of tables ({@link #AT_TABLE_ENDS}).
   */
  @Provide
  Arbitrary<List<Op>> wideOps() {
    Arbitrary<Integer> id = Arbitraries.frequencyOf(
        Tuple.of(6, Arbitraries.integers().between(0, 40)),
        Tuple.of(4, Arbitraries.of(AT_TABLE_ENDS)),
        Tuple.of(1, Arbitraries.of(-1, Integer.MIN_VALUE, Integer.MAX_VALUE, 1 << 30, 3 << 30)));
    Arbitrary<int[]> prompt = id.array(int[].class).ofMinSize(1).ofMaxSize(4);
    return opsOf(prompt, 150);
  }

  private static Arbitrary<List<Op>> opsOf(Arbitrary<int[]> prompt, int maxOps) {
    // the default scope most often; the same prompts in the others
    Arbitrary<Integer> scope = Arbitraries.frequencyOf(
        Tuple.of(3, Arbitraries.just(0)), Tuple.of(1, Arbitraries.just(1)),
        Tuple.of(1, Arbitraries.just(2)));
    Arbitrary<Op> op =
        Arbitraries.frequencyOf(
            Tuple.of(12, net.jqwik.api.Combinators.combine(scope, prompt).as(Insert::new)),
            Tuple.of(6, net.jqwik.api.Combinators.combine(scope, prompt).as(Match::new)),
            Tuple.of(4, net.jqwik.api.Combinators.combine(scope, prompt).as(Acquire::new)),
            Tuple.of(6, net.jqwik.api.Combinators.combine(
                scope, Arbitraries.integers().between(0, 50)).as(AcquireLeaf::new)),
            Tuple.of(4, Arbitraries.integers().between(0, 9).map(Release::new)),
            Tuple.of(2, Arbitraries.integers().between(0, 30).map(EvictTo::new)),
            Tuple.of(1, Arbitraries.just(new Clear())));
    return op.list().ofMaxSize(maxOps);
  }

  @Property
  void behavesLikeTheNaiveModel(
      @ForAll("ops") List<Op> ops,
      @ForAll @IntRange(min = 1, max = 40) int capacity,
      @ForAll @IntRange(min = 1, max = 5) int blockSize,
      @ForAll boolean listenFromStart,
      @ForAll @IntRange(min = 0, max = 8) int stampLimit) {
    check(ops, capacity, blockSize, listenFromStart, stampLimit);
  }

  @Property
  void behavesLikeTheNaiveModelWithWideFanout(
      @ForAll("wideOps") List<Op> ops,
      @ForAll @IntRange(min = 1, max = 120) int capacity,
      @ForAll @IntRange(min = 1, max = 3) int blockSize,
      @ForAll boolean listenFromStart) {
    boolean wrapped = check(ops, capacity, blockSize, listenFromStart, 0);
    // the generator must put children past the end of their tables' probe sequences (10% of
    // tries in runs of 200, 19% to 23% in runs of 1,000; the bound sits far below, so that
    // only a generator that lost the case fails it): the invariant check after every
    // operation then finds each child by its first token across the end of the table
    Statistics.label("a child sat past the end of its table").collect(wrapped);
    Statistics.label("a child sat past the end of its table")
        .coverage(c -> c.check(true).percentage(pct -> pct >= 2));
  }

  /**
   * Runs the operations on a tree and the model. A positive {@code stampLimit} makes the tree
   * renumber its use stamps whenever its counter reaches it (normally near 2^31), which must
   * change nothing observable. Returns whether a child sat past the end of its table after some
   * operation ({@link #wrapped}).
   */
  private static boolean check(List<Op> ops, int capacity, int blockSize, boolean listenFromStart,
      int stampLimit) {
    ConcurrentPrefixTree tree =
        ConcurrentPrefixTree.builder().capacityTokens(capacity).blockSize(blockSize).build();
    if (stampLimit > 0) {
      tree.stampLimitForTest(stampLimit);
    }
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    if (listenFromStart) { // else the first half runs with no listener (no evicted hashes)
      tree.addListener(replay);
    }
    Model model = new Model(capacity);
    List<ConcurrentPrefixTree.Lease> leases = new ArrayList<>();
    List<ModelLease> modelLeases = new ArrayList<>();
    List<Boolean> released = new ArrayList<>();
    ConcurrentPrefixTreeTest.Replay late = new ConcurrentPrefixTreeTest.Replay();
    int step = 0;
    boolean wrapped = false;
    for (Op op : ops) {
      if (step++ == ops.size() / 2) {
        for (long h : tree.addListenerWithSnapshot(late)) {
          late.held.add(h);
        }
      }
      if (op instanceof AcquireLeaf al) {
        List<List<Integer>> leaves = new ArrayList<>(sorted(model.leaves(al.scope())));
        if (leaves.isEmpty()) {
          continue;
        }
        op = new Acquire(al.scope(), leaves.get(al.pick() % leaves.size()).stream()
            .mapToInt(Integer::intValue).toArray());
      }
      if (op instanceof Insert i) {
        if (i.scope() == 0) {
          tree.insert(i.tokens());
        } else {
          tree.insert(SCOPES[i.scope()], i.tokens(), i.tokens().length);
        }
        model.insert(i.scope(), i.tokens());
      } else if (op instanceof Match m) {
        int expected = model.match(m.scope(), m.tokens());
        assertEquals(expected, tree.match(SCOPES[m.scope()], m.tokens()), "match");
        if (m.scope() == 0) {
          assertEquals(expected, tree.match(m.tokens()), "unscoped match");
        }
      } else if (op instanceof Acquire a) {
        ConcurrentPrefixTree.Lease l = a.scope() == 0
            ? tree.acquire(a.tokens()) : tree.acquire(SCOPES[a.scope()], a.tokens());
        int[] pinned = model.acquire(a.scope(), a.tokens());
        assertEquals(pinned.length, l.lockedTokens(), "leased tokens");
        leases.add(l);
        modelLeases.add(new ModelLease(a.scope(), pinned, model.epoch));
        released.add(false);
      } else if (op instanceof Release r) {
        if (leases.isEmpty()) {
          continue;
        }
        int w = r.which() % leases.size();
        if (released.get(w)) {
          assertThrows(IllegalStateException.class, leases.get(w)::release);
        } else {
          leases.get(w).release();
          ModelLease ml = modelLeases.get(w);
          model.release(ml.scope(), ml.pinned(), ml.epoch());
          released.set(w, true);
        }
      } else if (op instanceof EvictTo e) {
        long before = model.lastUse.size();
        model.evict(e.target());
        assertEquals(before - model.lastUse.size(), tree.evictTo(e.target()), "evicted");
      } else {
        tree.clear();
        model.clear();
      }
      tree.checkInvariants();
      wrapped |= wrapped(tree);
      assertEquals(model.lastUse.size(), tree.sizeTokens(), "size after " + op);
      assertEquals(model.leases.values().stream().filter(c -> c > 0).count(),
          tree.pinnedTokens(), "pinned tokens after " + op);
      for (int sc = 0; sc < SCOPES.length; sc++) {
        assertEquals(sorted(model.leaves(sc)),
            sorted(asLists(tree.leafSequences(SCOPES[sc]))), "scope " + sc + " after " + op);
      }
      assertEquals(model.scopesHeld(), tree.scopeCount(), "scope roots after " + op);
      Set<Long> expectedBlocks = model.blockHashes(tree.hasher());
      replay.assertConsistent("after " + op);
      late.assertConsistent("after " + op);
      if (listenFromStart) {
        assertEquals(expectedBlocks, replay.held, "replayed blocks after " + op);
      }
      assertEquals(expectedBlocks, Arrays.stream(tree.blockHashes()).boxed()
          .collect(Collectors.toSet()), "block snapshot after " + op);
      if (step > ops.size() / 2) {
        assertEquals(expectedBlocks, late.held, "snapshot plus later events after " + op);
      }
    }
    return wrapped;
  }

  /**
   * Whether a child of some node sits in a slot of its child table below its home slot: its
   * probe sequence wrapped around the end of the table.
   */
  static boolean wrapped(ConcurrentPrefixTree tree) {
    java.util.ArrayDeque<ConcurrentPrefixTree.Node> stack = new java.util.ArrayDeque<>();
    tree.rootsForTest().forEach(stack::push);
    while (!stack.isEmpty()) {
      ConcurrentPrefixTree.Node n = stack.pop();
      int len = n.kids.length;
      for (int i = 0; i < len; i++) {
        ConcurrentPrefixTree.Node c = n.kids[i];
        if (c != null) {
          if (len > ConcurrentPrefixTree.DENSE_MAX
              && i < ConcurrentPrefixTree.slot(c.edge[0], len)) {
            return true;
          }
          stack.push(c);
        }
      }
    }
    return false;
  }

  static Set<List<Integer>> asLists(List<int[]> seqs) {
    Set<List<Integer>> out = new HashSet<>();
    for (int[] s : seqs) {
      out.add(Arrays.stream(s).boxed().collect(Collectors.toList()));
    }
    return out;
  }

  static TreeSet<List<Integer>> sorted(Set<List<Integer>> s) {
    Comparator<List<Integer>> cmp = (a, b) -> {
      for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
        int c = Integer.compare(a.get(i), b.get(i));
        if (c != 0) {
          return c;
        }
      }
      return Integer.compare(a.size(), b.size());
    };
    TreeSet<List<Integer>> t = new TreeSet<>(cmp);
    t.addAll(s);
    return t;
  }
}
