package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.tree.ConcurrentPrefixTreeTest.Replay;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Several threads write at once (inserts, leases taken and released, evictions, clears, in three
 * scopes) while another reads: the events replayed from creation, or from a snapshot taken
 * mid-run, give exactly the blocks held at the end, and no lease stays pinned once all are
 * released. And an engine-driven tree, fed a fixed stream of engine events (stores continuing
 * held blocks, copies, removals, clears, drops over the mirror limit) while two threads match:
 * every match equals that of a state the stream left while it ran, and is whole blocks.
 */
class ConcurrentPrefixTreeWritersTest {

  static final long[] SCOPES = {
    BlockHasher.ROOT_PARENT, BlockHasher.scopeRoot("lora-a", ""), BlockHasher.scopeRoot("", "t1")
  };

  static final int WRITERS = 3;
  static final int OPS_PER_WRITER = 4_000;

  @Test
  void concurrentWritersKeepEventsLeasesAndInvariants() throws Exception {
    for (long seed = 1; seed <= 2; seed++) {
      run(seed);
    }
  }

  @Test
  void engineDrivenMatchesSeeOnlyStatesThatExisted() throws Exception {
    int b = 4;
    SplittableRandom r = new SplittableRandom(7);
    BlockHasher engineHasher = new BlockHasher(b, 0x5eed); // the engine's own hashes
    int[][] prompts = new int[12][];
    for (int i = 0; i < prompts.length; i++) {
      prompts[i] = r.ints(b * (2 + r.nextInt(40)), 0, 3).toArray(); // shared first tokens
      if (i % 2 == 0) {
        prompts[i][0] = 10 + i; // and others: the root holds a child table
      }
    }
    List<java.util.function.Consumer<io.github.prefixrouter.spi.CacheEventListener>> script =
        new ArrayList<>();
    for (int i = 0; i < 2_000; i++) {
      int[] p = prompts[r.nextInt(prompts.length)];
      long[] h = engineHasher.chain(p);
      int roll = r.nextInt(100);
      if (roll < 55) { // a prompt's blocks, in one or two events
        int k = 1 + r.nextInt(h.length);
        int[] first = Arrays.copyOf(p, k * b);
        long[] firstHashes = Arrays.copyOf(h, k);
        int[] rest = Arrays.copyOfRange(p, k * b, p.length);
        long[] restHashes = Arrays.copyOfRange(h, k, h.length);
        script.add(l -> l.onBlocksStored(
            io.github.prefixrouter.spi.CacheEventListener.NO_PARENT, firstHashes, first));
        if (restHashes.length > 0) {
          script.add(l -> l.onBlocksStored(firstHashes[k - 1], restHashes, rest));
        }
      } else if (roll < 98) { // the last blocks of a prompt, last first
        int from = r.nextInt(h.length);
        long[] gone = new long[h.length - from];
        for (int j = 0; j < gone.length; j++) {
          gone[j] = h[h.length - 1 - j];
        }
        script.add(l -> l.onBlocksRemoved(gone));
      } else {
        script.add(io.github.prefixrouter.spi.CacheEventListener::onAllCleared);
      }
    }
    script.add(io.github.prefixrouter.spi.CacheEventListener::onAllCleared);
    int n = script.size();
    int[][] queries = new int[16][];
    for (int q = 0; q < queries.length; q++) {
      int[] p = prompts[q % prompts.length];
      queries[q] = Arrays.copyOf(p, 1 + r.nextInt(p.length));
    }
    int[][] expected = new int[n + 1][queries.length];
    ConcurrentPrefixTree reference = engineTree(b);
    for (int k = 0; k <= n; k++) {
      if (k > 0) {
        script.get(k - 1).accept(reference.engineEvents());
      }
      for (int q = 0; q < queries.length; q++) {
        expected[k][q] = reference.match(queries[q]);
      }
    }
    assertTrue(reference.engineEventStats().overflowBlocks() > 0, "the script never overflows");

    ConcurrentPrefixTree tree = engineTree(b);
    java.util.concurrent.atomic.AtomicLong done = new java.util.concurrent.atomic.AtomicLong();
    java.util.concurrent.atomic.AtomicLong matches = new java.util.concurrent.atomic.AtomicLong();
    AtomicBoolean stop = new AtomicBoolean();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    Thread writer = new Thread(() -> {
      try {
        for (long g = 0; g < 10L * n && !stop.get(); g++) {
          script.get((int) (g % n)).accept(tree.engineEvents());
          done.set(g + 1);
        }
      } catch (Throwable t) {
        failures.add(t);
      } finally {
        stop.set(true);
      }
    }, "engine");
    List<Thread> readers = new ArrayList<>();
    for (int i = 0; i < 2; i++) {
      SplittableRandom rr = new SplittableRandom(i);
      readers.add(new Thread(() -> {
        try {
          while (!stop.get()) {
            int q = rr.nextInt(queries.length);
            long before = done.get();
            int got = tree.match(queries[q]);
            long after = done.get();
            boolean ok = false;
            for (long g = before; g <= after + 1 && !ok; g++) {
              ok = expected[(int) (g % n)][q] == got;
            }
            if (!ok || got % b != 0) {
              throw new AssertionError("match " + got + " for query " + q
                  + " matches no state in events " + before + ".." + (after + 1));
            }
            matches.incrementAndGet();
          }
        } catch (Throwable t) {
          failures.add(t);
          stop.set(true);
        }
      }, "reader-" + i));
    }
    writer.start();
    readers.forEach(Thread::start);
    writer.join();
    for (Thread t : readers) {
      t.join();
    }
    if (!failures.isEmpty()) {
      throw new AssertionError("concurrent failure", failures.peek());
    }
    assertTrue(matches.get() > 1_000, "readers ran: " + matches.get());
    tree.checkInvariants();
    assertEquals(0, tree.sizeTokens()); // the script ends with a clear
  }

