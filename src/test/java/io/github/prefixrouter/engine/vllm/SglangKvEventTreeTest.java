package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.RandomDistribution;
import net.jqwik.api.Tuple;

/**
 * The receiver feeding an engine-driven tree from a stream shaped like SGLang's (its
 * {@code --kv-events-config} publisher speaks vLLM's format): a paged radix cache whose nodes
 * hold whole pages, one {@code BlockStored} per page with the previous page as its parent, nodes
 * split without any event when a request diverges inside one, and a leaf node evicted in one
 * {@code BlockRemoved} naming its pages from the first on. The tree must mirror exactly the
 * pages the cache holds, with no event it cannot apply.
 */
class SglangKvEventTreeTest {

  /** SGLang's {@code --page-size}: the node's block size. */
  static final int P = 2;

  /** A paged radix cache of at most {@code capacity} pages, LRU over leaf nodes. */
  static final class Cache {
    static final class Node {
      final List<Integer> key = new ArrayList<>(); // whole pages
      final List<Long> hashes = new ArrayList<>(); // one per page
      final Map<List<Integer>, Node> children = new LinkedHashMap<>(); // by first page
      Node parent;
      long lastUse;

      int pages() {
        return hashes.size();
      }
    }

    final Node root = new Node();
    final int capacity;
    final List<byte[]> pending = new ArrayList<>();
    long clock;
    long seq;

    Cache(int capacity) {
      this.capacity = capacity;
    }

    /** A page's hash, chained through the one before (as SGLang's are, by SHA-256). */
    static long hash(long before, List<Integer> page) {
      long h = before * 0x9E3779B97F4A7C15L + 0x632BE59BD9B4E019L;
      for (int t : page) {
        h = (h ^ t) * 0xBF58476D1CE4E5B9L;
        h ^= h >>> 31;
      }
      return h == 0 ? 1 : h;
    }

    static List<Integer> page(List<Integer> key, int i) {
      return List.copyOf(key.subList(i * P, (i + 1) * P));
    }

    /** Caches the whole pages of {@code prompt}, then evicts down to the capacity. */
    void request(int[] prompt) {
      List<Integer> tokens = new ArrayList<>();
      for (int i = 0; i + P <= prompt.length; i += P) {
        for (int j = 0; j < P; j++) {
          tokens.add(prompt[i + j]);
        }
      }
      clock++;
      Node node = root;
      int pos = 0; // in pages
      int all = tokens.size() / P;
      while (pos < all) {
        Node child = node.children.get(page(tokens, pos));
        if (child == null) {
          Node n = new Node();
          n.parent = node;
          n.lastUse = clock;
          long before = node == root ? 0 : node.hashes.get(node.pages() - 1);
          Long parent = node == root ? null : before;
          for (int i = pos; i < all; i++) {
            List<Integer> pg = page(tokens, i);
            long h = hash(before, pg);
            n.key.addAll(pg);
            n.hashes.add(h);
            // one BlockStored per page: [tag, [hash], parent, tokens, page size, nil, "GPU"]
            pending.add(Batches.stored(parent, new long[] {h},
                pg.stream().mapToInt(Integer::intValue).toArray(), P));
            parent = h;
            before = h;
          }
          node.children.put(page(n.key, 0), n);
          node = n;
          break;
        }
        int k = 0;
        while (k < child.pages() && pos + k < all
            && page(child.key, k).equals(page(tokens, pos + k))) {
          k++;
        }
        if (k < child.pages()) { // diverges inside the node: split it, no event
          Node mid = new Node();
          mid.parent = node;
          mid.key.addAll(child.key.subList(0, k * P));
          mid.hashes.addAll(child.hashes.subList(0, k));
          List<Integer> restKey = new ArrayList<>(child.key.subList(k * P, child.key.size()));
          List<Long> restHashes = new ArrayList<>(child.hashes.subList(k, child.pages()));
          child.key.clear();
          child.key.addAll(restKey);
          child.hashes.clear();
          child.hashes.addAll(restHashes);
          child.parent = mid;
          mid.lastUse = child.lastUse;
          mid.children.put(page(child.key, 0), child);
          node.children.put(page(mid.key, 0), mid);
          child = mid;
        }
        child.lastUse = clock;
        node = child;
        pos += k;
      }
      for (Node n = node; n != root; n = n.parent) {
        n.lastUse = clock;
      }
      while (pages(root) > capacity) {
        evictOne();
      }
    }

