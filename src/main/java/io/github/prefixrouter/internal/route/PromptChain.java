package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.tree.BlockHasher;

import io.github.prefixrouter.internal.gossip.BlockChainSource;
import java.util.Arrays;

/**
 * A prompt's block-hash chain computed on demand, reusable across decisions (one per thread):
 * {@link #reset} points it at a new prompt without allocating; the hashes array only grows.
 *
 * <p>With a {@link PrefixHashCache}, once the head ({@link PrefixHashCache#HEAD_BLOCKS} blocks)
 * is hashed the chain looks for a cached prompt with the same head and, for every further block
 * asked for, copies the cached hash instead of hashing as long as the block's tokens equal the
 * cached prompt's (compared chunk by chunk, only as far as asked); from the first difference on
 * it hashes. {@link #finish} offers the prompt to the cache.
 *
 * <p>Past the blocks copied from a cached prompt, {@link #ensureSome} (what the replica query
 * calls) hashes {@value #MIN_STEP} blocks, then as many as it has hashed since the copy ended
 * (doubling), instead of the query's whole chunk: the usual prompt after a cached preamble is
 * its own tail (a user turn), which no peer holds, so the query stops at its first block, and
 * hashing a whole chunk of it would be wasted. A peer that does hold more (the same
 * conversation, one turn longer) costs a few more calls, at most twice the blocks it matches.
 */
final class PromptChain implements BlockChainSource {

  /** Blocks {@link #ensureSome} hashes first past a stretch copied from the cache. */
  static final int MIN_STEP = 2;

  private ChainHasher hasher;
  /** The root parent of the prompt's chain: its cache scope's. */
  private long scopeRoot = BlockHasher.ROOT_PARENT;
  private PrefixHashCache cache;
  private int blockSize;
  private long[] hashes = new long[256];
  private int[] tokens;
  private int maxBlocks;
  private int done;
  /** The cached prompt still being followed, or null. */
  private PrefixHashCache.Entry source;
  private boolean looked;
  private int reused;

  /** Starts a new prompt; nothing is hashed until {@link #ensure} asks. */
  void reset(int[] tokens, ChainHasher hasher, int blockSize) {
    reset(tokens, hasher, blockSize, null);
  }

  /**
   * Starts a new prompt whose hashes may come from {@code cache} (null: none); the cache must
   * have been filled by chains over the same hasher.
   */
  void reset(int[] tokens, ChainHasher hasher, int blockSize, PrefixHashCache cache) {
    reset(BlockHasher.ROOT_PARENT, tokens, hasher, blockSize, cache);
  }

  /**
   * Starts a new prompt of the cache scope whose chain starts from {@code scopeRoot}
   * ({@link BlockHasher#scopeRoot}); cached hashes are reused only from prompts of the same
   * scope.
   */
  void reset(long scopeRoot, int[] tokens, ChainHasher hasher, int blockSize,
      PrefixHashCache cache) {
    this.scopeRoot = scopeRoot;
    this.hasher = hasher;
    this.blockSize = blockSize;
    this.tokens = tokens;
    this.maxBlocks = tokens.length / blockSize;
    this.done = 0;
    this.cache = cache != null && maxBlocks > PrefixHashCache.MIN_PROMPT_BLOCKS ? cache : null;
    this.source = null;
    this.looked = false;
    this.reused = 0;
    if (hashes.length < maxBlocks) {
      hashes = new long[Math.max(maxBlocks, hashes.length * 2)];
    }
  }

  /** Drops the references to the last prompt, hasher and cache. */
  void clear() {
    tokens = null;
    hasher = null;
    cache = null;
    source = null;
  }

  /** Offers the prompt to the cache (if any), then {@link #clear}s. */
  void finish() {
    finish(done);
  }

  /**
   * Offers the prompt to the cache (if any), of which the first {@code useful} blocks were
   * needed (see {@link PrefixHashCache#offer}), then {@link #clear}s.
   */
  void finish(int useful) {
    if (cache != null) {
      cache.offer(scopeRoot, tokens, hashes, done, reused, useful);
    }
    clear();
  }

  /** The prompt's number of full blocks. */
  int maxBlocks() {
    return maxBlocks;
  }

  /** Blocks available so far (hashed or copied from the cache). */
  int hashed() {
    return done;
  }

  /** Blocks copied from the cache so far. */
  int reused() {
    return reused;
  }

  @Override
  public int ensure(int blocks) {
    return extend(blocks, false);
  }

  @Override
  public int ensureSome(int blocks) {
    return extend(blocks, true);
  }

  /**
   * Makes {@code blocks} available ({@code some}: or fewer, but at least one more, when they
   * would be hashed right after blocks copied from the cache; see the class notes).
   */
  private int extend(int blocks, boolean some) {
    int want = Math.min(blocks, maxBlocks);
    if (want <= done) {
      return done;
    }
    if (cache != null) {
      int head = PrefixHashCache.HEAD_BLOCKS;
      if (!looked && want >= head) {
        done = hasher.extend(scopeRoot, tokens, done, head * blockSize, hashes);
        looked = true;
        source = cache.find(scopeRoot, hashes[head - 1], tokens);
      }
      if (source != null && want > done) {
        copyFromSource(want);
      }
    }
    if (want > done) {
      if (some && reused > 0) { // past a copied stretch: a little at a time, doubling
        int hashedSinceCopy = done - (PrefixHashCache.HEAD_BLOCKS + reused);
        want = Math.min(want, done + Math.max(MIN_STEP, hashedSinceCopy));
      }
      done = hasher.extend(scopeRoot, tokens, done, want * blockSize, hashes);
    }
    return done;
  }

  /** Copies the cached hashes of the blocks up to {@code want} whose tokens are equal. */
  private void copyFromSource(int want) {
    PrefixHashCache.Entry e = source;
    int limit = Math.min(want, e.blocks());
    int from = done * blockSize;
    int to = limit * blockSize;
    int m = Arrays.mismatch(tokens, from, to, e.tokens, from, to);
    int equal = m < 0 ? limit : done + m / blockSize;
    System.arraycopy(e.hashes, done, hashes, done, equal - done);
    reused += equal - done;
    done = equal;
    if (m >= 0 || limit == e.blocks()) {
      source = null; // diverged, or the cached prompt ends here
    }
  }

  @Override
  public long[] hashes() {
    return hashes;
  }
}
