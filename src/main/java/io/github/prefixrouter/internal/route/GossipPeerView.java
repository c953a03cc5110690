package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.internal.gossip.BlockChainSource;
import io.github.prefixrouter.internal.gossip.GossipConfig;
import io.github.prefixrouter.internal.gossip.GossipCounter;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.internal.gossip.GossipView;
import io.github.prefixrouter.internal.gossip.LocalSummary;
import io.github.prefixrouter.internal.tree.BlockEventListener;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.internal.wire.WireTypes;
import io.github.prefixrouter.spi.PeerAddress;
import java.time.Duration;
import java.util.List;
import java.util.function.Supplier;

/**
 * The router's {@link PeerView} over the anti-entropy engine: live peers with their advertised
 * load, overload flag, smoothed round trip and replica age, and the single-pass leading-block
 * query over all replicas. The {@link PeerSet} is rebuilt only when the gossip view changes.
 */
final class GossipPeerView implements PeerView {

  private final Supplier<GossipEngine> factory;
  private final ThreadLocal<int[]> perSlot;
  private volatile GossipEngine engine;
  private volatile Cached cached;

  private record Cached(GossipView view, PeerSet peers) {}

  /**
   * @param factory creates the engine on {@link #start()}, once the transport knows its own
   *     address
   * @param slots the engine's slot capacity (the configured maximum number of peers)
   */
  GossipPeerView(Supplier<GossipEngine> factory, int slots) {
    this.factory = factory;
    this.perSlot = ThreadLocal.withInitial(() -> new int[slots]);
  }

  /**
   * The gossip settings a router configuration implies. An exchange sends at most 1 MiB of
   * snapshot chunks, or one chunk when {@code gossipMessageBytes} is larger, and at most
   * {@value GossipConfig#DEFAULT_SNAPSHOT_CHUNKS_PER_EXCHANGE} chunks (the gossip default),
   * whatever their size, so that one exchange's chunks fit the HTTP transport's window of 64
   * messages outstanding to a peer: at 1 KiB the bytes alone let an exchange hand it about a
   * thousand chunks, all but 64 of which it dropped. Chunks of a full message meet the count
   * first below 1 MiB / 48 (about 21 KiB) and the bytes first above; the snapshot cache keeps
   * its bound of 4 times the bytes (4 MiB up to 1 MiB messages), so a snapshot larger than one
   * exchange is still encoded once and sent over several.
   */
  static GossipConfig gossipConfig(RouterConfig c) {
    Duration forget = c.peerDeadAfter().multipliedBy(4);
    return GossipConfig.builder()
        .interval(c.gossipInterval())
        .fanout(c.gossipFanout())
        .suspectAfter(c.peerSuspectAfter())
        .deadAfter(c.peerDeadAfter())
        .forgetAfter(forget)
        .maxPeers(c.maxPeers())
        .messageByteCap(c.gossipMessageBytes())
        .snapshotBytesPerExchange(Math.max(1 << 20, c.gossipMessageBytes()))
        .highWatermark(c.highWatermark())
        .lowWatermark(c.lowWatermark())
        .build();
  }

  /**
   * Feeds {@code tree}'s block events into the gossiped local summary, starting with the blocks
   * the tree holds already: an engine that publishes cache events reports the blocks it holds
   * when the node sets its listener, at build time, and gossip starts later, with the node.
   * Registered without them, the summary never published those blocks (its later evictions of
   * them changed nothing), so peers never learned that the node holds them.
   *
   * <p>The summary's lock ({@link LocalSummary} synchronizes on itself) is held from the
   * registration until the blocks held then are published, so an event delivered meanwhile on
   * another thread (an eviction of one of them) waits and applies after them, in order.
   */
  static void followTree(ConcurrentPrefixTree tree, LocalSummary summary) {
    BlockEventListener feed = summaryFeed(summary);
    synchronized (summary) {
      long[] held = tree.addListenerWithSnapshot(feed);
      if (held.length > 0) {
        summary.onStored(held);
      }
    }
  }

  /** Feeds the local tree's block events into the gossiped local summary. */
  static BlockEventListener summaryFeed(LocalSummary summary) {
    return new BlockEventListener() {
      @Override
      public void onStored(long[] blockHashes) {
        summary.onStored(blockHashes);
      }

      @Override
      public void onEvicted(long[] blockHashes) {
        summary.onEvicted(blockHashes);
      }

      @Override
      public void onCleared() {
        summary.onCleared();
      }
    };
  }

  /** The engine, or null before {@link #start()}. */
  GossipEngine engine() {
    return engine;
  }