    /** Evicts the least recently used leaf node: one BlockRemoved naming its pages in order. */
    void evictOne() {
      Node victim = null;
      for (Node leaf : leaves(root, new ArrayList<>())) {
        if (victim == null || leaf.lastUse < victim.lastUse) {
          victim = leaf;
        }
      }
      victim.parent.children.remove(page(victim.key, 0));
      pending.add(Batches.removed(victim.hashes.stream().mapToLong(Long::longValue).toArray()));
    }

    /** SGLang's flush_cache. */
    void flushCache() {
      root.children.clear();
      pending.add(Batches.cleared());
    }

    static List<Node> leaves(Node n, List<Node> out) {
      if (n.children.isEmpty() && n.parent != null) {
        out.add(n);
      }
      for (Node c : n.children.values()) {
        leaves(c, out);
      }
      return out;
    }

    static int pages(Node n) {
      int p = n.pages();
      for (Node c : n.children.values()) {
        p += pages(c);
      }
      return p;
    }

    /** The token path, from the prompt start, of every cached page. */
    Set<List<Integer>> paths() {
      Set<List<Integer>> out = new HashSet<>();
      collect(root, List.of(), out);
      return out;
    }

    private static void collect(Node n, List<Integer> above, Set<List<Integer>> out) {
      List<Integer> path = new ArrayList<>(above);
      for (int i = 0; i < n.pages(); i++) {
        path.addAll(page(n.key, i));
        out.add(List.copyOf(path));
      }
      for (Node c : n.children.values()) {
        collect(c, path, out);
      }
    }

    /** The publisher's next message: the batch of events since the last. */
    byte[] flush() {
      byte[] batch = Batches.batch(pending.toArray(new byte[0][]));
      pending.clear();
      seq++;
      return batch;
    }
  }

  sealed interface Op permits Request, FlushCache, Publish {}

  record Request(int[] prompt) implements Op {
    @Override
    public String toString() {
      return "request" + Arrays.toString(prompt);
    }
  }

  record FlushCache() implements Op {}

  record Publish() implements Op {}

  @Provide
  Arbitrary<List<Op>> ops() {
    Arbitrary<Op> op = Arbitraries.frequencyOf(
        Tuple.of(10, Arbitraries.integers().between(1, 3).array(int[].class).ofMaxSize(13)
            .map(Request::new)),
        Tuple.of(1, Arbitraries.just(new FlushCache())),
        Tuple.of(6, Arbitraries.just(new Publish())));
    return op.list().ofMaxSize(60).withSizeDistribution(RandomDistribution.uniform());
  }

  /**
   * After every message the tree holds exactly the pages the cache holds, and at the end no
   * event was one the tree could not apply: no unknown parent or block, nothing malformed or
   * conflicting, no block size the receiver refused.
   */
  @Property
  void theTreeMirrorsSglangsPagedRadixCache(@ForAll("ops") List<Op> ops) {
    ConcurrentPrefixTree tree = ConcurrentPrefixTree.engineDriven(P);
    VllmKvEventReceiver receiver = new VllmKvEventReceiver(tree.engineEvents(), P);
    Cache cache = new Cache(8);
    for (Op op : ops) {
      if (op instanceof Request r) {
        cache.request(r.prompt());
      } else if (op instanceof FlushCache) {
        cache.flushCache();
      } else {
        receiver.onMessage(cache.seq, cache.flush());
        VllmKvEventTreeTest.assertHolds(tree, cache.paths());
      }
    }
    receiver.onMessage(cache.seq, cache.flush());
    VllmKvEventTreeTest.assertHolds(tree, cache.paths());
    CacheEventStats s = tree.engineEventStats();
    assertEquals(new CacheEventStats(s.storedEvents(), s.removedEvents(), s.clearedEvents(),
        0, 0, 0, 0, 0, 0, 0, 0), s, "events the tree could not apply");
    assertEquals(0, receiver.stats().blockSizeMismatches());
    assertEquals(0, receiver.stats().gaps());
  }

  /**
   * A request diverging inside a cached node splits it (no event), and its own pages continue
   * the last shared page; evicting a leaf node removes all its pages in one event.
   */
  @Example
  void aSplitNodeAndAWholeNodeEviction() {
    theTreeMirrorsSglangsPagedRadixCache(List.of(
        new Request(new int[] {1, 1, 2, 2, 3, 3, 1, 2}), new Publish(),
        new Request(new int[] {1, 1, 2, 2, 2, 2, 3}), new Publish(),
        new Request(new int[] {3, 3, 3, 3, 3, 3, 3, 3, 3, 3}), new Publish()));
  }
}
