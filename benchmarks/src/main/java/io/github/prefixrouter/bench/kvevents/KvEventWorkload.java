package io.github.prefixrouter.bench.kvevents;

import io.github.prefixrouter.spi.CacheEventListener;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * A cyclic stream of vLLM KV-event batches that keeps an engine's cache, and so its mirror, at a
 * fixed size: the steady state of a busy vLLM whose cache is full.
 *
 * <p>Shape. The cache holds {@code roots} shared preambles ("system prompts", {@code
 * rootBlocks} blocks each, stored once by {@link #fill}) and the blocks of finished prefills
 * continuing them. Each batch (one engine step) stores {@code storesPerBatch} chains of 1 to
 * {@code maxChainBlocks} blocks (uniform), each continuing a preamble's last block, as vLLM
 * reports requests that finished their prefill; and before them, as vLLM evicts while it
 * allocates the step's blocks, it removes exactly as many blocks as it stores, one {@code
 * BlockRemoved} event per block as vLLM sends them, so the cache stays at {@link
 * #heldTokens()}. Evictions take the oldest stored blocks first, a chain's last block first
 * (vLLM frees a request's blocks in reverse order), so a removed block is always a leaf.
 *
 * <p>Cycle. The {@link #batches()} batches store every chain once; after the last one the
 * cache is exactly as {@link #fill} left it, so the stream can be replayed forever, with
 * consecutive sequence numbers, and the mirror stays at the same size. Batch {@code b} removes
 * the blocks at positions {@code [S(b-1) - H, S(b) - H)} (mod the blocks of a cycle) of the
 * eviction order, where {@code S(b)} counts the blocks stored up to batch {@code b} and {@code
 * H} the chain blocks held; {@link #fill} stores the blocks at positions {@code [B - H, B)}, the
 * ones held at the end of a previous cycle.
 *
 * <p>Encoding: as vLLM's msgspec structs (array-like, tagged), {@code [ts, [events...], 0]}
 * with {@code ["BlockRemoved", [hash], "GPU"]} and {@code ["BlockStored", hashes, parent,
 * tokens, 16, nil, "GPU"]}. Hashes are 64-bit ints ({@link HashKind#INT}, what vLLM sends by
 * default: its digest's low 64 bits) or 32-byte bins ({@link HashKind#BIN}, the sha256 digest
 * itself, what vLLM sends with {@code VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0}; the decoder keeps
 * their last 8 bytes). Token ids are random; sequences continuing the same block differ in their
 * first token, so the tree holds exactly the blocks times the block size. Deterministic for a
 * seed.
 */
public final class KvEventWorkload {

  /** How block hashes are encoded. */
  public enum HashKind {
    /** msgpack ints (what vLLM sends by default). */
    INT,
    /** 32-byte msgpack bins (vLLM with {@code VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0}). */
    BIN
  }

  /** Block size in tokens (vLLM's default). */
  public static final int BLOCK_SIZE = 16;

  /** Vocabulary the token ids are drawn from (Qwen2's). */
  static final int VOCABULARY = 151_936;

  final HashKind hashKind;
  final int blockSize = BLOCK_SIZE;
  final int storesPerBatch;
  final int maxChainBlocks;
  private final long heldTokens;
  private final int rootBlocks;

  /** Per root: its block hashes and tokens. */
  private final long[][] rootHashes;
  private final int[][] rootTokens;

  /** Per chain (in store order): its root, hashes and tokens. */
  private final int[] chainRoot;
  private final long[][] chainHashes;
  private final int[][] chainTokens;
  /** Position of each chain's first block in a cycle's blocks; {@code chainOffset[C] = B}. */
  private final int[] chainOffset;
  /** Chain blocks held at steady state. */
  private final int heldChainBlocks;

  private final byte[][] payloads;
  private final long payloadBytes;

  /** The benchmark's workload: 1M tokens held, 2,048 batches of 4 stores of 1 to 64 blocks. */
  public static KvEventWorkload standard(HashKind kind) {
    return new KvEventWorkload(kind, 1_000_000, 64, 4, 2048, 4, 64, 42);
  }

  /**
   * @param heldTokens tokens the cache holds at steady state, preambles included (a multiple of
   *     the block size)
   * @param roots shared preambles
   * @param rootBlocks blocks per preamble
   * @param batches batches per cycle
   * @param storesPerBatch stored chains per batch
   * @param maxChainBlocks longest chain
   */
  public KvEventWorkload(HashKind kind, long heldTokens, int roots, int rootBlocks, int batches,
      int storesPerBatch, int maxChainBlocks, long seed) {
    this.hashKind = kind;
    this.heldTokens = heldTokens;
    this.rootBlocks = rootBlocks;
    this.storesPerBatch = storesPerBatch;
    this.maxChainBlocks = maxChainBlocks;
    if (heldTokens % blockSize != 0) {
      throw new IllegalArgumentException("heldTokens " + heldTokens + " is not a multiple of "
          + blockSize);
    }
    SplittableRandom rnd = new SplittableRandom(seed);
    Set<Long> used = new HashSet<>();
    used.add(CacheEventListener.NO_PARENT);
    Set<Integer> firstTokens = new HashSet<>();

    rootHashes = new long[roots][];
    rootTokens = new int[roots][];
    for (int r = 0; r < roots; r++) {
      rootHashes[r] = newHashes(rnd, used, rootBlocks);
      rootTokens[r] = newTokens(rnd, firstTokens, rootBlocks * blockSize);
    }
    int chains = batches * storesPerBatch;
    chainRoot = new int[chains];
    chainHashes = new long[chains][];
    chainTokens = new int[chains][];
    chainOffset = new int[chains + 1];
    for (int c = 0; c < chains; c++) {
      int n = 1 + rnd.nextInt(maxChainBlocks);
      chainRoot[c] = rnd.nextInt(roots);
      chainHashes[c] = newHashes(rnd, used, n);
      chainTokens[c] = newTokens(rnd, firstTokens, n * blockSize);
      chainOffset[c + 1] = chainOffset[c] + n;
    }
    long held = heldTokens / blockSize - (long) roots * rootBlocks;
    int cycleBlocks = chainOffset[chains];
    if (held <= 0 || held + 2L * storesPerBatch * maxChainBlocks > cycleBlocks) {
      throw new IllegalArgumentException("a cycle of " + cycleBlocks + " blocks cannot keep "
          + held + " chain blocks held: more batches or fewer tokens");
    }
    heldChainBlocks = (int) held;

    payloads = new byte[batches][];
    MsgpackEncoder enc = new MsgpackEncoder();
    long bytes = 0;
    for (int b = 0; b < batches; b++) {
      enc.clear();
      int storedTo = chainOffset[(b + 1) * storesPerBatch];
      int storedFrom = chainOffset[b * storesPerBatch];
      int removals = storedTo - storedFrom;
      enc.array(3).float64(1.7e9 + b * 0.025).array(removals + storesPerBatch);
      for (int i = 0; i < removals; i++) {
        int p = Math.floorMod(storedFrom - heldChainBlocks + i, cycleBlocks);
        enc.array(3).str("BlockRemoved").array(1);
        hash(enc, blockAtEvictionPosition(p));
        enc.str("GPU");
      }
      for (int c = b * storesPerBatch; c < (b + 1) * storesPerBatch; c++) {
        long[] hs = chainHashes[c];
        enc.array(7).str("BlockStored").array(hs.length);
        for (long h : hs) {
          hash(enc, h);
        }
        long[] parent = rootHashes[chainRoot[c]];
        hash(enc, parent[parent.length - 1]);
        int[] ts = chainTokens[c];
        enc.array(ts.length);
        for (int t : ts) {
          enc.integer(t);
        }
        enc.integer(blockSize).nil().str("GPU");
      }
      enc.integer(0);
      payloads[b] = enc.toBytes();
      bytes += payloads[b].length;
    }
    payloadBytes = bytes;
  }

  private static long[] newHashes(SplittableRandom rnd, Set<Long> used, int n) {
    long[] hs = new long[n];
    for (int i = 0; i < n; i++) {
      long h;
      do {
        h = rnd.nextLong();
      } while (!used.add(h));
      hs[i] = h;
    }
    return hs;
  }

  /**
   * Random token ids; the first differs from every other sequence's first, so that no two
   * sequences continuing the same block share a token (the tree would hold that token once, and
   * its size would not be blocks times the block size).
   */
  private static int[] newTokens(SplittableRandom rnd, Set<Integer> firstTokens, int n) {
    int[] ts = new int[n];
    do {
      ts[0] = rnd.nextInt(VOCABULARY);
    } while (!firstTokens.add(ts[0]));
    for (int i = 1; i < n; i++) {
      ts[i] = rnd.nextInt(VOCABULARY);
    }
    return ts;
  }

  private void hash(MsgpackEncoder enc, long h) {
    if (hashKind == HashKind.INT) {
      enc.integer(h);
      return;
    }
    byte[] b = new byte[32];
    long x = h;
    for (int i = 0; i < 32; i += 8) {
      long v = i == 24 ? h : (x = mix(x));
      for (int k = 0; k < 8; k++) {
        b[i + k] = (byte) (v >>> (56 - 8 * k));
      }
    }
    enc.bin(b);
  }

  private static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** The hash of the block at position {@code p} of a cycle's eviction order. */
  private long blockAtEvictionPosition(int p) {
    int c = chainAt(p);
    int last = chainOffset[c + 1] - 1;
    return chainHashes[c][last - p];
  }

  private int chainAt(int p) {
    int i = Arrays.binarySearch(chainOffset, p);
    return i >= 0 ? i : -i - 2;
  }

  /**
   * Stores the steady state the cycle starts from (and returns to) into {@code listener}: the
   * preambles, then the held part (the first blocks) of the chains held at the end of a cycle.
   */
  public void fill(CacheEventListener listener) {
    for (int r = 0; r < rootHashes.length; r++) {
      listener.onBlocksStored(CacheEventListener.NO_PARENT, rootHashes[r], rootTokens[r]);
    }
    int cycleBlocks = chainOffset[chainOffset.length - 1];
    int from = cycleBlocks - heldChainBlocks;
    for (int c = chainAt(from); c < chainHashes.length; c++) {
      int held = chainOffset[c + 1] - Math.max(from, chainOffset[c]);
      long[] parent = rootHashes[chainRoot[c]];
      listener.onBlocksStored(parent[parent.length - 1],
          Arrays.copyOf(chainHashes[c], held), Arrays.copyOf(chainTokens[c], held * blockSize));
    }
  }

  /** The encoded batches of one cycle, in order. */
  public byte[][] payloads() {
    return payloads;
  }

  public int batches() {
    return payloads.length;
  }

  /** Tokens held at steady state, after {@link #fill} and after every batch. */
  public long heldTokens() {
    return heldTokens;
  }

  /** Blocks stored (and as many removed) per cycle. */
  public long blocksPerCycle() {
    return chainOffset[chainOffset.length - 1];
  }

  /** Blocks stored per batch, on average over a cycle (each also removed once). */
  public double blocksPerBatch() {
    return (double) blocksPerCycle() / batches();
  }

  /** Events per batch, on average: the stores and one removal per block. */
  public double eventsPerBatch() {
    return storesPerBatch + blocksPerBatch();
  }

  /** Payload bytes per batch, on average. */
  public double bytesPerBatch() {
    return (double) payloadBytes / batches();
  }

  /** Preamble blocks, held throughout. */
  public int rootBlocksTotal() {
    return rootHashes.length * rootBlocks;
  }

  public String description() {
    return String.format(java.util.Locale.ROOT, "%s hashes, %,d tokens held, %d batches per"
        + " cycle of %d stores of 1..%d blocks (%.1f blocks, %.1f events, %.0f bytes per batch)",
        hashKind == HashKind.INT ? "int" : "32-byte bin", heldTokens, batches(), storesPerBatch,
        maxChainBlocks, blocksPerBatch(), eventsPerBatch(), bytesPerBatch());
  }
}
