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
   * Runs the writer for {@code rounds} rounds of its script while two readers match (at least
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
    // expected[state][q]: state k = after k operations of a round
    int n = script.size();
    int[][] expected = new int[n + 1][QUERIES];
    ConcurrentPrefixTree reference = newTree();
    java.util.ArrayDeque<ConcurrentPrefixTree.Lease> referenceLeases = new java.util.ArrayDeque<>();
    for (int k = 0; k <= n; k++) {
      if (k > 0) {
        apply(reference, script.get(k - 1), referenceLeases);
      }
      for (int q = 0; q < QUERIES; q++) {
        expected[k][q] = reference.match(queryScopes[q], queries[q]);
      }
    }

    ConcurrentPrefixTree tree = newTree();
    AtomicLong done = new AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    AtomicLong matches = new AtomicLong();
    CountDownLatch started = new CountDownLatch(3);
    Thread writer = new Thread(() -> {
      started.countDown();
      java.util.ArrayDeque<ConcurrentPrefixTree.Lease> leases = new java.util.ArrayDeque<>();
      try {
        for (long g = 0; !stop.get(); g++) {
          if (g % n == 0) {
            leases.clear(); // the script's final clear made them no-ops
          }
          apply(tree, script.get((int) (g % n)), leases);
          done.set(g + 1);
        }
      } catch (Throwable t) {
        failures.add(t);
      }
    }, "writer");
    List<Thread> readers = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      int readerSeed = i;
      readers.add(new Thread(() -> {
        started.countDown();
        SplittableRandom rr = new SplittableRandom(readerSeed);
        try {
          while (!stop.get()) {
            int q = rr.nextInt(QUERIES);
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
    while ((done.get() < (long) rounds * n || matches.get() < MIN_MATCHES)
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
    assertTrue(matches.get() >= MIN_MATCHES, "readers ran: " + matches.get());
    assertEquals(0, tree.listenerFailures());
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
