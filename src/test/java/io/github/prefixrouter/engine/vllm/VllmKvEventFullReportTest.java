package io.github.prefixrouter.engine.vllm;

import static io.github.prefixrouter.engine.vllm.GroupedEvents.removed;
import static io.github.prefixrouter.engine.vllm.GroupedEvents.stored;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
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
import net.jqwik.api.RandomDistribution;
import net.jqwik.api.Tuple;
import net.jqwik.api.statistics.Statistics;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * vLLM's full report mode: a request sent with {@code "kv_cache_report_mode": "full"} (in
 * {@code vllm_xargs}) makes vLLM publish, when it finds the request's prefix in its cache, a
 * {@code BlockStored} for the blocks it found, from the prompt's first block on (no parent),
 * though they were stored before and nothing removed them: the same physical blocks, announced
 * again. vLLM sends one {@code BlockRemoved} per physical block when it evicts it, so such an
 * announcement must not count as another copy of the block; a block vLLM computes again (the
 * last block of a prompt it holds whole) is another physical block, evicted on its own, and
 * must.
 */
class VllmKvEventFullReportTest {

  static final int B = 4;
  static final long H1 = 0x1111;
  static final long H2 = 0x2222;
  static final long H3 = 0x3333;
  static final int[] PROMPT = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  static final long GROUP = 0;

