package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.Durations;
import io.github.prefixrouter.internal.collect.LongLongMap;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Request;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import java.util.random.RandomGenerator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Anti-entropy gossip: keeps read-only replicas of every peer's block hashes, the peers' load
 * and liveness, and publishes this node's own {@link LocalSummary}.
 *
 * <h2>Design notes</h2>
 *
 * <p><b>State per origin.</b> Every origin (a node) owns its block set; only it changes it, so
 * there are no conflicts. The set is versioned by (generation, version): the generation is new
 * on every restart and must grow; the version counts changes, version 0 being the empty set.
 * A replica at version {@code v} applies delta {@code v+1} and ignores any other, so applying
 * is idempotent and order-insensitive: duplicated or reordered deltas are ignored, gaps are
 * filled by a later exchange. A snapshot installs only if newer than the replica. A higher
 * generation resets the replica to the empty set of that generation. A replica truncated by a
 * cap asks again for the whole set (its digest shows version 0, rate-limited) once the
 * origin's set would fit, so it does not stay a subset after the origin shrank.
 *
 * <p><b>A replica ahead of its origin.</b> Deltas or snapshots the origin never made (a lying
 * or buggy third party) put a replica at a version above the origin's, where it ignores every
 * real change as older. A third party's claim is taken only within {@code maxSequenceJump} of
 * the replica it replaces; the origin, seeing a version of its own above its own, refutes any
 * claim within the jump of its version by moving its version past it ({@link #refuteVersion}),
 * and every replica below then gets a snapshot. Claims in steps can take a replica beyond
 * that reach; there the origin's own word (its digest entry, update header or chunk, in the
 * replica's generation) is believed over the replica: the replica restarts from the empty set
 * ({@link #restartIfBeyondReach}). Each case is undone in an exchange between the replica's
 * holder and the origin, in either direction, and an older message of the origin reordered
 * behind newer relayed state (behind it by the few changes made in flight) restarts nothing.
 *
 * <p><b>Evictions by store number.</b> An origin numbers the fingerprints it publishes as
 * stored (1, 2, 3, ... per generation) and names evicted blocks by those numbers (about a byte
 * each on the wire instead of a 4-byte fingerprint). Every replica keeps its blocks' numbers in
 * a {@link StoreOrder}, snapshots carry them, relayers forward deltas unchanged. An eviction
 * that does not resolve is never half-applied: the replica restarts from the empty set at
 * version 0 and the next exchange refills it.
 *
 * <p><b>Exchange</b> (Cassandra's three messages). Every interval (jittered) the node sends a
 * SYN holding its digest, one entry per known live origin (generation, version, heartbeat,
 * load, overload flag), to {@code fanout} random live peers (seeds while it knows too few, a
 * random seed and a dead peer now and then so partitions heal). The receiver answers with an
 * ACK carrying the updates the initiator lacks (deltas from the owner's delta log or from the
 * relay log kept for third-party origins, else a snapshot in chunks) and requests for what it
 * lacks itself; the initiator answers the requests with an ACK2. Third-party origins are
 * relayed, so a change reaches all N nodes in O(log N) rounds. Snapshot chunks of one
 * (origin, generation, version) are cached by the sender while its log still covers that
 * version, so a receiver can collect them over several rounds under loss.
 *
 * <p><b>Membership.</b> A peer whose heartbeat has not advanced for {@code suspectAfter} is
 * suspect; after {@code deadAfter} it is dead: its replica and relay log are dropped and only a
 * tombstone (generation, heartbeat) remains, so stale gossip cannot revive it; a newer
 * heartbeat or generation does. After {@code forgetAfter} the tombstone goes and its slot is
 * freed. A full table ({@code maxPeers}, tombstones included) makes room for an origin that
 * speaks for itself (a SYN, ACK or ACK2 it sent) by dropping a tombstone, or else a member
 * never heard from directly, the oldest first ({@link #makeRoom}); origins learned from third
 * parties are refused. Updates heard from a third party that jump absurdly far ahead
 * ({@code maxGenerationJump}, {@code maxSequenceJump}) are rejected and counted.
 *
 * <p><b>Threads.</b> The engine starts no thread: rounds run on the injected
 * {@link Scheduler}, time comes from the injected {@link Clock}, randomness from the injected
 * {@link RandomGenerator}. All mutation ({@link #onMessage}, rounds) happens under the write
 * lock of a read-write lock; {@link #leadingBlocks} takes no lock of it: it reads the replica
 * index optimistically (see {@link ReplicaIndex}), so request threads never wait for gossip.
 * {@link #view()} and {@link #stats()} read immutable snapshots and never block on gossip.
 * Messages are sent after the lock is released.
 *
 * <p><b>Failures.</b> Anything thrown while a message is decoded (but a malformed payload's
 * {@link MalformedMessageException}) or handled is counted in {@link
 * GossipCounter#INTERNAL_ERRORS} and the message dropped, a {@link StackOverflowError} too (a
 * pathological message's fault); only a {@link VirtualMachineError} other than that (out of
 * memory) is thrown on, to the transport's thread that delivered the message. A round's
 * failures of any kind are counted and the rounds go on: a scheduled task has no caller that
 * would see them, and stopped rounds would stop the node's gossip for good.
 */
public final class GossipEngine {

  private static final Logger log = LoggerFactory.getLogger(GossipEngine.class);

  /** Bytes one replicated block takes in a delta or a snapshot chunk on the wire. */
  public static final int WIRE_BYTES_PER_BLOCK = BlockFingerprint.BYTES;

  /** Per request thread: a view of the request's chain as block fingerprints, reused. */
  private static final ThreadLocal<FingerprintedChain> FINGERPRINTED =
      ThreadLocal.withInitial(FingerprintedChain::new);

  /** Sends one gossip payload to a peer; must not block; may drop. */
  @FunctionalInterface
  public interface Sender {
    void send(PeerAddress to, byte[] payload);
  }

  enum Status { ALIVE, SUSPECT, DEAD }

  /** A pending snapshot assembly for one origin. */
  private static final class Assembly {
    final long generation;
    final long version;
    final long storeCount;
    final long[][] chunks;
    final long[][] stores;
    /** Blocks of each chunk received, kept or dropped. */
    final int[] counts;
    /** The sender of the first chunk, and the generation known for it then. */
    final String sender;
    final long senderGeneration;
    /** Another sender (or the same one restarted) sent chunks too. */
    boolean mixed;
    int received;
    /** Blocks kept (they count toward the pending caps). */
    long hashes;
    /** Blocks of received chunks dropped because the caps were reached: installs truncated. */
    long dropped;
    long lastProgressNanos;

    Assembly(long generation, long version, long storeCount, int chunkCount, String sender,
        long senderGeneration, long now) {
      this.generation = generation;
      this.version = version;
      this.storeCount = storeCount;
      this.chunks = new long[chunkCount][];
      this.stores = new long[chunkCount][];
      this.counts = new int[chunkCount];
      this.sender = sender;
      this.senderGeneration = senderGeneration;
      this.lastProgressNanos = now;
    }
  }

  /** Everything known of one origin. */
  private static final class Member {
    final String nodeId;
    PeerAddress address;
    final int slot;
    long generation;
    long version;
    long heartbeat;
    int queueDepth;
    int inFlight;
    boolean overloaded;
    long heartbeatNanos;
    long lastSyncNanos;
    long deadSinceNanos;
    Status status = Status.ALIVE;
    /**
     * Whether the origin itself sent this node a SYN, ACK or ACK2 (as the transport
     * authenticates senders) while it was a member. A full table makes room for an origin
     * speaking for itself by dropping a tombstone or a member never heard from directly
     * ({@link #makeRoom}).
     */
    boolean heardDirectly;
    final DeltaLog relayLog;
    /** Store number -> fingerprint of every block the replica holds. */
    final StoreOrder order = new StoreOrder();
    /** The origin's last store number handed out, as of the replica's version. */
    long storeCount;
    /**
     * The number of fingerprints in the origin's set at the replica's version, from the deltas
     * and snapshots applied (a truncated replica holds fewer).
     */
    long originBlocks;
    /**
     * True while this truncated replica asks for a fresh snapshot: the digest and requests
     * show version 0 for the origin, and a snapshot at the replica's own version installs.
     */
    boolean refreshing;
    long refreshSinceNanos;
    /**
     * No refresh starts before this time (one per {@link #REFRESH_SPACING} intervals; a
     * {@link Durations#deadline}, or {@link Durations#NEVER}).
     */
    long nextRefreshNanos = Durations.NEVER;
    Assembly pending;
    long rttNanos = -1;
    long seenStamp;
    /** When this node's replica of the origin last changed (generation or version). */
    long versionNanos;
    /** Deltas sent to this peer, per origin, that its digests do not show yet (lazy). */
    Map<String, InFlight> sent;

    Member(String nodeId, PeerAddress address, int slot, long relayCap) {
      this.nodeId = nodeId;
      this.address = address;
      this.slot = slot;
      this.relayLog = new DeltaLog(relayCap, 0);
    }

    DigestEntry entry() {
      return new DigestEntry(
          nodeId, generation, version, heartbeat, queueDepth, inFlight, overloaded);
    }
  }

  /**
   * Deltas of one origin sent to one peer and not yet visible in that peer's digests: up to
   * {@link #IN_FLIGHT_SEGMENTS} contiguous segments {@code (from, end]}, each with the time it
   * was sent (arrays grow from 4). Merging two segments keeps the older time, so it can only
   * shorten the wait before a resend.
   */
  private static final class InFlight {
    long generation;
    long[] from = new long[4];
    long[] end = new long[4];
    long[] at = new long[4];
    int n;

    /** Drops the segments the peer's digest shows it has. */
    void confirm(long version) {
      int k = 0;
      while (k < n && end[k] <= version) {
        k++;
      }
      if (k > 0) {
        System.arraycopy(from, k, from, 0, n - k);
        System.arraycopy(end, k, end, 0, n - k);
        System.arraycopy(at, k, at, 0, n - k);
        n -= k;
      }
    }

    void add(long f, long e, long now) {
      while (n > 0 && end[n - 1] > f) {
        n--; // superseded by this send
      }
      if (n > 0 && end[n - 1] != f) {
        n = 0; // keep the segments contiguous
      }
      if (n == from.length) {
        if (n < IN_FLIGHT_SEGMENTS) {
          from = java.util.Arrays.copyOf(from, 2 * n);
          end = java.util.Arrays.copyOf(end, 2 * n);
          at = java.util.Arrays.copyOf(at, 2 * n);
        } else {
          // merge the two neighbours sent closest together, keeping the older time
          int best = 0;
          for (int i = 1; i < n - 1; i++) {
            if (at[i + 1] - at[i] < at[best + 1] - at[best]) {
              best = i;
            }
          }
          end[best] = end[best + 1];
          System.arraycopy(from, best + 2, from, best + 1, n - best - 2);
          System.arraycopy(end, best + 2, end, best + 1, n - best - 2);
          System.arraycopy(at, best + 2, at, best + 1, n - best - 2);
          n--;
        }
      }
      from[n] = f;
      end[n] = e;
      at[n] = now;
      n++;
    }
  }

  private static final int IN_FLIGHT_SEGMENTS = 32;
  /** Rounds between two refreshes of one truncated replica (at most one per this many). */
  private static final int REFRESH_SPACING = 32;
  /**
   * Rounds a refresh waits for its snapshot before it gives up (until the next one), unless a
   * snapshot of the origin is still arriving then.
   */
  private static final int REFRESH_WINDOW = 16;
  private static final int IN_FLIGHT_MAX_ENTRIES = 1 << 14;
  /**
   * Intervals during which an origin a peer's digest leaves out, once its blocks were sent to
   * that peer, gets only its header in answers to it: the peer learns the origin from the
   * header, and once it lists it (at version 0) gets its blocks as any listed origin does; a
   * peer that still leaves it out has no room for it ({@code maxPeers}) and refuses it, so its
   * blocks went to it in every exchange for nothing. At most {@link #IN_FLIGHT_MAX_ENTRIES}
   * (peer, origin) entries in all; beyond, the blocks are simply sent again.
   */
  private static final int UNLISTED_SPACING = 32;

  /** Origins a peer's digest left out whose blocks were sent to it ({@link #unlistedSent}). */
  private static final class UnlistedSent {
    final long peerGeneration;
    final Map<String, long[]> origins = new HashMap<>();

    UnlistedSent(long peerGeneration) {
      this.peerGeneration = peerGeneration;
    }
  }
  /**
   * An origin's snapshot is assembled (and installs truncated) up to this many times
   * {@code maxBlocksPerPeer} blocks; one claiming more chunks starts a truncated replica from
   * its first chunk instead ({@link #startTruncated}).
   */
  private static final int OVERSIZED_ORIGIN_FACTOR = 16;
  /**
   * The fewest blocks a snapshot chunk holds, but for its origin's last (and an empty origin's
   * only) chunk, at the smallest {@code messageByteCap} any sender may have: a sender's cap
   * / 16 at the densest chunks. The bound is the smallest cap's, not this node's own: a peer of
   * a smaller cap (a rolling change of the setting) splits a snapshot into more chunks, and
   * the bound of a node of 16 MiB messages took an origin of 6 chunks of a 64 KiB sender
   * (about 80,000 blocks) for one too large to assemble.
   */
  private static final int MIN_CHUNK_BLOCKS = GossipConfig.MIN_MESSAGE_BYTE_CAP / 16;
  /** Rounds a snapshot assembly is kept without receiving a new chunk. */
  private static final int ASSEMBLY_PATIENCE = 16;

  /**
   * An encoded snapshot; {@code storeBytes[i]} bytes of chunk {@code i} are store numbers;
   * {@code sentNanos} is when it was last encoded or sent chunks; {@code marks} counts the
   * exchanges that queued chunks of it (one whose chunks all failed to send takes its mark
   * back only while it is the latest); {@code sentTo} holds, per peer it queued chunks to while
   * older than its origin's current version, the chunks queued since the peer's last full pass
   * (every chunk queued) and its full passes (over the whole cache, at most
   * {@link #STALE_TRACKED_PEERS} peers and {@link #STALE_TRACKED_BITS} chunk bits).
   */
  private static final class CachedSnapshot {
    final long generation;
    final long version;
    final List<byte[]> chunks;
    final long bytes;
    final long[] storeBytes;
    long sentNanos;
    long marks;
    Map<String, Passes> sentTo;

    CachedSnapshot(long generation, long version, List<byte[]> chunks, long bytes,
        long[] storeBytes, long sentNanos) {
      this.generation = generation;
      this.version = version;
      this.chunks = chunks;
      this.bytes = bytes;
      this.storeBytes = storeBytes;
      this.sentNanos = sentNanos;
    }

    /** Full passes of this snapshot's chunks queued to {@code peer}. */
    int passesTo(String peer) {
      Passes p = sentTo == null ? null : sentTo.get(peer);
      return p == null ? 0 : p.full;
    }

    /** Whether the chunks queued to {@code peer} are tracked. */
    boolean tracks(String peer) {
      return sentTo != null && sentTo.containsKey(peer);
    }

    /** Chunk {@code k} was queued to {@code peer}, which is tracked. */
    void queued(String peer, int k) {
      Passes p = sentTo.get(peer);
      p.chunks.set(k);
      if (p.chunks.cardinality() == chunks.size()) {
        p.full++;
        p.chunks.clear();
      }
    }
  }

  /** The chunks of a cached snapshot queued to one peer: this pass's, and the full passes. */
  private static final class Passes {
    final java.util.BitSet chunks = new java.util.BitSet();
    int full;
  }

  /**
   * A peer that was sent every chunk of a cached snapshot older than its origin's current
   * version this many times, and still asks for the origin's whole set, gets the set as it is
   * now: it could not take the older one (a truncated replica asking for a fresh copy is at a
   * version above it), or lost chunks of it twice.
   */
  private static final int STALE_SNAPSHOT_PASSES = 2;

  /**
   * Most peers, and most chunk bits, the snapshot cache tracks the chunks sent to (see
   * {@link CachedSnapshot}): a peer it has no room for gets the snapshot encoded anew.
   */
  private static final int STALE_TRACKED_PEERS = 1 << 14;
  private static final long STALE_TRACKED_BITS = 1L << 24;

  /**
   * How many times its bound ({@code 4 × snapshotBytesPerExchange}) the snapshot cache may hold
   * in snapshots sent within the last {@link #ASSEMBLY_PATIENCE} intervals, which peers may
   * still be assembling.
   */
  private static final int SNAPSHOT_CACHE_IN_USE_FACTOR = 4;

  /**
   * What one exchange may still send in snapshot chunks: {@code snapshotBytesPerExchange} bytes
   * and {@code snapshotChunksPerExchange} chunks at first. Once a chunk did not fit in the bytes
   * left, or no chunk is left ({@code full}), no further snapshot is encoded for the exchange
   * (cached ones may still send chunks that fit), so the snapshot work of an exchange is bounded
   * by the bytes it sends plus one snapshot, whatever the message asked for.
   */
  private static final class SnapshotBudget {
    int bytes;
    int chunks;
    boolean full;

    SnapshotBudget(int bytes, int chunks) {
      this.bytes = bytes;
      this.chunks = chunks;
    }

    /** The budget of a new exchange. */
    static SnapshotBudget of(GossipConfig config) {
      return new SnapshotBudget(config.snapshotBytesPerExchange(),
          config.snapshotChunksPerExchange());
    }
  }

  /**
   * A SYN awaiting its ACK, sent to {@code nodeId} at {@code address}; {@code complete} if its
   * digest listed every live origin.
   */
  private record PendingSyn(String nodeId, String address, long sentNanos, boolean complete) {

    boolean to(PeerAddress peer) {
      return nodeId.equals(peer.nodeId()) && address.equals(peer.address());
    }
  }

  /**
   * A message to send. {@code sent}, if not null, counts what the message carries once the send
   * function took it (returned without throwing); {@code unsent}, if not null, undoes under the
   * write lock what was recorded of the message as if it had left, when its send threw.
   */
  private record Outgoing(PeerAddress to, byte[] payload, Runnable sent, Runnable unsent) {}

  private final PeerAddress self;
  /** This node's generation; raised only by {@link #refuteGeneration}, under the write lock. */
  private volatile long generation;
  private final GossipConfig config;
  private final List<PeerAddress> seeds;
  private final Clock clock;
  private final Scheduler scheduler;
  private final RandomGenerator random;
  private final Supplier<EngineLoad> loadSupplier;
  /** Whether to advertise overload whatever the queue (a stalled engine); none by default. */
  private volatile BooleanSupplier pushBack = () -> false;
  private final Sender sender;
  private final GossipCodec codec;
  /** Decodes received payloads: the codec's decoder, or a faulty one in tests. */
  private volatile Decoder decoder;
  private final LocalSummary summary;
  private final ReplicaIndex index;

  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();
  private final Map<String, Member> members = new HashMap<>();
  /**
   * Every member (dead ones too) sorted by node id, as the digests list them; null once a
   * member was added or forgotten, and sorted again by the next digest. Sorting the live
   * members for every digest took about a tenth of the gossip time of DisseminationMatrixTest
   * (docs/gossip.md, "CPU per round").
   */
  private Member[] sortedMembers;
  /**
   * This node's id and its members' as of {@link #sortedMembers}, for the decoder (on any
   * thread): a received id it holds is decoded as the member's own string.
   */
  private volatile IdTable knownIds = IdTable.EMPTY;
  /** The secret keying {@link #knownIds}' slots (see {@link IdTable}). */
  private final long knownIdsSeed;
  private final int[] freeSlots;
  private int freeSlotCount;
  private final Member[] bySlot;
  private final LinkedHashMap<String, CachedSnapshot> snapshotCache =
      new LinkedHashMap<>(16, 0.75f, true);
  private long snapshotCacheBytes;
  /** Peers, and their chunk bits, tracked by the cached snapshots ({@link CachedSnapshot}). */
  private long staleTrackedPeers;
  private long staleTrackedBits;
  private final long snapshotCacheMaxBytes;
  private final Map<Long, PendingSyn> pendingSyns = new HashMap<>();
  private long pendingHashes;
  /** Chunk slots of the pending assemblies, at most {@code maxBlocksTotal}. */
  private long pendingChunks;
  private long nextRound = 1;
  private long heartbeat;
  private int localQueueDepth;
  private int localInFlight;
  private boolean localOverloaded;
  /** The push-back condition as sampled with the load. */
  private boolean sampledPushBack;
  private long relayHashes;
  private int inFlightEntries;
  /**
   * Per peer (a member or not: a peer may have no room here either), in the peer's generation,
   * the origins its digest left out whose blocks were sent to it: origin -> (the origin's
   * generation then, when); see {@link #UNLISTED_SPACING}.
   */
  private final Map<String, UnlistedSent> unlistedSent = new HashMap<>();
  private int unlistedEntries;
  /**
   * Per sender, the SYNs answered in its current window of one interval: {start, count}; see
   * {@link #admitSyn}. Windows that ended are dropped each round.
   */
  private final Map<String, long[]> synsAnswered = new HashMap<>();
  /** Stamps the members met in one SYN's digest or one ACK's requests, to skip repeats. */
  private long synStamp;
  /**
   * Set once {@link #displaceable} found nothing while the current message was handled:
   * nothing becomes displaceable within one message (deaths come in rounds), so a message
   * repeating its sender's update scans the table once, not once per repeat.
   */
  private boolean noRoomToMake;
  private volatile int slotHighWater; // one more than the highest slot ever assigned
  private final long heartbeatLagToCorrect;
  /** No refutation before this time ({@link Durations#deadline}, or {@link Durations#NEVER}). */
  private long nextVersionRefutationNanos = Durations.NEVER;
  private long nextGenerationRefutationNanos = Durations.NEVER;
  /** Generations this run refuted ({@link #refuteGeneration}). */
  private int generationRefutations;
  /**
   * When the last {@link #ID_IN_USE_REFUTATIONS} refutations of a generation were made: the
   * {@code i}-th refutation (from 1) at {@code (i - 1) % ID_IN_USE_REFUTATIONS}.
   */
  private final long[] generationRefutedAt = new long[ID_IN_USE_REFUTATIONS];
  /** {@link #ID_IN_USE_WINDOW} intervals, or {@code Long.MAX_VALUE} if that overflows. */
  private final long idInUseWindowNanos;
  /** Whether this node takes its id to be in use by another process ({@link #nodeIdInUse}). */
  private volatile boolean idInUse;
  /**
   * Refutations of a higher generation followed at once, before the pace of one every {@link
   * #REFRESH_SPACING} rounds applies: a node restarted below its generation may have to refute
   * twice (peers that knew different earlier runs), and should not wait 32 rounds for it.
   */
  static final int FREE_GENERATION_REFUTATIONS = 3;
  /** A refuted generation is drawn from {@code claimed + 1} to {@code claimed + this}. */
  static final long GENERATION_REFUTATION_SPREAD = 1L << 30;
  /**
   * Refutations of a higher generation within {@link #ID_IN_USE_WINDOW} rounds from which this
   * node takes its id to be in use by another process ({@link #nodeIdInUse()}): one more than
   * the {@link #FREE_GENERATION_REFUTATIONS} followed at once, so the last of them came at
   * least {@link #REFRESH_SPACING} rounds after the third. A restart below the generation peers
   * know refutes once, twice when peers knew two earlier runs, and then never again: earlier
   * runs' generations do not grow, and each refutation ends above the claim it answers. Another
   * process with the same id answers every refutation with one of its own, forever.
   */
  public static final int ID_IN_USE_REFUTATIONS = FREE_GENERATION_REFUTATIONS + 1;
  /**
   * Rounds within which {@link #ID_IN_USE_REFUTATIONS} refutations show the id in use by
   * another process, and without a refutation after which that report ends. Two processes
   * refute each other about once every {@link #REFRESH_SPACING} rounds each, so four
   * refutations of either fit in it with room for slow exchanges.
   */
  public static final int ID_IN_USE_WINDOW = 4 * REFRESH_SPACING;

  /**
   * SYNs of one sender answered per interval at most ({@link #admitSyn}). An honest node of
   * the same interval sends a peer at most two SYNs a round (one to its address as a member or
   * a dead entry, one to a seed of the same id at another address), and its rounds start at
   * least half an interval apart (jitter is at most 0.5), so the SYNs it sends within any one
   * interval come from at most four rounds: eight (six at the default jitter of 0.1), and one
   * or two in practice. More come only from a peer of a shorter interval, or one flooding.
   */
  public static final int SYNS_ANSWERED_PER_INTERVAL = 8;
  /**
   * Senders whose SYNs {@link #admitSyn} counts at once; beyond, a new sender's SYNs are
   * answered uncounted until a round drops the windows that ended.
   */
  static final int SYN_SENDERS_TRACKED = 16_384;

  private final AtomicLongArray counters = new AtomicLongArray(GossipCounter.values().length);
  private volatile GossipView view;
  private volatile boolean viewDirty = true;
  private Scheduler.Cancellable nextTick;
  private boolean running;

  /**
   * @param self this node's id and address
   * @param generation this node's generation, at least 1 and larger than any earlier
   *     generation of the same node id (for example seconds since the epoch at start)
   * @param seeds peers to contact first (this node's own address may be among them)
   * @param load this node's current load; called once per round on the scheduler's thread
   * @param sender sends a gossip payload; must not block
   */
  public GossipEngine(
      PeerAddress self,
      long generation,
      GossipConfig config,
      List<PeerAddress> seeds,
      Clock clock,
      Scheduler scheduler,
      RandomGenerator random,
      Supplier<EngineLoad> load,
      Sender sender) {
    this.self = Objects.requireNonNull(self, "self");
    if (generation < 1 || generation > GossipMessage.MAX_COUNTER) {
      throw new IllegalArgumentException(
          "generation must be in 1.." + GossipMessage.MAX_COUNTER + ", was " + generation);
    }
    this.generation = generation;
    this.config = Objects.requireNonNull(config, "config");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
    this.random = Objects.requireNonNull(random, "random");
    this.loadSupplier = Objects.requireNonNull(load, "load");
    this.sender = Objects.requireNonNull(sender, "sender");
    List<PeerAddress> s = new ArrayList<>();
    for (PeerAddress p : Objects.requireNonNull(seeds, "seeds")) {
      Objects.requireNonNull(p, "seed");
      if (!p.nodeId().equals(self.nodeId()) && !s.contains(p)) {
        s.add(p);
      }
    }
    this.seeds = List.copyOf(s);
    // origins beyond this node's maxPeers are refused one by one (MEMBERS_REFUSED), not the
    // whole message: a peer configured with a larger maxPeers lists more. Likewise a peer with
    // a larger messageByteCap sends larger messages: they are read up to the largest cap, while
    // this node's own stay within its cap (a rolling change of the setting must not stop a
    // node taking its peers' digests, updates and snapshots)
    this.codec = new GossipCodec(config.messageByteCap(), GossipConfig.MAX_MESSAGE_BYTE_CAP,
        GossipConfig.MAX_PEERS_LIMIT + 1);
    this.decoder = payload -> codec.decode(payload, knownIds);
    int maxHashesPerDelta = Math.max(1, (config.messageByteCap() - 1_024) / 8 / 2);
    this.summary = new LocalSummary(generation, config.deltaLogMaxHashes(), maxHashesPerDelta);
    // the replica index keys its home slots with a secret drawn from the injected source, so
    // peers cannot choose fingerprints that crowd one probe cluster (see ReplicaIndex); the
    // table of known ids keys its slots with the same secret, so peers cannot choose ids that
    // fill one run of slots either (see IdTable). One draw: a seeded run draws as before
    long secret = random.nextLong();
    this.index = new ReplicaIndex(config.maxPeers(), config.maxBlocksPerPeer(),
        config.maxBlocksTotal(), secret);
    this.knownIdsSeed = secret;
    this.freeSlots = new int[config.maxPeers()];
    for (int i = 0; i < freeSlots.length; i++) {
      freeSlots[i] = freeSlots.length - 1 - i;
    }
    this.freeSlotCount = freeSlots.length;
    this.bySlot = new Member[config.maxPeers()];
    this.snapshotCacheMaxBytes = 4L * config.snapshotBytesPerExchange();
    this.heartbeatLagToCorrect =
        Math.max(1, config.suspectAfter().toNanos() / config.intervalNanos() / 2);
    this.idInUseWindowNanos = config.intervalNanos() > Long.MAX_VALUE / ID_IN_USE_WINDOW
        ? Long.MAX_VALUE : ID_IN_USE_WINDOW * config.intervalNanos();
  }

  // ================================================================ public surface

  public PeerAddress self() {
    return self;
  }

  public long generation() {
    return generation;
  }

  public GossipConfig config() {
    return config;
  }

  /** This node's own summary: register it as the local tree's block event listener. */
  public LocalSummary localSummary() {
    return summary;
  }

  /** Number of slots, the minimum length of the array given to {@link #leadingBlocks}. */
  public int slotCapacity() {
    return config.maxPeers();
  }

  /**
   * For a request's chain of block hashes, how many leading blocks each peer's replica holds,
   * in one pass over the chain whatever the number of peers. Map slots to peers with
   * {@link #view()}. Thread-safe and lock-free in the common case (see {@link ReplicaIndex}).
   *
   * @param chain chained block hashes of the request, first block first
   * @param n how many of {@code chain} to consider
   * @param outPerSlot receives the count per slot; length at least {@link #slotCapacity()}.
   *     Only the slots that have ever been assigned are written (the others keep whatever
   *     they held): read the entries of the peers in a {@link #view()}
   * @return the largest count over all peers
   */
  public int leadingBlocks(long[] chain, int n, int[] outPerSlot) {
    if (n < 0 || n > chain.length) {
      throw new IllegalArgumentException("n must be in 0.." + chain.length + ", was " + n);
    }
    return leadingBlocks(BlockChainSource.of(chain, n), outPerSlot);
  }

  /**
   * Like {@link #leadingBlocks(long[], int, int[])}, but pulls the chain from {@code chain} in
   * chunks only while some peer still holds every block so far, so the caller hashes a prompt
   * only about as far as the longest match.
   */
  public int leadingBlocks(BlockChainSource chain, int[] outPerSlot) {
    if (outPerSlot.length < config.maxPeers()) {
      throw new IllegalArgumentException(
          "outPerSlot needs " + config.maxPeers() + " entries, has " + outPerSlot.length);
    }
    return index.leadingBlocks(FINGERPRINTED.get().of(chain), outPerSlot, slotHighWater);
  }

  /**
   * A request's chain as the fingerprints replicas hold ({@link BlockFingerprint}), folded as
   * the replica query pulls blocks, into an array reused per thread.
   */
  private static final class FingerprintedChain implements BlockChainSource {
    private BlockChainSource source;
    private long[] fingerprints = new long[64];
    private int folded;

    FingerprintedChain of(BlockChainSource chain) {
      source = chain;
      folded = 0;
      return this;
    }

    @Override
    public int ensure(int blocks) {
      return fold(source.ensure(blocks));
    }

    @Override
    public int ensureSome(int blocks) {
      return fold(source.ensureSome(blocks));
    }

    /** Folds the hashes up to {@code n} not folded yet; returns {@code n}. */
    private int fold(int n) {
      if (n > folded) {
        long[] hashes = source.hashes();
        if (fingerprints.length < n) {
          fingerprints = Arrays.copyOf(fingerprints, Math.max(n, 2 * fingerprints.length));
        }
        for (int i = folded; i < n; i++) {
          fingerprints[i] = BlockFingerprint.of(hashes[i]);
        }
        folded = n;
      }
      return n;
    }

    @Override
    public long[] hashes() {
      return fingerprints;
    }
  }

  /**
   * The live membership as of the last change. Thread-safe and cheap: while gossip holds its
   * lock (handling a message, running a round), the view as of the last rebuild is returned at
   * once instead of waiting for it; only the very first call may wait.
   */
  public GossipView view() {
    GossipView v = view;
    if (!viewDirty && v != null) {
      return v;
    }
    ReentrantReadWriteLock.WriteLock w = lock.writeLock();
    if (v == null) {
      w.lock();
    } else if (!w.tryLock()) {
      return v; // gossip is busy: the last view rather than a wait behind it
    }
    try {
      return rebuildView();
    } finally {
      w.unlock();
    }
  }

  /** The counters. Thread-safe. */
  public Map<GossipCounter, Long> stats() {
    Map<GossipCounter, Long> m = new EnumMap<>(GossipCounter.class);
    for (GossipCounter c : GossipCounter.values()) {
      m.put(c, counters.get(c.ordinal()));
    }
    return m;
  }

  public long counter(GossipCounter c) {
    return counters.get(c.ordinal());
  }

  /**
   * Whether this node takes its id to be in use by another process: it has refuted a higher
   * generation of itself {@value #ID_IN_USE_REFUTATIONS} times within {@value
   * #ID_IN_USE_WINDOW} rounds (see {@link #ID_IN_USE_REFUTATIONS}), and the last refutation is
   * less than {@value #ID_IN_USE_WINDOW} rounds old (checked at each round). Such a refutation
   * is also what a peer forging claims in this node's name causes. Thread-safe.
   */
  public boolean nodeIdInUse() {
    return idInUse;
  }

  /** This node's overload flag as it advertises it. */
  public boolean localOverloaded() {
    return readLocked(() -> localOverloaded || sampledPushBack);
  }

  /** Starts gossiping: the first round runs after a random fraction of the interval. */
  public void start() {
    lock.writeLock().lock();
    try {
      if (running) {
        return;
      }
      running = true;
      long first = (long) (random.nextDouble() * config.intervalNanos());
      nextTick = scheduler.schedule(first, this::tick);
    } finally {
      lock.writeLock().unlock();
    }
  }

  /**
   * Stops gossiping; messages received afterwards are still applied. Pending snapshot
   * assemblies expire in rounds only, so they stay (within their caps) until the engine starts
   * again.
   */
  public void stop() {
    lock.writeLock().lock();
    try {
      running = false;
      if (nextTick != null) {
        nextTick.cancel();
        nextTick = null;
      }
    } finally {
      lock.writeLock().unlock();
    }
  }

  /**
   * Handles one gossip payload from {@code from} (as authenticated by the transport). A
   * malformed payload is counted and dropped without changing any state; nothing is thrown
   * but a {@link VirtualMachineError} other than a {@link StackOverflowError} (see the class
   * notes), whether it comes from decoding the payload or from handling the message.
   */
  public void onMessage(PeerAddress from, byte[] payload) {
    count(GossipCounter.MESSAGES_RECEIVED, 1);
    count(GossipCounter.BYTES_RECEIVED, payload.length);
    GossipMessage m;
    try {
      m = decoder.decode(payload);
    } catch (MalformedMessageException e) {
      count(GossipCounter.MALFORMED_DROPPED, 1);
      log.debug("dropped gossip from {}: {}", from, e.getMessage());
      return;
    } catch (Throwable e) { // a fault of the decoder itself: the same policy as handle()'s
      messageFailed("decoding", from, e);
      return;
    }
    handle(from, m);
  }

  /** Decodes a received payload. */
  @FunctionalInterface
  interface Decoder {
    GossipMessage decode(byte[] payload) throws MalformedMessageException;
  }

  /** Replaces the decoder of received payloads (tests that inject a decoder's fault). */
  void decoderForTest(Decoder d) {
    decoder = d;
  }

  /** Handles one decoded message; exposed to tests that bypass the codec. */
  void handle(PeerAddress from, GossipMessage m) {
    if (from.nodeId().equals(self.nodeId())) {
      count(GossipCounter.REJECTED, 1);
      return;
    }
    List<Outgoing> out = new ArrayList<>();
    lock.writeLock().lock();
    try {
      if (m instanceof Syn && !admitSyn(from, clock.nanoTime())) {
        count(GossipCounter.SYNS_REFUSED, 1);
        return;
      }
      noRoomToMake = false;
      followAddress(from, m);
      if (m instanceof Syn s) {
        onSyn(from, s, out);
      } else if (m instanceof Ack a) {
        onAck(from, a, out);
      } else if (m instanceof Ack2 a) {
        for (Update u : a.updates()) {
          apply(from, u);
        }
      } else {
        onChunk(from, (SnapshotChunk) m);
      }
      viewDirty = true;
    } catch (Throwable e) { // an Error, a checked exception thrown undeclared too
      messageFailed("handling", from, e);
    } finally {
      lock.writeLock().unlock();
    }
    flush(out);
  }

  /**
   * Whether a SYN of {@code from} gets an answer: at most {@link #SYNS_ANSWERED_PER_INTERVAL}
   * per sender in a window of one interval that starts with its first SYN answered. An ACK is
   * far larger than a SYN (updates, requests, snapshot chunks besides), so a peer sending SYNs
   * at a high rate used to get an ACK for every one of them. The windows of at most
   * {@link #SYN_SENDERS_TRACKED} senders are kept; a new sender beyond them is answered.
   */
  private boolean admitSyn(PeerAddress from, long now) {
    long[] w = synsAnswered.get(from.nodeId());
    if (w == null || now - w[0] >= config.intervalNanos()) {
      if (w == null && synsAnswered.size() >= SYN_SENDERS_TRACKED) {
        return true;
      }
      synsAnswered.put(from.nodeId(), new long[] {now, 1});
      return true;
    }
    if (w[1] >= SYNS_ANSWERED_PER_INTERVAL) {
      return false;
    }
    w[1]++;
    return true;
  }

  /**
   * Counts and logs {@code e}, thrown while {@code doing} ("decoding" or "handling") a message
   * from {@code from}: the message's fault (a {@link StackOverflowError} too: a pathological
   * message), which drops it, unless it is a {@link VirtualMachineError} other than that: the
   * virtual machine's trouble, not the message's, thrown on for the transport's thread to see.
   */
  private void messageFailed(String doing, PeerAddress from, Throwable e) {
    count(GossipCounter.INTERNAL_ERRORS, 1);
    if (e instanceof VirtualMachineError vme && !(e instanceof StackOverflowError)) {
      log.error("error {} gossip from {}", doing, from, e);
      throw vme;
    }
    log.warn("error {} gossip from {}", doing, from, e);
  }

  /**
   * A message from a known peer in the generation this node knows it by gives that peer's
   * address (as the transport authenticated it): the address it was learned under may be a
   * third party's word (a relayed address, or the old address kept when a third party told of
   * the peer's restart first), and a restarted peer may listen elsewhere now.
   */
  private void followAddress(PeerAddress from, GossipMessage msg) {
    long senderGeneration;
    if (msg instanceof Syn s) {
      senderGeneration = s.senderGeneration();
    } else if (msg instanceof Ack a) {
      senderGeneration = a.senderGeneration();
    } else if (msg instanceof Ack2 a) {
      senderGeneration = a.senderGeneration();
    } else {
      return;
    }
    Member m = members.get(from.nodeId());
    if (m == null) {
      return;
    }
    m.heardDirectly = true;
    if (m.generation == senderGeneration && !m.address.equals(from)) {
      m.address = from;
    }
  }

  /**
   * Runs one gossip round now, started or not, for a caller that drives the rounds itself; the
   * scheduled rounds run the same way while the engine runs.
   */
  public void runRound() {
    runRound(false);
  }

  /**
   * Runs one round and sends what it gives. With {@code whileRunning}, the check that the
   * engine runs and the round are under one hold of the lock, and nothing is done once it is
   * stopped.
   *
   * @return false if {@code whileRunning} and the engine was not running
   */
  private boolean runRound(boolean whileRunning) {
    List<Outgoing> out = new ArrayList<>();
    lock.writeLock().lock();
    try {
      if (whileRunning && !running) {
        return false;
      }
      round(out);
      viewDirty = true;
    } catch (Throwable e) { // an Error too: the rounds must go on
      count(GossipCounter.INTERNAL_ERRORS, 1);
      log.warn("error in gossip round", e);
    } finally {
      lock.writeLock().unlock();
    }
    flush(out);
    return true;
  }

  // ================================================================ test and accounting access

  /** Exact block hashes replicated for {@code nodeId}, or {@code null} if not a live member. */
  long[] replicaOf(String nodeId) {
    return readLocked(() -> {
      Member m = members.get(nodeId);
      return m == null || m.status == Status.DEAD ? null : index.blocksOf(m.slot);
    });
  }

  /**
   * The replica of {@code nodeId} as {store numbers ascending, their fingerprints, {store
   * count}}, or {@code null} if not a live member.
   */
  long[][] replicaStores(String nodeId) {
    return readLocked(() -> {
      Member m = members.get(nodeId);
      if (m == null || m.status == Status.DEAD) {
        return null;
      }
      long[][] a = m.order.toArrays();
      return new long[][] {a[0], a[1], {m.storeCount}};
    });
  }

  /** (generation, version) of the replica of {@code nodeId}, or {@code null}. */
  long[] replicaVersion(String nodeId) {
    return readLocked(() -> {
      Member m = members.get(nodeId);
      return m == null ? null : new long[] {m.generation, m.version};
    });
  }

  /** Status of {@code nodeId}, or {@code null} if unknown (never learned, or forgotten). */
  Status statusOf(String nodeId) {
    return readLocked(() -> {
      Member m = members.get(nodeId);
      return m == null ? null : m.status;
    });
  }

  /** Hashes held by all relay logs (a delta without hashes counting as one). */
  long relayHashCount() {
    return readLocked(() -> relayHashes);
  }

  /** The table the decoder finds known ids in, as of the last digest built. */
  IdTable knownIds() {
    return knownIds;
  }

  /** Members tracked, tombstones included. */
  int memberCount() {
    return readLocked(() -> members.size());
  }

  /** Table slots the replica index read scanning for a replica's blocks to clear. */
  long clearSlotsScanned() {
    return readLocked(() -> index.clearSlotsScanned());
  }

  /** (peer, block) pairs replicated over all peers. Thread-safe. */
  public long replicatedPairs() {
    return readLocked(() -> index.pairs());
  }

  /**
   * Bytes held by the replica index (hash table, holder cells, per-slot counters); divided by
   * {@link #replicatedPairs()} it gives the memory per replicated block. Thread-safe.
   */
  public long indexBytes() {
    return readLocked(() -> index.retainedBytes() + storeOrderBytesLocked());
  }

  /**
   * Bytes held by the replicas' store-number maps (part of {@link #indexBytes()}), which
   * resolve evictions named by store number. Thread-safe.
   */
  public long storeOrderBytes() {
    return readLocked(() -> storeOrderBytesLocked());
  }

  /** What {@code read} gives, read under the read lock. */
  private <T> T readLocked(Supplier<T> read) {
    lock.readLock().lock();
    try {
      return read.get();
    } finally {
      lock.readLock().unlock();
    }
  }

  private long storeOrderBytesLocked() {
    long b = 0;
    for (Member m : members.values()) {
      b += m.order.retainedBytes();
    }
    return b;
  }

  /**
   * An estimate of the bytes held by the replicas, relay logs, membership, pending snapshots and
   * snapshot cache (not the local summary), from array lengths and fixed per-object costs.
   */
  long retainedBytesEstimate() {
    lock.readLock().lock();
    try {
      long b = index.retainedBytes() + storeOrderBytesLocked() + 8L * bySlot.length
          + 4L * freeSlots.length;
      b += 64L + 48L * members.size(); // hash map entries
      for (Member m : members.values()) {
        b += 200 + m.relayLog.retainedBytes();
        if (m.pending != null) {
          b += 64 + 32L * m.pending.chunks.length + 16 * m.pending.hashes;
        }
      }
      b += snapshotCacheBytes + 100L * snapshotCache.size();
      b += 100L * pendingSyns.size();
      return b;
    } finally {
      lock.readLock().unlock();
    }
  }

  /** Checks internal invariants (tests call it after every step). */
  void checkInvariants() {
    lock.readLock().lock();
    try {
      index.checkInvariants();
      int used = 0;
      long relay = 0;
      int inFlight = 0;
      int unlisted = 0;
      long assembled = 0;
      long chunkSlots = 0;
      for (Member m : members.values()) {
        if (m.pending != null) {
          assembled += m.pending.hashes;
          chunkSlots += m.pending.chunks.length;
        }
        if (bySlot[m.slot] != m) {
          throw new IllegalStateException("slot table out of sync for " + m.nodeId);
        }
        if (m.status == Status.DEAD && index.blocks(m.slot) != 0) {
          throw new IllegalStateException("dead member " + m.nodeId + " still has blocks");
        }
        m.order.checkInvariants();
        if (m.order.size() != index.blocks(m.slot)) {
          throw new IllegalStateException("store numbers of " + m.nodeId + ": " + m.order.size()
              + " for " + index.blocks(m.slot) + " blocks");
        }
        if (m.order.lastStore() > m.storeCount) {
          throw new IllegalStateException("store number past the store count for " + m.nodeId);
        }
        if (m.refreshing && index.refused(m.slot) == 0) {
          throw new IllegalStateException("complete replica of " + m.nodeId + " refreshing");
        }
        if (m.relayLog.last() != m.version && m.status != Status.DEAD) {
          throw new IllegalStateException("relay log of " + m.nodeId + " not at its version");
        }
        relay += m.relayLog.hashCount();
        used++;
        if (m.sent != null) {
          if (m.status == Status.DEAD) {
            throw new IllegalStateException("dead member " + m.nodeId + " has in-flight deltas");
          }
          inFlight += m.sent.size();
          for (InFlight f : m.sent.values()) {
            for (int i = 0; i < f.n; i++) {
              if (f.from[i] >= f.end[i] || (i > 0 && f.from[i] != f.end[i - 1])) {
                throw new IllegalStateException("in-flight segments to " + m.nodeId + " broken");
              }
            }
          }
        }
      }
      if (inFlight != inFlightEntries || inFlight > IN_FLIGHT_MAX_ENTRIES) {
        throw new IllegalStateException("in-flight entries " + inFlightEntries + " != " + inFlight);
      }
      for (UnlistedSent u : unlistedSent.values()) {
        unlisted += u.origins.size();
      }
      if (unlisted != unlistedEntries || unlisted > IN_FLIGHT_MAX_ENTRIES) {
        throw new IllegalStateException(
            "unlisted origins sent " + unlistedEntries + " != " + unlisted);
      }
      if (used + freeSlotCount != bySlot.length) {
        throw new IllegalStateException("slots leaked: " + used + " + " + freeSlotCount);
      }
      if (assembled != pendingHashes || chunkSlots != pendingChunks
          || pendingChunks > config.maxBlocksTotal()) {
        throw new IllegalStateException("pending snapshots: " + pendingHashes + " blocks, "
            + pendingChunks + " chunks for " + assembled + ", " + chunkSlots);
      }
      if (relay != relayHashes) {
        throw new IllegalStateException("relay hash count " + relayHashes + " != " + relay);
      }
      if (relayHashes > config.relayLogMaxHashesTotal()) {
        throw new IllegalStateException("relay logs hold " + relayHashes + " hashes, over "
            + config.relayLogMaxHashesTotal());
      }
      if (members.size() > config.maxPeers()) {
        throw new IllegalStateException("more members than maxPeers");
      }
      if (synsAnswered.size() > SYN_SENDERS_TRACKED) {
        throw new IllegalStateException("SYN windows of " + synsAnswered.size() + " senders");
      }
      for (long[] w : synsAnswered.values()) {
        if (w[1] < 1 || w[1] > SYNS_ANSWERED_PER_INTERVAL) {
          throw new IllegalStateException("SYN window counts " + w[1]);
        }
      }
      if (index.pairs() > config.maxBlocksTotal()) {
        throw new IllegalStateException("replica pairs over cap");
      }
      if (snapshotCacheBytes > SNAPSHOT_CACHE_IN_USE_FACTOR * snapshotCacheMaxBytes
          && snapshotCache.size() > 1) {
        throw new IllegalStateException("snapshot cache over cap");
      }
      long trackedPeers = 0;
      long trackedBits = 0;
      for (CachedSnapshot c : snapshotCache.values()) {
        int peers = c.sentTo == null ? 0 : c.sentTo.size();
        trackedPeers += peers;
        trackedBits += (long) peers * c.chunks.size();
      }
      if (trackedPeers != staleTrackedPeers || trackedBits != staleTrackedBits
          || trackedPeers > STALE_TRACKED_PEERS || trackedBits > STALE_TRACKED_BITS) {
        throw new IllegalStateException("snapshot cache tracks " + staleTrackedPeers + " peers, "
            + staleTrackedBits + " chunk bits for " + trackedPeers + ", " + trackedBits);
      }
    } finally {
      lock.readLock().unlock();
    }
  }

  // ================================================================ rounds

  private void tick() {
    // the check and the round under one hold of the lock: a stop() between the two (on another
    // thread) must not be followed by a whole round (membership, replicas, a digest sent)
    if (!runRound(true)) {
      return;
    }
    lock.writeLock().lock();
    try {
      if (running) {
        double j = config.jitter() * (2 * random.nextDouble() - 1);
        long delay = Math.max(1, (long) (config.intervalNanos() * (1 + j)));
        try {
          nextTick = scheduler.schedule(delay, this::tick);
        } catch (Throwable e) { // a host's executor shut down under the running node
          count(GossipCounter.INTERNAL_ERRORS, 1);
          log.error("gossip: node {}: the scheduler refused the timer of the next gossip round"
              + " ({}); the node sends no more gossip and its peers will declare it dead: its"
              + " scheduler must run its timers until the node has stopped", self.nodeId(),
              String.valueOf(e));
        }
      }
    } finally {
      lock.writeLock().unlock();
    }
  }

  private void round(List<Outgoing> out) {
    long now = clock.nanoTime();
    count(GossipCounter.ROUNDS, 1);
    heartbeat++;
    if (idInUse && now - generationRefutedAt[(generationRefutations - 1) % ID_IN_USE_REFUTATIONS]
        > idInUseWindowNanos) { // the last refutation (idInUse: there were some)
      idInUse = false;
      log.info("gossip: no generation of node {} above its own for {} rounds: its id no longer "
          + "seems in use by another process (generation {})", self.nodeId(), ID_IN_USE_WINDOW,
          generation);
    }
    sampleLoad();
    updateMembership(now);
    expirePendingSyns(now);
    expireAssemblies(now);
    refreshTruncatedReplicas(now);

    List<Member> live = new ArrayList<>();
    List<Member> dead = new ArrayList<>();
    for (Member m : members.values()) {
      (m.status == Status.DEAD ? dead : live).add(m);
    }
    // stable order so a seeded run replays exactly (HashMap order depends only on ids)
    List<PeerAddress> targets = new ArrayList<>();
    for (Member m : pickRandom(live, config.fanout())) {
      targets.add(m.address);
    }
    if (targets.size() < config.fanout()) {
      List<PeerAddress> fill = new ArrayList<>();
      for (PeerAddress s : seeds) {
        Member m = members.get(s.nodeId());
        if (!targets.contains(s) && (m == null || m.status == Status.DEAD)) {
          fill.add(s);
        }
      }
      for (PeerAddress s : pickRandom(fill, config.fanout() - targets.size())) {
        targets.add(s);
      }
    }
    if (!seeds.isEmpty()
        && random.nextDouble() < (double) seeds.size() / (live.size() + dead.size() + 1)) {
      PeerAddress s = seeds.get(random.nextInt(seeds.size()));
      if (!targets.contains(s)) {
        targets.add(s);
      }
    }
    if (!dead.isEmpty() && random.nextDouble() < (double) dead.size() / (live.size() + 1)) {
      PeerAddress d = dead.get(random.nextInt(dead.size())).address;
      if (!targets.contains(d)) {
        targets.add(d);
      }
    }
    // a peer whose last SYN is still unanswered gets none: the next round asks again (an
    // exchange in flight already carries what a new one would, and over a transport that opens
    // a connection per message in flight, SYNs every round to a slow peer pile up handshakes)
    targets.removeIf(t -> synInFlight(t, now));
    if (targets.isEmpty()) {
      return;
    }
    // The first exchange starts now; the others are spread over the interval, each with a
    // digest taken when it is sent. Sending all SYNs at once would have every target answer
    // with the same missing deltas; spreading them lets each answer build on the last one.
    out.add(syn(targets.get(0), live, now));
    long spacing = config.intervalNanos() / targets.size();
    for (int k = 1; k < targets.size(); k++) {
      PeerAddress t = targets.get(k);
      scheduler.schedule(k * spacing, () -> sendLater(t));
    }
  }

  private Outgoing syn(PeerAddress to, List<Member> live, long now) {
    long round = nextRound++;
    List<DigestEntry> digest = buildDigest(live, to.nodeId(), askedAt(to.nodeId(), now));
    pendingSyns.put(round,
        new PendingSyn(to.nodeId(), to.address(), now, digest.size() == live.size() + 1));
    byte[] payload = codec.encode(new Syn(round, generation, digest));
    int marks = 0;
    for (DigestEntry e : digest) {
      marks += e.pending() ? 1 : 0;
    }
    int pendingMarks = marks;
    return new Outgoing(to, payload, () -> {
      count(GossipCounter.DIGEST_BYTES_SENT, payload.length);
      count(GossipCounter.PENDING_MARKS_SENT, pendingMarks);
    }, () -> pendingSyns.remove(round)); // never left: it must not hold the peer's next SYN
  }

  private void sendLater(PeerAddress to) {
    List<Outgoing> out = new ArrayList<>(1);
    lock.writeLock().lock();
    try {
      if (!running) {
        return;
      }
      List<Member> live = new ArrayList<>();
      for (Member m : members.values()) {
        if (m.status != Status.DEAD) {
          live.add(m);
        }
      }
      long now = clock.nanoTime();
      if (synInFlight(to, now)) {
        return;
      }
      out.add(syn(to, live, now));
    } catch (Throwable e) { // an Error too: as for a round, nobody would see it thrown
      count(GossipCounter.INTERNAL_ERRORS, 1);
      log.warn("error sending a gossip digest", e);
    } finally {
      lock.writeLock().unlock();
    }
    flush(out);
  }

  /**
   * Whether the last SYN to {@code to} (its node id at its address) is still awaiting its
   * answer and younger than its window (counted in {@link GossipCounter#SYNS_IN_FLIGHT_SKIPPED}
   * if so). The window is the peer's in-flight window ({@link #inFlightWindow}; one and a half
   * intervals before any round trip is known), doubled for each further SYN to it still
   * unanswered, and at most {@code suspectAfter / 2} (at least the in-flight window): a slow
   * peer gets one exchange at a time, a peer that answers nothing gets fewer and fewer SYNs
   * (one every {@code suspectAfter / 2} at most), and a lost SYN costs one window.
   */
  private boolean synInFlight(PeerAddress to, long now) {
    long newest = 0;
    int unanswered = 0;
    for (PendingSyn p : pendingSyns.values()) {
      if (p.to(to)) {
        // readings compared by their difference: their origin is arbitrary and they may wrap
        if (unanswered == 0 || p.sentNanos() - newest > 0) {
          newest = p.sentNanos();
        }
        unanswered++;
      }
    }
    if (unanswered == 0) {
      return false;
    }
    Member m = members.get(to.nodeId());
    long interval = config.interval().toNanos();
    long window = m == null ? interval + interval / 2 : inFlightWindow(m);
    long cap = Math.max(window, config.suspectAfter().toNanos() / 2);
    long wait = window;
    for (int i = 1; i < unanswered && wait < cap; i++) {
      wait = wait > cap / 2 ? cap : 2 * wait;
    }
    if (now - newest >= Math.min(wait, cap)) {
      return false;
    }
    count(GossipCounter.SYNS_IN_FLIGHT_SKIPPED, 1);
    return true;
  }

  private <T> List<T> pickRandom(List<T> from, int k) {
    if (from.size() <= k) {
      List<T> all = new ArrayList<>(from);
      Collections.shuffle(all, asRandom());
      return all;
    }
    List<T> copy = new ArrayList<>(from);
    for (int i = 0; i < k; i++) {
      int j = i + random.nextInt(copy.size() - i);
      Collections.swap(copy, i, j);
    }
    return copy.subList(0, k);
  }

  private java.util.Random asRandom() {
    return new java.util.Random(random.nextLong());
  }

  /**
   * Sets a condition under which this node advertises overload whatever its queue depth (the
   * node's engine is stalled): sampled with the load, once per round.
   *
   * @param condition whether to push back now; must be cheap and must not block
   */
  public void pushBackWhen(BooleanSupplier condition) {
    this.pushBack = Objects.requireNonNull(condition, "condition");
  }

  private void sampleLoad() {
    sampledPushBack = pushBackNow();
    EngineLoad l;
    try {
      l = loadSupplier.get();
    } catch (Throwable e) { // an Error, a checked exception thrown undeclared too
      log.warn("load supplier failed; keeping the last figures", e);
      return;
    }
    if (l == null) {
      return;
    }
    localQueueDepth = l.queueDepth();
    localInFlight = l.inFlight();
    // the queue alone, as the node's own refusal of forwarded work: running requests are
    // capacity in use (an HTTP server runs hundreds at once), not overload
    int queued = l.queueDepth();
    if (!localOverloaded && queued >= config.highWatermark()) {
      localOverloaded = true;
    } else if (localOverloaded && queued <= config.lowWatermark()) {
      localOverloaded = false;
    }
  }

  private boolean pushBackNow() {
    try {
      return pushBack.getAsBoolean();
    } catch (Throwable e) { // an Error, a checked exception thrown undeclared too
      log.warn("push-back condition failed; not pushing back for it", e);
      return false;
    }
  }

  private DigestEntry selfEntry() {
    return new DigestEntry(self.nodeId(), generation, summary.version(), heartbeat,
        localQueueDepth, localInFlight, localOverloaded || sampledPushBack);
  }

  /**
   * When the newest SYN still awaiting its answer was sent, among complete SYNs to peers other
   * than {@code target} sent within their in-flight window; {@link Durations#NEVER} if none.
   * Third-party origins unchanged since then were asked about already: the digest for
   * {@code target} marks them pending so that several peers do not all answer with the same
   * third-party deltas while the first answer is on its way.
   */
  private long askedAt(String target, long now) {
    long at = Durations.NEVER;
    for (PendingSyn p : pendingSyns.values()) {
      // readings compared by their difference: their origin is arbitrary and they may wrap
      if (!p.complete() || p.nodeId().equals(target)
          || (at != Durations.NEVER && p.sentNanos() - at <= 0)) {
        continue;
      }
      Member peer = members.get(p.nodeId());
      if (peer == null || peer.status == Status.DEAD) {
        continue;
      }
      if (now - p.sentNanos() < inFlightWindow(peer)) {
        at = p.sentNanos();
      }
    }
    return at;
  }

  private List<DigestEntry> buildDigest(List<Member> live, String target, long askedAt) {
    List<DigestEntry> digest = new ArrayList<>(live.size() + 1);
    DigestEntry me = selfEntry();
    digest.add(me);
    GossipCodec.Prev prev = new GossipCodec.Prev();
    int budget = config.messageByteCap() - GossipCodec.synOverhead(Long.MAX_VALUE >>> 2,
        generation, live.size() + 1) - GossipCodec.sizeOf(me, prev);
    prev.set(me.nodeId(), me.generation());
    // sorted by id, so each id is coded as the prefix it shares with the previous one + the rest
    Member[] sorted = liveSorted(live.size());
    int n = sorted.length;
    int start = n == 0 ? 0 : random.nextInt(n);
    for (int i = 0; i < n; i++) {
      Member m = sorted[(start + i) % n];
      DigestEntry e = m.entry();
      if (m.refreshing) {
        // a truncated replica asking for a fresh snapshot (see refreshTruncatedReplicas)
        e = new DigestEntry(e.nodeId(), e.generation(), 0, e.heartbeat(), e.queueDepth(),
            e.inFlight(), e.overloaded());
      } else if (askedAt != Durations.NEVER && m.versionNanos - askedAt <= 0
          && !m.nodeId.equals(target)) {
        e = new DigestEntry(e.nodeId(), e.generation(), e.version(), e.heartbeat(),
            e.queueDepth(), e.inFlight(), e.overloaded(), true);
      }
      int size = GossipCodec.sizeOf(e, prev);
      prev.set(e.nodeId(), e.generation());
      if (size > budget) {
        break; // the rest goes in a later round (start rotates)
      }
      budget -= size;
      digest.add(e);
    }
    return digest;
  }

  /**
   * The members not dead, sorted by node id: taken from {@link #sortedMembers} (sorted again
   * only after the membership changed), so a digest costs no sort.
   *
   * @param live how many members are not dead
   */
  private Member[] liveSorted(int live) {
    Member[] all = sortedMembers;
    if (all == null) {
      all = members.values().toArray(new Member[0]);
      Arrays.sort(all, (x, y) -> x.nodeId.compareTo(y.nodeId));
      sortedMembers = all;
      List<String> ids = new ArrayList<>(all.length + 1);
      ids.add(self.nodeId());
      for (Member m : all) {
        ids.add(m.nodeId);
      }
      knownIds = new IdTable(ids, knownIdsSeed);
    }
    Member[] out = new Member[live];
    int k = 0;
    for (Member m : all) {
      if (m.status != Status.DEAD) {
        out[k++] = m;
      }
    }
    if (k != live) {
      throw new IllegalStateException(k + " live members listed, " + live + " expected");
    }
    return out;
  }

  private void updateMembership(long now) {
    long suspect = config.suspectAfter().toNanos();
    long dead = config.deadAfter().toNanos();
    long forget = config.forgetAfter().toNanos();
    Iterator<Member> it = members.values().iterator();
    while (it.hasNext()) {
      Member m = it.next();
      long age = now - m.heartbeatNanos;
      switch (m.status) {
        case ALIVE -> {
          if (age > dead) {
            declareDead(m, now);
          } else if (age > suspect) {
            m.status = Status.SUSPECT;
            count(GossipCounter.MEMBERS_SUSPECTED, 1);
          }
        }
        case SUSPECT -> {
          if (age > dead) {
            declareDead(m, now);
          }
        }
        case DEAD -> {
          if (now - m.deadSinceNanos > forget) {
            it.remove();
            sortedMembers = null;
            bySlot[m.slot] = null;
            releaseSlot(m.slot);
            snapshotCacheRemove(m.nodeId);
            count(GossipCounter.MEMBERS_FORGOTTEN, 1);
          }
        }
      }
    }
    retrimRelayLogs();
    sweepInFlight(now);
  }

  /** Returns a slot to the free stack, keeping it sorted so the lowest free slot goes first. */
  private void releaseSlot(int slot) {
    int i = freeSlotCount++;
    while (i > 0 && freeSlots[i - 1] < slot) {
      freeSlots[i] = freeSlots[i - 1];
      i--;
    }
    freeSlots[i] = slot;
  }

  /**
   * The member a full table drops to make room for an origin that speaks for itself: a
   * tombstone, the longest dead first, else a live member never heard from directly (only
   * relayed by third parties), the one whose heartbeat last advanced longest ago first (ties
   * to the lowest slot); null if every member is live and was heard from directly.
   */
  private Member displaceable() {
    if (noRoomToMake) {
      return null;
    }
    Member best = null;
    for (Member m : members.values()) {
      if (m.status != Status.DEAD && m.heardDirectly) {
        continue;
      }
      if (best == null || displacedBefore(m, best)) {
        best = m;
      }
    }
    if (best == null) {
      noRoomToMake = true;
    }
    return best;
  }

  private static boolean displacedBefore(Member a, Member b) {
    boolean deadA = a.status == Status.DEAD;
    boolean deadB = b.status == Status.DEAD;
    if (deadA != deadB) {
      return deadA;
    }
    // readings compared by their difference: their origin is arbitrary and they may wrap
    long d = deadA ? a.deadSinceNanos - b.deadSinceNanos : a.heartbeatNanos - b.heartbeatNanos;
    return d != 0 ? d < 0 : a.slot < b.slot;
  }

  private boolean hasRoomToMake() {
    return displaceable() != null;
  }

  /**
   * Frees a slot of a full table for an origin that speaks for itself, by dropping the member
   * {@link #displaceable} names (counted in {@link GossipCounter#MEMBERS_DISPLACED}): its
   * replica, relay log, pending snapshot and deltas in flight go as at death, and its entry as
   * when a tombstone is forgotten. Without this a peer relaying made-up origins, or the
   * tombstones of departed nodes, kept every node that joined later out of the table until
   * they were dead and forgotten ({@code deadAfter + forgetAfter}), or for as long as the
   * relaying went on.
   *
   * @return whether a slot is free now
   */
  private boolean makeRoom() {
    Member v = displaceable();
    if (v == null) {
      return false;
    }
    if (v.status != Status.DEAD) {
      clearInFlight(v);
      clearReplica(v);
      resetRelay(v, 0);
      abandonPending(v);
    }
    members.remove(v.nodeId);
    for (Member peer : members.values()) {
      removeInFlight(peer, v.nodeId); // the origin's deltas sent to peers: gone with it
    }
    sortedMembers = null;
    bySlot[v.slot] = null;
    releaseSlot(v.slot);
    snapshotCacheRemove(v.nodeId);
    count(GossipCounter.MEMBERS_DISPLACED, 1);
    return true;
  }

  private void declareDead(Member m, long now) {
    m.status = Status.DEAD;
    clearInFlight(m);
    m.deadSinceNanos = now;
    m.versionNanos = now;
    clearReplica(m);
    resetRelay(m, 0);
    m.version = 0;
    m.storeCount = 0;
    m.originBlocks = 0;
    abandonPending(m);
    snapshotCacheRemove(m.nodeId);
    count(GossipCounter.MEMBERS_DEAD, 1);
  }

  /**
   * A replica that a cap truncated stays a subset while deltas alone update it: nothing brings
   * back the blocks it refused. Once its origin's set would fit again (below 7/8 of the per-peer
   * cap, and of the total cap with the other replicas), it asks for a fresh snapshot: its digest
   * entries and requests show version 0 for the origin until a snapshot (or the deltas from
   * version 0) arrives, while the truncated replica keeps answering lookups. At most one refresh
   * per origin every {@link #REFRESH_SPACING} rounds, each given up after
   * {@link #REFRESH_WINDOW} rounds unless a snapshot of the origin is still arriving (an
   * assembly of its generation that got a new chunk within {@link #ASSEMBLY_PATIENCE} intervals: it
   * would be dropped, with every chunk collected, once the refresh ended, and a snapshot that
   * takes longer than the window to arrive never installed); with the 1/8 hysteresis, an origin
   * hovering around the cap cannot cause a snapshot every round.
   */
  private void refreshTruncatedReplicas(long now) {
    long interval = config.intervalNanos();
    for (Member m : members.values()) {
      // expireAssemblies ran first: an assembly left got a new chunk within its patience
      if (m.refreshing && now - m.refreshSinceNanos >= REFRESH_WINDOW * interval
          && (m.pending == null || m.pending.generation != m.generation)) {
        m.refreshing = false; // no snapshot came: try again after the spacing
      }
      if (m.refreshing || m.status == Status.DEAD || m.version == 0
          || index.refused(m.slot) == 0 || Durations.ahead(m.nextRefreshNanos, now)) {
        continue;
      }
      long others = index.pairs() - index.blocks(m.slot);
      if (m.originBlocks * 8 <= config.maxBlocksPerPeer() * 7
          && (others + m.originBlocks) * 8 <= config.maxBlocksTotal() * 7) {
        m.refreshing = true;
        m.refreshSinceNanos = now;
        m.nextRefreshNanos = Durations.deadline(now, REFRESH_SPACING * interval);
        count(GossipCounter.REPLICA_REFRESHES, 1);
      }
    }
  }

  /**
   * Drops snapshot assemblies that can no longer complete usefully: no new chunk for
   * {@link #ASSEMBLY_PATIENCE} intervals (chunks lost for good, or a peer that never sends the
   * rest), or a replica that reached their version meanwhile. Otherwise an assembly would hold
   * its chunks until another chunk of the same origin came, for an origin that deltas keep
   * current never, and such assemblies would take the pending budget ({@code maxBlocksTotal})
   * from every later snapshot.
   */
  private void expireAssemblies(long now) {
    long patience = ASSEMBLY_PATIENCE * config.intervalNanos();
    for (Member m : members.values()) {
      Assembly a = m.pending;
      if (a == null) {
        continue;
      }
      boolean overtaken = a.generation < m.generation || (a.generation == m.generation
          && (a.version < m.version || (a.version == m.version && !m.refreshing)));
      if (overtaken || now - a.lastProgressNanos > patience) {
        abandonPending(m);
      }
    }
  }

  private void expirePendingSyns(long now) {
    long maxAge = config.deadAfter().toNanos();
    pendingSyns.values().removeIf(p -> now - p.sentNanos() > maxAge);
    long interval = config.intervalNanos();
    synsAnswered.values().removeIf(w -> now - w[0] >= interval);
  }

  // ================================================================ SYN / ACK / ACK2

  private void onSyn(PeerAddress from, Syn syn, List<Outgoing> out) {
    long now = clock.nanoTime();
    List<Update> updates = new ArrayList<>();
    List<Request> requests = new ArrayList<>();
    List<Outgoing> chunks = new ArrayList<>();
    SnapshotBudget snapshotBudget = SnapshotBudget.of(config);
    int budget = config.messageByteCap() - 64;
    long stamp = ++synStamp;
    boolean selfSeen = false;
    Set<String> unknown = null; // origins requested as unknown, to skip their repeats
    for (DigestEntry e : syn.digest()) {
      if (e.nodeId().equals(self.nodeId())) {
        if (selfSeen) {
          continue; // duplicate entry: first one wins
        }
        selfSeen = true;
        if (e.generation() > generation) {
          refuteGeneration(e.generation(), now);
          if (e.generation() >= generation) {
            continue; // rejected, or a claim followed lately: not refuted now
          }
          // refuted: the sender gets this node's set of the new generation below
        }
        refuteHeartbeat(e);
        refuteVersion(e, now);
        // a heartbeat claim too far above to follow is answered with this node's own, which
        // the peer believes over it (inflatedHeartbeat); a version claim beyond reach too, which
        // restarts the peer's replica (beyondReach)
        if (e.generation() < generation || e.version() < summary.version()
            || e.heartbeat() < heartbeat || e.heartbeat() - heartbeat > config.maxSequenceJump()
            || (e.generation() == generation && beyondReach(summary.version(), e.version()))) {
          budget = addUpdate(updates, known(serveSelf(from, e.generation(), e.version(), budget,
              chunks, snapshotBudget)), budget);
        }
        continue;
      }
      Member m = members.get(e.nodeId());
      boolean thirdParty = !e.nodeId().equals(from.nodeId());
      if (m != null) {
        if (m.seenStamp == stamp) {
          continue; // duplicate entry: first one wins
        }
        m.seenStamp = stamp;
      }
      if (m == null) {
        if (unknown == null) {
          unknown = new HashSet<>();
        }
        if (!unknown.add(e.nodeId())) {
          continue; // duplicate entry: first one wins
        }
        // an origin speaking for itself finds room where the table holds a tombstone or a
        // member never heard from directly (makeRoom, when its update comes)
        if (members.size() < config.maxPeers() || (!thirdParty && hasRoomToMake())) {
          requests.add(new Request(e.nodeId(), 0, 0));
        } else {
          count(GossipCounter.MEMBERS_REFUSED, 1);
        }
        continue;
      }
      if (thirdParty && absurd(m, e)) {
        count(GossipCounter.REJECTED, 1);
        continue;
      }
      if (!thirdParty && e.generation() < m.generation) {
        // the node itself, restarted at a generation below the one known (dead or alive):
        // told that one, it continues above it (refuteGeneration); its old set is of no use
        // to it
        budget = addUpdate(updates, known(headerOnly(m, m.version)), budget);
        continue;
      }
      if (m.status == Status.DEAD) {
        if (e.generation() > m.generation
            || (e.generation() == m.generation && e.heartbeat() > m.heartbeat)
            || inflatedHeartbeat(m, e, thirdParty)) {
          requests.add(new Request(m.nodeId, m.generation, 0));
        }
        continue;
      }
      if (e.generation() > m.generation) {
        requests.add(new Request(m.nodeId, m.generation, m.version));
        continue;
      }
      if (e.generation() < m.generation) {
        budget = addUpdate(updates, known(
            serveMember(m, e.generation(), e.version(), budget, from, chunks, snapshotBudget)),
            budget);
        continue;
      }
      if (!thirdParty) {
        restartIfBeyondReach(m, e.version());
      }
      if (inflatedHeartbeat(m, e, thirdParty)) {
        count(GossipCounter.REJECTED, 1);
        acceptHeartbeat(m, e, now);
      } else if (e.heartbeat() > m.heartbeat) {
        acceptHeartbeat(m, e, now);
      }
      if (e.version() > m.version) {
        requests.add(new Request(m.nodeId, m.generation, m.refreshing ? 0 : m.version));
      } else if (e.pending() && thirdParty) {
        m.lastSyncNanos = e.version() == m.version ? now : m.lastSyncNanos;
        continue; // the initiator awaits this origin's news from another peer
      } else if (e.version() < m.version) {
        budget = addUpdate(updates, known(
            serveMember(m, e.generation(), e.version(), budget, from, chunks, snapshotBudget)),
            budget);
      } else {
        m.lastSyncNanos = now;
        // heartbeats spread by the digests themselves; answer a heartbeat-only difference
        // only when the initiator is far enough behind to start suspecting the origin
        if (m.heartbeat - e.heartbeat() > heartbeatLagToCorrect) {
          budget = addUpdate(updates, known(headerOnly(m, e.version())), budget);
        }
      }
    }
    // what the initiator does not list: unknown to it, unless the digest may be one that left
    // origins out for want of room; such origins get deltas from version 0 where a log still
    // has them, or their header alone, and no snapshot (which went, in every exchange, to
    // initiators that held the origin already). A header teaches an initiator an origin it did
    // not know; its next digest lists it, at version 0, and gets the snapshot then
    SnapshotBudget unlisted = snapshotBudget;
    if (mayLeaveOriginsOut(syn)) {
      unlisted = new SnapshotBudget(0, 0);
      unlisted.full = true;
    }
    if (!selfSeen) {
      budget = addUpdate(updates, serveSelf(from, 0, 0, budget, chunks, unlisted), budget);
    }
    List<String> remembered = null; // unlisted origins whose blocks this answer carries
    for (Member m : members.values()) {
      if (m.status != Status.DEAD && m.seenStamp != stamp
          && !m.nodeId.equals(from.nodeId())) {
        if (unlistedSentLately(from.nodeId(), syn.senderGeneration(), m, now)) {
          budget = addUpdate(updates, headerOnly(m, 0), budget);
          continue;
        }
        int updatesBefore = updates.size();
        int chunksBefore = chunks.size();
        budget = addUpdate(updates,
            serveMember(m, 0, 0, budget, from, chunks, unlisted), budget);
        if ((chunks.size() > chunksBefore || (updates.size() > updatesBefore
            && !updates.get(updates.size() - 1).deltas().isEmpty()))
            && rememberUnlistedSent(from.nodeId(), syn.senderGeneration(), m, now)) {
          if (remembered == null) {
            remembered = new ArrayList<>();
          }
          remembered.add(m.nodeId);
        }
      }
    }
    trimRequests(requests, budget);
    recordInFlight(from, updates);
    Runnable unsentAck = () -> forgetInFlight(from, updates);
    if (remembered != null) {
      // an answer or a chunk whose send failed did not carry the blocks: not remembered as sent
      List<String> origins = remembered;
      long peerGeneration = syn.senderGeneration();
      Runnable forget = () -> forgetUnlistedSent(from.nodeId(), peerGeneration, origins, now);
      unsentAck = () -> {
        forgetInFlight(from, updates);
        forget.run();
      };
      for (int i = 0; i < chunks.size(); i++) {
        Outgoing c = chunks.get(i);
        Runnable unsentChunk = c.unsent();
        chunks.set(i, new Outgoing(c.to(), c.payload(), c.sent(), () -> {
          if (unsentChunk != null) {
            unsentChunk.run();
          }
          forget.run();
        }));
      }
    }
    out.add(new Outgoing(from, codec.encode(new Ack(syn.round(), generation, updates, requests)),
        updateBytesCounter(updates), unsentAck));
    out.addAll(chunks);
  }

  /**
   * Whether the digest of {@code syn} may leave out origins its sender knows. A sender lists
   * what fits in one message ({@link #buildDigest}: a rotating subset once the digest is larger)
   * and nothing on the wire says so; a digest is complete if one more entry of any size would
   * still have fit in this node's {@code messageByteCap}. A peer of a smaller cap (a rolling
   * change of the setting) may leave origins out of a digest this takes for complete: they get
   * snapshots they may not need, within the exchange's snapshot budget, until the caps agree.
   */
  private boolean mayLeaveOriginsOut(Syn syn) {
    GossipCodec.Prev prev = new GossipCodec.Prev();
    long bytes = GossipCodec.synOverhead(GossipMessage.MAX_COUNTER, syn.senderGeneration(),
        GossipConfig.MAX_PEERS_LIMIT + 1);
    for (DigestEntry e : syn.digest()) {
      bytes += GossipCodec.sizeOf(e, prev);
      prev.set(e.nodeId(), e.generation());
    }
    return bytes + GossipCodec.MAX_DIGEST_ENTRY_BYTES > config.messageByteCap();
  }

  /**
   * {@code u} without the origin's address, for a receiver that listed the origin (in its
   * digest or a request with a known generation) and so knows its address already.
   */
  private static Update known(Update u) {
    return u == null || u.address() == null ? u
        : new Update(u.header(), null, u.fromVersion(), u.deltas());
  }

  private void trimRequests(List<Request> requests, int budget) {
    int used = 0;
    for (int i = 0; i < requests.size(); i++) {
      used += GossipCodec.sizeOf(requests.get(i));
      if (used > budget) {
        requests.subList(i, requests.size()).clear();
        return;
      }
    }
  }

  private int addUpdate(List<Update> updates, Update u, int budget) {
    if (u == null) {
      return budget;
    }
    int size = GossipCodec.sizeOf(u);
    if (size > budget) {
      return budget;
    }
    updates.add(u);
    return budget - size;
  }

  private void onAck(PeerAddress from, Ack ack, List<Outgoing> out) {
    long now = clock.nanoTime();
    PendingSyn p = pendingSyns.get(ack.round());
    boolean sampled = false;
    if (p != null && p.nodeId().equals(from.nodeId())) {
      pendingSyns.remove(ack.round());
      // the earlier SYNs to the peer still unanswered are taken for lost: a new SYN to it waits
      // one window again, not the longer one they made it wait
      pendingSyns.values().removeIf(q -> q.nodeId().equals(p.nodeId())
          && q.address().equals(p.address()) && q.sentNanos() - p.sentNanos() < 0);
      long sample = now - p.sentNanos();
      Member m = members.get(from.nodeId());
      if (m != null && sample >= 0) {
        m.rttNanos = m.rttNanos < 0 ? sample
            : (long) ((1 - config.rttSmoothing()) * m.rttNanos + config.rttSmoothing() * sample);
        count(GossipCounter.RTT_SAMPLES, 1);
        sampled = true;
      }
    }
    for (Update u : ack.updates()) {
      apply(from, u);
    }
    // RTT sample for a first contact lands once the member exists; a member the updates
    // restarted (its round trip unknown again) starts from the sample already counted
    if (p != null && p.nodeId().equals(from.nodeId())) {
      Member m = members.get(from.nodeId());
      if (m != null && m.rttNanos < 0) {
        m.rttNanos = now - p.sentNanos();
        if (!sampled) {
          count(GossipCounter.RTT_SAMPLES, 1);
        }
      }
    }
    if (ack.requests().isEmpty()) {
      return;
    }
    List<Update> updates = new ArrayList<>();
    List<Outgoing> chunks = new ArrayList<>();
    SnapshotBudget snapshotBudget = SnapshotBudget.of(config);
    int budget = config.messageByteCap() - 32;
    // an origin requested twice is served once (the first request wins, as in a digest):
    // serving every repeat cost the work of finding its deltas again each time
    long stamp = ++synStamp;
    boolean selfServed = false;
    for (Request r : ack.requests()) {
      Update u;
      if (r.nodeId().equals(self.nodeId())) {
        if (selfServed) {
          continue;
        }
        selfServed = true;
        if (r.generation() > generation) {
          refuteGeneration(r.generation(), clock.nanoTime());
        }
        u = serveSelf(from, r.generation(), r.version(), budget, chunks, snapshotBudget);
      } else {
        Member m = members.get(r.nodeId());
        if (m == null || m.status == Status.DEAD || m.seenStamp == stamp) {
          continue;
        }
        m.seenStamp = stamp;
        u = serveMember(m, r.generation(), r.version(), budget, from, chunks, snapshotBudget);
      }
      budget = addUpdate(updates, r.generation() == 0 ? u : known(u), budget);
    }
    if (!updates.isEmpty()) {
      recordInFlight(from, updates);
      out.add(new Outgoing(from, codec.encode(new Ack2(generation, updates)),
          updateBytesCounter(updates), () -> forgetInFlight(from, updates)));
    }
    out.addAll(chunks);
  }

  /**
   * A peer's entry about this node with a heartbeat above this node's own: no honest peer can
   * know one, yet peers take the highest heartbeat they hear of from anyone, so such a value (a
   * peer's bug, a corrupted relay) would stand above every heartbeat this node sends, and every
   * peer would see it stop and declare it dead while it keeps talking to them. Like a SWIM node
   * refuting a suspicion, this node continues its heartbeat from above the value, so its next
   * digests spread again. A value more than {@code maxSequenceJump} above (which peers refuse from
   * third parties, so only an impersonation of this node could have spread it), or in the upper
   * half of the counter range, is rejected instead: following it would let a liar push the
   * counter to its limit.
   */
  private void refuteHeartbeat(DigestEntry e) {
    if (e.generation() != generation || e.heartbeat() <= heartbeat) {
      return;
    }
    if (e.heartbeat() - heartbeat > config.maxSequenceJump()
        || e.heartbeat() >= GossipMessage.MAX_COUNTER / 2) {
      count(GossipCounter.REJECTED, 1);
      return;
    }
    heartbeat = e.heartbeat() + 1;
    count(GossipCounter.HEARTBEATS_REFUTED, 1);
  }

  /**
   * A peer's entry, update or request about this node with a generation above this node's own.
   * Peers know the node by an earlier run's generation, larger than this run's (its clock was
   * ahead at that start: a clock set right between the two, a restored snapshot of a virtual
   * machine), or a third party claimed it. They would ignore this run until they had declared
   * that generation dead and forgotten it ({@code deadAfter + forgetAfter}), its cache drawing
   * no forwards meanwhile. This node continues with the same set ({@link
   * LocalSummary#newGeneration}) as a generation drawn above the claim (up to {@link
   * #GENERATION_REFUTATION_SPREAD} above: two runs refuting the same claim must not take the
   * same generation), which its peers then take as a restart and get as a snapshot. A claim
   * more than {@code maxGenerationJump} above its own (peers refuse such a jump from third
   * parties, so only an impersonation could have spread it), or in the upper half of the
   * counter range, is rejected instead (a liar cannot push the generation to its limit). After
   * the first {@link #FREE_GENERATION_REFUTATIONS}, at most one claim is followed every {@link
   * #REFRESH_SPACING} rounds, since each costs every peer a snapshot. Two processes started
   * with one node id raise each other's generation at that pace; after {@link
   * #ID_IN_USE_REFUTATIONS} refutations within {@link #ID_IN_USE_WINDOW} rounds each reports its
   * id in use ({@link #nodeIdInUse()}), logged once at error, and its later refutations at debug.
   */
  private void refuteGeneration(long claimed, long now) {
    if (claimed <= generation) {
      return;
    }
    if (claimed - generation > config.maxGenerationJump()
        || claimed >= GossipMessage.MAX_COUNTER / 2) {
      count(GossipCounter.REJECTED, 1);
      return;
    }
    if (generationRefutations >= FREE_GENERATION_REFUTATIONS
        && Durations.ahead(nextGenerationRefutationNanos, now)) {
      return;
    }
    generationRefutations++;
    nextGenerationRefutationNanos =
        Durations.deadline(now, REFRESH_SPACING * config.intervalNanos());
    long before = generation;
    // above the claim by a drawn amount: two runs told the same claim (the second restarted
    // before every peer had heard of the first's refutation) must not share a generation, as
    // peers would take their two sets for one
    generation = claimed + 1 + random.nextLong(GENERATION_REFUTATION_SPREAD);
    summary.newGeneration(generation);
    snapshotCacheRemove(self.nodeId());
    count(GossipCounter.GENERATIONS_REFUTED, 1);
    generationRefutedAt[(generationRefutations - 1) % ID_IN_USE_REFUTATIONS] = now;
    if (idInUse) { // said once, at the start of the episode
      log.debug("gossip: peers know node {} by generation {}, above its own {}; it continues as "
          + "generation {}", self.nodeId(), claimed, before, generation);
      return;
    }
    if (generationRefutations >= ID_IN_USE_REFUTATIONS && now
        - generationRefutedAt[generationRefutations % ID_IN_USE_REFUTATIONS] <= idInUseWindowNanos) {
      idInUse = true;
      count(GossipCounter.NODE_ID_IN_USE_REPORTS, 1);
      log.error("gossip: node id {} is in use by another process: {} times within {} rounds "
          + "peers knew it by a generation above this process's own, the last time {} against "
          + "{}; the two keep drawing generations above each other's (this one now {}), each "
          + "draw costing every peer a snapshot. Give each process a node id of its own. "
          + "Reported until no such generation comes for {} rounds", self.nodeId(),
          ID_IN_USE_REFUTATIONS, ID_IN_USE_WINDOW, claimed, before, generation, ID_IN_USE_WINDOW);
      return;
    }
    log.warn("gossip: peers know node {} by generation {}, above its own {} (an earlier run "
        + "started with a clock ahead of this one's, or another process runs with this node "
        + "id); it continues as generation {}", self.nodeId(), claimed, before, generation);
  }

  /**
   * A peer's entry about this node with a version above this node's own (same generation): no
   * honest peer can know one. A peer holding it got deltas this node never made (invented by a
   * third party, or left from an earlier run under the same generation), and its replica
   * ignores every real delta, all "old", until this node's version passes the claim, and passes
   * the invented deltas on to others. This node moves its version past the claim without
   * changing its set ({@link LocalSummary#versionAbove}): its next digests show a version above
   * every such replica, and since its delta log restarts there, each replica gets a snapshot,
   * which installs as newer. A claim more than {@code maxSequenceJump} above (which peers
   * refuse from third parties, as {@link #absurd}: the two agree, so every claim a peer takes is
   * one this node refutes), or in the upper half of the counter range, is rejected instead; at
   * most one claim is followed every {@link #REFRESH_SPACING} rounds, since each costs every
   * peer a snapshot.
   */
  private void refuteVersion(DigestEntry e, long now) {
    long own = summary.version();
    if (e.generation() != generation || e.version() <= own) {
      return;
    }
    if (beyondReach(own, e.version())) {
      count(GossipCounter.REJECTED, 1);
      return;
    }
    if (Durations.ahead(nextVersionRefutationNanos, now)) {
      return;
    }
    nextVersionRefutationNanos =
        Durations.deadline(now, REFRESH_SPACING * config.intervalNanos());
    summary.versionAbove(e.version());
    snapshotCacheRemove(self.nodeId());
    count(GossipCounter.VERSIONS_REFUTED, 1);
  }

  /**
   * Whether an origin at version {@code own} rejects a claim of version {@code claimed} of its
   * own generation rather than refute it ({@link #refuteVersion}): more than {@code
   * maxSequenceJump} above (peers refuse such a step from third parties, {@link #absurd}), or in
   * the upper half of the counter range.
   */
  private boolean beyondReach(long own, long claimed) {
    return claimed > own && (claimed - own > config.maxSequenceJump()
        || claimed >= GossipMessage.MAX_COUNTER / 2);
  }

  /**
   * The origin's own word ({@code version}, in the replica's generation: a digest entry, an
   * update header or a snapshot chunk it sent) against a replica ahead of it. A replica ahead
   * by no more than the origin refutes is left to the origin ({@link #refuteVersion}), and so is
   * one ahead of an older message of the origin arriving after newer state from a peer (delayed
   * or reordered in flight); a replica beyond its reach holds a version the origin never made
   * and never will refute. Third-party claims are measured against the replica, so a chain of
   * them, each within {@code maxSequenceJump} of the last, gets there; the replica would then
   * ignore every real delta and snapshot of the origin (all "older") for the rest of the
   * generation. It restarts from the empty set at version 0 instead (with an assembly of a
   * snapshot beyond reach too), so the exchange that brought the word, or the next one, gives
   * it the origin's real set. Like {@link #inflatedHeartbeat} for heartbeats: only the
   * origin's word is believed over the replica's, never a third party's.
   */
  private void restartIfBeyondReach(Member m, long version) {
    Assembly a = m.pending;
    if (a != null && a.generation == m.generation && beyondReach(version, a.version)) {
      abandonPending(m);
    }
    if (!beyondReach(version, m.version)) {
      return;
    }
    restart(m);
    count(GossipCounter.REPLICAS_BEYOND_REACH_RESTARTED, 1);
  }

  /**
   * Whether a third party's claim {@code e} about {@code m} jumps too far ahead to be taken: a
   * generation more than {@code maxGenerationJump} above the one known; in the generation known,
   * a version or heartbeat more than {@code maxSequenceJump} above. A new generation's replica
   * starts at version 0, so a claim of one is measured against 0, as for an origin just learned
   * ({@link #apply}): of a restart already more than the jump along, a third party's digest
   * entry, update or snapshot is refused, and the replica gets the new generation from the
   * origin itself. Taken, a forged one put the replica beyond the reach of the origin's
   * refutation ({@link #refuteVersion}).
   */
  private boolean absurd(Member m, DigestEntry e) {
    if (e.generation() > m.generation) {
      return e.generation() - m.generation > config.maxGenerationJump()
          || e.version() > config.maxSequenceJump();
    }
    if (e.generation() == m.generation) {
      return (e.version() > m.version && e.version() - m.version > config.maxSequenceJump())
          || (e.heartbeat() > m.heartbeat
              && e.heartbeat() - m.heartbeat > config.maxSequenceJump());
    }
    return false;
  }

  /**
   * True if {@code e} is the origin's own word about itself ({@code thirdParty} false) in the
   * generation known for it, with a heartbeat more than {@code maxSequenceJump} below the one
   * held. The held value is then none the origin reached: its heartbeat never goes back, and
   * {@link #absurd} keeps third parties from raising a known one by more. It is the value a third
   * party introduced the origin with, which nothing could be measured against then, and which
   * the origin does not refute ({@link #refuteHeartbeat}: only claims within the jump); kept, it
   * would stand above every heartbeat the origin sends, and the origin, talking to this node,
   * would be declared dead here. The origin's own heartbeat replaces it.
   */
  private boolean inflatedHeartbeat(Member m, DigestEntry e, boolean thirdParty) {
    return !thirdParty && e.generation() == m.generation
        && m.heartbeat - e.heartbeat() > config.maxSequenceJump();
  }

  private void acceptHeartbeat(Member m, DigestEntry e, long now) {
    m.heartbeat = e.heartbeat();
    m.queueDepth = e.queueDepth();
    m.inFlight = e.inFlight();
    m.overloaded = e.overloaded();
    m.heartbeatNanos = now;
    m.status = Status.ALIVE;
  }

  // ================================================================ serving updates

  private Update headerOnly(Member m, long fromVersion) {
    return new Update(m.entry(), m.address.address(), fromVersion, List.of());
  }

  private Update serveSelf(PeerAddress to, long gen, long version, int budget,
      List<Outgoing> chunks, SnapshotBudget snapshotBudget) {
    DigestEntry me = selfEntry();
    String addr = self.address();
    long myVersion = me.version();
    if (gen == generation && version >= myVersion) {
      return new Update(me, addr, myVersion, List.of());
    }
    if (gen == generation) {
      version = servedFrom(to, self.nodeId(), generation, version);
      if (version >= myVersion) {
        return new Update(me, addr, myVersion, List.of()); // the rest is in flight
      }
    }
    if (gen <= generation && !config.fullSnapshotsOnly()) {
      long from = gen == generation ? version : 0; // an older generation restarts from empty
      int headerSize = GossipCodec.headerOnlySize(me, addr, from) + 8;
      int maxSingle = config.messageByteCap() - 256 - headerSize;
      List<Delta> deltas = summary.deltasAfter(from, budget - headerSize, maxSingle);
      if (deltas != null) {
        // the tree's thread may have changed the summary since the header was taken: deltas
        // past the header's version would make the whole message malformed
        if (deltas.size() > myVersion - from) {
          deltas = List.copyOf(deltas.subList(0, (int) (myVersion - from)));
        }
        return new Update(me, addr, from, deltas);
      }
    }
    // a snapshot: header-only update now (so the receiver resets to this generation) + chunks
    sendSnapshot(to, self.nodeId(), generation, myVersion, chunks, snapshotBudget,
        () -> summary.snapshot(),
        v -> v == summary.version() || (!config.fullSnapshotsOnly() && summary.logCovers(v)));
    return new Update(me, addr, 0, List.of());
  }

  private Update serveMember(Member m, long gen, long version, int budget, PeerAddress to,
      List<Outgoing> chunks, SnapshotBudget snapshotBudget) {
    if (gen > m.generation || (gen == m.generation && version >= m.version)) {
      return headerOnly(m, m.version);
    }
    if (gen == m.generation) {
      version = servedFrom(to, m.nodeId, m.generation, version);
      if (version >= m.version) {
        return null; // all in flight; heartbeats travel in the digests
      }
    }
    long from = gen == m.generation ? version : 0;
    int headerSize = GossipCodec.headerOnlySize(m.entry(), m.address.address(), from) + 8;
    int maxSingle = config.messageByteCap() - 256 - headerSize;
    List<Delta> deltas = config.fullSnapshotsOnly() ? null
        : m.relayLog.after(from, budget - headerSize, maxSingle);
    if (deltas != null) {
      return new Update(m.entry(), m.address.address(), from, deltas);
    }
    if (m.version > 0 && index.refused(m.slot) == 0) {
      sendSnapshot(to, m.nodeId, m.generation, m.version, chunks, snapshotBudget, () -> {
        long[][] a = m.order.toArrays();
        return new LocalSummary.Snapshot(m.version, m.storeCount, a[0], a[1]);
      }, v -> v == m.version || (!config.fullSnapshotsOnly() && m.relayLog.covers(v)));
    }
    return headerOnly(m, 0);
  }

  /**
   * How long deltas sent to {@code peer} count as in flight: twice its smoothed round trip or
   * one interval, whichever is longer, plus half an interval. A peer's digest taken before our
   * answer reached it cannot show that answer's deltas; after this window the answer is
   * presumed lost and the digest is believed again.
   */
  private long inFlightWindow(Member peer) {
    long interval = config.interval().toNanos();
    return Math.max(2 * Math.max(peer.rttNanos, 0), interval) + interval / 2;
  }

  /**
   * The version to serve {@code origin} (current generation {@code gen}) from to {@code to},
   * whose digest or request says it holds {@code version}: that version, or the end of the
   * deltas already sent to it and still in flight.
   */
  private long servedFrom(PeerAddress to, String origin, long gen, long version) {
    Member peer = members.get(to.nodeId());
    if (peer == null || peer.sent == null) {
      return version;
    }
    InFlight f = peer.sent.get(origin);
    if (f == null) {
      return version;
    }
    if (f.generation != gen) {
      removeInFlight(peer, origin);
      return version;
    }
    f.confirm(version);
    if (f.n == 0) {
      removeInFlight(peer, origin);
      return version;
    }
    if (f.from[0] > version || clock.nanoTime() - f.at[0] >= inFlightWindow(peer)) {
      return version; // a gap, or presumed lost: serve from what the peer shows
    }
    long end = f.end[f.n - 1];
    count(GossipCounter.DELTAS_IN_FLIGHT_SKIPPED, end - version);
    return end;
  }

  /** Remembers the deltas just sent to {@code to}. */
  private void recordInFlight(PeerAddress to, List<Update> updates) {
    Member peer = members.get(to.nodeId());
    if (peer == null || peer.status == Status.DEAD) {
      return;
    }
    long now = clock.nanoTime();
    for (Update u : updates) {
      List<Delta> deltas = u.deltas();
      if (deltas.isEmpty()) {
        continue;
      }
      String origin = u.header().nodeId();
      InFlight f = peer.sent == null ? null : peer.sent.get(origin);
      if (f == null) {
        if (inFlightEntries >= IN_FLIGHT_MAX_ENTRIES) {
          continue; // full: this peer simply gets the deltas again
        }
        if (peer.sent == null) {
          peer.sent = new HashMap<>();
        }
        f = new InFlight();
        f.generation = u.header().generation();
        peer.sent.put(origin, f);
        inFlightEntries++;
      } else if (f.generation != u.header().generation()) {
        f.generation = u.header().generation();
        f.n = 0;
      }
      f.add(u.fromVersion(), deltas.get(deltas.size() - 1).seq(), now);
    }
  }

  /**
   * Splits the bytes of updates about to be sent into headers, own and relayed deltas, and
   * counts them when run (once the message carrying them was sent).
   */
  private Runnable updateBytesCounter(List<Update> updates) {
    long own = 0;
    long relayed = 0;
    for (Update u : updates) {
      long deltaBytes = Delta.encodedSize(u.deltas());
      if (u.header().nodeId().equals(self.nodeId())) {
        own += deltaBytes;
      } else {
        relayed += deltaBytes;
      }
    }
    long ownBytes = own;
    long relayedBytes = relayed;
    long headerBytes = GossipCodec.updatesSize(updates) - own - relayed;
    return () -> {
      count(GossipCounter.OWN_DELTA_BYTES_SENT, ownBytes);
      count(GossipCounter.RELAYED_DELTA_BYTES_SENT, relayedBytes);
      count(GossipCounter.UPDATE_HEADER_BYTES_SENT, headerBytes);
    };
  }

  /**
   * The answer carrying {@code updates} to {@code to} never left (its send threw): the deltas
   * recorded in flight for their origins are forgotten, so that the peer's next SYN gets them at
   * once. Whatever else was in flight to it for those origins is forgotten too: sent again at
   * worst, never withheld. Under the write lock.
   */
  private void forgetInFlight(PeerAddress to, List<Update> updates) {
    Member peer = members.get(to.nodeId());
    if (peer == null) {
      return;
    }
    for (Update u : updates) {
      if (!u.deltas().isEmpty()) {
        removeInFlight(peer, u.header().nodeId());
      }
    }
  }

  private void removeInFlight(Member peer, String origin) {
    if (peer.sent != null && peer.sent.remove(origin) != null) {
      inFlightEntries--;
    }
  }

  private void clearInFlight(Member peer) {
    if (peer.sent != null) {
      inFlightEntries -= peer.sent.size();
      peer.sent = null;
    }
  }

  /**
   * Whether {@code origin}'s blocks were sent to {@code peer} (in generation
   * {@code peerGeneration}), whose digest left the origin out, within the last
   * {@link #UNLISTED_SPACING} intervals, in the origin's current generation.
   */
  private boolean unlistedSentLately(String peer, long peerGeneration, Member origin, long now) {
    UnlistedSent u = unlistedSent.get(peer);
    if (u == null || u.peerGeneration != peerGeneration) {
      return false;
    }
    long[] at = u.origins.get(origin.nodeId);
    return at != null && at[0] == origin.generation
        && now - at[1] < UNLISTED_SPACING * config.intervalNanos();
  }

  /**
   * Remembers that {@code origin}'s blocks are being sent to {@code peer}, which left it out;
   * false if there is no room to (the blocks then simply go again next time).
   */
  private boolean rememberUnlistedSent(String peer, long peerGeneration, Member origin, long now) {
    UnlistedSent u = unlistedSent.get(peer);
    if (u != null && u.peerGeneration != peerGeneration) {
      unlistedEntries -= u.origins.size(); // the peer restarted: what it was sent is gone
      unlistedSent.remove(peer);
      u = null;
    }
    long[] at = u == null ? null : u.origins.get(origin.nodeId);
    if (at != null) {
      at[0] = origin.generation;
      at[1] = now;
      return true;
    }
    if (unlistedEntries >= IN_FLIGHT_MAX_ENTRIES) {
      return false; // full: this peer simply gets the blocks again
    }
    if (u == null) {
      u = new UnlistedSent(peerGeneration);
      unlistedSent.put(peer, u);
    }
    u.origins.put(origin.nodeId, new long[] {origin.generation, now});
    unlistedEntries++;
    return true;
  }

  /**
   * Takes back what {@link #rememberUnlistedSent} noted at {@code now} of {@code origins} for
   * {@code peer}: the message that was to carry their blocks was not sent. Under the write lock.
   */
  private void forgetUnlistedSent(String peer, long peerGeneration, List<String> origins,
      long now) {
    UnlistedSent u = unlistedSent.get(peer);
    if (u == null || u.peerGeneration != peerGeneration) {
      return;
    }
    for (String origin : origins) {
      long[] at = u.origins.get(origin);
      if (at != null && at[1] == now) {
        u.origins.remove(origin);
        unlistedEntries--;
      }
    }
    if (u.origins.isEmpty()) {
      unlistedSent.remove(peer);
    }
  }

  /** Drops in-flight entries that expired or whose origin is gone or restarted. */
  private void sweepInFlight(long now) {
    long spacing = UNLISTED_SPACING * config.intervalNanos();
    Iterator<UnlistedSent> peers = unlistedSent.values().iterator();
    while (peers.hasNext()) {
      Iterator<long[]> origins = peers.next().origins.values().iterator();
      while (origins.hasNext()) {
        if (now - origins.next()[1] >= spacing) {
          origins.remove();
          unlistedEntries--;
        }
      }
    }
    unlistedSent.values().removeIf(u -> u.origins.isEmpty());
    for (Member peer : members.values()) {
      if (peer.sent == null) {
        continue;
      }
      long window = inFlightWindow(peer);
      Iterator<Map.Entry<String, InFlight>> it = peer.sent.entrySet().iterator();
      while (it.hasNext()) {
        Map.Entry<String, InFlight> en = it.next();
        InFlight f = en.getValue();
        long gen;
        if (en.getKey().equals(self.nodeId())) {
          gen = generation;
        } else {
          Member o = members.get(en.getKey());
          gen = o == null || o.status == Status.DEAD ? -1 : o.generation;
        }
        if (f.n == 0 || f.generation != gen || now - f.at[f.n - 1] >= window) {
          it.remove();
          inFlightEntries--;
        }
      }
      if (peer.sent.isEmpty()) {
        peer.sent = null;
      }
    }
  }

  private void sendSnapshot(PeerAddress to, String origin, long gen, long current,
      List<Outgoing> chunks, SnapshotBudget snapshotBudget, Supplier<LocalSummary.Snapshot> take,
      java.util.function.LongPredicate stillUseful) {
    long now = clock.nanoTime();
    CachedSnapshot c = snapshotCache.get(origin);
    // an older snapshot than the origin's current version serves a peer that can catch up from
    // it by deltas, but not a truncated replica asking for a fresh copy (at a version above it):
    // one sent to a peer in full twice, which still asks, is encoded anew
    if (c == null || c.generation != gen || !stillUseful.test(c.version)
        || (c.version != current && (c.passesTo(to.nodeId()) >= STALE_SNAPSHOT_PASSES
            || !track(c, to.nodeId())))) {
      if (snapshotBudget.full) {
        // a chunk of this exchange did not fit already: encoding another snapshot (O(blocks),
        // under the lock) would be wasted work; the next exchange serves it
        return;
      }
      snapshotCacheRemove(origin);
      LocalSummary.Snapshot s = take.get();
      c = encodeSnapshot(origin, gen, s, now);
      count(GossipCounter.SNAPSHOTS_ENCODED, 1);
      // cached whatever its size (one larger than the cache is held alone): a snapshot of more
      // than one exchange's budget completes at a peer only if later exchanges send chunks of
      // the same version, and re-encoded at every exchange it took a new version each time the
      // origin had changed since, so that no peer ever completed it. For the same reason a
      // snapshot sent within the patience of an assembly is kept while the cache holds at most
      // SNAPSHOT_CACHE_IN_USE_FACTOR times its bound: two snapshots each over half the bound,
      // sent in turn, pushed each other out, and each re-encoding took a new version, so that
      // peers collecting them started over at every exchange, for ever
      snapshotCache.put(origin, c);
      snapshotCacheBytes += c.bytes;
      long inUse = ASSEMBLY_PATIENCE * config.intervalNanos();
      Iterator<Map.Entry<String, CachedSnapshot>> it = snapshotCache.entrySet().iterator();
      while (snapshotCacheBytes > snapshotCacheMaxBytes && it.hasNext()) {
        Map.Entry<String, CachedSnapshot> e = it.next();
        if (e.getKey().equals(origin) || (now - e.getValue().sentNanos <= inUse
            && snapshotCacheBytes <= SNAPSHOT_CACHE_IN_USE_FACTOR * snapshotCacheMaxBytes)) {
          continue;
        }
        left(e.getValue());
        it.remove();
      }
    }
    // a snapshot older than the origin's current version counts the chunks sent to each peer
    boolean tracked = c.version != current && c.tracks(to.nodeId());
    List<byte[]> all = c.chunks;
    int n = all.size();
    int start = n == 1 ? 0 : random.nextInt(n);
    int queued = 0;
    // counted as the send function takes the chunks: the snapshot once, with its first chunk
    // taken (flush sends the chunks of one exchange on one thread, in order)
    boolean[] snapshotCounted = new boolean[1];
    // chunks of this exchange whose send threw; when all did, nothing went, and the snapshot is
    // not in use by this exchange (its mark is taken back, so that it may leave the cache)
    int[] unsent = new int[1];
    int[] sending = new int[1];
    CachedSnapshot cached = c;
    long before = c.sentNanos;
    long mark = c.marks + 1;
    Runnable unsentChunk = () -> {
      if (++unsent[0] == sending[0] && cached.marks == mark) {
        cached.sentNanos = before;
      }
    };
    for (int i = 0; i < n; i++) {
      int k = (start + i) % n;
      byte[] chunk = all.get(k);
      if (chunk.length > snapshotBudget.bytes || snapshotBudget.chunks == 0) {
        snapshotBudget.full = true;
        break;
      }
      snapshotBudget.bytes -= chunk.length;
      if (--snapshotBudget.chunks == 0) {
        snapshotBudget.full = true; // no chunk of another snapshot can go
      }
      if (tracked) {
        c.queued(to.nodeId(), k);
      }
      long storeBytes = c.storeBytes[k];
      chunks.add(new Outgoing(to, chunk, () -> {
        count(GossipCounter.SNAPSHOT_CHUNKS_SENT, 1);
        count(GossipCounter.SNAPSHOT_BYTES_SENT, chunk.length);
        count(GossipCounter.SNAPSHOT_STORE_NUMBER_BYTES_SENT, storeBytes);
        if (!snapshotCounted[0]) {
          snapshotCounted[0] = true;
          count(GossipCounter.SNAPSHOTS_SENT, 1);
        }
      }, unsentChunk));
      queued++;
    }
    if (queued > 0) {
      sending[0] = queued;
      c.sentNanos = now;
      c.marks = mark;
    }
  }

  /**
   * Encodes a snapshot as chunks of at most {@code messageByteCap} bytes, split evenly: chunk
   * {@code i} of {@code n} holds the blocks from {@code floor(i * total / n)} to
   * {@code floor((i + 1) * total / n)}; {@code n} starts at the bytes over the room a chunk
   * has, rounded up, and grows while a chunk does not fit. The boundaries then depend on the
   * blocks and the chunk count alone, so chunks of the same (origin, generation, version, chunk
   * count) from senders with different caps are the same chunks, and a peer may assemble them
   * from several senders; filled to the cap, the same count of chunks split at other
   * boundaries, and a mix lacked the blocks between them.
   */
  private CachedSnapshot encodeSnapshot(String origin, long gen, LocalSummary.Snapshot s,
      long now) {
    int budget = config.messageByteCap()
        - GossipCodec.chunkOverhead(origin, gen, s.version(), s.storeCount());
    long[] h = s.hashes();
    long[] st = s.stores();
    // a block costs its store-number gap (the first of a chunk: the store number itself) plus
    // its fingerprint; gapBytes[i] sums the gaps' varints before block i
    long[] gapBytes = new long[h.length + 1];
    for (int i = 0; i < h.length; i++) {
      gapBytes[i + 1] = gapBytes[i] + ByteWriter.varLongSize(i == 0 ? st[0] : st[i] - st[i - 1]);
    }
    long total = gapBytes[h.length] + (long) h.length * BlockFingerprint.BYTES;
    int count = (int) Math.max(1, Math.min(Math.max(h.length, 1), (total + budget - 1) / budget));
    long[] storeBytes;
    while (true) {
      storeBytes = new long[count];
      long largest = 0;
      for (int i = 0; i < count; i++) {
        int from = (int) evenStart(i, count, h.length);
        int to = (int) evenStart(i + 1, count, h.length);
        storeBytes[i] = from == to ? 0 : gapBytes[to] - gapBytes[from + 1]
            + ByteWriter.varLongSize(st[from]);
        largest = Math.max(largest, storeBytes[i] + (long) (to - from) * BlockFingerprint.BYTES);
      }
      if (largest <= budget || count >= h.length) {
        break;
      }
      // more chunks, in proportion to the excess (uneven gaps), so that this takes few passes
      count = (int) Math.min(h.length, Math.max(count + 1L, count * largest / budget + 1));
    }
    List<byte[]> chunks = new ArrayList<>(count);
    long bytes = 0;
    for (int i = 0; i < count; i++) {
      int from = (int) evenStart(i, count, h.length);
      int to = (int) evenStart(i + 1, count, h.length);
      byte[] b = codec.encode(new SnapshotChunk(origin, gen, s.version(), s.storeCount(), i,
          count, Arrays.copyOfRange(st, from, to), Arrays.copyOfRange(h, from, to)));
      chunks.add(b);
      bytes += b.length;
    }
    return new CachedSnapshot(gen, s.version(), chunks, bytes, storeBytes, now);
  }

  /** The chunks, encoded, that this node sends of snapshot {@code s} of {@code origin}. */
  List<byte[]> snapshotChunks(String origin, long gen, LocalSummary.Snapshot s) {
    return encodeSnapshot(origin, gen, s, clock.nanoTime()).chunks;
  }

  /**
   * Tracks the chunks of {@code c} sent to {@code peer}, if not yet and if the bounds leave room.
   *
   * @return whether they are tracked
   */
  private boolean track(CachedSnapshot c, String peer) {
    if (c.tracks(peer)) {
      return true;
    }
    int bits = c.chunks.size();
    if (staleTrackedPeers >= STALE_TRACKED_PEERS
        || staleTrackedBits + bits > STALE_TRACKED_BITS) {
      return false;
    }
    if (c.sentTo == null) {
      c.sentTo = new HashMap<>();
    }
    c.sentTo.put(peer, new Passes());
    staleTrackedPeers++;
    staleTrackedBits += bits;
    return true;
  }

  /** Gives back what {@code c}, leaving the cache, held: its bytes, and the peers it tracked. */
  private void left(CachedSnapshot c) {
    snapshotCacheBytes -= c.bytes;
    if (c.sentTo != null) {
      staleTrackedPeers -= c.sentTo.size();
      staleTrackedBits -= (long) c.sentTo.size() * c.chunks.size();
      c.sentTo = null;
    }
  }

  private void snapshotCacheRemove(String origin) {
    CachedSnapshot c = snapshotCache.remove(origin);
    if (c != null) {
      left(c);
    }
  }

  // ================================================================ applying

  private void apply(PeerAddress from, Update u) {
    long now = clock.nanoTime();
    DigestEntry e = u.header();
    if (e.nodeId().equals(self.nodeId())) {
      if (e.generation() > generation) {
        refuteGeneration(e.generation(), now);
      } else {
        refuteHeartbeat(e);
        refuteVersion(e, now);
      }
      return;
    }
    boolean thirdParty = !e.nodeId().equals(from.nodeId());
    Member m = members.get(e.nodeId());
    if (m == null) {
      if ((freeSlotCount == 0 || members.size() >= config.maxPeers())
          && (thirdParty || !makeRoom())) {
        count(GossipCounter.MEMBERS_REFUSED, 1);
        return;
      }
      if (thirdParty && u.address() == null) {
        return; // an update for a receiver that knew the origin, which this one forgot since
      }
      PeerAddress addr = thirdParty ? new PeerAddress(e.nodeId(), u.address()) : from;
      int slot = freeSlots[--freeSlotCount];
      slotHighWater = Math.max(slotHighWater, slot + 1);
      m = new Member(e.nodeId(), addr, slot, relayCap());
      m.heardDirectly = !thirdParty;
      m.generation = e.generation();
      m.heartbeat = e.heartbeat();
      m.queueDepth = e.queueDepth();
      m.inFlight = e.inFlight();
      m.overloaded = e.overloaded();
      m.heartbeatNanos = now;
      m.lastSyncNanos = now;
      m.versionNanos = now;
      members.put(m.nodeId, m);
      sortedMembers = null;
      bySlot[slot] = m;
      retrimRelayLogs(); // one more origin: every log's share of the total shrinks now
      count(GossipCounter.MEMBERS_JOINED, 1);
      if (thirdParty && e.version() > config.maxSequenceJump() && !u.deltas().isEmpty()) {
        // the replica starts at version 0, which a third party's claim is measured against
        // (absurd): the origin is learned, its history that far along only from itself
        count(GossipCounter.REJECTED, 1);
        return;
      }
    } else {
      if (thirdParty && absurd(m, e)) {
        count(GossipCounter.REJECTED, 1);
        return;
      }
      if (e.generation() < m.generation) {
        return; // stale
      }
      if (e.generation() > m.generation && !adoptsGeneration(m, thirdParty, now)) {
        count(GossipCounter.REJECTED, 1);
        return; // the origin is visibly alive in its current generation
      }
      boolean inflated = inflatedHeartbeat(m, e, thirdParty);
      if (m.status == Status.DEAD) {
        if (e.generation() == m.generation && e.heartbeat() <= m.heartbeat && !inflated) {
          return; // stale gossip about a dead peer does not revive it
        }
        m.status = Status.ALIVE;
        m.heartbeatNanos = now;
      }
      if (e.generation() > m.generation) {
        // the address changes only on word from the origin itself
        newGeneration(m, e, thirdParty ? m.address : from, now);
      } else if (inflated) {
        count(GossipCounter.REJECTED, 1);
        acceptHeartbeat(m, e, now);
      } else if (e.heartbeat() > m.heartbeat) {
        acceptHeartbeat(m, e, now);
      }
      if (!thirdParty && e.generation() == m.generation) {
        restartIfBeyondReach(m, e.version());
      }
    }
    applyDeltas(m, u);
    if (m.version == e.version()) {
      m.lastSyncNanos = now;
    }
  }

  /**
   * Whether a higher generation of {@code m} is taken as a restart. Heard from the origin
   * itself, always. Heard from a third party, only once the current generation's heartbeat has
   * stopped advancing for half the suspicion time (a restarted node's old heartbeat stops), so
   * a forged "restart" cannot wipe the replica of a peer that is visibly alive.
   */
  private boolean adoptsGeneration(Member m, boolean thirdParty, long now) {
    return !thirdParty || m.status == Status.DEAD
        || now - m.heartbeatNanos >= config.suspectAfter().toNanos() / 2;
  }

  private void newGeneration(Member m, DigestEntry e, PeerAddress addr, long now) {
    clearReplica(m);
    resetRelay(m, 0);
    if (m.pending != null && m.pending.generation < e.generation()) {
      abandonPending(m);
    }
    snapshotCacheRemove(m.nodeId);
    m.generation = e.generation();
    m.version = 0;
    m.storeCount = 0;
    m.originBlocks = 0;
    m.versionNanos = now;
    m.address = addr;
    m.rttNanos = -1;
    clearInFlight(m);
    acceptHeartbeat(m, e, now);
    m.lastSyncNanos = now;
    count(GossipCounter.GENERATIONS_REPLACED, 1);
  }

  private void applyDeltas(Member m, Update u) {
    if (m.refreshing && m.version > 0 && u.fromVersion() == 0 && !u.deltas().isEmpty()
        && u.deltas().get(0).seq() == 1) {
      replayFromEmpty(m, u);
      return;
    }
    long prevRef = 0;
    for (Delta d : u.deltas()) {
      long ref = prevRef;
      prevRef = d.lastRef(prevRef);
      if (d.seq() <= m.version) {
        count(GossipCounter.DELTAS_REDUNDANT, 1);
        count(GossipCounter.REDUNDANT_DELTA_BYTES_RECEIVED, d.encodedSize(ref));
        continue;
      }
      if (d.seq() != m.version + 1) {
        break; // gap: a later exchange fills it
      }
      switch (d.op()) {
        case Delta.STORE -> {
          if (d.hashes().length > Delta.MAX_STORE - m.storeCount) {
            // store numbers past 2^62, which no origin hands out (a forged or corrupted
            // snapshot claimed a last store number near the limit): held, they would make
            // every snapshot served of this replica one its peers reject as malformed
            count(GossipCounter.REJECTED, 1);
            restart(m);
            return;
          }
          for (long h : d.hashes()) {
            long store = ++m.storeCount;
            m.originBlocks++;
            addToReplica(m, store, h);
          }
        }
        case Delta.EVICT -> {
          if (!resolves(m, d.hashes())) {
            unresolved(m);
            return;
          }
          for (long store : d.hashes()) {
            int i = m.order.find(store);
            if (i >= 0) { // absent only from a truncated replica
              index.remove(m.slot, m.order.fingerprintAt(i));
              m.order.removeAt(i);
            }
          }
          m.originBlocks = Math.max(0, m.originBlocks - d.hashes().length);
          count(GossipCounter.EVICTIONS_RESOLVED, d.hashes().length);
        }
        default -> {
          clearReplica(m);
          m.originBlocks = 0;
        }
      }
      m.version = d.seq();
      m.versionNanos = clock.nanoTime();
      appendRelay(m, d);
      count(GossipCounter.DELTAS_APPLIED, 1);
    }
  }

  /**
   * A refresh answered with the origin's history from version 0 rather than a snapshot: the
   * replica restarts from the empty set and takes the net result of the deltas (the blocks
   * still held at their end), so that blocks the origin held only while it was past the cap
   * do not fill the replica and truncate it again on the way.
   */
  private void replayFromEmpty(Member m, Update u) {
    restart(m);
    LongLongMap net = new LongLongMap(); // store number -> fingerprint
    long[] stores = new long[16]; // every store number put in net, ascending
    int n = 0;
    for (Delta d : u.deltas()) {
      if (d.seq() != m.version + 1) {
        break; // gap: a later exchange fills it
      }
      switch (d.op()) {
        case Delta.STORE -> {
          for (long h : d.hashes()) {
            long store = ++m.storeCount;
            m.originBlocks++;
            net.put(store, h);
            if (n == stores.length) {
              stores = Arrays.copyOf(stores, 2 * n);
            }
            stores[n++] = store;
          }
        }
        case Delta.EVICT -> {
          for (long store : d.hashes()) {
            if (net.get(store) == LongLongMap.ABSENT) {
              unresolved(m);
              return;
            }
          }
          for (long store : d.hashes()) {
            net.remove(store);
          }
          m.originBlocks -= d.hashes().length;
          count(GossipCounter.EVICTIONS_RESOLVED, d.hashes().length);
        }
        default -> {
          net.clear();
          n = 0;
          m.originBlocks = 0;
        }
      }
      m.version = d.seq();
      appendRelay(m, d);
      count(GossipCounter.DELTAS_APPLIED, 1);
    }
    for (int i = 0; i < n; i++) {
      long h = net.get(stores[i]);
      if (h == LongLongMap.ABSENT) {
        continue;
      }
      addToReplica(m, stores[i], h);
    }
    m.versionNanos = clock.nanoTime();
  }

  /**
   * True if every store number of an eviction names a block the replica holds, or the replica
   * is truncated (a refused block has no entry, and evicting it changes nothing).
   */
  private boolean resolves(Member m, long[] stores) {
    if (index.refused(m.slot) > 0) {
      return true;
    }
    for (long store : stores) {
      if (m.order.find(store) < 0) {
        return false;
      }
    }
    return true;
  }

  /**
   * An eviction named a block the replica does not hold under that store number: between
   * correct nodes this cannot happen (a replica at version v holds exactly the origin's blocks
   * and store numbers at v). Rather than guess, the replica goes back to the origin's empty set
   * at version 0 of the generation, a true if old state, and the next exchange refills it from
   * deltas or a snapshot.
   */
  private void unresolved(Member m) {
    count(GossipCounter.UNRESOLVED_EVICTIONS, 1);
    restart(m);
  }

  /** Puts the replica of {@code m} back to the empty set at version 0 of its generation. */
  private void restart(Member m) {
    clearReplica(m);
    m.storeCount = 0;
    m.originBlocks = 0;
    m.version = 0;
    m.versionNanos = clock.nanoTime();
    resetRelay(m, 0);
    snapshotCacheRemove(m.nodeId);
  }

  /**
   * Empties the replica of {@code m} (index and store numbers; the store count goes on). An
   * empty replica is exact, so a refresh in progress is over. The store numbers name every block
   * the replica holds, so the index removes those without scanning the table (a peer can have
   * a replica emptied with a few bytes: a STORE and a CLEAR, an eviction that does not resolve).
   */
  private void clearReplica(Member m) {
    index.clearSlot(m.slot, m.order.fingerprints());
    m.order.clear();
    m.refreshing = false;
  }

  private void onChunk(PeerAddress from, SnapshotChunk c) {
    long now = clock.nanoTime();
    if (c.nodeId().equals(self.nodeId())) {
      if (c.generation() > generation) {
        count(GossipCounter.REJECTED, 1);
      }
      return;
    }
    Member m = members.get(c.nodeId());
    if (m == null || m.status == Status.DEAD) {
      return; // learn the origin from an update first
    }
    boolean thirdParty = !c.nodeId().equals(from.nodeId());
    if (thirdParty && absurd(m, new DigestEntry(c.nodeId(), c.generation(), c.version(),
        m.heartbeat, 0, 0, false))) {
      count(GossipCounter.REJECTED, 1);
      return;
    }
    if (!thirdParty && c.generation() == m.generation) {
      restartIfBeyondReach(m, c.version());
    }
    if (c.generation() < m.generation || (c.generation() == m.generation
        && (c.version() < m.version || (c.version() == m.version && !m.refreshing)))) {
      return; // not newer than the replica (nor the fresh copy a truncated one asked for)
    }
    if (c.generation() > m.generation && !adoptsGeneration(m, thirdParty, now)) {
      // a third party's word of a restart of an origin visibly alive: the complete snapshot
      // would be rejected, so its chunks take none of the pending budget meanwhile
      count(GossipCounter.REJECTED, 1);
      return;
    }
    Member sentBy = members.get(from.nodeId());
    long senderGeneration = sentBy == null ? 0 : sentBy.generation;
    Assembly a = m.pending;
    if (a != null && (a.generation != c.generation() || a.version != c.version()
        || a.chunks.length != c.chunkCount() || a.storeCount != c.storeCount())) {
      boolean newer = c.generation() > a.generation
          || (c.generation() == a.generation && c.version() > a.version);
      boolean stale = now - a.lastProgressNanos > 4 * config.intervalNanos();
      if (!newer && !stale) {
        return;
      }
      abandonPending(m);
      a = null;
    }
    if (a == null) {
      // a chunk holds at least MIN_CHUNK_BLOCKS blocks (a sender's messageByteCap / 16, the
      // smallest cap's whatever this node's own, as senders may have any cap): an origin of up
      // to 16 times the per-peer cap fits (its snapshot installs truncated), a larger one
      // starts a truncated replica from this chunk; the chunk slots of all assemblies (12 bytes
      // each) are held to maxBlocksTotal
      long maxChunks = OVERSIZED_ORIGIN_FACTOR * config.maxBlocksPerPeer() / MIN_CHUNK_BLOCKS
          + 2;
      if (c.chunkCount() > maxChunks) {
        startTruncated(m, c, thirdParty, now);
        return;
      }
      if (pendingChunks + c.chunkCount() > config.maxBlocksTotal()) {
        count(GossipCounter.REJECTED, 1);
        return;
      }
      a = new Assembly(c.generation(), c.version(), c.storeCount(), c.chunkCount(),
          from.nodeId(), senderGeneration, now);
      m.pending = a;
      pendingChunks += c.chunkCount();
    }
    if (a.chunks[c.chunkIndex()] != null) {
      return; // duplicate
    }
    if (!a.sender.equals(from.nodeId()) || a.senderGeneration != senderGeneration) {
      a.mixed = true;
    }
    a.counts[c.chunkIndex()] = c.hashes().length;
    if (pendingHashes + c.hashes().length > config.maxBlocksTotal()
        || a.hashes + c.hashes().length > config.maxBlocksPerPeer() + (long) c.hashes().length) {
      // past a cap: the chunk counts as received without its blocks, and the snapshot installs
      // as a truncated replica (a subset, as deltas past the cap would have left it)
      count(GossipCounter.BLOCKS_REFUSED, c.hashes().length);
      a.chunks[c.chunkIndex()] = Delta.NO_HASHES;
      a.stores[c.chunkIndex()] = Delta.NO_HASHES;
      a.dropped += c.hashes().length;
    } else {
      a.chunks[c.chunkIndex()] = c.hashes();
      a.stores[c.chunkIndex()] = c.stores();
      a.hashes += c.hashes().length;
      pendingHashes += c.hashes().length;
    }
    a.received++;
    a.lastProgressNanos = now;
    if (a.received < a.chunks.length) {
      return;
    }
    // complete: install. Chunks of several senders are one snapshot only if they were split at
    // the same boundaries, which nothing in a chunk pins: senders split evenly (encodeSnapshot),
    // so a mix must show the even split of its blocks; one of a sender that splits otherwise
    // (a release that filled each chunk to its messageByteCap) may lack blocks between chunks
    if ((a.generation > m.generation && !adoptsGeneration(m, thirdParty, now))
        || !ascending(a.stores) || (a.mixed && !evenSplit(a.counts))) {
      abandonPending(m);
      count(GossipCounter.REJECTED, 1);
      return;
    }
    if (a.generation > m.generation) {
      newGeneration(m, restartHeardInAChunk(m, a.generation), m.address, now);
    }
    clearReplica(m);
    for (int k = 0; k < a.chunks.length; k++) {
      long[] part = a.chunks[k];
      long[] stores = a.stores[k];
      for (int i = 0; i < part.length; i++) {
        long h = part[i];
        addToReplica(m, stores[i], h);
      }
    }
    if (a.dropped > 0) {
      index.refuse(m.slot);
    }
    m.storeCount = a.storeCount;
    m.originBlocks = a.hashes + a.dropped;
    m.version = a.version;
    m.versionNanos = now;
    resetRelay(m, a.version);
    dropPending(m);
    m.lastSyncNanos = now;
    count(GossipCounter.SNAPSHOTS_INSTALLED, 1);
  }

  /**
   * The entry a restart of {@code m} as {@code generation} is taken with when the first word of
   * it is a snapshot chunk, which carries no heartbeat and no load: heartbeat 0, idle. The new
   * run counts its heartbeats again from 1, so the old run's heartbeat kept for it stood above
   * every one the new run sent for as many rounds as the old run had lived, and the node, alive
   * and gossiping, was suspected and declared dead meanwhile.
   */
  private static DigestEntry restartHeardInAChunk(Member m, long generation) {
    return new DigestEntry(m.nodeId, generation, 0, 0, 0, 0, false);
  }

  /**
   * Adds fingerprint {@code h}, the origin's store number {@code store}, to the replica of
   * {@code m}, and counts a refusal: by the index (a cap or the probe limit), or by the store
   * order (held 2^31 stores after the oldest block).
   */
  private void addToReplica(Member m, long store, long h) {
    int added = index.add(m.slot, h);
    if (added < 0) {
      count(GossipCounter.BLOCKS_REFUSED, 1);
      if (added == -2) {
        count(GossipCounter.BLOCKS_REFUSED_PROBE_LIMIT, 1);
      }
    } else if (added > 0 && !m.order.append(store, h)) {
      index.remove(m.slot, h);
      index.refuse(m.slot);
      count(GossipCounter.BLOCKS_REFUSED, 1);
    }
  }

  /**
   * True if {@code counts}, the blocks of each chunk, are the even split of their sum that
   * {@link #encodeSnapshot} makes: chunk {@code i} of {@code n} holds the blocks from
   * {@code floor(i * total / n)} to {@code floor((i + 1) * total / n)}.
   */
  static boolean evenSplit(int[] counts) {
    long total = 0;
    for (int k : counts) {
      total += k;
    }
    int n = counts.length;
    for (int i = 0; i < n; i++) {
      if (counts[i] != evenStart(i + 1, n, total) - evenStart(i, n, total)) {
        return false;
      }
    }
    return true;
  }

  /** Where chunk {@code i} of {@code n} of an even split of {@code total} blocks starts. */
  static long evenStart(int i, int n, long total) {
    return total * i / n;
  }

  /**
   * A snapshot of more chunks than an assembly takes: its origin holds more than
   * {@link #OVERSIZED_ORIGIN_FACTOR} times {@code maxBlocksPerPeer} blocks (at the densest
   * chunks), of which a replica keeps at most {@code maxBlocksPerPeer}. Assembling it would take
   * a chunk slot per chunk for blocks that are refused anyway; refusing it left the replica empty
   * for good, and every exchange sent the whole snapshot again. The replica starts over from this
   * chunk's blocks instead, truncated, at the snapshot's version and store count, and deltas carry
   * it on from there, as past the cap they would have: a subset of the origin's set, which the
   * router underestimates. The snapshot's other chunks are then not newer, and nothing is
   * allocated for them. The origin's block count is taken as the least the chunk count implies,
   * so that the replica asks for a fresh copy only once the origin has shrunk near the cap.
   */
  private void startTruncated(Member m, SnapshotChunk c, boolean thirdParty, long now) {
    if ((c.generation() > m.generation && !adoptsGeneration(m, thirdParty, now))
        || !ascending(new long[][] {c.stores()})) {
      count(GossipCounter.REJECTED, 1);
      return;
    }
    if (c.generation() > m.generation) {
      newGeneration(m, restartHeardInAChunk(m, c.generation()), m.address, now);
    }
    abandonPending(m);
    clearReplica(m);
    long[] part = c.hashes();
    long[] stores = c.stores();
    for (int i = 0; i < part.length; i++) {
      addToReplica(m, stores[i], part[i]);
    }
    index.refuse(m.slot);
    m.storeCount = c.storeCount();
    m.originBlocks = Math.max(part.length,
        (c.chunkCount() - 1L) * MIN_CHUNK_BLOCKS);
    m.version = c.version();
    m.versionNanos = now;
    resetRelay(m, c.version());
    m.lastSyncNanos = now;
    count(GossipCounter.SNAPSHOTS_INSTALLED, 1);
  }

  /** True if the store numbers of the chunks, in chunk order, ascend strictly. */
  private static boolean ascending(long[][] stores) {
    long prev = 0;
    for (long[] part : stores) {
      for (long s : part) {
        if (s <= prev) {
          return false;
        }
        prev = s;
      }
    }
    return true;
  }

  /**
   * Drops the snapshot assembly of {@code m}, if any, which will never install: each assembly
   * begun ends either installed or counted here once, in {@code SNAPSHOTS_ABANDONED}.
   */
  private void abandonPending(Member m) {
    if (m.pending != null) {
      dropPending(m);
      count(GossipCounter.SNAPSHOTS_ABANDONED, 1);
    }
  }

  private void dropPending(Member m) {
    if (m.pending != null) {
      pendingHashes -= m.pending.hashes;
      pendingChunks -= m.pending.chunks.length;
      m.pending = null;
    }
  }

  // ================================================================ relay logs

  private long relayCap() {
    long live = Math.max(1, members.size());
    return Math.min(config.relayLogMaxHashesPerOrigin(), config.relayLogMaxHashesTotal() / live);
  }

  private void appendRelay(Member m, Delta d) {
    long before = m.relayLog.hashCount();
    m.relayLog.setMaxHashes(relayCap());
    m.relayLog.append(d);
    relayHashes += m.relayLog.hashCount() - before;
  }

  private void resetRelay(Member m, long version) {
    relayHashes -= m.relayLog.hashCount();
    m.relayLog.reset(version);
  }

  private void retrimRelayLogs() {
    long cap = relayCap();
    for (Member m : members.values()) {
      if (m.relayLog.hashCount() > cap) {
        long before = m.relayLog.hashCount();
        m.relayLog.setMaxHashes(cap);
        relayHashes += m.relayLog.hashCount() - before;
      }
    }
  }

  // ================================================================ plumbing

  private GossipView rebuildView() {
    viewDirty = false;
    List<PeerView> peers = new ArrayList<>();
    PeerView[] slots = new PeerView[bySlot.length];
    for (Member m : bySlot) {
      if (m == null || m.status == Status.DEAD) {
        continue;
      }
      PeerView p = new PeerView(m.address, m.slot, m.generation, m.status == Status.SUSPECT,
          m.queueDepth, m.inFlight, m.overloaded, m.rttNanos, m.lastSyncNanos,
          m.heartbeatNanos, index.blocks(m.slot), m.version, index.refused(m.slot) > 0);
      peers.add(p);
      slots[m.slot] = p;
    }
    // as advertised: a stalled engine's push-back is overload whatever the queue
    GossipView v = new GossipView(List.copyOf(peers), slots, localOverloaded || sampledPushBack);
    view = v;
    return v;
  }

  /**
   * Sends {@code out}, outside the lock (a transport may call back into this engine), and counts
   * each message the send function took (returned without throwing) as sent; one whose send
   * threw counts in {@link GossipCounter#SEND_FAILURES} only.
   */
  private void flush(List<Outgoing> out) {
    List<Runnable> unsent = null;
    for (Outgoing o : out) {
      try {
        sender.send(o.to(), o.payload());
      } catch (Throwable e) { // an Error, or a checked exception undeclared, too: thrown on
        // out of a round, it kept the next round from being scheduled, and gossip stopped
        count(GossipCounter.SEND_FAILURES, 1);
        log.debug("send to {} failed", o.to(), e);
        if (o.unsent() != null) {
          if (unsent == null) {
            unsent = new ArrayList<>(1);
          }
          unsent.add(o.unsent());
        }
        continue; // not sent: counted as a failure only
      }
      count(GossipCounter.MESSAGES_SENT, 1);
      count(GossipCounter.BYTES_SENT, o.payload().length);
      if (o.sent() != null) {
        o.sent().run();
      }
    }
    if (unsent != null) { // what never left must not be taken for what is in flight
      lock.writeLock().lock();
      try {
        for (Runnable r : unsent) {
          r.run();
        }
      } finally {
        lock.writeLock().unlock();
      }
    }
  }

  private void count(GossipCounter c, long n) {
    counters.addAndGet(c.ordinal(), n);
  }

}
