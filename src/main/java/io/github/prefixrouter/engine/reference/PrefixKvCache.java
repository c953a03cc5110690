package io.github.prefixrouter.engine.reference;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.internal.engine.ParentsFirst;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The reference engine's prefix KV cache: full blocks of {@code blockSize} tokens with their
 * keys and values for every layer, keyed by a chained block hash (a block's hash covers its
 * parent's hash and its own tokens, as in vLLM), bounded to {@code capacityBlocks} blocks and
 * evicted least-recently-used, leaves first. Like vLLM's, the hash of a prompt's first block
 * also covers the request's {@link CacheScope} (LoRA adapter, cache salt), so a prefix cached in
 * one scope is never a hit in another; stores of a chain's first blocks report the scope.
 *
 * <p>Design note: a request touches its matched path deepest block first and the root last, so
 * a parent is mostly more recently used than its children; not always (a store touches the
 * block it continues after its new blocks, but not that block's own parents). Eviction
 * therefore takes the least recently used block that has no children (a leaf), and never
 * orphans a cached block. Every store
 * and eviction is reported to the {@link CacheEventListener} while the cache lock is held, so
 * listeners see events in the order they took effect. All methods are synchronized; the cached
 * arrays are never modified after a block is stored, so readers copy them without the lock.
 */
final class PrefixKvCache {

  /** One cached block. Arrays are immutable once stored. */
  static final class Block {
    final long hash;
    final long parent;
    /** The scope of the request that stored it: that of its chain when it starts one. */
    final CacheScope scope;
    final int[] tokens;
    final float[][] keys; // [layer][blockSize * dim]
    final float[][] values;
    int children;

    Block(long hash, long parent, CacheScope scope, int[] tokens, float[][] keys,
        float[][] values) {
      this.hash = hash;
      this.parent = parent;
      this.scope = scope;
      this.tokens = tokens;
      this.keys = keys;
      this.values = values;
    }
  }

  private final int blockSize;
  private final int capacityBlocks;
  private final LinkedHashMap<Long, Block> blocks = new LinkedHashMap<>(16, 0.75f, true);
  private CacheEventListener listener = new CacheEventListener() {};
  private long stored;
  private long evicted;

  PrefixKvCache(int blockSize, int capacityBlocks) {
    this.blockSize = blockSize;
    this.capacityBlocks = capacityBlocks;
  }

  int blockSize() {
    return blockSize;
  }

  /**
   * Reports later changes to {@code l}, after telling it of the blocks cached now (one store
   * each, every block after its parent), so that replaying its events gives the cached blocks
   * also when it is set after requests ran.
   */
  synchronized void setListener(CacheEventListener l) {
    this.listener = l;
    // LinkedHashMap.get would touch a block: the cache's order must not change here
    Map<Long, Block> byHash = new HashMap<>();
    for (Block b : blocks.values()) {
      byHash.put(b.hash, b);
    }
    for (Block b : ParentsFirst.order(blocks.values(), b -> byHash.get(b.parent))) {
      try {
        l.onBlocksStored(b.scope, b.parent, new long[] {b.hash}, b.tokens.clone());
      } catch (Throwable e) { // a checked exception undeclared too
        listenerFailed(e);
      }
    }
  }

  /**
   * The hash of a block continuing {@code parent} with {@code tokens[from, from + blockSize)};
   * never {@link CacheEventListener#NO_PARENT}.
   */
  static long chain(long parent, int[] tokens, int from, int blockSize) {
    long h = parent * 0x9E3779B97F4A7C15L + 0x632BE59BD9B4E019L;
    for (int i = from; i < from + blockSize; i++) {
      h ^= tokens[i] & 0xFFFFFFFFL;
      h *= 0xBF58476D1CE4E5B9L;
      h ^= h >>> 31;
    }
    h ^= h >>> 29;
    return h == CacheEventListener.NO_PARENT ? 1L : h;
  }

  /**
   * What a chain's first block is hashed as continuing: {@link CacheEventListener#NO_PARENT}
   * for the default scope (the hashes of before scopes), else the scope's root.
   */
  static long scopeSeed(CacheScope scope) {
    return scope.isDefault() ? CacheEventListener.NO_PARENT : BlockHasher.scopeRoot(scope);
  }

  /** {@link #match(CacheScope, int[])} in the default scope. */
  synchronized List<Block> match(int[] tokens) {
    return match(CacheScope.DEFAULT, tokens);
  }

  /**
   * The cached blocks of {@code scope} continuing the start of {@code tokens}, in order,
   * touched as most recently used (deepest first).
   */
  synchronized List<Block> match(CacheScope scope, int[] tokens) {
    List<Block> out = new ArrayList<>();
    long parent = CacheEventListener.NO_PARENT;
    long seed = scopeSeed(scope);
    for (int b = 0; (b + 1) * blockSize <= tokens.length; b++) {
      long h = chain(b == 0 ? seed : parent, tokens, b * blockSize, blockSize);
      Block blk = blocks.get(h); // get() touches; order fixed below
      if (blk == null || blk.parent != parent
          || !Arrays.equals(blk.tokens, 0, blockSize, tokens, b * blockSize, (b + 1) * blockSize)) {
        break;
      }
      out.add(blk);
      parent = h;
    }
    for (int i = out.size() - 1; i >= 0; i--) {
      blocks.get(out.get(i).hash); // deepest first, root last
    }
    return out;
  }

  /**
   * Stores new full blocks continuing the cached block {@code parentHash} (or the start of the
   * prompt). Blocks already present are skipped; storing stops if room cannot be made. Reports
   * one stored event per contiguous run.
   *
   * @param firstBlock index of the first block to store within {@code tokens}
   * @param keys keys for every position from {@code firstBlock * blockSize} on, [layer][pos*dim]
   */
  synchronized int store(
      int[] tokens, int firstBlock, int blockCount, long parentHash, float[][] keys, float[][] values,
      int dim) {
    return store(CacheScope.DEFAULT, tokens, firstBlock, blockCount, parentHash, keys, values,
        dim);
  }

  /** {@link #store(int[], int, int, long, float[][], float[][], int)} of a request of scope. */
  synchronized int store(CacheScope scope,
      int[] tokens, int firstBlock, int blockCount, long parentHash, float[][] keys, float[][] values,
      int dim) {
    int layers = keys.length;
    long seed = scopeSeed(scope);
    long parent = parentHash;
    if (parent != CacheEventListener.NO_PARENT && !blocks.containsKey(parent)) {
      return 0; // the parent was evicted meanwhile; a child would be unreachable
    }
    List<Long> runHashes = new ArrayList<>();
    int runStart = -1;
    long runParent = parent;
    int added = 0;
    List<Long> path = new ArrayList<>();
    for (int b = firstBlock; b < firstBlock + blockCount; b++) {
      long h = chain(b == 0 ? seed : parent, tokens, b * blockSize, blockSize);
      Block existing = blocks.get(h);
      if (existing != null) {
        flushRun(scope, runParent, runHashes, tokens, runStart);
        runHashes.clear();
        runStart = -1;
        if (existing.parent != parent) {
          break; // hash collision with a different chain: stop rather than mix states
        }
        path.add(h);
        parent = h;
        continue;
      }
      if (!makeRoom(parent)) {
        break;
      }
      float[][] k = new float[layers][];
      float[][] v = new float[layers][];
      int from = (b - firstBlock) * blockSize * dim;
      for (int l = 0; l < layers; l++) {
        k[l] = Arrays.copyOfRange(keys[l], from, from + blockSize * dim);
        v[l] = Arrays.copyOfRange(values[l], from, from + blockSize * dim);
      }
      Block blk = new Block(
          h, parent, scope, Arrays.copyOfRange(tokens, b * blockSize, (b + 1) * blockSize), k, v);
      blocks.put(h, blk);
      if (parent != CacheEventListener.NO_PARENT) {
        blocks.get(parent).children++;
      }
      if (runStart < 0) {
        runStart = b;
        runParent = parent;
      }
      runHashes.add(h);
      path.add(h);
      stored++;
      added++;
      parent = h;
    }
    flushRun(scope, runParent, runHashes, tokens, runStart);
    // the new blocks' parents more recently used than they are (the continued block's own
    // parents were touched by the match before, so not necessarily more than it)
    for (int i = path.size() - 1; i >= 0; i--) {
      blocks.get(path.get(i));
    }
    if (parentHash != CacheEventListener.NO_PARENT) {
      blocks.get(parentHash);
    }
    return added;
  }

  private void flushRun(
      CacheScope scope, long runParent, List<Long> hashes, int[] tokens, int runStart) {
    if (hashes.isEmpty()) {
      return;
    }
    long[] hs = new long[hashes.size()];
    for (int i = 0; i < hs.length; i++) {
      hs[i] = hashes.get(i);
    }
    int[] ids = Arrays.copyOfRange(tokens, runStart * blockSize, (runStart + hs.length) * blockSize);
    try {
      listener.onBlocksStored(scope, runParent, hs, ids);
    } catch (Throwable e) { // a checked exception undeclared too
      listenerFailed(e);
    }
  }

  /**
   * A listener that threw (an exception, an {@link Error} or a checked exception it does not
   * declare) must neither corrupt the cache nor
   * escape into the request that changed it, whose future would never complete: it is the
   * host's bug, to see in its logs.
   */
  private static void listenerFailed(Throwable e) {
    org.slf4j.LoggerFactory.getLogger(PrefixKvCache.class).warn("cache event listener failed", e);
  }

  /** Evicts LRU leaves until one more block fits; never evicts {@code keep}. */
  private boolean makeRoom(long keep) {
    while (blocks.size() >= capacityBlocks) {
      Block victim = null;
      Iterator<Block> it = blocks.values().iterator();
      while (it.hasNext()) {
        Block b = it.next();
        if (b.children == 0 && b.hash != keep) {
          victim = b;
          break;
        }
      }
      if (victim == null) {
        return false;
      }
      blocks.remove(victim.hash);
      if (victim.parent != CacheEventListener.NO_PARENT) {
        Block p = blocks.get(victim.parent);
        if (p != null) {
          p.children--;
        }
      }
      evicted++;
      try {
        listener.onBlocksRemoved(new long[] {victim.hash});
      } catch (Throwable e) { // a checked exception undeclared too
        listenerFailed(e);
      }
    }
    return true;
  }

  /** Drops every block. */
  synchronized void clear() {
    evicted += blocks.size();
    blocks.clear();
    try {
      listener.onAllCleared();
    } catch (Throwable e) { // a checked exception undeclared too
      listenerFailed(e);
    }
  }

  synchronized int size() {
    return blocks.size();
  }

  synchronized long storedCount() {
    return stored;
  }

  synchronized long evictedCount() {
    return evicted;
  }

  /** Checks the structural invariants; for tests. Returns a problem description or null. */
  synchronized String checkInvariants() {
    if (blocks.size() > capacityBlocks) {
      return "size " + blocks.size() + " above capacity " + capacityBlocks;
    }
    Map<Long, Integer> childCounts = new HashMap<>();
    for (Block b : blocks.values()) {
      if (b.parent != CacheEventListener.NO_PARENT) {
        if (!blocks.containsKey(b.parent)) {
          return "block " + b.hash + " has no cached parent";
        }
        childCounts.merge(b.parent, 1, Integer::sum);
      }
    }
    for (Block b : blocks.values()) {
      if (b.children != childCounts.getOrDefault(b.hash, 0)) {
        return "block " + b.hash + " child count " + b.children + " != " + childCounts.getOrDefault(b.hash, 0);
      }
    }
    return null;
  }
}
