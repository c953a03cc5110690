package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.RouteDecision.SkipReason;
import io.github.prefixrouter.spi.PeerAddress;
import java.util.Arrays;

/**
 * An immutable snapshot of the live peers a routing decision considers, as flat parallel
 * arrays so the decision loop touches no per-peer objects. Index {@code i} refers to the same
 * peer in every array; {@link #slots} is the peer's slot in the replica store, passed back to
 * {@link PeerView#leadingBlocks}. The snapshot keeps the arrays it is given: callers must not
 * modify them afterwards.
 *
 * <p>{@link #states} is a lazily filled cache of each peer's {@link PeerHealth.PeerState}
 * (benign race: every writer stores the state lookups find), looked up again once the state is
 * discarded ({@link PeerHealth#get(PeerSet, int)}).
 */
public final class PeerSet {

  /** No peers. */
  public static final PeerSet EMPTY =
      new PeerSet(new PeerAddress[0], new int[0], new int[0], new int[0], new boolean[0],
          new boolean[0], new long[0], new long[0]);

  final int size;
  final PeerAddress[] addresses;
  final String[] ids;
  final long[] idHashes;
  final int[] slots;
  final int[] queueDepth;
  final int[] inFlight;
  final boolean[] overloaded;
  final boolean[] suspect;
  final long[] rttNanos;
  final long[] lastSyncNanos;
  /**
   * Each peer's incarnation (its gossip generation, new at every start), or 0 where the view
   * does not know it. A memory about a peer that holds only for one incarnation (that it does
   * not speak scoped FORWARDs) is dropped when this changes.
   */
  final long[] generation;
  final PeerHealth.PeerState[] states;
  /** {@link #idsWithLocal}'s last answer (benign race: equal arrays). */
  private String[] withLocal;
  /** Every candidate eligible: {@link SkipReason#NONE} {@code size + 1} times, never modified. */
  final SkipReason[] noneSkipped;
  /**
   * The round-trip column of a decision when gossip measured every peer's round trip: 0 for the
   * local node, then {@link #rttNanos}; null if some peer has none yet. Never modified.
   */
  final long[] rttWithLocal;

  /**
   * @param addresses the peers
   * @param slots each peer's replica slot (opaque to the router)
   * @param queueDepth advertised queue depth
   * @param inFlight advertised requests in flight
   * @param overloaded advertised overload flag
   * @param suspect the peer's heartbeat stopped advancing (not routed to)
   * @param rttNanos smoothed round trip, or -1 if not measured yet
   * @param lastSyncNanos clock time at which the peer's replica was last known up to date
   */
  public PeerSet(
      PeerAddress[] addresses,
      int[] slots,
      int[] queueDepth,
      int[] inFlight,
      boolean[] overloaded,
      boolean[] suspect,
      long[] rttNanos,
      long[] lastSyncNanos) {
    this(addresses, slots, queueDepth, inFlight, overloaded, suspect, rttNanos, lastSyncNanos,
        new long[addresses.length]);
  }

  /**
   * A snapshot that also knows each peer's incarnation.
   *
   * @param addresses the peers
   * @param slots each peer's replica slot (opaque to the router)
   * @param queueDepth advertised queue depth
   * @param inFlight advertised requests in flight
   * @param overloaded advertised overload flag
   * @param suspect the peer's heartbeat stopped advancing (not routed to)
   * @param rttNanos smoothed round trip, or -1 if not measured yet
   * @param lastSyncNanos clock time at which the peer's replica was last known up to date
   * @param generation each peer's gossip generation (new at every start of the peer), or 0
   *     where unknown
   */
  public PeerSet(
      PeerAddress[] addresses,
      int[] slots,
      int[] queueDepth,
      int[] inFlight,
      boolean[] overloaded,
      boolean[] suspect,
      long[] rttNanos,
      long[] lastSyncNanos,
      long[] generation) {
    int n = addresses.length;
    if (slots.length != n || queueDepth.length != n || inFlight.length != n
        || overloaded.length != n || suspect.length != n || rttNanos.length != n
        || lastSyncNanos.length != n || generation.length != n) {
      throw new IllegalArgumentException("peer arrays must have equal lengths");
    }
    this.size = n;
    this.addresses = addresses;
    this.slots = slots;
    this.queueDepth = queueDepth;
    this.inFlight = inFlight;
    this.overloaded = overloaded;
    this.suspect = suspect;
    this.rttNanos = rttNanos;
    this.lastSyncNanos = lastSyncNanos;
    this.generation = generation;
    this.ids = new String[n];
    this.idHashes = new long[n];
    for (int i = 0; i < n; i++) {
      ids[i] = addresses[i].nodeId();
      idHashes[i] = Rendezvous.nodeHash(ids[i]);
    }
    this.states = new PeerHealth.PeerState[n];
    this.noneSkipped = new SkipReason[n + 1];
    Arrays.fill(noneSkipped, SkipReason.NONE);
    boolean measured = true;
    for (long r : rttNanos) {
      measured &= r >= 0;
    }
    long[] w = null;
    if (measured) {
      w = new long[n + 1];
      System.arraycopy(rttNanos, 0, w, 1, n);
    }
    this.rttWithLocal = w;
  }

  /**
   * The node ids of a decision's candidates: {@code localId} then the peers', shared by every
   * decision over this snapshot (never modified).
   */
  String[] idsWithLocal(String localId) {
    String[] w = withLocal;
    if (w == null || !w[0].equals(localId)) {
      w = new String[size + 1];
      w[0] = localId;
      System.arraycopy(ids, 0, w, 1, size);
      withLocal = w;
    }
    return w;
  }

  /** Number of peers. */
  public int size() {
    return size;
  }

  /** The address of peer {@code i}. */
  public PeerAddress address(int i) {
    return addresses[i];
  }

  /** Index of the peer with this node id, or -1. */
  public int indexOf(String nodeId) {
    for (int i = 0; i < size; i++) {
      if (ids[i].equals(nodeId)) {
        return i;
      }
    }
    return -1;
  }
}