  private final ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(B);
  private final VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), B);
  private long seq;

  /** One engine step's batch: the events of one-event batches, in order. */
  static byte[] step(byte[]... oneEventBatches) {
    byte[][] events = new byte[oneEventBatches.length][];
    for (int i = 0; i < events.length; i++) {
      // [ts, [event]]: the event follows the array header, the 9-byte float and the events'
      // array header
      events[i] = Arrays.copyOfRange(oneEventBatches[i], 1 + 9 + 1, oneEventBatches[i].length);
    }
    return Batches.batch(events);
  }

  private void send(byte[]... oneEventBatches) {
    receiver.onMessage(seq++, step(oneEventBatches));
    tree.checkInvariants();
  }

  private static int[] tokens(int fromBlock, int toBlock) {
    return Arrays.copyOfRange(PROMPT, fromBlock * B, toBlock * B);
  }

  /** A kind of null: a vLLM that names the group but not its kind. */
  @ParameterizedTest(name = "maps {0}, kind {1}")
  @CsvSource(value = {"true,full_attention", "false,full_attention", "true,", "false,"})
  void aReannouncedBlockGoesWithItsOneRemoval(boolean maps, String kind) {
    // request A: a miss, its two whole blocks stored
    send(stored(maps, GROUP, kind, B, null, tokens(0, 2), H1, H2));
    // request B, full report: its prefix found, announced again; its third block stored
    send(stored(maps, GROUP, kind, B, null, tokens(0, 2), H1, H2),
        stored(maps, GROUP, kind, B, H2, tokens(2, 3), H3));
    // request C, full report: all three found
    send(stored(maps, GROUP, kind, B, null, tokens(0, 3), H1, H2, H3));
    assertEquals(12, tree.match(PROMPT));
    // vLLM evicts each physical block once
    send(removed(maps, GROUP, H3));
    assertEquals(8, tree.match(PROMPT), "vLLM no longer holds the third block");
    send(removed(maps, GROUP, H2), removed(maps, GROUP, H1));
    assertEquals(0, tree.match(PROMPT), "vLLM holds none of the prompt");
    assertEquals(0, tree.sizeTokens());
    assertEquals(0, tree.engineEventStats().unknownBlocks(), "every removal applied was held");
    VllmKvEventReceiver.Stats s = receiver.stats();
    assertEquals(5, s.reannouncedBlocks());
    assertEquals(2, s.storedEvents(), "A's store and B's third block");
    assertEquals(3, s.removedEvents());
    assertEquals(0, receiver.holders(), "nothing kept for blocks vLLM no longer holds");
  }

  @ParameterizedTest(name = "maps {0}, kind {1}")
  @CsvSource(value = {"true,full_attention", "false,full_attention", "true,", "false,"})
  void aBlockComputedAgainIsAnotherCopy(boolean maps, String kind) {
    send(stored(maps, GROUP, kind, B, null, tokens(0, 2), H1, H2));
    // the same two blocks, full report: vLLM uses at most the prompt less its last token, so
    // it finds the first block, announces it, and computes the second again into a block of
    // its own, stored under the same hash
    send(stored(maps, GROUP, kind, B, null, tokens(0, 1), H1),
        stored(maps, GROUP, kind, B, H1, tokens(1, 2), H2));
    send(removed(maps, GROUP, H2));
    assertEquals(8, tree.match(PROMPT), "vLLM still holds the other copy of the second block");
    send(removed(maps, GROUP, H2));
    assertEquals(4, tree.match(PROMPT));
    send(removed(maps, GROUP, H1));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(0, tree.engineEventStats().unknownBlocks());
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void aMirrorStartedLateLearnsTheBlocksAnnouncedAgain(boolean maps) {
    // vLLM held the first block before the node connected: the store continuing it cannot be
    // mirrored (its parent is unknown to the tree)
    send(stored(maps, GROUP, "full_attention", B, H1, tokens(1, 2), H2));
    assertEquals(0, tree.match(PROMPT));
    // a full-report request finds both
    send(stored(maps, GROUP, "full_attention", B, null, tokens(0, 2), H1, H2));
    assertEquals(8, tree.match(PROMPT));
    send(removed(maps, GROUP, H2));
    assertEquals(4, tree.match(PROMPT));
    send(removed(maps, GROUP, H1));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(0, tree.engineEventStats().unknownBlocks());
    assertEquals(0, receiver.stats().reannouncedBlocks(), "the first block was news");
    assertEquals(0, receiver.holders());
  }

  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void eachFullAttentionGroupHoldsItsOwnCopies(boolean maps) {
    for (long g = 0; g < 2; g++) { // two groups of full-attention layers, each its own blocks
      send(stored(maps, g, "full_attention", B, null, tokens(0, 2), H1, H2));
    }
    for (long g = 0; g < 2; g++) { // a full-report request finds both in both
      send(stored(maps, g, "full_attention", B, null, tokens(0, 2), H1, H2));
    }
    assertEquals(2, receiver.stats().storedEvents());
    assertEquals(4, receiver.stats().reannouncedBlocks());
    send(removed(maps, 0L, H2), removed(maps, 0L, H1));
    assertEquals(8, tree.match(PROMPT), "group 1 still holds both");
    // group 0 removes a block it holds no copy of: group 1's copy is not its to take
    send(removed(maps, 0L, H1));
    assertEquals(8, tree.match(PROMPT));
    assertEquals(1, receiver.stats().unmirroredRemovals());
    send(removed(maps, 1L, H2), removed(maps, 1L, H1));
    assertEquals(0, tree.match(PROMPT));
    assertEquals(0, tree.engineEventStats().unknownBlocks());
  }

  /**
   * A one-block prompt vLLM holds is computed again (vLLM keeps the last token to compute)
   * into a block of its own: a chain start naming a block held, as an announcement is. It is
   * taken as the same block, so the mirror lets the block go at the first of its two removals,
   * while vLLM still holds the other copy: it holds less than vLLM, never more.
   */
  @ParameterizedTest(name = "maps {0}")
  @ValueSource(booleans = {true, false})
  void aChainStartComputedAgainIsTakenAsTheSameBlock(boolean maps) {
    send(stored(maps, GROUP, "full_attention", B, null, tokens(0, 1), H1));
    send(stored(maps, GROUP, "full_attention", B, null, tokens(0, 1), H1));
    assertEquals(1, receiver.stats().reannouncedBlocks());
    send(removed(maps, GROUP, H1));
    assertEquals(0, tree.match(PROMPT), "vLLM holds one copy more than the mirror took");
    send(removed(maps, GROUP, H1));
    assertEquals(1, receiver.stats().unmirroredRemovals());
    assertEquals(0, tree.engineEventStats().unknownBlocks());
  }

  // ---- a vLLM with full report on some requests, against what it holds ----

  static final int PB = 2;

  /** A request: its prompt (tokens 1 or 2) and whether it asks for the full report. */
  record Request(List<Integer> prompt, boolean full) {}

  /** Evict the leaf at {@code pick} (mod their number), one physical copy of it. */
  record Evict(int pick) {}

  /** Publish the step's events. */
  record Flush() {}

  @Provide
  Arbitrary<List<Object>> runs() {
    Arbitrary<Integer> token = Arbitraries.integers().between(1, 2);
    Arbitrary<List<Integer>> prompt = Arbitraries.frequencyOf(
        Tuple.of(1, token.list().ofSize(PB)), // one block, computed again if held
        Tuple.of(20, token.list().ofMinSize(PB + 1).ofMaxSize(4 * PB + 1)));
    Arbitrary<Object> request = Combinators.combine(
            prompt, Arbitraries.integers().between(0, 3).map(x -> x > 0))
        .as(Request::new);
    Arbitrary<Object> op = Arbitraries.frequencyOf(
        Tuple.of(6, request),
        Tuple.of(5, Arbitraries.integers().between(0, 50).map(Evict::new)),
        Tuple.of(4, Arbitraries.just(new Flush())));
    return op.list().ofMaxSize(60).withSizeDistribution(RandomDistribution.uniform());
  }

  static long hash(List<Integer> path) {
    return VllmKvEventMirrorProperties.hash(path);
  }

  /**
   * vLLM's prefix cache as its events show it: the physical copies of each block (by its token
   * path), a request's prefix found up to its prompt less the last token, the rest computed
   * into blocks of its own; evictions of blocks no held block continues. Its events are those
   * vLLM publishes, one group of full attention.
   */
  static final class Engine {
    final Map<List<Integer>, Integer> copies = new HashMap<>();
    final List<byte[]> pending = new ArrayList<>();
    final boolean maps;
    final String kind;
    /** A chain start stored again as another copy (vLLM computing a one-block prompt again). */
    boolean chainStartCopied;
    /** Blocks announced again. */
    long reannounced;

    Engine(boolean maps, String kind) {
      this.maps = maps;
      this.kind = kind;
    }

    static List<Integer> head(List<Integer> prompt, int blocks) {
      return List.copyOf(prompt.subList(0, blocks * PB));
    }

    byte[] store(List<Integer> prompt, int from, int to) {
      long[] hashes = new long[to - from];
      for (int i = from; i < to; i++) {
        hashes[i - from] = hash(head(prompt, i + 1));
      }
      int[] tokens = prompt.subList(from * PB, to * PB).stream().mapToInt(Integer::intValue)
          .toArray();
      Long parent = from == 0 ? null : hash(head(prompt, from));
      return stored(maps, GROUP, kind, PB, parent, tokens, hashes);
    }

    void request(Request r) {
      int n = r.prompt().size() / PB;
      int usable = (r.prompt().size() - 1) / PB; // vLLM computes the last token again
      int found = 0;
      while (found < usable && copies.containsKey(head(r.prompt(), found + 1))) {
        found++;
      }
      if (r.full() && found > 0) {
        pending.add(store(r.prompt(), 0, found));
        reannounced += found;
      }
      if (found < n) {
        if (found == 0 && copies.containsKey(head(r.prompt(), 1))) {
          chainStartCopied = true;
        }
        for (int i = found; i < n; i++) {
          copies.merge(head(r.prompt(), i + 1), 1, Integer::sum);
        }
        pending.add(store(r.prompt(), found, n));
      }
    }

    void evict(int pick) {
      List<List<Integer>> leaves = new ArrayList<>();
      for (List<Integer> p : copies.keySet()) {
        boolean continued = copies.keySet().stream()
            .anyMatch(q -> q.size() > p.size() && q.subList(0, p.size()).equals(p));
        if (!continued) {
          leaves.add(p);
        }
      }
      if (leaves.isEmpty()) {
        return;
      }
      leaves.sort((a, b) -> a.toString().compareTo(b.toString()));
      List<Integer> victim = leaves.get(pick % leaves.size());
      copies.computeIfPresent(victim, (k, c) -> c == 1 ? null : c - 1);
      pending.add(removed(maps, GROUP, hash(victim)));
    }

    byte[] flush() {
      byte[] batch = step(pending.toArray(new byte[0][]));
      pending.clear();
      return batch;
    }
  }

  /**
   * After every step the tree holds no block vLLM dropped, and exactly vLLM's blocks as long
   * as no request stored a chain start vLLM already held (a one-block prompt computed again:
   * on the wire the same as that block announced again, so taken as the same block, which
   * can only make the mirror hold less).
   */
  @Property
  void theMirrorIsVllmsCacheWhateverTheRequestsReport(
      @ForAll("runs") List<Object> run, @ForAll boolean maps, @ForAll boolean kindReported) {
    Engine engine = new Engine(maps, kindReported ? "full_attention" : null);
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(PB);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), PB);
    long seq = 0;
    int full = 0;
    int exact = 0;
    for (Object op : run) {
      if (op instanceof Request r) {
        full += r.full() ? 1 : 0;
        engine.request(r);
      } else if (op instanceof Evict e) {
        engine.evict(e.pick());
      } else {
        receiver.onMessage(seq++, engine.flush());
        tree.checkInvariants();
        Set<Long> held = new HashSet<>();
        for (long h : tree.blockHashes()) {
          held.add(h);
        }
        Set<Long> vllm = new HashSet<>(); // the tree's hashes of vLLM's blocks
        for (List<Integer> p : engine.copies.keySet()) {
          long[] chain = tree.hasher().chain(p.stream().mapToInt(Integer::intValue).toArray());
          vllm.add(chain[chain.length - 1]);
        }
        assertTrue(vllm.containsAll(held), "the tree holds a block vLLM dropped");
        if (!engine.chainStartCopied) {
          assertEquals(vllm, held, "the tree is vLLM's cache");
          assertEquals(engine.reannounced, receiver.stats().reannouncedBlocks());
          assertEquals(0, tree.engineEventStats().unknownBlocks(), "a removal of a block not held");
          exact++;
        }
      }
    }
    Statistics.label("full-report requests").collect(Math.min(full, 4));
    Statistics.label("blocks announced again").collect(Math.min(engine.reannounced, 4));
    Statistics.label("chain start copied").collect(engine.chainStartCopied);
    Statistics.label("steps checked exactly").collect(Math.min(exact, 5));
  }
}