  @Override
  public PeerSet livePeers() {
    GossipEngine e = engine;
    if (e == null) {
      return PeerSet.EMPTY;
    }
    GossipView v = e.view();
    Cached c = cached;
    if (c != null && c.view == v) {
      return c.peers;
    }
    PeerSet ps = build(v);
    cached = new Cached(v, ps);
    return ps;
  }

  private static PeerSet build(GossipView v) {
    List<io.github.prefixrouter.internal.gossip.PeerView> list = v.peers();
    int n = list.size();
    PeerAddress[] a = new PeerAddress[n];
    int[] slots = new int[n];
    int[] q = new int[n];
    int[] f = new int[n];
    boolean[] over = new boolean[n];
    boolean[] suspect = new boolean[n];
    long[] rtt = new long[n];
    long[] sync = new long[n];
    long[] gen = new long[n];
    for (int i = 0; i < n; i++) {
      var p = list.get(i);
      a[i] = p.address();
      slots[i] = p.slot();
      q[i] = p.queueDepth();
      f[i] = p.inFlight();
      over[i] = p.overloaded();
      suspect[i] = p.suspect();
      rtt[i] = p.rttNanos();
      sync[i] = p.lastSyncNanos();
      gen[i] = p.generation();
    }
    return new PeerSet(a, slots, q, f, over, suspect, rtt, sync, gen);
  }

  @Override
  public void leadingBlocks(PeerSet peers, long[] chain, int blocks, int[] out) {
    GossipEngine e = engine;
    if (e == null || peers.size == 0) {
      return;
    }
    int[] slotCounts = perSlot.get();
    e.leadingBlocks(chain, blocks, slotCounts);
    for (int i = 0; i < peers.size; i++) {
      out[i] = slotCounts[peers.slots[i]];
    }
  }

  @Override
  public void leadingBlocks(PeerSet peers, BlockChainSource chain, int maxBlocks, int[] out) {
    GossipEngine e = engine;
    if (e == null || peers.size == 0) {
      chain.ensure(Math.min(maxBlocks, 1)); // the first block's hash, for cold placement
      return;
    }
    int[] slotCounts = perSlot.get();
    e.leadingBlocks(chain, slotCounts);
    int[] slots = peers.slots;
    for (int i = 0; i < peers.size; i++) {
      out[i] = slotCounts[slots[i]];
    }
  }

  @Override
  public synchronized void start() {
    if (engine == null) {
      engine = factory.get();
      engine.start();
    }
  }

  @Override
  public void stop() {
    GossipEngine e = engine;
    if (e != null) {
      e.stop();
    }
  }

  @Override
  public boolean onMessage(PeerAddress from, byte[] payload) {
    if (payload.length == 0 || !WireTypes.isGossip(payload[0] & 0xFF)) {
      return false;
    }
    GossipEngine e = engine;
    if (e != null) {
      e.onMessage(from, payload);
    }
    return true;
  }

  @Override
  public long localBlocks() {
    GossipEngine e = engine;
    return e == null ? 0 : e.localSummary().size();
  }

  @Override
  public long replicaBlocks() {
    GossipEngine e = engine;
    if (e == null) {
      return 0;
    }
    long n = 0;
    for (var p : e.view().peers()) {
      n += p.replicaBlocks();
    }
    return n;
  }

  @Override
  public long bytesIn() {
    GossipEngine e = engine;
    return e == null ? 0 : e.counter(GossipCounter.BYTES_RECEIVED);
  }

  @Override
  public GossipStats gossipStats() {
    GossipEngine e = engine;
    if (e == null) {
      return NO_GOSSIP;
    }
    int suspect = 0;
    for (var p : e.view().peers()) {
      suspect += p.suspect() ? 1 : 0;
    }
    return new GossipStats(e.generation(), e.nodeIdInUse(), suspect,
        e.counter(GossipCounter.ROUNDS), e.counter(GossipCounter.MALFORMED_DROPPED),
        e.counter(GossipCounter.REJECTED), e.counter(GossipCounter.INTERNAL_ERRORS),
        e.counter(GossipCounter.MEMBERS_SUSPECTED), e.counter(GossipCounter.MEMBERS_DEAD),
        e.counter(GossipCounter.MEMBERS_REFUSED), e.counter(GossipCounter.GENERATIONS_REPLACED),
        e.counter(GossipCounter.GENERATIONS_REFUTED), e.counter(GossipCounter.SNAPSHOTS_SENT),
        e.counter(GossipCounter.SNAPSHOTS_INSTALLED),
        e.counter(GossipCounter.SNAPSHOTS_ABANDONED), e.counter(GossipCounter.BLOCKS_REFUSED),
        e.counter(GossipCounter.SYNS_REFUSED));
  }

  @Override
  public long bytesOut() {
    GossipEngine e = engine;
    return e == null ? 0 : e.counter(GossipCounter.BYTES_SENT);
  }
}
