package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Readers match while a writer inserts, evicts and clears. The writer runs a fixed script whose
 * match results after every operation were computed beforehand on a private tree; each
 * concurrent match must equal the result of some state that existed while it ran, i.e. between
 * the number of operations completed before it started and one past the number completed
 * after it returned. No torn read can pass that check, and none may throw. Inserts, leases
 * and queries are spread over three cache scopes, so scope roots come and go (the capacity
 * evicts a scope's last leaf, a clear drops them all) while readers look them up.
 */
class ConcurrentPrefixTreeConcurrencyTest {

  static final int QUERIES = 24;

  static final long MIN_MATCHES = 100_000;

  static final int READERS = 2;

  sealed interface Op permits Insert, Evict, Clear, Acquire, Release {}

  /** The scopes' root hashes: the default and two others. */
  static final long[] SCOPES = {
    BlockHasher.ROOT_PARENT, BlockHasher.scopeRoot("lora-a", ""), BlockHasher.scopeRoot("", "t1")
  };

  record Insert(long scope, int[] tokens) implements Op {}

  record Evict(long target) implements Op {}

  record Clear() implements Op {}

  record Acquire(long scope, int[] tokens) implements Op {}

  record Release() implements Op {}

  @Test
  void concurrentMatchesSeeOnlyStatesThatExisted() throws Exception {
    run(42, 20);
  }

  @Test
  @Tag("long")
  void concurrentMatchesSeeOnlyStatesThatExistedManySeeds() throws Exception {
    for (int seed = 1; seed <= 10; seed++) {
      run(seed, 60);
    }
  }

  /**
   * A torn read that the walk's own consistency checks cannot see: the child arrays of a node
   * caught between two stores (a new {@code kids} with the old {@code keys}), or a table probed
   * while a deletion shifts its cluster back into the hole, makes a lookup miss a child that is
   * there before and after the write, and the walk then returns a short match as if that were
   * the answer. Pinned prompts (so their answers never change) hang off two wide nodes, the
   * default root and a scope root, and off a node with two children in dense arrays; the writer
   * adds and evicts many siblings, which grows, shrinks and rehashes the tables and shifts
   * their clusters, and keeps putting a second child in front of a pinned one. Every answer is
   * checked as in {@link #concurrentMatchesSeeOnlyStatesThatExisted}, most of them (the pinned
   * prompts) against one value that every state shares.
   */
  @Test
  void childTableChurnNeverHidesAPinnedPrompt() throws Exception {
    runChurn(11, 1000, 200_000);
  }

  @Test
  @Tag("long")
  void childTableChurnNeverHidesAPinnedPromptManySeeds() throws Exception {
    for (int seed = 1; seed <= 10; seed++) {
      runChurn(seed, 3000, 1_000_000);
    }
  }

  /**
   * The size a concurrent reader sees is that of a whole operation: an insert adds its tokens and
   * then evicts, and a status reader (the node's cached-token count) must not see the sum in
   * between, which a tree without leases never holds once the insert returns.
   */
  @Test
  void sizeSeenByReadersNeverExceedsTheCapacityWithoutLeases() throws Exception {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.selfManaged(100);
    AtomicBoolean stop = new AtomicBoolean();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    Thread writer = new Thread(() -> {
      try {
        for (int i = 0; i < 200_000; i++) {
          int[] p = new int[90];
          Arrays.fill(p, i); // nothing in common with what is cached: 90 new tokens every time
          tree.insert(p);
        }
      } catch (Throwable t) {
        failures.add(t);
      } finally {
        stop.set(true);
      }
    }, "writer");
    long[] worst = new long[1];
    Thread reader = new Thread(() -> {
      while (!stop.get()) {
        worst[0] = Math.max(worst[0], tree.sizeTokens());
      }
    }, "reader");
    writer.start();
    reader.start();
    writer.join();
    reader.join();
    assertTrue(failures.isEmpty(), () -> "writer failed: " + failures.peek());
    assertTrue(worst[0] <= 100, "a reader saw " + worst[0] + " tokens in a 100-token tree");
  }

  /**
   * A scope root that an insert registers and its own eviction drops again (here every insert
   * into a new scope, since leases hold the whole capacity) never held anything once the insert
   * returned, so a concurrent reader must not count it.
   */
  @Test
  void scopeCountSeenByReadersIsThatOfWholeOperations() throws Exception {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.selfManaged(10);
    int[] pinned = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    tree.insert(pinned);
    ConcurrentPrefixTree.Lease lease = tree.acquire(pinned);
    AtomicBoolean stop = new AtomicBoolean();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    Thread writer = new Thread(() -> {
      try {
        for (int i = 0; i < 100_000; i++) {
          tree.insert(BlockHasher.scopeRoot("", "tenant-" + (i % 100)), new int[] {i, i}, 2);
          if (tree.scopeCount() != 0) {
            throw new AssertionError("the insert left a scope root");
          }
        }
      } catch (Throwable t) {
        failures.add(t);
      } finally {
        stop.set(true);
      }
    }, "writer");
    int[] worst = new int[1];
    Thread reader = new Thread(() -> {
      while (!stop.get()) {
        worst[0] = Math.max(worst[0], tree.scopeCount());
      }
    }, "reader");
    writer.start();
    reader.start();
    writer.join();
    reader.join();
    lease.release();
    assertTrue(failures.isEmpty(), () -> "writer failed: " + failures.peek());
    assertEquals(0, worst[0], "a reader counted scope roots that held nothing");
  }

  /**
   * Runs the writer for {@code rounds} rounds of its script while the readers match (at least
   * {@link #MIN_MATCHES} matches), however long that takes on this machine.
   */
  private void run(long seed, int rounds) throws Exception {
    SplittableRandom r = new SplittableRandom(seed);
    int[][] bases = new int[6][];
    for (int i = 0; i < bases.length; i++) {
      bases[i] = r.ints(400, 0, 50).toArray();
    }
    List<Op> script = new ArrayList<>();
    for (int i = 0; i < 3000; i++) {
      int roll = r.nextInt(100);
      if (roll < 90) {
        int[] base = bases[r.nextInt(bases.length)];
        int[] s = Arrays.copyOf(base, 20 + r.nextInt(380));
        for (int k = r.nextInt(s.length); k < s.length; k += 1 + r.nextInt(40)) {
          s[k] = r.nextInt(50); // diverge here and there
        }
        long scope = SCOPES[r.nextInt(SCOPES.length)];
        if (roll < 8) {
          script.add(new Acquire(scope, s)); // pinned until a later release
        } else if (roll < 16) {
          script.add(new Release());
        } else {
          script.add(new Insert(scope, s));
        }
      } else if (roll < 99) {
        script.add(new Evict(r.nextInt(3000)));
      } else {
        script.add(new Clear());
      }
    }
    script.add(new Clear()); // every round starts from empty (outstanding leases become no-ops)
    int[][] queries = new int[QUERIES][];
    long[] queryScopes = new long[QUERIES];
    for (int q = 0; q < QUERIES; q++) {
      queryScopes[q] = SCOPES[(q / 3) % SCOPES.length];
      int[] base = bases[q % bases.length];
      queries[q] = Arrays.copyOf(base, 50 + r.nextInt(350));
      if (q % 3 == 0) {
        queries[q][r.nextInt(queries[q].length)] = 49;
      }
    }
    ConcurrentPrefixTree tree = race(ConcurrentPrefixTreeConcurrencyTest::newTree, List.of(),
        script, queryScopes, queries, rounds, MIN_MATCHES);
    assertEquals(0, tree.listenerFailures());
  }

  /**
   * Pins prompts on two wide nodes and on a dense pair, then runs the writer for {@code rounds}
   * rounds of a script that adds siblings to them and evicts everything unpinned, while the
   * readers match (at least {@code minMatches} matches).
   */
  private void runChurn(long seed, int rounds, long minMatches) throws Exception {
    SplittableRandom r = new SplittableRandom(seed);
    // First tokens whose home is the last slot of every table up to 512 slots: the cluster
    // there wraps around to slot 0, so a rehash (which refills in slot order) puts the wrapped
    // siblings in front of the pinned children, and each eviction of one, oldest first, shifts
    // the whole cluster back past them while a reader probes it.
    int[] lastSlot = IntStream.iterate(1000, k -> k + 1)
        .filter(k -> ConcurrentPrefixTree.slot(k, 512) == 511).limit(256).toArray();
    List<Op> setup = new ArrayList<>();
    List<int[]> pinned = new ArrayList<>();
    List<Long> pinnedScopes = new ArrayList<>();
    for (int i = 0; i < 6; i++) { // 4 children of the default root, 2 of a scope root
      int[] p = r.ints(1 + r.nextInt(3), 0, 1 << 20).toArray();
      p[0] = lastSlot[i];
      long scope = i < 4 ? BlockHasher.ROOT_PARENT : SCOPES[1];
      setup.add(new Insert(scope, p));
      setup.add(new Acquire(scope, p));
      pinned.add(p);
      pinnedScopes.add(scope);
    }
    // a pinned prompt whose tail is the larger of two dense children at 8, 16 and 24 once a
    // sibling starting with token 0 diverges there
    int[] dense = new int[32];
    for (int i = 0; i < dense.length; i++) {
      dense[i] = 5000 + i;
    }
    setup.add(new Insert(BlockHasher.ROOT_PARENT, dense));
    setup.add(new Acquire(BlockHasher.ROOT_PARENT, dense));

    List<Op> script = new ArrayList<>();
    List<int[]> siblings = new ArrayList<>();
    List<Long> siblingScopes = new ArrayList<>();
    for (int i = 6; i < lastSlot.length; i++) {
      int[] c = r.ints(1 + r.nextInt(3), 0, 1 << 20).toArray();
      c[0] = lastSlot[i];
      long scope = i % 3 == 0 ? SCOPES[1] : BlockHasher.ROOT_PARENT;
      script.add(new Insert(scope, c));
      siblings.add(c);
      siblingScopes.add(scope);
      if (i % 8 == 0) {
        int at = 8 * (1 + r.nextInt(3));
        int[] d = Arrays.copyOf(dense, at + 1 + r.nextInt(4));
        d[at] = 0; // in front of the pinned prompt's tail: a dense pair (0, 5000 + at)
        script.add(new Insert(BlockHasher.ROOT_PARENT, d));
      }
    }
    script.add(new Evict(0)); // every sibling goes, oldest first, one removal at a time

    pinned.add(dense);
    pinnedScopes.add(BlockHasher.ROOT_PARENT);
    int queryCount = 2 * pinned.size() + 2;
    int[][] queries = new int[queryCount][];
    long[] queryScopes = new long[queryCount];
    for (int i = 0; i < pinned.size(); i++) {
      int[] p = pinned.get(i);
      queries[2 * i] = p; // the whole prompt
      queries[2 * i + 1] = Arrays.copyOf(p, p.length + 1); // and past its end
      queries[2 * i + 1][p.length] = 1 << 21;
      queryScopes[2 * i] = pinnedScopes.get(i);
      queryScopes[2 * i + 1] = pinnedScopes.get(i);
    }
    for (int q = 2 * pinned.size(); q < queryCount; q++) {
      int c = r.nextInt(siblings.size());
      queries[q] = siblings.get(c);
      queryScopes[q] = siblingScopes.get(c);
    }
    race(() -> ConcurrentPrefixTree.builder().capacityTokens(Long.MAX_VALUE).blockSize(4).build(),
        setup, script, queryScopes, queries, rounds, minMatches);
  }

  /**
   * Applies {@code setup} (its leases are kept), then runs the writer for {@code rounds} rounds
   * of {@code script}, which must leave the answers as it found them, while two readers match
   * {@code queries} (at least {@code minMatches} matches), however long that takes on this
   * machine. The answers after every step were computed beforehand on a private tree; each
   * concurrent answer must be that of a state that existed while the match ran. Returns the
   * tree raced on.
   */
  private static ConcurrentPrefixTree race(java.util.function.Supplier<ConcurrentPrefixTree> trees, List<Op> setup,
      List<Op> script, long[] queryScopes, int[][] queries, int rounds, long minMatches)
      throws Exception {
    int queryCount = queries.length;
    // expected[state][q]: state k = after k operations of a round
    int n = script.size();
    int[][] expected = new int[n + 1][queryCount];
    ConcurrentPrefixTree reference = trees.get();
    java.util.ArrayDeque<ConcurrentPrefixTree.Lease> referencePins = new java.util.ArrayDeque<>();
    for (Op op : setup) {
      apply(reference, op, referencePins);
    }
    java.util.ArrayDeque<ConcurrentPrefixTree.Lease> referenceLeases = new java.util.ArrayDeque<>();
    for (int k = 0; k <= n; k++) {
      if (k > 0) {
        apply(reference, script.get(k - 1), referenceLeases);
      }
      for (int q = 0; q < queryCount; q++) {
        expected[k][q] = reference.match(queryScopes[q], queries[q]);
      }
    }
    assertTrue(Arrays.equals(expected[0], expected[n]), "the script does not end as it starts");

    ConcurrentPrefixTree tree = trees.get();
    java.util.ArrayDeque<ConcurrentPrefixTree.Lease> pins = new java.util.ArrayDeque<>();
    for (Op op : setup) {
      apply(tree, op, pins);
    }
    AtomicLong done = new AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    AtomicLong matches = new AtomicLong();
    CountDownLatch started = new CountDownLatch(1 + READERS);
    Thread writer = new Thread(() -> {
      started.countDown();
      java.util.ArrayDeque<ConcurrentPrefixTree.Lease> leases = new java.util.ArrayDeque<>();
      try {
        for (long g = 0; !stop.get(); g++) {
          if (g % n == 0) {
            leases.clear(); // none left, or no-ops after a final clear
          }
          apply(tree, script.get((int) (g % n)), leases);
          done.set(g + 1);
        }
      } catch (Throwable t) {
        failures.add(t);
      }
    }, "writer");
    List<Thread> readers = new ArrayList<>();
    for (int i = 0; i < READERS; i++) {
      int readerSeed = i;
      readers.add(new Thread(() -> {
        started.countDown();
        SplittableRandom rr = new SplittableRandom(readerSeed);
        try {
          while (!stop.get()) {
            int q = rr.nextInt(queryCount);
            long before = done.get();
            int got = queryScopes[q] == BlockHasher.ROOT_PARENT
                ? tree.match(queries[q]) : tree.match(queryScopes[q], queries[q]);
            long after = done.get();
            boolean ok = false;
            for (long g = before; g <= after + 1 && !ok; g++) {
              ok = expected[(int) (g % n)][q] == got;
            }
            if (!ok) {
              fail("match " + got + " for query " + q + " matches no state in ops " + before + ".."
                  + (after + 1));
            }
            matches.incrementAndGet();
          }
        } catch (Throwable t) {
          failures.add(t);
        }
      }, "reader-" + i));
    }
    writer.start();
    readers.forEach(Thread::start);
    started.await();
    long deadline = System.nanoTime() + TimeUnit.MINUTES.toNanos(5);
    while ((done.get() < (long) rounds * n || matches.get() < minMatches)
        && failures.isEmpty() && System.nanoTime() < deadline) {
      Thread.sleep(5); // polls the progress counters; the threads do not wait for it
    }
    stop.set(true);
    writer.join();
    for (Thread t : readers) {
      t.join();
    }
    if (!failures.isEmpty()) {
      throw new AssertionError("concurrent failure", failures.peek());
    }
    tree.checkInvariants();
    assertTrue(done.get() >= (long) rounds * n,
        "the writer ran " + rounds + " rounds of " + n + " operations: " + done.get());
    assertTrue(matches.get() >= minMatches, "readers ran: " + matches.get());
    return tree;
  }

  private static ConcurrentPrefixTree newTree() {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().capacityTokens(4000).blockSize(16)
        .build();
    t.addListener(new BlockEventListener() {});
    return t;
  }

  private static void apply(ConcurrentPrefixTree t, Op op,
      java.util.ArrayDeque<ConcurrentPrefixTree.Lease> leases) {
    if (op instanceof Insert i) {
      t.insert(i.scope(), i.tokens(), i.tokens().length);
    } else if (op instanceof Acquire a) {
      leases.push(t.acquire(a.scope(), a.tokens()));
    } else if (op instanceof Release) {
      if (!leases.isEmpty()) {
        leases.pop().release();
      }
    } else if (op instanceof Evict e) {
      t.evictTo(e.target());
    } else {
      t.clear();
    }
  }
}
