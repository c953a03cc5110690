package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The local tree's block events feed the summary; peers' estimates match the owner's tree. */
class TreeIntegrationTest {

  static final int BLOCK = 16;

  static int[] prompt(SplittableRandom r, int[] shared, int suffix) {
    int[] p = new int[shared.length + suffix];
    System.arraycopy(shared, 0, p, 0, shared.length);
    for (int i = shared.length; i < p.length; i++) {
      p[i] = r.nextInt(100_000);
    }
    return p;
  }

  @Test
  void peersEstimateExactlyTheBlocksTheOwnersTreeHolds() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(1)).deadAfter(Duration.ofSeconds(3))
        .forgetAfter(Duration.ofSeconds(6)).build();
    SimCluster c = SimCluster.of(3, 21, config);
    c.delayNanos = 2_000_000;
    c.loss = 0.2;
    List<ConcurrentPrefixTree> trees = new ArrayList<>();
    for (GossipEngine e : c.nodes) {
      ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().blockSize(BLOCK)
          .capacityTokens(3_000).build();
      t.addListener(e.localSummary());
      trees.add(t);
    }
    SplittableRandom r = new SplittableRandom(5);
    int[][] subjects = new int[5][];
    for (int s = 0; s < subjects.length; s++) {
      subjects[s] = prompt(r, new int[0], 100 + r.nextInt(400));
    }
    List<int[]> prompts = new ArrayList<>();
    for (int k = 0; k < 200; k++) {
      int[] p = prompt(r, subjects[r.nextInt(subjects.length)], 20 + r.nextInt(80));
      prompts.add(p);
      trees.get(r.nextInt(3)).insert(p); // capacity forces LRU evictions along the way
      c.runFor(r.nextLong(c.interval()));
    }
    c.loss = 0;
    assertTrue(c.runUntilConverged(100) >= 0, c.firstDivergence());
    GossipEngine n0 = c.nodes.get(0);
    int[] out = new int[n0.slotCapacity()];
    GossipView view = n0.view();
    for (int[] p : prompts) {
      long[] chain = trees.get(0).hasher().chain(p);
      n0.leadingBlocks(chain, chain.length, out);
      for (int owner = 1; owner < 3; owner++) {
        String id = c.nodes.get(owner).self().nodeId();
        PeerView pv = view.peers().stream().filter(v -> v.address().nodeId().equals(id))
            .findFirst().orElseThrow();
        int cachedTokens = trees.get(owner).match(p);
        assertEquals(cachedTokens / BLOCK, out[pv.slot()], "owner " + owner);
      }
    }
  }

  /** Request threads query while the gossip thread applies messages: no torn or invented reads. */
  @Test
  void concurrentQueriesSeeOnlyStatesThatExisted() throws Exception {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofSeconds(5)).deadAfter(Duration.ofSeconds(10))
        .forgetAfter(Duration.ofSeconds(20)).build();
    SimCluster c = SimCluster.of(2, 8, config);
    c.delayNanos = 1_000_000;
    c.runFor(10 * c.interval());
    GossipEngine reader = c.nodes.get(0);
    GossipEngine owner = c.nodes.get(1);
    int slot = reader.view().peers().get(0).slot();
    long[] chain = new long[2_000];
    for (int i = 0; i < chain.length; i++) {
      chain[i] = i * 0x9E3779B97F4A7C15L + 1;
    }
    AtomicInteger stored = new AtomicInteger();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    AtomicInteger queries = new AtomicInteger();
    List<Thread> readers = new ArrayList<>();
    for (int t = 0; t < 2; t++) {
      Thread th = new Thread(() -> {
        int[] out = new int[reader.slotCapacity()];
        int last = 0;
        try {
          while (stored.get() < chain.length || last < chain.length) {
            reader.leadingBlocks(chain, chain.length, out);
            int seen = out[slot];
            if (seen < last || seen > stored.get()) {
              throw new AssertionError("saw " + seen + " after " + last + ", stored "
                  + stored.get());
            }
            last = seen;
            reader.view();
            queries.incrementAndGet();
          }
        } catch (Throwable e) {
          failure.set(e);
        }
      });
      th.start();
      readers.add(th);
    }
    for (int i = 0; i < chain.length; i += 50) {
      owner.localSummary().onStored(java.util.Arrays.copyOfRange(chain, i, i + 50));
      stored.set(i + 50);
      c.runFor(c.interval());
    }
    c.runFor(20 * c.interval());
    for (Thread th : readers) {
      th.join(30_000);
    }
    if (failure.get() != null) {
      throw new AssertionError(failure.get());
    }
    assertTrue(queries.get() > 0);
  }
}