  private static ConcurrentPrefixTree engineTree(int blockSize) {
    ConcurrentPrefixTree t = ConcurrentPrefixTree.builder()
        .mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(blockSize)
        .mirrorLimitTokens(300).build();
    t.addListener(new BlockEventListener() {});
    return t;
  }

  private void run(long seed) throws Exception {
    ConcurrentPrefixTree tree =
        ConcurrentPrefixTree.builder().capacityTokens(3_000).blockSize(8).build();
    Replay fromStart = new Replay();
    tree.addListener(fromStart);
    AtomicReference<Recorder> late = new AtomicReference<>();
    AtomicReference<long[]> lateSnapshot = new AtomicReference<>();
    ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
    AtomicBoolean stop = new AtomicBoolean();
    CyclicBarrier start = new CyclicBarrier(WRITERS + 1);
    SplittableRandom shared = new SplittableRandom(seed);
    int[][] bases = new int[5][];
    for (int i = 0; i < bases.length; i++) {
      bases[i] = shared.ints(300, 0, 20).toArray();
    }
    List<Thread> writers = new ArrayList<>();
    for (int w = 0; w < WRITERS; w++) {
      SplittableRandom r = shared.split();
      int id = w;
      writers.add(new Thread(() -> {
        ArrayDeque<ConcurrentPrefixTree.Lease> leases = new ArrayDeque<>();
        try {
          start.await();
          for (int i = 0; i < OPS_PER_WRITER; i++) {
            if (id == 0 && i == OPS_PER_WRITER / 2) {
              Recorder l = new Recorder();
              lateSnapshot.set(tree.addListenerWithSnapshot(l));
              late.set(l);
            }
            int roll = r.nextInt(100);
            long scope = SCOPES[r.nextInt(SCOPES.length)];
            int[] s = Arrays.copyOf(bases[r.nextInt(bases.length)], 1 + r.nextInt(299));
            for (int k = r.nextInt(s.length); k < s.length; k += 1 + r.nextInt(30)) {
              s[k] = r.nextInt(20);
            }
            if (roll < 60) {
              tree.insert(scope, s, s.length);
            } else if (roll < 75) {
              leases.push(tree.acquire(scope, s));
            } else if (roll < 92) {
              if (!leases.isEmpty()) {
                leases.pop().release();
              }
            } else if (roll < 99) {
              tree.evictTo(r.nextInt(3_000));
            } else {
              tree.clear();
            }
          }
          while (!leases.isEmpty()) {
            leases.pop().close();
          }
        } catch (Throwable t) {
          failures.add(t);
        }
      }, "writer-" + w));
    }
    Thread reader = new Thread(() -> {
      SplittableRandom r = new SplittableRandom(seed + 100);
      try {
        while (!stop.get()) {
          int[] q = bases[r.nextInt(bases.length)];
          int got = tree.match(SCOPES[r.nextInt(SCOPES.length)], q);
          if (got < 0 || got > q.length) {
            throw new AssertionError("match " + got + " of a " + q.length + "-token query");
          }
        }
      } catch (Throwable t) {
        failures.add(t);
      }
    }, "reader");
    writers.forEach(Thread::start);
    reader.start();
    start.await();
    for (Thread t : writers) {
      t.join(60_000);
    }
    stop.set(true);
    reader.join(10_000);
    if (!failures.isEmpty()) {
      throw new AssertionError("concurrent failure, seed " + seed, failures.peek());
    }
    tree.checkInvariants();
    assertEquals(0, tree.pinnedTokens(), "tokens left pinned, seed " + seed);
    assertTrue(tree.sizeTokens() <= tree.capacityTokens(), "over capacity, seed " + seed);
    assertEquals(0, tree.listenerFailures());
    long[] held = tree.blockHashes();
    Arrays.sort(held);
    fromStart.assertConsistent("seed " + seed);
    assertArrayEquals(held, sorted(fromStart.held), "replayed from creation, seed " + seed);
    Replay l = new Replay();
    l.onStored(lateSnapshot.get());
    late.get().replayInto(l);
    l.assertConsistent("seed " + seed);
    assertArrayEquals(held, sorted(l.held), "snapshot plus replay, seed " + seed);
    // evicting everything reports every block held, exactly once
    tree.evictTo(0);
    assertEquals(0, tree.sizeTokens());
    fromStart.assertConsistent("after evicting all, seed " + seed);
    assertEquals(0, fromStart.held.size());
  }

  /** Records the events it receives, to replay them later onto the snapshot. */
  static final class Recorder implements BlockEventListener {
    final List<Runnable> events = new ArrayList<>();
    private Replay target;

    @Override
    public synchronized void onStored(long[] hashes) {
      events.add(() -> target.onStored(hashes));
    }

    @Override
    public synchronized void onEvicted(long[] hashes) {
      events.add(() -> target.onEvicted(hashes));
    }

    @Override
    public synchronized void onCleared() {
      events.add(() -> target.onCleared());
    }

    synchronized void replayInto(Replay r) {
      target = r;
      events.forEach(Runnable::run);
    }
  }

  private static long[] sorted(java.util.Set<Long> s) {
    long[] a = s.stream().mapToLong(Long::longValue).toArray();
    Arrays.sort(a);
    return a;
  }
}
