package io.github.prefixrouter.internal.gossip;

/**
 * A prompt's chain of block hashes, computed on demand: a replica query asks for more blocks
 * only while some peer still holds every block so far, so a prompt is hashed about as far as
 * the longest peer match and no further (the chain is serial, so this is the only way to save
 * hashing).
 */
public interface BlockChainSource {

  /**
   * Makes the hashes of the first {@code blocks} blocks available in {@link #hashes()} (or all
   * of the prompt's blocks if it has fewer). Idempotent: never recomputes what is there.
   *
   * @return how many hashes are available now
   */
  int ensure(int blocks);

  /**
   * Like {@link #ensure}, but may stop short of {@code blocks} where going on would mean hashing
   * blocks that are probably not needed: the replica query, which asks for blocks in chunks only
   * while some peer still matches, calls this. Makes at least one more block available than
   * before if the prompt has one, and never more than {@code blocks}. The default is {@link
   * #ensure}.
   *
   * @return how many hashes are available now
   */
  default int ensureSome(int blocks) {
    return ensure(blocks);
  }

  /** The hashes computed so far; read it again after {@link #ensure}, which may replace it. */
  long[] hashes();

  /** A chain whose first {@code n} hashes are all known already. */
  static BlockChainSource of(long[] chain, int n) {
    return new BlockChainSource() {
      @Override
      public int ensure(int blocks) {
        return n;
      }

      @Override
      public long[] hashes() {
        return chain;
      }
    };
  }
}
