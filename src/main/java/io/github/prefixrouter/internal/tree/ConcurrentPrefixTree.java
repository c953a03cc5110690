package io.github.prefixrouter.internal.tree;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.locks.StampedLock;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The exact radix tree of the token prefixes that this node's inference engine holds in its KV
 * cache: optimistic lock-free reads, serialized writes.
 *
 * <h2>Thread safety</h2>
 *
 * Any number of threads may call {@link #match} concurrently with each other and with any
 * number of writing threads (whose writes are serialized). A match takes no lock and allocates nothing: it reads the tree under a
 * {@link StampedLock} optimistic stamp and validates the stamp at the end; if a write overlapped
 * it retries, and after {@value #OPTIMISTIC_ATTEMPTS} overlapped attempts it takes the shared
 * read lock for one final pass (so a reader can never starve, and never returns a value from a
 * torn state). Every mutation ({@link #insert}, {@link #acquire}, {@link Lease#release},
 * {@link #evictTo}, {@link #clear}, engine events) runs under the exclusive write lock, so
 * writes are serialized and each is atomic with respect to readers.
 *
 * <h2>Design notes</h2>
 *
 * <ul>
 *   <li><b>Shape.</b> Nodes hold a compressed edge ({@code int[]} of token ids, never empty
 *       except at the root), the depth just past it ({@code end}; the start depth is derived),
 *       and their children by first token: up to two in sorted dense arrays, more in an
 *       open-addressing table with linear probing, at most 3/4 full, so that a lookup is about
 *       one probe with no data-dependent branch (a binary search over the 2,000 children of a
 *       wide root mispredicts a branch per probe). Matching compares edges with {@link
 *       Arrays#mismatch(int[], int, int, int[], int, int)}, which the JIT vectorizes, and takes
 *       the next position from {@code end}, so the next lookup does not wait for the edge
 *       array. (Edges packed to 2.125 bytes per token, 16 low bits plus one bit per id, were
 *       measured: they cut memory per token by 33 to 47% but made the match 2 to 6 times
 *       slower, since a comparison of chars with ints is scalar. One {@code int[]} record per
 *       node holding its children and edge, walked without node objects, was measured too:
 *       no faster, since the upper levels of a path stay cached; see docs/tree.md.)
 *   <li><b>Node size.</b> A self-managed node is 48 bytes: four references (edge, child keys,
 *       children, parent), the one block hash, and three ints: the use stamp (32-bit,
 *       renumbered by rank before it would overflow), {@code end}, and one field that is either
 *       the node's LRU heap index (an unleased leaf) or its lease count.
 *   <li><b>Blocks.</b> Every node keeps one chained hash ({@link BlockHasher}): that of the
 *       last full block ending at or before its end. An insert hashes only its new blocks
 *       (continuing from that hash; a path that leaves an edge mid-way rehashes at most that
 *       edge); an eviction recomputes the hashes of the evicted blocks from the tokens only if
 *       a listener needs them (about 1 ns per token), instead of every node storing 8 bytes
 *       per block. An engine-driven leaf keeps its edge's hashes once the engine starts
 *       removing its blocks ({@link EngineNode#blockHashCache}), so that removing a chain one
 *       block at a time rehashes it once.
 *   <li><b>Self-managed mode</b> (token granularity). {@link #insert} records an executed prompt;
 *       every node on its path gets the operation's access stamp (a counter, not a clock). The
 *       path is split where the prompt ends, so all tokens of a node share one stamp. This makes
 *       node-level LRU identical to token-level LRU: evicting down to capacity repeatedly
 *       removes the cached token with no cached continuation, no lease, and the oldest stamp.
 *       Evictable leaves (unlocked, non-root) sit in an intrusive binary min-heap by stamp;
 *       eviction trims the top leaf's edge by exactly the excess or removes it whole.
 *   <li><b>Leases.</b> {@link #acquire} pins the cached prefix of a running request: the path
 *       is split at the match end and each node on it gets its reference count incremented;
 *       nodes with a count are never evicted. A split keeps the node's identity for the lower
 *       part, and a merge lets the child absorb its parent, so a lease's end node stays valid.
 *   <li><b>Normal form.</b> A non-root node with exactly one child is merged with it unless a
 *       lease ends at it or it was touched more recently than the child, or, engine-driven, it
 *       ends at a span boundary, where a leaf extension stops ({@link #EXTENSION_SPAN_TOKENS});
 *       see {@link #checkInvariants()}.
 *   <li><b>Engine-driven mode</b> (block granularity). The engine's stored/removed/cleared
 *       events ({@link #engineEvents()}) are the only mutations; the tree maps each engine block
 *       hash to the node holding the block's last token and the block's index there. An engine
 *       may hold several copies of a block under one hash (each stored and removed on its own):
 *       the tree counts them, and the removal of the last copy removes the block and everything
 *       continuing it. Matches are rounded down to whole blocks, since an engine serves only
 *       whole cached blocks. Events that cannot be applied are counted
 *       ({@link #engineEventStats()}), never thrown; a store whose token count is not its
 *       blocks times the block size (an engine of another block size) is also logged at ERROR,
 *       the 1st, 2nd, 4th, 8th... such store. A store stamps its whole path as a
 *       self-managed insert does, and leaves sit in the same LRU heap, so that a tree above
 *       its mirror limit ({@link Builder#mirrorLimitTokens}: an engine whose removals do not
 *       arrive) drops its least recently stored blocks, leaves first, down to the limit.
 *   <li><b>Scopes.</b> An engine keys its cache by the LoRA adapter and cache salt as well as
 *       the tokens ({@link CacheScope}). Each scope other than the default has its own root
 *       node, found by the scope's root hash ({@link BlockHasher#scopeRoot}) in a concurrent
 *       map; the root's {@code lastHash} is that hash, so every block hash below it is the
 *       scope's chain, and a match, insert or lease of one scope never sees another's nodes.
 *       The LRU heap, the capacity, the size and the engine-hash index stay global: one engine
 *       cache holds every scope. A scope root goes as soon as it holds nothing (a client
 *       sending a million salts leaves no empty roots behind); the default scope's root is the
 *       field {@code root} and stays, and its hot path is unchanged (no map lookup).
 *   <li><b>Events</b> are queued under the write lock and delivered in order, one at a time,
 *       after it is released; a listener may therefore read the tree, and write to it (the
 *       events of such a nested write follow the current event, to every listener).
 *   <li><b>Why a stamp rather than copy-on-write nodes.</b> Leases, the LRU heap and the
 *       engine-hash index hold node identities that path copying would have to move on every
 *       write; in-place updates validated by a stamp keep nodes small and writes cheap, and
 *       cost readers two volatile reads. A half-written state seen by a reader (a stale array,
 *       a null) is caught and discarded with the failed validation.
 *   <li><b>Failures part-way.</b> A write that throws part-way (out of memory where it
 *       allocates, a bug) is repaired before its error goes on ({@code repairAfterFault}):
 *       kept if the invariants still hold, else the tree is cleared, as {@link #clear} does.
 *       An acquire that throws pins nothing; a release that throws has released its lease.
 * </ul>
 */
public final class ConcurrentPrefixTree {

  private static final Logger LOG = LoggerFactory.getLogger(ConcurrentPrefixTree.class);

  /** Optimistic read attempts before a match takes the shared read lock. */
  static final int OPTIMISTIC_ATTEMPTS = 4;

  private static final int[] NO_TOKENS = new int[0];
  private static final Node[] NO_NODES = new Node[0];

  /**
   * Children up to this count sit in sorted dense arrays; more go to an open-addressing table
   * (see {@link Node#kids}).
   */
  static final int DENSE_MAX = 2;

  /**
   * Engine-driven mode: a store that continues a leaf grows the leaf's edge only up to the next
   * multiple of this many tokens (rounded up to whole blocks) and continues it in a child from
   * there, so that a chain stored one block at a time copies at most about this many tokens per
   * store rather than the whole chain (see {@code extensionSpan}).
   */
  static final int EXTENSION_SPAN_TOKENS = 2048;

  /** How the tree learns what is cached. */
  public enum Mode {
    /** The tree records executed prompts itself and applies LRU at its capacity. */
    SELF_MANAGED,
    /** The tree mirrors the engine's own cache events, at block granularity. */
    ENGINE_DRIVEN
  }

  private final Mode mode;
  private final int blockSize;
  /** What the tree's log lines begin with: {@code "node <id>: "}, or nothing without a node. */
  private final String logPrefix;
  private final BlockHasher hasher;
  private final long capacity;
  /**
   * Engine-driven mode: the most tokens the mirror holds ({@link Long#MAX_VALUE}: unlimited);
   * beyond it the least recently stored blocks are dropped (see {@link #evictOverflow()}).
   */
  private final long mirrorLimit;
  /**
   * Engine-driven mode: the depths that are multiples of this (a whole number of blocks) are
   * where a leaf extension stops and a child continues; a node ending at one is never merged
   * with its only child, so that the chain stays cut there (a field so that tests can lower it).
   */
  private int extensionSpan;

  private final StampedLock lock = new StampedLock();
  private final Node root = new Node();
  /**
   * The roots of the scopes other than the default, by scope root hash: written under the
   * write lock, read by matches without it. Each holds at least one child.
   */
  private final ConcurrentHashMap<Long, Node> scopeRoots = new ConcurrentHashMap<>();
  private volatile long size;
  private int clock;
  /** The clock value at which stamps are renumbered (a field so that tests can lower it). */
  private int stampLimit = Integer.MAX_VALUE - 1;
  private int epoch;
  /** Blocks whose hashes were recomputed from held tokens (tests only), under the write lock. */
  private long rehashedBlocks;
  /** Tokens written into new edge arrays by extensions, splits, merges and trims (tests only). */
  private long copiedEdgeTokens;
  /** Nodes the writes' stamping and normalizing walks visited (tests only). */
  private long pathSteps;

  // LRU heap of evictable leaves (self-managed mode), guarded by the write lock
  private Node[] heap = new Node[16];
  private int heapSize;

  // engine-driven mode, guarded by the write lock
  private final Map<Long, Node> engineIndex;
  /** Alias to the hash it stands for, oldest first (see {@link #forgetOldestAliases}). */
  private final Map<Long, Long> aliases;
  /**
   * The most aliases kept: one per block the mirror limit holds (an engine holds no more blocks
   * than that, and each alias is a block of its own in it).
   */
  private final long aliasLimit;
  /**
   * Copies beyond the first of an engine hash held more than once (the engine computed the same
   * block for two requests and stored both): hash to a count of at least 1. Only hashes in
   * {@code engineIndex} or {@code aliases} have an entry, so it is no larger than those.
   */
  private final Map<Long, Long> extraCopies;
  private long storedEvents;
  private long removedEvents;
  private long clearedEvents;
  private long unknownParents;
  private long unknownBlocks;
  private long malformedEvents;
  /**
   * Of the malformed events, the stores whose token count is not their block count times the
   * block size (an engine of another block size), each logged while a power of two.
   */
  private long misfitStores;
  private long duplicateBlocks;
  private long aliasedBlocks;
  private long conflictingEvents;
  private long overflows;
  private long overflowBlocks;
  /** Alias count above which an overflow eviction forgets the aliases of dropped blocks. */
  private int aliasSweepAt = 64;

  // events
  /** Replaced (never mutated) under the write lock; each queued event keeps the array of its time. */
  private volatile BlockEventListener[] listeners = new BlockEventListener[0];
  private final ConcurrentLinkedQueue<Event> pending = new ConcurrentLinkedQueue<>();
  private final ReentrantLock delivery = new ReentrantLock();
  private final LongBuffer storedBuf = new LongBuffer();
  private final LongBuffer evictedBuf = new LongBuffer();
  private volatile long listenerFailures;
  /** Writes that threw part-way and were repaired ({@code repairAfterFault}); write lock. */
  private long repairs;
  /** Engine events whose application threw (engineEvents()); counted outside the write lock. */
  private final AtomicLong engineEventFailures = new AtomicLong();
  /** Run under the write lock as each engine event is applied (tests that inject a fault). */
  private volatile Runnable engineFaultForTest = () -> { };
  /** Runs in a store event once its tokens are in the tree, before its hashes (tests only). */
  volatile Runnable midStoreFaultForTest = () -> { };
  /**
   * Runs where a write allocates part-way through a change (a leaf linked, an edge trimmed, the
   * LRU heap grown, two nodes merged, a snapshot of the blocks held taken), as an {@link
   * OutOfMemoryError} there would (tests only).
   */
  volatile Runnable midWriteFaultForTest = () -> { };

  private final CacheEventListener engineListener = new EngineListener();

  private ConcurrentPrefixTree(Builder b) {
    this.mode = b.mode;
    this.blockSize = b.blockSize;
    this.logPrefix = b.nodeId == null ? "" : "node " + b.nodeId + ": ";
    this.hasher = new BlockHasher(b.blockSize, b.salt);
    this.capacity = b.capacityTokens;
    this.mirrorLimit = b.mirrorLimitTokens;
    this.extensionSpan = (EXTENSION_SPAN_TOKENS + blockSize - 1) / blockSize * blockSize;
    this.engineIndex = mode == Mode.ENGINE_DRIVEN ? new HashMap<>() : null;
    this.aliases = mode == Mode.ENGINE_DRIVEN ? new LinkedHashMap<>() : null;
    this.aliasLimit = mirrorLimit / blockSize;
    this.extraCopies = mode == Mode.ENGINE_DRIVEN ? new HashMap<>() : null;
    root.edge = NO_TOKENS;
    root.keys = NO_TOKENS;
    root.kids = NO_NODES;
  }

  /**
   * A builder; the defaults are self-managed mode, block size 16, salt 0. A self-managed tree
   * needs a capacity; an engine-driven one only reports it (default unlimited) and holds at most
   * its mirror limit (default unlimited).
   */
  public static Builder builder() {
    return new Builder();
  }

  /** A self-managed tree holding at most {@code capacityTokens} tokens, block size 16, salt 0. */
  public static ConcurrentPrefixTree selfManaged(long capacityTokens) {
    return builder().capacityTokens(capacityTokens).build();
  }

  /** An engine-driven tree for an engine with the given block size, salt 0. */
  public static ConcurrentPrefixTree engineDriven(int blockSize) {
    return builder().mode(Mode.ENGINE_DRIVEN).blockSize(blockSize).build();
  }

  // ---------------------------------------------------------------------------------------------
  // reads

  /** The length in tokens of the longest cached prefix of {@code tokens}. */
  public int match(int[] tokens) {
    Objects.requireNonNull(tokens, "tokens");
    return match(tokens, tokens.length);
  }

  /**
   * The length in tokens of the longest cached prefix of the first {@code length} tokens. In
   * engine-driven mode the result is a multiple of the block size. Takes no lock and allocates
   * nothing unless writers keep interfering (see the class notes).
   *
   * @throws IllegalArgumentException if {@code length} is negative or exceeds the array
   */
  public int match(int[] tokens, int length) {
    return match(BlockHasher.ROOT_PARENT, tokens, length);
  }

  /**
   * The length in tokens of the longest prefix of the first {@code length} tokens cached in the
   * scope whose root hash is {@code scopeRoot} ({@link BlockHasher#scopeRoot}); for
   * {@link BlockHasher#ROOT_PARENT} exactly {@link #match(int[], int)}. Takes no lock; a scoped
   * match may box the key of its map lookup.
   *
   * @throws IllegalArgumentException if {@code length} is negative or exceeds the array
   */
  public int match(long scopeRoot, int[] tokens, int length) {
    Objects.requireNonNull(tokens, "tokens");
    if (length < 0 || length > tokens.length) {
      throw new IllegalArgumentException(
          "length must be in [0, " + tokens.length + "], was " + length);
    }
    for (int attempt = 0; attempt < OPTIMISTIC_ATTEMPTS; attempt++) {
      long stamp = lock.tryOptimisticRead();
      if (stamp != 0) {
        int r;
        try {
          r = walkScope(scopeRoot, tokens, length);
        } catch (RuntimeException tornRead) {
          r = -1; // a concurrent write was seen half-done; validation below fails
        }
        if (lock.validate(stamp) && r >= 0) {
          return roundDown(r);
        }
      }
      Thread.onSpinWait();
    }
    long stamp = lock.readLock();
    try {
      return roundDown(walkScope(scopeRoot, tokens, length));
    } finally {
      lock.unlockRead(stamp);
    }
  }

  /** {@link #walk} from the root of the scope {@code scopeRoot}; 0 if it holds nothing. */
  private int walkScope(long scopeRoot, int[] tokens, int length) {
    Node start = rootOf(scopeRoot);
    return start == null ? 0 : walk(start, tokens, length);
  }

  /** The root node of the scope {@code scopeRoot}, or null if that scope holds nothing. */
  private Node rootOf(long scopeRoot) {
    return scopeRoot == BlockHasher.ROOT_PARENT ? root : scopeRoots.get(scopeRoot);
  }

  /** {@link #match(long, int[], int)} of the whole array. */
  public int match(long scopeRoot, int[] tokens) {
    Objects.requireNonNull(tokens, "tokens");
    return match(scopeRoot, tokens, tokens.length);
  }

  /**
   * The number of scopes other than the default that hold something now: as left by a whole
   * operation (an insert registers its scope's root before its eviction may drop it again), read
   * as {@link #sizeTokens()} is.
   */
  public int scopeCount() {
    long stamp = lock.tryOptimisticRead();
    int n = scopeRoots.size();
    if (lock.validate(stamp)) {
      return n;
    }
    stamp = lock.readLock();
    try {
      return scopeRoots.size();
    } finally {
      lock.unlockRead(stamp);
    }
  }

  private int roundDown(int matched) {
    return mode == Mode.ENGINE_DRIVEN ? matched - matched % blockSize : matched;
  }

  /**
   * Returns the matched length, or -1 if it saw an inconsistent (torn) state. The next query
   * position comes from the child's {@code end} field rather than from its edge's length, so
   * the next child's lookup does not wait for the edge array to arrive from memory (the edge
   * is compared while the processor already fetches the path further down).
   */
  private int walk(Node start, int[] q, int length) {
    Node n = start;
    int pos = 0;
    while (pos < length) {
      Node c = child(n, q[pos]);
      if (c == null) {
        break;
      }
      int[] e = c.edge;
      int end = c.end;
      int el = e.length;
      if (el == 0 || end - el != pos) {
        return -1;
      }
      if (end > length) { // the query ends inside this edge
        int mm = Arrays.mismatch(e, 0, length - pos, q, pos, length);
        return mm >= 0 ? pos + mm : length;
      }
      int mm = Arrays.mismatch(e, 0, el, q, pos, end);
      if (mm >= 0) {
        return pos + mm;
      }
      pos = end;
      n = c;
    }
    return pos;
  }

  /**
   * The child of n whose edge starts with {@code key}, or null. Safe on a torn state (bounded,
   * may throw an index exception or return a wrong node, which the caller's validation discards).
   */
  static Node child(Node n, int key) {
    Node[] kids = n.kids;
    int[] keys = n.keys;
    int len = kids.length;
    if (len <= DENSE_MAX) {
      for (int i = 0; i < len; i++) {
        if (keys[i] == key) {
          return kids[i];
        }
      }
      return null;
    }
    int mask = len - 1;
    int h = slot(key, len);
    for (int probes = 0; probes < len; probes++) {
      Node c = kids[h];
      if (c == null) {
        return null;
      }
      if (keys[h] == key) {
        return c;
      }
      h = (h + 1) & mask;
    }
    return null;
  }

  /** Home slot of a first token in a child table of {@code len} (a power of two) slots. */
  static int slot(int key, int len) {
    return (key * 0x9E3779B9) >>> Integer.numberOfLeadingZeros(len - 1);
  }

  /**
   * Tokens currently cached (the sum of all edge lengths): the size after some whole operation,
   * never one seen half-way (an insert adds its tokens before it evicts). Read as a match is:
   * under an optimistic stamp, then under the read lock if a write overlapped.
   */
  public long sizeTokens() {
    long stamp = lock.tryOptimisticRead();
    long s = size;
    if (lock.validate(stamp)) {
      return s;
    }
    stamp = lock.readLock();
    try {
      return size;
    } finally {
      lock.unlockRead(stamp);
    }
  }

  /** The configured capacity in tokens ({@link Long#MAX_VALUE} when unlimited). */
  public long capacityTokens() {
    return capacity;
  }

  /**
   * Engine-driven mode: the most tokens the mirror holds before it drops its least recently
   * stored blocks ({@link Long#MAX_VALUE} when unlimited, and always for a self-managed tree).
   */
  public long mirrorLimitTokens() {
    return mirrorLimit;
  }

  /** Tokens per block. */
  public int blockSize() {
    return blockSize;
  }

  /** The hasher that computes the block hashes this tree reports. */
  public BlockHasher hasher() {
    return hasher;
  }

  /** The tree's mode. */
  public Mode mode() {
    return mode;
  }

  // ---------------------------------------------------------------------------------------------
  // self-managed writes

  /**
   * Records an executed prompt (self-managed mode): its tokens are now cached, and every prefix
   * of it becomes the most recently used. Then evicts least recently used unleased tokens until
   * the size is within capacity.
   *
   * @throws IllegalArgumentException if {@code tokens} is empty
   * @throws IllegalStateException if the tree is engine-driven
   */
  public void insert(int[] tokens) {
    Objects.requireNonNull(tokens, "tokens");
    insert(tokens, tokens.length);
  }

  /** Like {@link #insert(int[])} for the first {@code length} tokens. */
  public void insert(int[] tokens, int length) {
    insert(BlockHasher.ROOT_PARENT, tokens, length);
  }

  /**
   * Like {@link #insert(int[], int)} in the scope whose root hash is {@code scopeRoot}
   * ({@link BlockHasher#scopeRoot}; {@link BlockHasher#ROOT_PARENT} for the default scope).
   * Capacity and LRU order are shared by all scopes.
   */
  public void insert(long scopeRoot, int[] tokens, int length) {
    Objects.requireNonNull(tokens, "tokens");
    requireSelfManaged("insert");
    if (length < 1 || length > tokens.length) {
      throw new IllegalArgumentException(
          "length must be in [1, " + tokens.length + "] (no empty prompts), was " + length);
    }
    write(Delivery.ALL, () -> {
      int now = nextStamp();
      Node start = rootForWrite(scopeRoot);
      Node end = extend(start, 0, tokens, 0, length, 0, now, true);
      normalizeUpward(end);
      evictLocked(capacity);
      return null;
    });
  }

  /**
   * Pins the cached prefix of {@code tokens} for a running request (self-managed mode): those
   * tokens are not evicted until the lease is released, and they become the most recently
   * used. In engine-driven mode the engine owns eviction, so the lease pins nothing but still
   * reports the matched length and must still be released once.
   *
   * @throws IllegalArgumentException if {@code tokens} is empty
   */
  public Lease acquire(int[] tokens) {
    return acquire(BlockHasher.ROOT_PARENT, tokens);
  }

  /**
   * Like {@link #acquire(int[])} in the scope whose root hash is {@code scopeRoot}
   * ({@link BlockHasher#scopeRoot}; {@link BlockHasher#ROOT_PARENT} for the default scope).
   *
   * @throws IllegalArgumentException if {@code tokens} is empty
   */
  public Lease acquire(long scopeRoot, int[] tokens) {
    Objects.requireNonNull(tokens, "tokens");
    if (tokens.length == 0) {
      throw new IllegalArgumentException("tokens must not be empty");
    }
    if (mode == Mode.ENGINE_DRIVEN) {
      return new Lease(this, null, match(scopeRoot, tokens, tokens.length), 0);
    }
    return write(Delivery.AFTER_REPAIR, () -> {
      Node start = rootOf(scopeRoot);
      int matched = start == null ? 0 : walk(start, tokens, tokens.length);
      if (matched == 0) {
        return new Lease(this, null, 0, epoch);
      }
      int now = nextStamp();
      Node end = extend(start, 0, tokens, 0, matched, 0, now, true);
      Lease lease = new Lease(this, end, matched, epoch); // allocated before anything is pinned
      for (Node x = end; x.parent != null; x = x.parent) {
        if (x.lru >= 0) {
          heapRemove(x);
        }
        x.lru--; // one more lock
      }
      // a failure from here on hands out no lease: only a merge that was due can fail, and the
      // path left unmerged breaks the normal form, so the repair clears the tree and the pins
      normalizeUpward(end);
      return lease;
    });
  }

  /**
   * Releases {@code lease} if it is still held. Returns false, changing nothing, if it was
   * already released; any error is the release's own (the lease is released all the same).
   */
  boolean releaseIfHeld(Lease lease) {
    return write(Delivery.ALL, () -> {
      if (lease.released) {
        return false;
      }
      lease.released = true; // even if what follows fails: the repair keeps or clears its pins
      unpin(lease);
      return true;
    });
  }

  private void unpin(Lease lease) {
    Node end = lease.end;
    if (end == null || lease.epoch != epoch) {
      return; // nothing pinned, or the tree was cleared since
    }
    // the counts first, none of which can fail: a failure after them leaves no count behind
    for (Node x = end; x.parent != null; x = x.parent) {
      x.lru++; // one lock less
    }
    if (end.lru == -1 && end.kids.length == 0) { // the others on the path have a child
      heapAdd(end);
    }
    normalizeUpward(end.kids.length == 1 ? end.kids[0] : end);
    // nothing to evict: the size never exceeds the capacity, leases or not (see checkInvariants)
  }

  /**
   * Evicts least recently used unleased tokens until at most {@code targetTokens} remain (or
   * nothing more can be evicted), for example when the engine reports memory pressure.
   * Self-managed mode only.
   *
   * @return the number of tokens evicted
   */
  public long evictTo(long targetTokens) {
    requireSelfManaged("evictTo");
    if (targetTokens < 0) {
      throw new IllegalArgumentException("targetTokens must be >= 0, was " + targetTokens);
    }
    return write(Delivery.ALL, () -> {
      long before = size;
      evictLocked(targetTokens);
      return before - size;
    });
  }

  /** Drops everything. Outstanding leases become no-ops (their release still counts once). */
  public void clear() {
    write(Delivery.ALL, () -> {
      clearLocked();
      return null;
    });
  }

  /** Which queued block events {@link #write} delivers once it has released the write lock. */
  private enum Delivery {
    /** All of them, whether the write returned or threw. */
    ALL,
    /**
     * Only if the write threw and was repaired: an acquire queues no events of its own, and must
     * not wait on those of others (a blocked listener holds up writes, never a lease).
     */
    AFTER_REPAIR,
    /** None: the caller delivers them (an engine event, once it has counted its own failure). */
    BY_CALLER
  }

  /**
   * Runs {@code change} the way every insert, acquire, release, eviction, clear and engine event
   * runs: under the write lock, taken first (a failure to take it changes and delivers nothing).
   * If it returns, the block changes it buffered are queued as events ({@link #flushEvents}). If
   * it throws, the tree is repaired and the repair counted ({@link #repairAfterFault}) before the
   * lock is released, and the same error goes on. Then, outside the lock and after a failure too,
   * the queued events are given to the listeners as {@code delivery} says; that delivery throws
   * only a listener's virtual machine error, which replaces the write's result or error ({@link
   * #deliver}).
   */
  private <T> T write(Delivery delivery, Supplier<T> change) {
    long ws = lock.writeLock();
    boolean repaired = false;
    try {
      try {
        T result = change.get();
        flushEvents();
        return result;
      } catch (Throwable e) {
        repaired = true;
        repairAfterFault();
        throw e;
      } finally {
        lock.unlockWrite(ws);
      }
    } finally {
      if (delivery == Delivery.ALL || repaired && delivery == Delivery.AFTER_REPAIR) {
        deliver();
      }
    }
  }

  /**
   * After a write that threw part-way, under the write lock (every write, self-managed or an
   * engine event, calls it before its error goes on): the changes it made stay if the tree is
   * still consistent (as when it threw before changing anything); else the tree is cleared (as
   * {@link #clear} does: outstanding leases pin nothing then, and their release still counts
   * once), which can only under-report the cache, rather than left with broken links, a wrong
   * size or LRU heap, or blocks that no removal reaches. The block events the write buffered are
   * not given: it may have hashed blocks it never linked, or reported blocks evicted that it
   * kept. If it buffered any and the tree stays, the listeners are told {@code onCleared()} and
   * then every block held, as a new listener's snapshot gives them; if it is cleared, they are
   * told {@code onCleared()}. The check is linear in the tree's size and runs only after such a
   * failure ({@link #repairsForTest}).
   */
  private void repairAfterFault() {
    repairs++;
    boolean buffered = storedBuf.size > 0 || evictedBuf.size > 0;
    storedBuf.size = 0;
    evictedBuf.size = 0;
    try {
      new InvariantChecker().check();
      if (buffered && listeners.length > 0) {
        long[] held = blockHashesLocked();
        pending.add(new Event(Event.CLEARED, null, listeners));
        if (held.length > 0) {
          pending.add(new Event(Event.STORED, held, listeners));
        }
      }
      return;
    } catch (Throwable broken) { // a StackOverflowError or out of memory too: clear
      LOG.error("{}the prefix tree could not be kept after a write that failed part-way: cleared",
          logPrefix, broken);
    }
    clearLocked();
  }

  /** How many writes threw part-way and were repaired (tests only). */
  long repairsForTest() {
    long ws = lock.writeLock();
    try {
      return repairs;
    } finally {
      lock.unlockWrite(ws);
    }
  }

  private void clearLocked() {
    flushEvents();
    root.keys = NO_TOKENS;
    root.kids = NO_NODES;
    scopeRoots.clear();
    Arrays.fill(heap, 0, heapSize, null);
    heapSize = 0;
    size = 0;
    epoch++;
    if (engineIndex != null) {
      engineIndex.clear();
      aliases.clear();
      extraCopies.clear();
    }
    if (listeners.length > 0) {
      pending.add(new Event(Event.CLEARED, null, listeners));
    }
  }

  private void requireSelfManaged(String op) {
    if (mode != Mode.SELF_MANAGED) {
      throw new IllegalStateException(
          op + " is for self-managed trees; this tree is engine-driven: feed it engineEvents()");
    }
  }

  /**
   * The root of the scope {@code scopeRoot}, created (empty, and registered) if it has none; a
   * caller that may leave it empty calls {@link #dropIfEmptyScope} after.
   */
  private Node rootForWrite(long scopeRoot) {
    if (scopeRoot == BlockHasher.ROOT_PARENT) {
      return root;
    }
    Node r = scopeRoots.get(scopeRoot);
    if (r == null) {
      r = newScopeRoot(scopeRoot);
      scopeRoots.put(scopeRoot, r);
    }
    return r;
  }

  private static Node newScopeRoot(long scopeRoot) {
    Node r = new Node();
    r.edge = NO_TOKENS;
    r.keys = NO_TOKENS;
    r.kids = NO_NODES;
    r.lastHash = scopeRoot;
    return r;
  }

  /** Forgets root r if it is a scope root that holds nothing (the default root stays). */
  private void dropIfEmptyScope(Node r) {
    if (r != root && r.kids.length == 0) {
      scopeRoots.remove(r.lastHash, r);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // the path walk shared by insert, acquire and engine stores

  /**
   * Makes sure the path continuing position (n, d) by t[off..to) exists and returns the node on
   * which it ends. Token t[i] sits at depth i + shift. If {@code touch}, every node on the way
   * gets stamp {@code now}, and the path is split where it ends (self-managed mode).
   */
  private Node extend(
      Node n, int d, int[] t, int off, int to, int shift, int now, boolean touch) {
    while (true) {
      int nEnd = n.end;
      if (d < nEnd) { // inside n's edge
        int eo = d - n.start();
        int m = Math.min(n.edge.length - eo, to - off);
        int mm = Arrays.mismatch(n.edge, eo, eo + m, t, off, off + m);
        int matched = mm < 0 ? m : mm;
        d += matched;
        off += matched;
        if (d < nEnd) {
          if (off == to) { // the sequence ends inside this edge
            if (touch) {
              Node u = splitAt(n, d);
              u.stamp = now;
              return u;
            }
            return n;
          }
          Node u = splitAt(n, d); // diverges inside this edge
          if (touch) {
            u.stamp = now;
          }
          return addLeaf(u, t, off, to, shift, now);
        }
        if (touch) {
          touch(n, now); // the whole edge is on the path
        }
        continue;
      }
      if (off == to) {
        return n;
      }
      Node next = child(n, t[off]);
      if (next == null) {
        if (n.parent != null && n.kids.length == 0 && n.locks() == 0) { // not a root
          if (mode == Mode.SELF_MANAGED) {
            extendLeaf(n, t, off, to, shift);
            return n;
          }
          // up to the next span boundary; beyond it a child, so that the edge copied stays short
          int room = (n.end + extensionSpan - 1) / extensionSpan * extensionSpan - n.end;
          if (room > 0) {
            int k = Math.min(room, to - off);
            extendLeaf(n, t, off, off + k, shift);
            off += k;
            if (off == to) {
              return n;
            }
          }
        }
        return addLeaf(n, t, off, to, shift, now);
      }
      n = next;
    }
  }

  /**
   * The next use stamp. Stamps are 32-bit to keep nodes small; before the counter would
   * overflow, every node's stamp is replaced by its rank among the distinct stamps in use,
   * which keeps all comparisons (LRU order, the heap, the normal form) as they were.
   */
  private int nextStamp() {
    if (clock >= stampLimit) {
      renumberStamps();
    }
    return ++clock;
  }

  private void renumberStamps() {
    List<Node> all = new ArrayList<>();
    java.util.ArrayDeque<Node> stack = new java.util.ArrayDeque<>();
    stack.push(root);
    scopeRoots.values().forEach(stack::push);
    while (!stack.isEmpty()) {
      Node n = stack.pop();
      all.add(n);
      for (Node c : n.kids) {
        if (c != null) {
          stack.push(c);
        }
      }
    }
    int[] distinct = all.stream().mapToInt(n -> n.stamp).sorted().distinct().toArray();
    for (Node n : all) {
      n.stamp = Arrays.binarySearch(distinct, n.stamp); // the roots keep 0, the smallest
    }
    clock = distinct.length - 1;
  }

  /**
   * How many block hashes the tree has recomputed from the tokens it holds (not counting the
   * hashes of newly stored blocks), including those {@link #checkInvariants()} recomputes
   * (tests only).
   */
  long rehashedBlocksForTest() {
    long ws = lock.writeLock();
    try {
      return rehashedBlocks;
    } finally {
      lock.unlockWrite(ws);
    }
  }

  /**
   * The work of the writes so far (tests only): tokens copied into new edge arrays, and nodes
   * visited by the walks that stamp a path and restore the normal form.
   */
  long[] writeCostForTest() {
    long ws = lock.writeLock();
    try {
      return new long[] {copiedEdgeTokens, pathSteps};
    } finally {
      lock.unlockWrite(ws);
    }
  }

  /** Sets the span at which leaf extensions stop, in blocks (tests only; see extensionSpan). */
  void extensionSpanForTest(int blocks) {
    extensionSpan = blocks * blockSize;
  }

  /**
   * Whether p is kept apart from an only child it could otherwise merge with: an engine-driven
   * node ending at a span boundary (see {@code extensionSpan}).
   */
  private boolean atSpanBoundary(Node p) {
    return mode == Mode.ENGINE_DRIVEN && p.end % extensionSpan == 0;
  }

  /** Lowers the stamp renumbering threshold (tests only). */
  void stampLimitForTest(int limit) {
    stampLimit = limit;
  }

  /**
   * Sets the use counter (tests only), to run a tree up to the real renumbering threshold; the
   * stamps held must not exceed it.
   */
  void clockForTest(int value) {
    long ws = lock.writeLock();
    try {
      clock = value;
    } finally {
      lock.unlockWrite(ws);
    }
  }

  private Node newNode() {
    return mode == Mode.ENGINE_DRIVEN ? new EngineNode() : new Node();
  }

  private void touch(Node n, int now) {
    pathSteps++;
    n.stamp = now;
    if (n.lru >= 0) {
      siftDown(n.lru);
    }
  }

  /** Splits n at absolute depth d (n.start() < d < n.end): returns the new upper node. */
  private Node splitAt(Node n, int d) {
    int m = d - n.start();
    int[] e = n.edge;
    Node u = newNode();
    u.edge = Arrays.copyOfRange(e, 0, m);
    u.end = d;
    u.stamp = n.stamp;
    u.lru = -1 - n.locks(); // an inner node: never in the heap
    u.parent = n.parent;
    u.keys = new int[] {e[m]};
    u.kids = new Node[] {n};
    int ku = d / blockSize - n.start() / blockSize;
    u.lastHash = ku == 0 ? n.parent.lastHash : hashEndingAt(n, (d / blockSize) * blockSize);
    if (ku > 0) {
      int total = blockCount(n);
      if (n.engineBlocks() != null) {
        u.engineBlocks(Arrays.copyOfRange(n.engineBlocks(), 0, ku));
        n.engineBlocks(ku == total ? null : Arrays.copyOfRange(n.engineBlocks(), ku, total));
        reindex(u);
      }
    }
    n.edge = Arrays.copyOfRange(e, m, e.length); // n.end stays
    copiedEdgeTokens += e.length;
    n.dropBlockHashCache(); // its edge starts later: other blocks, another parent hash
    replaceChild(u.parent, n, u);
    n.parent = u;
    return u;
  }

  private Node addLeaf(Node parent, int[] t, int off, int to, int shift, int now) {
    Node leaf = newNode();
    leaf.edge = Arrays.copyOfRange(t, off, to);
    leaf.end = to + shift;
    leaf.stamp = now;
    leaf.parent = parent;
    leaf.keys = NO_TOKENS;
    leaf.kids = NO_NODES;
    long[] added = hashNewBlocks(parent, leaf.start(), leaf.end, t, shift);
    leaf.lastHash = added == null ? parent.lastHash : added[added.length - 1];
    if (added != null && mode == Mode.ENGINE_DRIVEN) {
      leaf.engineBlocks(new long[added.length]);
    }
    boolean wasLeaf = parent.kids.length == 0;
    midWriteFaultForTest.run(); // its blocks are hashed (and buffered as stored), not linked yet
    insertChild(parent, leaf);
    if (wasLeaf && parent.lru >= 0) {
      heapRemove(parent);
    }
    size += leaf.edge.length;
    heapAdd(leaf); // unleased: in engine-driven mode nothing is ever leased
    return leaf;
  }

  private void extendLeaf(Node n, int[] t, int off, int to, int shift) {
    int oldEnd = n.end;
    int[] e = Arrays.copyOf(n.edge, n.edge.length + (to - off));
    System.arraycopy(t, off, e, n.edge.length, to - off);
    copiedEdgeTokens += e.length;
    long[] added = hashNewBlocks(n, oldEnd, oldEnd + (to - off), t, shift);
    n.edge = e;
    n.end = oldEnd + (to - off);
    n.dropBlockHashCache(); // more blocks than it holds
    if (added != null) {
      n.lastHash = added[added.length - 1];
      if (mode == Mode.ENGINE_DRIVEN) {
        n.engineBlocks(concat(n.engineBlocks(), new long[added.length]));
      }
    }
    size += to - off;
  }

  /**
   * Hashes the blocks ending in (from, to] of a path whose position at depth {@code from} is on
   * node {@code at} (at.end >= from); token at depth x is t[x - shift]. Records them as stored.
   */
  private long[] hashNewBlocks(Node at, int from, int to, int[] t, int shift) {
    int first = from / blockSize;
    int count = to / blockSize - first;
    if (count == 0) {
      return null;
    }
    long prev = hashEndingAt(at, first * blockSize);
    long[] out = new long[count];
    for (int k = 0; k < count; k++) {
      int blockStart = (first + k) * blockSize;
      prev = hasher.hashBlock(prev, t, blockStart - shift);
      out[k] = prev;
    }
    storedBuf.addAll(out);
    return out;
  }

  /** The hash of the block ending at depth f on the path through n (n.end >= f). */
  private long hashEndingAt(Node n, int f) {
    Node x = n;
    while (x.start() >= f && x.parent != null) { // f == 0 ends on the root: its scope's hash
      x = x.parent;
    }
    if (f == (x.end) / blockSize * blockSize) {
      return x.lastHash; // x's last block
    }
    // rehash x's blocks up to f from the last block ending before x (at most x's edge)
    int g = x.start() / blockSize * blockSize;
    long prev = x.parent.lastHash;
    int[] buf = new int[f - g];
    pathTokens(x, g, f, buf);
    for (int s = 0; s < buf.length; s += blockSize) {
      prev = hasher.hashBlock(prev, buf, s);
    }
    rehashedBlocks += buf.length / blockSize;
    return prev;
  }

  /** Full blocks whose last token lies on n's edge. */
  private int blockCount(Node n) {
    return (n.end) / blockSize - n.start() / blockSize;
  }

  /** Writes the tokens at depths [from, to) of the path ending on node x (to <= x.end). */
  private static void pathTokens(Node x, int from, int to, int[] dst) {
    Node y = x;
    int hi = to;
    while (hi > from) {
      while (y.start() >= hi) {
        y = y.parent;
      }
      int lo = Math.max(from, y.start());
      System.arraycopy(y.edge, lo - y.start(), dst, lo - from, hi - lo);
      hi = lo;
    }
  }

  /**
   * The chained hashes of the blocks whose last token lies on n's edge (null if none),
   * recomputed from the path's tokens and the hash held by n's parent.
   */
  private long[] blockHashesOf(Node n) {
    int count = blockCount(n);
    if (count == 0) {
      return null;
    }
    int g = n.start() / blockSize * blockSize;
    long prev = n.parent.lastHash;
    int[] buf = new int[count * blockSize];
    pathTokens(n, g, g + buf.length, buf);
    long[] out = new long[count];
    for (int k = 0; k < count; k++) {
      prev = hasher.hashBlock(prev, buf, k * blockSize);
      out[k] = prev;
    }
    rehashedBlocks += count;
    return out;
  }

  /** The number of children (dense arrays hold exactly them; a table keeps the count). */
  static int childCount(Node p) {
    int len = p.kids.length;
    return len <= DENSE_MAX ? len : p.keys[len];
  }

  private static void insertChild(Node p, Node c) {
    int key = c.edge[0];
    Node[] kids = p.kids;
    int len = kids.length;
    if (len < DENSE_MAX) {
      int at = 0;
      while (at < len && p.keys[at] < key) {
        at++;
      }
      int[] nk = new int[len + 1];
      Node[] nn = new Node[len + 1];
      System.arraycopy(p.keys, 0, nk, 0, at);
      System.arraycopy(kids, 0, nn, 0, at);
      nk[at] = key;
      nn[at] = c;
      System.arraycopy(p.keys, at, nk, at + 1, len - at);
      System.arraycopy(kids, at, nn, at + 1, len - at);
      p.kids = nn;
      p.keys = nk;
      return;
    }
    int count = childCount(p);
    if (len == DENSE_MAX || (count + 1) * 4 > len * 3) {
      Node[] all = new Node[count + 1];
      int k = 0;
      for (Node x : kids) {
        if (x != null) {
          all[k++] = x;
        }
      }
      all[k] = c;
      setChildren(p, all);
      return;
    }
    int[] keys = p.keys;
    int h = slot(key, len);
    while (kids[h] != null) {
      h = (h + 1) & (len - 1);
    }
    keys[h] = key;
    keys[len] = count + 1;
    kids[h] = c;
  }

  /**
   * Replaces p's children by {@code all} (each with a non-empty edge, distinct first tokens):
   * sorted dense arrays for up to {@value #DENSE_MAX}, else a table filled to at most 3/4.
   */
  private static void setChildren(Node p, Node[] all) {
    int count = all.length;
    if (count == 0) {
      p.keys = NO_TOKENS;
      p.kids = NO_NODES;
      return;
    }
    if (count <= DENSE_MAX) {
      Node[] nn = all.clone();
      Arrays.sort(nn, (a, b) -> Integer.compare(a.edge[0], b.edge[0]));
      int[] nk = new int[count];
      for (int i = 0; i < count; i++) {
        nk[i] = nn[i].edge[0];
      }
      p.kids = nn;
      p.keys = nk;
      return;
    }
    int len = 4;
    while (count * 4 > len * 3) {
      len <<= 1;
    }
    int[] nk = new int[len + 1];
    Node[] nn = new Node[len];
    for (Node x : all) {
      int key = x.edge[0];
      int h = slot(key, len);
      while (nn[h] != null) {
        h = (h + 1) & (len - 1);
      }
      nk[h] = key;
      nn[h] = x;
    }
    nk[len] = count;
    p.kids = nn;
    p.keys = nk;
  }

  /** The index of child c (first token {@code key}) in p's child arrays. */
  private static int indexOfChild(Node p, Node c, int key) {
    Node[] kids = p.kids;
    int len = kids.length;
    int h = len <= DENSE_MAX ? 0 : slot(key, len);
    for (int probes = 0; probes < len; probes++) {
      if (kids[h] == c) {
        return h;
      }
      h = (h + 1) & (len - 1);
    }
    throw new AssertionError("not a child");
  }

  private static void removeChild(Node p, Node c) {
    Node[] kids = p.kids;
    int len = kids.length;
    int at = indexOfChild(p, c, c.edge[0]);
    if (len <= DENSE_MAX) {
      if (len == 1) {
        p.keys = NO_TOKENS;
        p.kids = NO_NODES;
        return;
      }
      int[] nk = new int[len - 1];
      Node[] nn = new Node[len - 1];
      System.arraycopy(p.keys, 0, nk, 0, at);
      System.arraycopy(kids, 0, nn, 0, at);
      System.arraycopy(p.keys, at + 1, nk, at, len - at - 1);
      System.arraycopy(kids, at + 1, nn, at, len - at - 1);
      p.kids = nn;
      p.keys = nk;
      return;
    }
    int count = childCount(p) - 1;
    if (count <= DENSE_MAX || count * 8 < len) { // back to dense arrays, or a smaller table
      Node[] rest = new Node[count];
      int k = 0;
      for (Node x : kids) {
        if (x != null && x != c) {
          rest[k++] = x;
        }
      }
      setChildren(p, rest);
      return;
    }
    // linear probing deletion: shift later entries of the cluster back into the hole
    int[] keys = p.keys;
    int mask = len - 1;
    int hole = at;
    kids[hole] = null;
    for (int j = (hole + 1) & mask; kids[j] != null; j = (j + 1) & mask) {
      int home = slot(keys[j], len);
      boolean between = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (!between) {
        keys[hole] = keys[j];
        kids[hole] = kids[j];
        kids[j] = null;
        hole = j;
      }
    }
    keys[len] = count;
  }

  private static void replaceChild(Node p, Node old, Node by) {
    p.kids[indexOfChild(p, old, by.edge[0])] = by;
  }

  /** Restores the normal form on the path from n up to the root after stamps or locks changed. */
  private void normalizeUpward(Node n) {
    normalizeUpward(n, null);
  }

  /**
   * {@link #normalizeUpward(Node)} up to {@code top}, an ancestor of n (or n) above which
   * nothing changed: the pairs of nodes from n up to {@code top} and its child (null: the root).
   */
  private void normalizeUpward(Node n, Node top) {
    Node x = n;
    while (x != top && x.parent != null && x.parent.parent != null) { // not roots
      pathSteps++;
      Node p = x.parent;
      if (p.kids.length == 1 && p.locks() == x.locks() && p.stamp == x.stamp
          && !atSpanBoundary(p)) {
        mergeIntoChild(p, x);
      } else {
        x = p;
      }
    }
  }

  /** Child c absorbs its parent p (p's only child, p not the root). */
  private void mergeIntoChild(Node p, Node c) {
    midWriteFaultForTest.run();
    int[] e = new int[p.edge.length + c.edge.length];
    System.arraycopy(p.edge, 0, e, 0, p.edge.length);
    System.arraycopy(c.edge, 0, e, p.edge.length, c.edge.length);
    copiedEdgeTokens += e.length;
    Node gp = p.parent;
    if (mode == Mode.ENGINE_DRIVEN) {
      c.engineBlocks(concat(p.engineBlocks(), c.engineBlocks()));
    }
    c.edge = e; // c.end stays
    c.dropBlockHashCache(); // its edge starts earlier: p's blocks come first
    replaceChild(gp, p, c);
    c.parent = gp;
    p.parent = null;
    if (mode == Mode.ENGINE_DRIVEN) {
      reindex(c);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // eviction (self-managed)

  private void evictLocked(long target) {
    while (size > target && heapSize > 0) {
      Node l = heap[0];
      long excess = size - target;
      int len = l.edge.length;
      if (excess < len) {
        trimLeaf(l, len - (int) excess);
      } else {
        removeLeafSelfManaged(l);
      }
    }
  }

  /** Shortens leaf l's edge to newLen >= 1 tokens, reporting the blocks that go. */
  private void trimLeaf(Node l, int newLen) {
    int keep = (l.start() + newLen) / blockSize - l.start() / blockSize;
    int count = blockCount(l);
    if (keep < count) {
      if (mode == Mode.ENGINE_DRIVEN || listeners.length > 0) {
        // the engine evicts a chain one block at a time: an engine node keeps the edge's block
        // hashes, whose first ones stay valid while only tail blocks go (EngineNode#blockHashCache)
        long[] hashes = l.blockHashCache();
        if (hashes == null) {
          hashes = blockHashesOf(l);
        }
        if (listeners.length > 0) { // the evicted hashes are only needed for the events
          evictedBuf.addRange(hashes, keep, count);
        }
        l.lastHash = keep == 0 ? l.parent.lastHash : hashes[keep - 1];
        if (l instanceof EngineNode en) {
          // at most twice the blocks kept, so that a long edge trimmed short frees its hashes
          en.blockHashCache = keep == 0 ? null
              : keep * 2 < hashes.length ? Arrays.copyOf(hashes, keep) : hashes;
        }
      } else {
        l.lastHash = hashEndingAt(l, (l.start() / blockSize + keep) * blockSize);
      }
      if (l.engineBlocks() != null) {
        unindex(l.engineBlocks(), keep, l.engineBlocks().length);
        l.engineBlocks(keep == 0 ? null : Arrays.copyOf(l.engineBlocks(), keep));
      }
    }
    size -= l.edge.length - newLen;
    l.end = l.start() + newLen;
    midWriteFaultForTest.run();
    l.edge = Arrays.copyOf(l.edge, newLen);
    copiedEdgeTokens += newLen;
  }

  private void removeLeafSelfManaged(Node l) {
    detach(l);
    Node p = l.parent;
    l.parent = null;
    if (p.parent == null) { // a root
      dropIfEmptyScope(p);
      return;
    }
    if (p.kids.length == 0) {
      if (p.locks() == 0) {
        heapAdd(p);
      }
    } else if (p.kids.length == 1) {
      Node c = p.kids[0];
      if (p.locks() == c.locks() && p.stamp == c.stamp) {
        mergeIntoChild(p, c);
      }
    }
  }

  /**
   * Removes leaf l from its parent (and from the LRU heap), reporting its blocks; l.parent is
   * left for the caller.
   */
  private void detach(Node l) {
    if (l.lru >= 0) {
      heapRemove(l);
    }
    int count = blockCount(l);
    if (count > 0) {
      if (listeners.length > 0) { // a trimmed engine leaf keeps its hashes: no need to rehash
        long[] hashes = l.blockHashCache();
        evictedBuf.addRange(hashes != null ? hashes : blockHashesOf(l), 0, count);
      }
      if (l.engineBlocks() != null) {
        unindex(l.engineBlocks(), 0, l.engineBlocks().length);
      }
    }
    size -= l.edge.length;
    removeChild(l.parent, l);
  }

  // ---------------------------------------------------------------------------------------------
  // engine-driven mode

  /**
   * The listener to register with the engine (engine-driven mode): its events are the only
   * thing that changes this tree. It never throws but a {@link VirtualMachineError} other than
   * a {@link StackOverflowError}; events it cannot apply are counted in {@link
   * #engineEventStats()}, and events whose application threw (a bug, an {@link Error}) in
   * {@link #engineEventFailures()}. A store whose token count is not its blocks times the block
   * size is logged at ERROR (the 1st, 2nd, 4th, 8th... such store), naming the engine's block
   * size when its tokens are a whole number of blocks of another size, else the count received:
   * an engine whose block size is not the tree's sends only such stores.
   *
   * @throws IllegalStateException if the tree is self-managed
   */
  public CacheEventListener engineEvents() {
    if (mode != Mode.ENGINE_DRIVEN) {
      throw new IllegalStateException(
          "engineEvents() is for engine-driven trees; this tree is self-managed: call insert()");
    }
    return engineListener;
  }

  /**
   * Counters of the engine events received so far, as some whole event left them: read under the
   * shared read lock, so that polling them does not make concurrent matches retry.
   */
  public CacheEventStats engineEventStats() {
    long rs = lock.readLock();
    try {
      return new CacheEventStats(
          storedEvents,
          removedEvents,
          clearedEvents,
          unknownParents,
          unknownBlocks,
          malformedEvents,
          duplicateBlocks,
          aliasedBlocks,
          conflictingEvents,
          overflows,
          overflowBlocks);
    } finally {
      lock.unlockRead(rs);
    }
  }

  /**
   * How many copies of the engine hash {@code h} the tree counts: the stores of it not yet
   * matched by a removal, while it names a held block or is an alias; 0 if the tree does not
   * know it (tests only).
   */
  long engineCopies(long h) {
    long ws = lock.writeLock();
    try {
      if (!engineIndex.containsKey(h) && !aliases.containsKey(h)) {
        return 0;
      }
      return 1 + extraCopies.getOrDefault(h, 0L);
    } finally {
      lock.unlockWrite(ws);
    }
  }

  /** The number of aliases remembered (tests only). */
  int aliasCountForTest() {
    long ws = lock.writeLock();
    try {
      return aliases.size();
    } finally {
      lock.unlockWrite(ws);
    }
  }

  private final class EngineListener implements CacheEventListener {
    @Override
    public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
      onBlocksStored(CacheScope.DEFAULT, parentBlockHash, blockHashes, tokenIds);
    }

    @Override
    public void onBlocksStored(
        CacheScope scope, long parentBlockHash, long[] blockHashes, int[] tokenIds) {
      if (scope == null) { // dropped and counted like the other malformed events
        long ws = lock.writeLock();
        try {
          malformedEvents++;
        } finally {
          lock.unlockWrite(ws);
        }
        return;
      }
      apply("stored", () -> {
        long scopeRoot = BlockHasher.scopeRoot(scope);
        StoreNotice notice = write(Delivery.BY_CALLER, () -> {
          engineFaultForTest.run();
          long before = overflowBlocks;
          long misfitsBefore = misfitStores;
          engineStore(scopeRoot, parentBlockHash, blockHashes, tokenIds);
          if (misfitStores != misfitsBefore) {
            return new Misfit(blockHashes.length, tokenIds.length, misfitStores);
          }
          return overflowBlocks == before
              ? null : new Overflow(overflowBlocks - before, overflows, overflowBlocks);
        });
        if (notice instanceof Misfit m && Long.bitCount(m.count()) == 1) { // 1st, 2nd, 4th...
          logMisfit(m);
        }
        Overflow overflow = notice instanceof Overflow o ? o : null;
        if (overflow != null && Long.bitCount(overflow.count()) == 1) { // 1st, 2nd, 4th, 8th...
          LOG.warn("{}the mirror of the engine's cache exceeded its limit of {} tokens and "
              + "dropped its {} least recently stored blocks ({} times, {} blocks so far): the "
              + "engine stores blocks whose removals do not arrive (a cache larger than the "
              + "limit, or an integration that loses or never sends BlockRemoved events)",
              logPrefix, mirrorLimit, overflow.dropped(), overflow.count(),
              overflow.droppedSoFar());
        } else if (overflow != null) {
          LOG.debug("mirror over its limit of {} tokens: dropped {} blocks ({} times)",
              mirrorLimit, overflow.dropped(), overflow.count());
        }
      });
    }

    @Override
    public void onBlocksRemoved(long[] blockHashes) {
      apply("removed", () -> write(Delivery.BY_CALLER, () -> {
        engineFaultForTest.run();
        engineRemove(blockHashes);
        return null;
      }));
    }

    @Override
    public void onAllCleared() {
      apply("cleared", () -> write(Delivery.BY_CALLER, () -> {
        engineFaultForTest.run();
        clearedEvents++;
        clearLocked();
        return null;
      }));
    }

    /**
     * Applies one engine event: {@code event} makes its change through {@link #write} ({@link
     * Delivery#BY_CALLER}), and may do more outside the write lock. Whatever it throws is the
     * event's failure ({@link #engineEventFailed}). Then, after a failure too, the queued block
     * events are delivered: only now, so that a listener's failure is no failure of the event
     * ({@link #listenerFailures()}), and before an error thrown on, so that the listeners hear
     * of its repair at once.
     */
    private void apply(String kind, Runnable event) {
      try {
        event.run();
      } catch (Throwable e) { // an Error or a checked exception thrown undeclared too
        engineEventFailed(kind, e);
      } finally {
        deliver();
      }
    }

    /** What a store leaves to be logged once the write lock is released. */
    private sealed interface StoreNotice permits Overflow, Misfit {}

    /** Blocks a store dropped over the mirror limit, the overflows so far and their blocks. */
    private record Overflow(long dropped, long count, long droppedSoFar) implements StoreNotice {}

    /**
     * A store dropped for its token count, not its block count times the block size: its blocks
     * and tokens, and the count of such stores so far.
     */
    private record Misfit(int blocks, int tokens, long count) implements StoreNotice {}

    /**
     * Logs a store whose token count does not fit the block size at ERROR: an engine whose
     * block size is not this tree's sends only such stores, and the tree stays empty. It names
     * the engine's block size when the tokens are a whole number of blocks of another size,
     * else the count received.
     */
    private void logMisfit(Misfit m) {
      String advice = ": RouterConfig.blockSize must equal the engine's KV block size; such "
          + "stores cannot be mirrored and are dropped ({} so far, counted in malformedEvents)";
      if (m.blocks() > 0 && m.tokens() > 0 && m.tokens() % m.blocks() == 0) {
        LOG.error("{}the engine stores blocks of {} tokens, the tree's block size is {}" + advice,
            logPrefix, m.tokens() / m.blocks(), blockSize, m.count());
      } else {
        LOG.error("{}the engine stored {} blocks with {} tokens, not blocks of {} tokens, the "
            + "tree's block size" + advice, logPrefix, m.blocks(), m.tokens(), blockSize,
            m.count());
      }
    }

    @Override
    public String toString() {
      return "engine events of " + ConcurrentPrefixTree.this;
    }

    /**
     * Counts and logs an event whose application threw: nothing goes back to the engine's
     * thread but a {@link VirtualMachineError} other than a {@link StackOverflowError} (out of
     * memory: the virtual machine's trouble, not the event's).
     */
    private void engineEventFailed(String kind, Throwable e) {
      engineEventFailures.incrementAndGet();
      if (e instanceof VirtualMachineError vme && !(e instanceof StackOverflowError)) {
        LOG.error("{}engine {} event could not be applied", logPrefix, kind, e);
        throw vme;
      }
      LOG.error("{}engine {} event could not be applied", logPrefix, kind, e);
    }
  }

  /**
   * Applies a store; {@code scopeRoot} is the scope of a chain starting at
   * {@link CacheEventListener#NO_PARENT} (a continued chain is in its parent's scope).
   */
  private void engineStore(long scopeRoot, long parent, long[] hashes, int[] tokens) {
    if (hashes == null || tokens == null) {
      malformedEvents++;
      return;
    }
    if (tokens.length != (long) hashes.length * blockSize) {
      malformedEvents++;
      misfitStores++;
      return;
    }
    for (long h : hashes) {
      if (h == CacheEventListener.NO_PARENT) {
        malformedEvents++;
        return;
      }
    }
    storedEvents++;
    if (hashes.length == 0) {
      return;
    }
    Node n;
    int d;
    boolean newScope = false;
    if (parent == CacheEventListener.NO_PARENT) {
      n = scopeRoot == BlockHasher.ROOT_PARENT ? root : scopeRoots.get(scopeRoot);
      if (n == null) { // registered below, once the event is known to apply
        n = newScopeRoot(scopeRoot);
        newScope = true;
      }
      d = 0;
    } else {
      long primary = aliases.getOrDefault(parent, parent);
      n = engineIndex.get(primary);
      if (n == null) {
        unknownParents++;
        return;
      }
      d = blockEnd(n, indexOfHash(n.engineBlocks(), primary));
    }
    if (reusesAHeldHash(n, d, hashes, tokens)) {
      conflictingEvents++;
      return;
    }
    if (newScope) {
      scopeRoots.put(scopeRoot, n);
    }
    // the store uses the whole prefix it continues (the engine ran a request on it): split where
    // it starts, touch up to the root, and extend touching, as a self-managed insert does
    int now;
    Node top = null;
    if (n.parent != null && d == n.end && n.kids.length == 0 && n.stamp == clock) {
      // it continues the leaf where the last store ended (a chain stored block by block): the
      // nodes holding the newest stamp are the path from the root to this leaf, so a new stamp
      // would order every node as the old one does; keep it and leave the path as it is
      now = clock;
      top = n;
    } else {
      if (d < n.end) {
        n = splitAt(n, d);
      }
      now = nextStamp();
      for (Node x = n; x.parent != null; x = x.parent) {
        touch(x, now);
      }
    }
    Node end = extend(n, d, tokens, 0, tokens.length, d, now, true);
    midStoreFaultForTest.run();
    // record the engine's hashes on the blocks of the path, deepest first
    Node x = end;
    for (int i = hashes.length - 1; i >= 0; i--) {
      int blockEndDepth = d + (i + 1) * blockSize;
      while (x.start() >= blockEndDepth) {
        x = x.parent;
      }
      int k = blockEndingAt(x, blockEndDepth);
      long existing = x.engineBlocks()[k];
      if (existing == 0) {
        x.engineBlocks()[k] = hashes[i];
        engineIndex.put(hashes[i], x);
        // it may be remembered as an alias of a block that has gone since: it names this block
        // now, so parents and removals naming it must find it here, not through the alias; the
        // copies counted for the alias were copies of the block that went, so it starts at one
        aliases.remove(hashes[i]);
        extraCopies.remove(hashes[i]);
      } else if (existing == hashes[i]) {
        duplicateBlocks++; // another copy: the block stays until every copy is removed
        extraCopies.merge(hashes[i], 1L, Long::sum);
      } else if (aliases.getOrDefault(hashes[i], 0L) != existing) {
        aliasedBlocks++;
        aliases.remove(hashes[i]); // one of a block that has gone is remembered anew: the newest
        aliases.put(hashes[i], existing);
        extraCopies.remove(hashes[i]); // a new alias (or one of a block that has gone): one copy
        forgetOldestAliases();
      } else {
        duplicateBlocks++; // another copy of the alias
        extraCopies.merge(hashes[i], 1L, Long::sum);
      }
    }
    normalizeUpward(end, top);
    evictOverflow();
    sweepAliases();
  }

  /**
   * Drops least recently stored blocks until the mirror holds at most its limit: a leaf's last
   * blocks first, leaves by age, exactly as the self-managed LRU but in whole blocks. A correct
   * engine never gets here (its cache cannot outgrow its KV capacity, and the limit is set above
   * that); an engine whose removals are lost would otherwise grow the mirror, the engine-hash
   * index and the gossiped summary without bound. The blocks go as if the engine had removed
   * them: reported evicted, unindexed with their copies; a later removal of one of them is an
   * unknown block, a store continuing one an unknown parent.
   */
  private void evictOverflow() {
    if (size <= mirrorLimit) {
      return;
    }
    overflows++;
    while (size > mirrorLimit && heapSize > 0) {
      Node l = heap[0];
      long excessBlocks = (size - mirrorLimit + blockSize - 1) / blockSize;
      int droppable = (l.edge.length - 1) / blockSize; // keeping the leaf's first token
      if (excessBlocks <= droppable) {
        trimLeaf(l, l.edge.length - (int) excessBlocks * blockSize);
        overflowBlocks += excessBlocks;
      } else {
        overflowBlocks += blockCount(l);
        Node p = l.parent;
        detach(l);
        l.parent = null;
        pruneEngine(p);
      }
    }
  }

  /**
   * Forgets the oldest aliases (and their copy counts) beyond {@link #aliasLimit}: more aliases
   * than the engine can hold blocks mean that their removals were lost, as for blocks beyond the
   * mirror limit, and aliases of a block that stays are not swept with those of blocks that went
   * (an engine that stores one block under ever new hashes and never removes them). A later
   * removal of a forgotten alias counts as an unknown block.
   */
  private void forgetOldestAliases() {
    Iterator<Long> oldest = aliases.keySet().iterator();
    while (aliases.size() > aliasLimit) {
      extraCopies.remove(oldest.next());
      oldest.remove();
    }
  }

  /**
   * Forgets the aliases of blocks that went (and their copy counts) once there are twice as
   * many aliases as after the last sweep: run after every store and removal, so aliases cannot
   * pile up whether or not the mirror reaches its limit (an engine that removes a block under
   * its first hash and never under its alias), at a cost linear in the aliases per doubling.
   */
  private void sweepAliases() {
    if (aliases.size() > aliasSweepAt) {
      aliases.values().removeIf(primary -> !engineIndex.containsKey(primary));
      extraCopies.keySet().removeIf(h -> !engineIndex.containsKey(h) && !aliases.containsKey(h));
      aliasSweepAt = Math.max(64, 2 * aliases.size());
    }
  }

  /**
   * Whether the store would tie one hash to two blocks: a hash appears twice in the event, or
   * names (as a block's hash or a live alias) a block other than the one the event puts it on.
   * An engine whose hashes are chained through the parent never does this; one that is not (or
   * a broken hasher) would otherwise leave a block that no removal can reach.
   */
  private boolean reusesAHeldHash(Node n, int d, long[] hashes, int[] tokens) {
    if (hashes.length > 1) {
      long[] sorted = hashes.clone();
      Arrays.sort(sorted);
      for (int i = 1; i < sorted.length; i++) {
        if (sorted[i] == sorted[i - 1]) {
          return true;
        }
      }
    }
    Node[] held = null;
    for (int i = 0; i < hashes.length; i++) {
      long h = hashes[i];
      Node at = engineIndex.get(h);
      if (at == null) {
        Long primary = aliases.get(h);
        if (primary == null || (at = engineIndex.get(primary)) == null) {
          continue; // unknown, or an alias of a block that has gone: free to name this block
        }
        h = primary;
      }
      if (held == null) {
        held = blocksOnPath(n, d, tokens, hashes.length);
      }
      Node x = held[i];
      int blockEndDepth = d + (i + 1) * blockSize;
      if (x != at || indexOfHash(at.engineBlocks(), h) != blockEndingAt(x, blockEndDepth)) {
        return true;
      }
    }
    return false;
  }

  /**
   * For each of the event's blocks, the node whose edge holds the block's last token if the
   * tree already holds the block at that place, else null.
   */
  private Node[] blocksOnPath(Node n, int d, int[] tokens, int blocks) {
    Node[] out = new Node[blocks];
    Node cur = n;
    int pos = d;
    for (int j = 0; j < tokens.length; j++) {
      if (pos == cur.end) {
        Node c = child(cur, tokens[j]);
        if (c == null) {
          break;
        }
        cur = c;
      }
      if (cur.edge[pos - cur.start()] != tokens[j]) {
        break;
      }
      pos++;
      if ((j + 1) % blockSize == 0) {
        out[j / blockSize] = cur;
      }
    }
    return out;
  }

  private void engineRemove(long[] hashes) {
    if (hashes == null) {
      malformedEvents++;
      return;
    }
    removedEvents++;
    for (long h : deepestFirst(hashes)) {
      Long extra = extraCopies.get(h);
      if (extra != null) { // another copy is still held: the block (or alias) stays
        if (extra == 1) {
          extraCopies.remove(h);
        } else {
          extraCopies.put(h, extra - 1);
        }
        continue;
      }
      Long aliasOf = aliases.remove(h);
      if (aliasOf != null) {
        continue; // the block stays cached under its first hash
      }
      Node n = engineIndex.get(h);
      if (n == null) {
        unknownBlocks++;
        continue;
      }
      int k = indexOfHash(n.engineBlocks(), h);
      // everything continuing the block goes, then the block itself and the rest of the edge
      for (Node c : n.kids.clone()) {
        if (c != null) {
          removeSubtree(c);
        }
      }
      int keepEnd = blockEnd(n, k) - blockSize;
      if (keepEnd <= n.start()) {
        Node p = n.parent;
        detach(n);
        n.parent = null;
        pruneEngine(p);
      } else {
        if (n.lru < 0) { // it lost its children: a leaf now
          heapAdd(n);
        }
        trimLeaf(n, keepEnd - n.start());
      }
    }
    sweepAliases();
  }

  /**
   * The hashes of one removal, those of held blocks deepest first (the others before them, in
   * their order). Removing a block takes everything continuing it, so an event naming a chain
   * root first (SGLang removes a radix node's pages in one event, in order) would otherwise
   * find the rest of the chain gone already and count each of its blocks as unknown; the
   * blocks left are the same in either order.
   */
  private long[] deepestFirst(long[] hashes) {
    if (hashes.length < 2) {
      return hashes;
    }
    long[] keyed = new long[hashes.length]; // depth in the high bits, position in the low
    for (int i = 0; i < hashes.length; i++) {
      Node n = engineIndex.get(hashes[i]);
      int depth = n == null ? Integer.MAX_VALUE
          : blockEnd(n, indexOfHash(n.engineBlocks(), hashes[i]));
      keyed[i] = ((long) (Integer.MAX_VALUE - depth) << 32) | i;
    }
    Arrays.sort(keyed);
    long[] out = new long[hashes.length];
    for (int i = 0; i < keyed.length; i++) {
      out[i] = hashes[(int) keyed[i]];
    }
    return out;
  }

  /**
   * Detaches {@code top} and everything below it, children before their parent (post-order), on
   * an explicit stack: an engine can build a path of one node per block, far deeper than the
   * thread's stack would allow a recursion.
   */
  private void removeSubtree(Node top) {
    ArrayDeque<RemovalFrame> stack = new ArrayDeque<>();
    stack.push(new RemovalFrame(top));
    while (!stack.isEmpty()) {
      RemovalFrame f = stack.peek();
      if (f.next < f.kids.length) {
        Node c = f.kids[f.next++];
        if (c != null) {
          stack.push(new RemovalFrame(c));
        }
      } else {
        stack.pop();
        detach(f.node);
        f.node.parent = null;
      }
    }
  }

  /** A node of {@link #removeSubtree} and the children it has yet to visit. */
  private static final class RemovalFrame {
    final Node node;
    final Node[] kids;
    int next;

    RemovalFrame(Node node) {
      this.node = node;
      this.kids = node.kids.clone();
    }
  }

  /** After p lost a child: drop a trailing partial block from a new leaf, merge a single child. */
  private void pruneEngine(Node p) {
    while (p.parent != null) { // not a root
      if (p.kids.length == 0) {
        int end = p.end;
        int aligned = end - end % blockSize;
        if (aligned > p.start()) {
          if (p.lru < 0) { // a leaf now
            heapAdd(p);
          }
          if (aligned < end) {
            trimLeaf(p, aligned - p.start());
          }
          return;
        }
        Node gp = p.parent;
        detach(p);
        p.parent = null;
        p = gp;
      } else {
        if (p.kids.length == 1 && p.stamp == p.kids[0].stamp // else a recency boundary
            && !atSpanBoundary(p)) {
          mergeIntoChild(p, p.kids[0]);
        }
        return;
      }
    }
    dropIfEmptyScope(p);
  }

  private int blockEnd(Node n, int k) {
    return (n.start() / blockSize + 1 + k) * blockSize;
  }

  /** The index on {@code n}'s edge of the block ending at depth {@code end}; see blockEnd. */
  private int blockEndingAt(Node n, int end) {
    return end / blockSize - n.start() / blockSize - 1;
  }

  private static int indexOfHash(long[] hashes, long h) {
    for (int i = 0; i < hashes.length; i++) {
      if (hashes[i] == h) {
        return i;
      }
    }
    throw new AssertionError("engine index points to a node without the hash");
  }

  private void reindex(Node n) {
    if (n.engineBlocks() != null) {
      for (long h : n.engineBlocks()) {
        if (h != 0) {
          engineIndex.put(h, n);
        }
      }
    }
  }

  private void unindex(long[] engineHashes, int from, int to) {
    for (int i = from; i < to; i++) {
      if (engineHashes[i] != 0) {
        engineIndex.remove(engineHashes[i]);
        extraCopies.remove(engineHashes[i]); // every copy goes with the block
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // LRU heap (min-heap by stamp of unlocked non-root leaves)

  private void heapAdd(Node n) {
    midWriteFaultForTest.run();
    if (heapSize == heap.length) {
      heap = Arrays.copyOf(heap, heapSize * 2);
    }
    heap[heapSize] = n;
    n.lru = heapSize;
    heapSize++;
    siftUp(heapSize - 1);
  }

  private void heapRemove(Node n) {
    int i = n.lru;
    n.lru = -1;
    heapSize--;
    if (i == heapSize) {
      heap[i] = null;
      return;
    }
    Node last = heap[heapSize];
    heap[heapSize] = null;
    heap[i] = last;
    last.lru = i;
    siftDown(i);
    siftUp(last.lru);
  }

  private void siftUp(int i) {
    Node n = heap[i];
    while (i > 0) {
      int p = (i - 1) >>> 1;
      Node pn = heap[p];
      if (pn.stamp <= n.stamp) {
        break;
      }
      heap[i] = pn;
      pn.lru = i;
      i = p;
    }
    heap[i] = n;
    n.lru = i;
  }

  private void siftDown(int i) {
    Node n = heap[i];
    int half = heapSize >>> 1;
    while (i < half) {
      int c = 2 * i + 1;
      Node cn = heap[c];
      int r = c + 1;
      if (r < heapSize && heap[r].stamp < cn.stamp) {
        c = r;
        cn = heap[r];
      }
      if (n.stamp <= cn.stamp) {
        break;
      }
      heap[i] = cn;
      cn.lru = i;
      i = c;
    }
    heap[i] = n;
    n.lru = i;
  }

  // ---------------------------------------------------------------------------------------------
  // events

  /** Adds a listener for the block events that follow. */
  public void addListener(BlockEventListener listener) {
    addListenerWithSnapshot(listener);
  }

  /**
   * Adds a listener and returns, atomically with the registration, the hashes of every block
   * held now (in depth-first prefix order: a block before its continuations). The listener then
   * receives exactly the changes made after this snapshot, so the snapshot plus the replayed
   * events always equal the blocks held. Like {@link #blockHashes()}, the snapshot is
   * recomputed from the cached tokens under the write lock.
   */
  public long[] addListenerWithSnapshot(BlockEventListener listener) {
    Objects.requireNonNull(listener, "listener");
    long ws = lock.writeLock();
    try {
      flushEvents();
      long[] snapshot = blockHashesLocked(); // first: if it fails, the listener is not added
      BlockEventListener[] now = Arrays.copyOf(listeners, listeners.length + 1);
      now[now.length - 1] = listener;
      listeners = now;
      return snapshot;
    } finally {
      lock.unlockWrite(ws);
    }
  }

  /** Removes a listener added before; events already queued may still reach it. */
  public void removeListener(BlockEventListener listener) {
    long ws = lock.writeLock();
    try {
      BlockEventListener[] now = Arrays.stream(listeners).filter(l -> l != listener)
          .toArray(BlockEventListener[]::new);
      listeners = now;
    } finally {
      lock.unlockWrite(ws);
    }
  }

  /**
   * The hashes of every block held now, in depth-first prefix order. They are recomputed from
   * the cached tokens (the tree keeps one hash per node), so this takes time linear in the
   * cached tokens, about 1 ns each, under the write lock.
   */
  public long[] blockHashes() {
    long ws = lock.writeLock();
    try {
      return blockHashesLocked();
    } finally {
      lock.unlockWrite(ws);
    }
  }

  private long[] blockHashesLocked() {
    midWriteFaultForTest.run(); // allocates in proportion to the tree
    LongBuffer out = new LongBuffer();
    java.util.ArrayDeque<Node> stack = new java.util.ArrayDeque<>();
    scopeRoots.values().forEach(stack::push);
    stack.push(root);
    while (!stack.isEmpty()) {
      Node n = stack.pop();
      if (n.parent != null && blockCount(n) > 0) {
        out.addAll(blockHashesOf(n));
      }
      for (int i = n.kids.length - 1; i >= 0; i--) {
        if (n.kids[i] != null) {
          stack.push(n.kids[i]);
        }
      }
    }
    return out.drain();
  }

  /**
   * How many engine events threw while they were applied (each is logged and otherwise
   * ignored; see {@link #engineEvents()}).
   */
  public long engineEventFailures() {
    return engineEventFailures.get();
  }

  /** Sets what runs under the write lock as each engine event is applied (tests only). */
  void engineFaultForTest(Runnable fault) {
    engineFaultForTest = fault;
  }

  /**
   * How many listener calls threw (each is logged and otherwise ignored, but a {@link
   * VirtualMachineError} other than a {@link StackOverflowError}, thrown on to the writer once
   * the events have reached the other listeners).
   */
  public long listenerFailures() {
    return listenerFailures;
  }

  /** Moves the buffered block changes of the current write to the delivery queue. */
  private void flushEvents() {
    if (listeners.length == 0) {
      storedBuf.size = 0;
      evictedBuf.size = 0;
      return;
    }
    if (storedBuf.size > 0) {
      pending.add(new Event(Event.STORED, storedBuf.drain(), listeners));
    }
    if (evictedBuf.size > 0) {
      pending.add(new Event(Event.EVICTED, evictedBuf.drain(), listeners));
    }
  }

  /**
   * Delivers the queued events in order. A write made by a listener from its callback finds the
   * delivery lock held by its own thread and returns at once: its events wait in the queue until
   * the event being delivered has reached every listener, so that all listeners see all events
   * in write order (delivering them from the nested call would show them to the later listeners
   * before the current event).
   *
   * <p>A listener that throws is counted and logged, and the event still reaches the listeners
   * after it. Nothing is thrown to the writer but a {@link VirtualMachineError} other than a
   * {@link StackOverflowError} (out of memory: the virtual machine's trouble, not the
   * listener's), and that only once every queued event has reached every listener, so that
   * their replicas stay whole.
   */
  private void deliver() {
    if (delivery.isHeldByCurrentThread()) {
      return; // a listener's own write: the loop below gives its events once the listener returns
    }
    // Nothing queued is not enough: another writer may have taken this write's events off the
    // queue and still be giving them to the listeners, and this write must not return before
    // it has (it did, a few times in a million writes of three threads). Read in this order, an
    // empty queue and a free delivery lock mean every event queued so far has been given.
    if (pending.isEmpty() && !delivery.isLocked()) {
      return;
    }
    VirtualMachineError fatal = null;
    delivery.lock();
    try {
      Event e;
      while ((e = pending.poll()) != null) {
        for (BlockEventListener l : e.listeners) {
          try {
            switch (e.kind) {
              case Event.STORED -> l.onStored(e.hashes.clone());
              case Event.EVICTED -> l.onEvicted(e.hashes.clone());
              default -> l.onCleared();
            }
          } catch (Throwable ex) { // an Error or a checked exception thrown undeclared too:
            // thrown on at once, it left the writer's (the engine's) call and kept the event
            // from the listeners after this one
            listenerFailures++;
            if (ex instanceof VirtualMachineError vme && !(ex instanceof StackOverflowError)) {
              LOG.error("{}block event listener {} failed", logPrefix, l, ex);
              if (fatal == null) {
                fatal = vme;
              }
            } else {
              LOG.warn("{}block event listener {} failed", logPrefix, l, ex);
            }
          }
        }
      }
    } finally {
      delivery.unlock();
    }
    if (fatal != null) {
      throw fatal;
    }
  }

  private static final class Event {
    static final int STORED = 0;
    static final int EVICTED = 1;
    static final int CLEARED = 2;
    final int kind;
    final long[] hashes;
    final BlockEventListener[] listeners;

    Event(int kind, long[] hashes, BlockEventListener[] listeners) {
      this.kind = kind;
      this.hashes = hashes;
      this.listeners = listeners;
    }
  }

  /** A growable long array reused across writes. */
  private static final class LongBuffer {
    long[] a = new long[64];
    int size;

    void addAll(long[] v) {
      addRange(v, 0, v.length);
    }

    void addRange(long[] v, int from, int to) {
      int n = to - from;
      if (size + n > a.length) {
        a = Arrays.copyOf(a, Math.max(a.length * 2, size + n));
      }
      System.arraycopy(v, from, a, size, n);
      size += n;
    }

    long[] drain() {
      long[] out = Arrays.copyOf(a, size);
      size = 0;
      return out;
    }
  }

  private static long[] concat(long[] a, long[] b) {
    if (a == null) {
      return b;
    }
    if (b == null) {
      return a;
    }
    long[] r = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, r, a.length, b.length);
    return r;
  }

  // ---------------------------------------------------------------------------------------------
  // diagnostics

  /**
   * Tokens on paths pinned by at least one outstanding lease (self-managed mode; always 0 in
   * engine-driven mode, whose leases pin nothing). 0 once every lease taken has been released.
   * Linear in the tree's size; for tests that check that no lease is left held.
   */
  long pinnedTokens() {
    long ws = lock.writeLock();
    try {
      long pinned = pinnedBelow(root);
      for (Node r : scopeRoots.values()) {
        pinned += pinnedBelow(r);
      }
      return pinned;
    } finally {
      lock.unlockWrite(ws);
    }
  }

  private static long pinnedBelow(Node top) {
    long pinned = 0;
    ArrayDeque<Node> todo = new ArrayDeque<>();
    todo.push(top);
    while (!todo.isEmpty()) {
      Node n = todo.pop();
      if (n.parent != null && n.locks() > 0) {
        pinned += n.edge.length;
      }
      for (Node c : n.kids) {
        if (c != null) {
          todo.push(c);
        }
      }
    }
    return pinned;
  }

  /**
   * Verifies every structural invariant and throws {@link IllegalStateException} naming the
   * first one broken. Linear in the tree's size; meant for tests.
   */
  public void checkInvariants() {
    long ws = lock.writeLock();
    try {
      new InvariantChecker().check();
    } finally {
      lock.unlockWrite(ws);
    }
  }

  private final class InvariantChecker {
    /** The root hash of the scope being visited. */
    long scopeRoot;
    long total;
    int evictable;
    long blocks;
    /** The tokens of the path to the node being visited, by depth. */
    int[] path = new int[16];
    /** The chained hashes of the path's blocks (block j ends at depth (j + 1) · blockSize). */
    long[] chain = new long[16];

    void check() {
      require(root.edge.length == 0 && root.end == 0, "root has an edge");
      require(root.lru == -1, "root has locks or sits in the LRU heap");
      scopeRoot = BlockHasher.ROOT_PARENT;
      visitAll(root);
      require(root.lastHash == BlockHasher.ROOT_PARENT && root.parent == null,
          "default root's hash or parent changed");
      for (Map.Entry<Long, Node> e : scopeRoots.entrySet()) {
        Node r = e.getValue();
        require(r != root && e.getKey() != BlockHasher.ROOT_PARENT, "default root among scopes");
        require(r.lastHash == e.getKey(), "scope root " + e.getKey() + " holds hash " + r.lastHash);
        require(r.parent == null && r.edge.length == 0 && r.end == 0, "scope root has an edge");
        require(r.lru == -1 && r.stamp == 0 && r.engineBlocks() == null,
            "scope root has locks, a stamp or blocks");
        require(r.kids.length > 0, "empty scope root " + e.getKey() + " kept");
        scopeRoot = r.lastHash;
        visitAll(r);
      }
      require(total == size, "size " + size + " != sum of edges " + total);
      require(evictable == heapSize,
          "LRU heap holds " + heapSize + " nodes, " + evictable + " leaves are evictable");
      for (int i = 0; i < heapSize; i++) {
        require(heap[i].lru == i, "heap index broken at " + i);
        require(i == 0 || heap[(i - 1) / 2].stamp <= heap[i].stamp, "heap order broken");
      }
      if (mode == Mode.SELF_MANAGED) {
        // a lease pins only tokens already cached, so an insert that has evicted every unpinned
        // token is left with tokens that were all cached before it, within the capacity
        require(size <= capacity, "size " + size + " exceeds capacity " + capacity);
      } else {
        require(size <= mirrorLimit || heapSize == 0,
            "size " + size + " exceeds the mirror limit " + mirrorLimit + " with leaves");
        require(engineIndex.size() == blocks,
            "engine index has " + engineIndex.size() + " hashes, tree holds " + blocks + " blocks");
        for (Long alias : aliases.keySet()) {
          require(!engineIndex.containsKey(alias), "hash " + alias + " is both indexed and an alias");
        }
        for (Map.Entry<Long, Long> e : extraCopies.entrySet()) {
          require(e.getValue() >= 1,
              "hash " + e.getKey() + " has " + e.getValue() + " extra copies");
          require(engineIndex.containsKey(e.getKey()) || aliases.containsKey(e.getKey()),
              "copies counted for hash " + e.getKey() + ", which is neither indexed nor an alias");
        }
      }
    }

    /**
     * Visits every node below {@code top} in depth-first pre-order, on an explicit stack: an
     * engine can build a path of one node per block, far deeper than a recursion could go.
     * Each node's path prefix (tokens and block hashes above its start) was written by its
     * ancestors and is not touched by the subtrees visited in between, which lie deeper.
     */
    private void visitAll(Node top) {
      ArrayDeque<Node> todo = new ArrayDeque<>();
      todo.push(top);
      while (!todo.isEmpty()) {
        Node n = todo.pop();
        visit(n);
        for (int i = n.kids.length - 1; i >= 0; i--) {
          if (n.kids[i] != null) {
            todo.push(n.kids[i]);
          }
        }
      }
    }

    /** Checks node n and its links to its children (which {@link #visitAll} visits after it). */
    private void visit(Node n) {
      int end = n.end;
      if (path.length < end) {
        path = Arrays.copyOf(path, Math.max(end, path.length * 2));
      }
      System.arraycopy(n.edge, 0, path, n.start(), n.edge.length);
      if (n.parent != null) {
        require(n.edge.length > 0, "empty edge at depth " + n.start());
        require((mode == Mode.ENGINE_DRIVEN) == (n instanceof EngineNode),
            "node class does not fit the mode at depth " + n.start());
        total += n.edge.length;
        checkBlocks(n);
        boolean leaf = n.kids.length == 0;
        if (leaf && n.locks() == 0) {
          evictable++;
          require(n.lru >= 0, "evictable leaf not in heap");
        } else {
          require(n.lru < 0, "non-evictable node in heap");
        }
        if (mode == Mode.ENGINE_DRIVEN && leaf) {
          require(end % blockSize == 0, "engine-driven leaf ends mid-block at " + end);
        }
        if (n.kids.length == 1 && n.parent != null) {
          Node c = n.kids[0];
          require(n.locks() != c.locks() || n.stamp != c.stamp || atSpanBoundary(n),
              "single-child chain at depth " + end + " with no lease, recency or span boundary");
        }
      }
      int len = n.kids.length;
      int count = 0;
      if (len <= DENSE_MAX) {
        require(n.keys.length == len, "dense keys and kids differ in length");
        count = len;
      } else {
        require(Integer.bitCount(len) == 1, "child table of " + len + " slots");
        require(n.keys.length == len + 1, "child table keys do not hold the count");
        for (Node c : n.kids) {
          count += c == null ? 0 : 1;
        }
        require(n.keys[len] == count, "child table count " + n.keys[len] + " != " + count);
        require(count > DENSE_MAX, "child table with only " + count + " children");
        require(count * 4 <= len * 3, "child table over 3/4 full");
        require(count * 8 >= len || len == 4, "child table under 1/8 full");
      }
      long lockSum = 0;
      for (int i = 0; i < len; i++) {
        Node c = n.kids[i];
        if (c == null) {
          continue;
        }
        require(len > DENSE_MAX || i == 0 || n.keys[i - 1] < n.keys[i],
            "child keys not strictly sorted");
        require(c.edge.length > 0 && n.keys[i] == c.edge[0],
            "child key is not its first token");
        require(child(n, c.edge[0]) == c, "child not found by its first token");
        require(c.parent == n, "child's parent pointer is wrong");
        require(c.start() == end, "child starts at " + c.start() + ", parent ends at " + end);
        require(c.stamp <= n.stamp || n.parent == null,
            "child used more recently than its parent");
        lockSum += c.locks();
      }
      require(n.parent == null || n.locks() >= lockSum,
          "node has fewer locks than its children");
    }

    private void checkBlocks(Node n) {
      int end = n.end;
      int first = n.start() / blockSize;
      int count = end / blockSize - first;
      // the chain recomputed from the path alone, independent of the nodes' hashes: the blocks
      // ending above n's start by its ancestors, those ending on its edge here
      if (chain.length < end / blockSize) {
        chain = Arrays.copyOf(chain, Math.max(end / blockSize, chain.length * 2));
      }
      long h = first == 0 ? scopeRoot : chain[first - 1];
      for (int j = first; j < first + count; j++) {
        h = hasher.hashBlock(h, path, j * blockSize);
        chain[j] = h;
      }
      require(n.lastHash == h,
          "wrong hash of the last block ending by depth " + end + " (at depth " + n.start() + ")");
      if (count == 0) {
        require(n.engineBlocks() == null, "engine hashes on a node without blocks");
        require(n.blockHashCache() == null, "cached block hashes on a node without blocks");
        return;
      }
      blocks += count;
      long[] held = blockHashesOf(n);
      for (int k = 0; k < count; k++) {
        require(held[k] == chain[first + k],
            "wrong block hash for the block ending at " + (first + k + 1) * blockSize);
      }
      long[] cached = n.blockHashCache();
      if (cached != null) {
        require(cached.length >= count && cached.length <= 2 * count,
            "cached block hashes: " + cached.length + " for " + count + " blocks at depth "
                + n.start());
        for (int k = 0; k < count; k++) {
          require(cached[k] == chain[first + k],
              "stale cached hash for the block ending at " + (first + k + 1) * blockSize);
        }
      }
      if (mode == Mode.ENGINE_DRIVEN) {
        require(n.engineBlocks() != null && n.engineBlocks().length == count,
            "engine hashes missing at depth " + n.start());
        for (long eh : n.engineBlocks()) {
          require(eh != 0 && engineIndex.get(eh) == n, "engine hash not indexed to its node");
        }
      } else {
        require(n.engineBlocks() == null, "engine hashes in a self-managed tree");
      }
    }

    private void require(boolean ok, String what) {
      if (!ok) {
        throw new IllegalStateException("prefix tree invariant broken: " + what);
      }
    }
  }

  /** The root node (tests only). */
  Node rootForTest() {
    return root;
  }

  /** The default root and every scope root (tests only). */
  List<Node> rootsForTest() {
    List<Node> out = new ArrayList<>();
    out.add(root);
    out.addAll(scopeRoots.values());
    return out;
  }

  /** Visits every cached sequence that has no cached continuation (tests only). */
  List<int[]> leafSequences() {
    return leafSequences(BlockHasher.ROOT_PARENT);
  }

  /** {@link #leafSequences()} of one scope (tests only). */
  List<int[]> leafSequences(long scopeRoot) {
    long ws = lock.writeLock();
    try {
      List<int[]> out = new ArrayList<>();
      Node r = scopeRoot == BlockHasher.ROOT_PARENT ? root : scopeRoots.get(scopeRoot);
      if (r != null) {
        collect(r, NO_TOKENS, out);
      }
      return out;
    } finally {
      lock.unlockWrite(ws);
    }
  }

  private static void collect(Node n, int[] prefix, List<int[]> out) {
    int[] p = Arrays.copyOf(prefix, prefix.length + n.edge.length);
    System.arraycopy(n.edge, 0, p, prefix.length, n.edge.length);
    if (n.kids.length == 0) {
      if (p.length > 0) {
        out.add(p);
      }
      return;
    }
    for (Node c : n.kids) {
      if (c != null) {
        collect(c, p, out);
      }
    }
  }

  @Override
  public String toString() {
    return "ConcurrentPrefixTree{" + mode + ", blockSize=" + blockSize + ", size=" + size
        + ", capacity=" + capacity
        + (mirrorLimit == Long.MAX_VALUE ? "" : ", mirrorLimit=" + mirrorLimit) + "}";
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * A tree node. Fields read by {@link #match} ({@code edge}, {@code end}, {@code keys},
   * {@code kids}) are written only under the write lock and read under an optimistic stamp; the
   * rest is touched only under the write lock.
   */
  static class Node {
    /** The edge's token ids. */
    int[] edge;
    /**
     * The children, by the first token of their edges. Up to {@value ConcurrentPrefixTree#DENSE_MAX}: dense arrays
     * sorted by first token ({@code keys[i]} is {@code kids[i].edge[0]}). More: an
     * open-addressing table with linear probing of {@code kids.length} slots (a power of two,
     * at most 3/4 full, home slot {@link #slot}), a free slot holding null, and
     * {@code keys[kids.length]} the number of children. A table so always has more than
     * {@value ConcurrentPrefixTree#DENSE_MAX} children: {@code kids.length == 0} means a leaf and
     * {@code kids.length == 1} exactly one child.
     */
    int[] keys;
    Node[] kids;
    Node parent;
    /**
     * The chained hash of the last full block ending at or before this node's end on its path
     * ({@link BlockHasher#ROOT_PARENT} if none); the hashes of the other blocks on the edge are
     * recomputed from the tokens when needed.
     */
    long lastHash = BlockHasher.ROOT_PARENT;
    /** Last use (self-managed mode): an operation counter, renumbered before it overflows. */
    int stamp;
    /**
     * Depth just past this node's edge (where its children start); the walk takes the next
     * query position from here, without waiting for the edge array's length.
     */
    int end;
    /**
     * The LRU state in one field: {@code >= 0} the node's index in the LRU heap (an unleased
     * leaf), else {@code -1 - locks} with {@code locks} the number of leases through it.
     */
    int lru = -1;

    /** The number of leases whose prefix passes through this node. */
    int locks() {
      return lru >= 0 ? 0 : -1 - lru;
    }

    /** Depth of the edge's first token. */
    int start() {
      return end - edge.length;
    }

    /** Engine-driven mode: the engine's hashes of the blocks ending on the edge, or null. */
    long[] engineBlocks() {
      return null;
    }

    void engineBlocks(long[] hashes) {
      if (hashes != null) {
        throw new AssertionError("engine hashes on a self-managed node");
      }
    }

    /** Engine-driven mode: forgets the cached block hashes of the edge (none here). */
    void dropBlockHashCache() {}

    /** Engine-driven mode: the cached block hashes of the edge, or null (none here). */
    long[] blockHashCache() {
      return null;
    }
  }

  /**
   * A node of an engine-driven tree: self-managed nodes do without its two fields (a node
   * object of 48 rather than 56 bytes).
   */
  static final class EngineNode extends Node {
    long[] engineBlocks;
    /**
     * The chained hashes of the blocks ending on the edge ({@code [0, blockCount)}; the array
     * may be longer, at most twice that, its tail stale), or null: filled by the first trim of
     * this leaf and kept by later trims, which only remove tail blocks and so leave the hashes
     * of the blocks kept unchanged; dropped by every other change of the edge (split, leaf
     * extension, merge), which is also every change of its start or of the path above it. So
     * the engine removing a chain one block at a time, last block first, rehashes the chain
     * once rather than once per block.
     */
    long[] blockHashCache;

    @Override
    void dropBlockHashCache() {
      blockHashCache = null;
    }

    @Override
    long[] blockHashCache() {
      return blockHashCache;
    }

    @Override
    long[] engineBlocks() {
      return engineBlocks;
    }

    @Override
    void engineBlocks(long[] hashes) {
      engineBlocks = hashes;
    }
  }

  /**
   * A pin on the cached prefix of a running request. Release it exactly once (or close it);
   * until then its tokens are not evicted.
   */
  public static final class Lease implements AutoCloseable {
    private final ConcurrentPrefixTree tree;
    private final Node end;
    private final int tokens;
    private final int epoch;
    private boolean released; // guarded by the tree's write lock

    Lease(ConcurrentPrefixTree tree, Node end, int tokens, int epoch) {
      this.tree = tree;
      this.end = end;
      this.tokens = tokens;
      this.epoch = epoch;
    }

    /** The number of leading tokens this lease pins (the cached prefix when acquired). */
    public int lockedTokens() {
      return tokens;
    }

    /**
     * Unpins the prefix. A release that throws part-way (out of memory) has still released the
     * lease: the tree's repair either kept its unpinning or cleared the tree, pins included.
     *
     * @throws IllegalStateException if the lease was already released
     */
    public void release() {
      if (!tree.releaseIfHeld(this)) {
        throw new IllegalStateException(
            "lease on " + tokens + " tokens was already released");
      }
    }

    /**
     * Releases the lease if it is still held; a no-op otherwise. Only a second release is
     * quiet: an error of the release itself goes on, as from {@link #release}.
     */
    @Override
    public void close() {
      tree.releaseIfHeld(this);
    }

    @Override
    public String toString() {
      return "Lease{" + tokens + " tokens}";
    }
  }

  /** Configuration of a {@link ConcurrentPrefixTree}; every setter validates its argument. */
  public static final class Builder {
    private Mode mode = Mode.SELF_MANAGED;
    private int blockSize = 16;
    private long salt;
    private long capacityTokens = Long.MAX_VALUE;
    private boolean capacitySet;
    private long mirrorLimitTokens = Long.MAX_VALUE;
    private boolean mirrorLimitSet;
    private String nodeId;

    private Builder() {}

    /**
     * The id of the node whose tree this is, named in the tree's log lines ({@code "node <id>:
     * ..."}), so that the trees of several nodes in one process can be told apart (default none:
     * the lines name no node).
     */
    public Builder nodeId(String nodeId) {
      this.nodeId = Objects.requireNonNull(nodeId, "nodeId");
      return this;
    }

    /** Self-managed (default) or engine-driven. */
    public Builder mode(Mode mode) {
      this.mode = Objects.requireNonNull(mode, "mode");
      return this;
    }

    /** Tokens per block, at least 1 (default 16). */
    public Builder blockSize(int blockSize) {
      if (blockSize < 1) {
        throw new IllegalArgumentException("blockSize must be at least 1, was " + blockSize);
      }
      this.blockSize = blockSize;
      return this;
    }

    /** Per-cluster salt mixed into every block hash (default 0). */
    public Builder salt(long salt) {
      this.salt = salt;
      return this;
    }

    /**
     * Capacity in tokens, at least 1 (default unlimited). Self-managed trees evict down to it;
     * engine-driven trees only report it.
     */
    public Builder capacityTokens(long capacityTokens) {
      if (capacityTokens < 1) {
        throw new IllegalArgumentException(
            "capacityTokens must be at least 1, was " + capacityTokens);
      }
      this.capacityTokens = capacityTokens;
      this.capacitySet = true;
      return this;
    }

    /**
     * Engine-driven trees: the most tokens the mirror holds, at least the block size (default
     * unlimited). The engine's own cache cannot outgrow its KV capacity, so a mirror above this
     * limit has missed removals: it drops its least recently stored blocks down to the limit,
     * reports them evicted and counts them ({@link CacheEventStats#overflowBlocks()}). Set it
     * above the engine's KV capacity, so that a correct engine never reaches it.
     */
    public Builder mirrorLimitTokens(long mirrorLimitTokens) {
      if (mirrorLimitTokens < 1) {
        throw new IllegalArgumentException(
            "mirrorLimitTokens must be at least 1, was " + mirrorLimitTokens);
      }
      this.mirrorLimitTokens = mirrorLimitTokens;
      this.mirrorLimitSet = true;
      return this;
    }

    /**
     * Builds the tree.
     *
     * @throws IllegalStateException if the tree is self-managed and no capacity was set (it
     *     would never evict; pass {@code Long.MAX_VALUE} to mean that), or has a mirror limit
     * @throws IllegalArgumentException if the mirror limit is below the block size
     */
    public ConcurrentPrefixTree build() {
      if (mode == Mode.SELF_MANAGED && !capacitySet) {
        throw new IllegalStateException(
            "a self-managed tree needs capacityTokens(...): the engine's KV capacity in tokens");
      }
      if (mode == Mode.SELF_MANAGED && mirrorLimitSet) {
        throw new IllegalStateException("mirrorLimitTokens is for engine-driven trees; a "
            + "self-managed tree evicts at capacityTokens");
      }
      if (mirrorLimitTokens < blockSize) {
        throw new IllegalArgumentException("mirrorLimitTokens must be at least the block size ("
            + blockSize + "): a smaller mirror holds no block, was " + mirrorLimitTokens);
      }
      return new ConcurrentPrefixTree(this);
    }
  }
}
