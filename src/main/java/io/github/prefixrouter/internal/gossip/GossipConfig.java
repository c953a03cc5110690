package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.Durations;
import java.time.Duration;
import java.util.Objects;

/**
 * Settings of the anti-entropy protocol, validated when built: an invalid value fails with an
 * {@link IllegalArgumentException} that names the setting, the value and what is allowed.
 *
 * <pre>{@code
 * GossipConfig config = GossipConfig.builder()
 *     .interval(Duration.ofMillis(500))
 *     .fanout(3)
 *     .build();
 * }</pre>
 */
public final class GossipConfig {

  private final Duration interval;
  /**
   * The shortest {@code interval} accepted: 1 ms. A node's rounds follow one another at the
   * interval whatever they cost, so rounds of a few nanoseconds kept the scheduler's thread busy
   * with nothing but rounds, each sending SYNs; the settings that must be longer than the
   * interval ({@code suspectAfter}, {@code deadAfter}, {@code forgetAfter}) are held above it.
   */
  public static final Duration MIN_INTERVAL = Duration.ofMillis(1);
  private final double jitter;
  private final int fanout;
  private final Duration suspectAfter;
  private final Duration deadAfter;
  private final Duration forgetAfter;
  private final int maxPeers;

  /**
   * The largest {@code maxPeers} accepted. Messages listing up to this many origins (plus the
   * sender) are well formed whatever the receiver's own {@code maxPeers}, so nodes configured
   * differently (during a rolling change of the setting) still gossip with each other.
   */
  public static final int MAX_PEERS_LIMIT = 65_536;
  private final long maxBlocksPerPeer;
  /**
   * The largest {@code maxBlocksTotal}: 805,306,368 (3 &times; 2^28) pairs, what the replica
   * index's table holds at its largest size (2^30 slots, 3/4 full; 8 GiB of table).
   */
  public static final long MAX_BLOCKS_TOTAL = ReplicaIndex.MAX_PAIRS;
  private final long maxBlocksTotal;
  private final long deltaLogMaxHashes;
  private final long relayLogMaxHashesPerOrigin;
  private final long relayLogMaxHashesTotal;
  /** The smallest {@code messageByteCap} accepted: 1,024 bytes. */
  public static final int MIN_MESSAGE_BYTE_CAP = 1_024;
  /**
   * The largest {@code messageByteCap} accepted: 16 MiB. A node reads messages of up to this
   * size whatever its own cap, so that nodes configured differently (during a rolling change of
   * the setting) still read each other's messages.
   */
  public static final int MAX_MESSAGE_BYTE_CAP = 16 << 20;
  private final int messageByteCap;
  private final int snapshotBytesPerExchange;
  /**
   * The default {@code snapshotChunksPerExchange}: 48, three quarters of the HTTP transport's
   * default window of 64 messages outstanding to a peer ({@code maxInFlightPerPeer}), beyond
   * which it drops a message. The other 16 leave room for the ACK or ACK2 the chunks go with,
   * this node's other gossip to that peer (its own SYN, or the answer to an exchange the peer
   * began; requests may not take the transport's last 4 slots, which keeps room for these) and
   * forwards in flight to it.
   */
  public static final int DEFAULT_SNAPSHOT_CHUNKS_PER_EXCHANGE = 48;
  private final int snapshotChunksPerExchange;
  private final int highWatermark;
  private final int lowWatermark;
  private final double rttSmoothing;
  private final long maxGenerationJump;
  private final long maxSequenceJump;
  private final boolean fullSnapshotsOnly;

  private GossipConfig(Builder b) {
    interval = positive("interval", b.interval);
    if (interval.compareTo(MIN_INTERVAL) < 0) {
      throw bad("interval", interval, "at least 1 ms");
    }
    if (Durations.saturatedNanos(interval) > Long.MAX_VALUE / 64) {
      // rounds derive windows of up to 64 intervals, in nanoseconds
      throw bad("interval", interval, "at most 2^63 / 64 ns (about 4.5 years)");
    }
    if (b.jitter < 0 || b.jitter > 0.5 || Double.isNaN(b.jitter)) {
      throw bad("jitter", b.jitter, "a fraction of the interval in [0, 0.5]");
    }
    jitter = b.jitter;
    fanout = range("fanout", b.fanout, 1, 64);
    suspectAfter = positive("suspectAfter", b.suspectAfter);
    deadAfter = positive("deadAfter", b.deadAfter);
    forgetAfter = positive("forgetAfter", b.forgetAfter);
    if (Durations.saturatedNanos(forgetAfter) == Long.MAX_VALUE) {
      // the engine counts time in nanoseconds; suspectAfter and deadAfter are shorter
      throw bad("forgetAfter", forgetAfter, "below 2^63 ns (about 292 years)");
    }
    if (suspectAfter.compareTo(interval) <= 0) {
      throw bad("suspectAfter", suspectAfter, "longer than interval (" + interval + ")");
    }
    if (deadAfter.compareTo(suspectAfter) <= 0) {
      throw bad("deadAfter", deadAfter, "longer than suspectAfter (" + suspectAfter + ")");
    }
    if (forgetAfter.compareTo(deadAfter) <= 0) {
      throw bad("forgetAfter", forgetAfter, "longer than deadAfter (" + deadAfter + ")");
    }
    maxPeers = range("maxPeers", b.maxPeers, 1, MAX_PEERS_LIMIT);
    maxBlocksPerPeer = range("maxBlocksPerPeer", b.maxBlocksPerPeer, 1, 1L << 30);
    // the replica index's table cannot hold more (MAX_BLOCKS_TOTAL); 2^31 used to pass
    maxBlocksTotal = range("maxBlocksTotal", b.maxBlocksTotal, 1, MAX_BLOCKS_TOTAL);
    deltaLogMaxHashes = range("deltaLogMaxHashes", b.deltaLogMaxHashes, 1, 1L << 26);
    relayLogMaxHashesPerOrigin =
        range("relayLogMaxHashesPerOrigin", b.relayLogMaxHashesPerOrigin, 0, 1L << 26);
    relayLogMaxHashesTotal = range("relayLogMaxHashesTotal", b.relayLogMaxHashesTotal, 0, 1L << 28);
    messageByteCap = range("messageByteCap", b.messageByteCap, MIN_MESSAGE_BYTE_CAP,
        MAX_MESSAGE_BYTE_CAP);
    snapshotBytesPerExchange =
        range("snapshotBytesPerExchange", b.snapshotBytesPerExchange, messageByteCap, 1 << 30);
    snapshotChunksPerExchange = range("snapshotChunksPerExchange", b.snapshotChunksPerExchange,
        1, Integer.MAX_VALUE);
    highWatermark = range("highWatermark", b.highWatermark, 1, Integer.MAX_VALUE);
    lowWatermark = range("lowWatermark", b.lowWatermark, 0, Integer.MAX_VALUE);
    if (lowWatermark >= highWatermark) {
      throw bad("lowWatermark", lowWatermark, "below highWatermark (" + highWatermark + ")");
    }
    if (!(b.rttSmoothing > 0 && b.rttSmoothing <= 1)) {
      throw bad("rttSmoothing", b.rttSmoothing, "an EWMA weight in (0, 1]");
    }
    rttSmoothing = b.rttSmoothing;
    maxGenerationJump = range("maxGenerationJump", b.maxGenerationJump, 1, Long.MAX_VALUE);
    maxSequenceJump = range("maxSequenceJump", b.maxSequenceJump, 1, Long.MAX_VALUE);
    fullSnapshotsOnly = b.fullSnapshotsOnly;
  }

  /**
   * True in the baseline mode that answers every lagging peer with the origin's full snapshot
   * instead of deltas (same exchanges, relaying and caps otherwise). It exists to measure what
   * deltas save; never useful in production. Default false.
   */
  public boolean fullSnapshotsOnly() {
    return fullSnapshotsOnly;
  }

  public static Builder builder() {
    return new Builder();
  }

  /** The defaults: 1 s rounds, 10% jitter, fanout 3, 64 KiB messages. */
  public static GossipConfig defaults() {
    return builder().build();
  }

  /** Time between two gossip rounds of a node (before jitter). Default 1 s; at least 1 ms. */
  public Duration interval() {
    return interval;
  }

  /** Each round's delay is drawn uniformly in interval × [1 - jitter, 1 + jitter]. Default 0.1. */
  public double jitter() {
    return jitter;
  }

  /** Peers contacted per round. Default 3. */
  public int fanout() {
    return fanout;
  }

  /** A peer whose heartbeat has not advanced for this long is suspected. Default 5 s. */
  public Duration suspectAfter() {
    return suspectAfter;
  }

  /** ... and declared dead, its replica dropped, after this long. Default 15 s. */
  public Duration deadAfter() {
    return deadAfter;
  }

  /** A dead peer's entry is forgotten (its slot freed) after this long. Default 60 s. */
  public Duration forgetAfter() {
    return forgetAfter;
  }

  /** Most peers tracked at once (slots). Default 4,096. */
  public int maxPeers() {
    return maxPeers;
  }

  /** Most blocks replicated for one peer; further stored blocks are refused. Default 262,144. */
  public long maxBlocksPerPeer() {
    return maxBlocksPerPeer;
  }

  /**
   * Most (peer, block) pairs replicated in total. Default 4,194,304; at most
   * {@link #MAX_BLOCKS_TOTAL}.
   */
  public long maxBlocksTotal() {
    return maxBlocksTotal;
  }

  /** Block hashes kept in this node's own delta log. Default 65,536. */
  public long deltaLogMaxHashes() {
    return deltaLogMaxHashes;
  }

  /** Block hashes of relayed deltas kept per third-party origin. Default 8,192. */
  public long relayLogMaxHashesPerOrigin() {
    return relayLogMaxHashesPerOrigin;
  }

  /** Block hashes of relayed deltas kept over all origins. Default 1,048,576. */
  public long relayLogMaxHashesTotal() {
    return relayLogMaxHashesTotal;
  }

  /**
   * Hard cap on one encoded gossip message, in bytes. Default 65,536. Messages received are read
   * up to {@link #MAX_MESSAGE_BYTE_CAP}, whatever this cap.
   */
  public int messageByteCap() {
    return messageByteCap;
  }

  /**
   * Most snapshot bytes sent in answer to one exchange. Default 1 MiB. The snapshot cache holds
   * 4 times this (see docs/gossip.md, "Memory bounds and drop policy").
   */
  public int snapshotBytesPerExchange() {
    return snapshotBytesPerExchange;
  }

  /**
   * Most snapshot chunks, each one transport message, sent in answer to one exchange, whatever
   * their bytes. Default {@value #DEFAULT_SNAPSHOT_CHUNKS_PER_EXCHANGE}, so that one exchange's
   * chunks fit the HTTP transport's window to a peer: at a small {@code messageByteCap}
   * {@code snapshotBytesPerExchange} alone let an exchange send about a thousand 1 KiB chunks,
   * of which the transport dropped all but 64.
   */
  public int snapshotChunksPerExchange() {
    return snapshotChunksPerExchange;
  }

  /** Engine queue depth at or above which this node advertises overload. Default 64. */
  public int highWatermark() {
    return highWatermark;
  }

  /** Engine queue depth at or below which the overload flag clears again. Default 32. */
  public int lowWatermark() {
    return lowWatermark;
  }

  /** Weight of a new round-trip sample in the smoothed estimate. Default 0.2. */
  public double rttSmoothing() {
    return rttSmoothing;
  }

  /**
   * A generation more than this above the one known for an origin, heard from a third party,
   * is rejected as absurd. Default 2^40.
   */
  public long maxGenerationJump() {
    return maxGenerationJump;
  }

  /**
   * A version more than this above the one known for an origin, heard from a third party, is
   * rejected as absurd. Default 2^32.
   */
  public long maxSequenceJump() {
    return maxSequenceJump;
  }

  long intervalNanos() {
    return interval.toNanos();
  }

  @Override
  public String toString() {
    return "GossipConfig{interval=" + interval + ", jitter=" + jitter + ", fanout=" + fanout
        + ", suspectAfter=" + suspectAfter + ", deadAfter=" + deadAfter
        + ", forgetAfter=" + forgetAfter + ", maxPeers=" + maxPeers
        + ", maxBlocksPerPeer=" + maxBlocksPerPeer + ", maxBlocksTotal=" + maxBlocksTotal
        + ", messageByteCap=" + messageByteCap + "}";
  }

  private static Duration positive(String name, Duration d) {
    Objects.requireNonNull(d, name);
    if (d.isNegative() || d.isZero()) {
      throw bad(name, d, "a positive duration");
    }
    return d;
  }

  private static int range(String name, int v, int min, int max) {
    if (v < min || v > max) {
      throw bad(name, v, "in " + min + ".." + max);
    }
    return v;
  }

  private static long range(String name, long v, long min, long max) {
    if (v < min || v > max) {
      throw bad(name, v, "in " + min + ".." + max);
    }
    return v;
  }

  private static IllegalArgumentException bad(String name, Object value, String allowed) {
    return new IllegalArgumentException(
        "gossip setting " + name + " = " + value + " is invalid: must be " + allowed);
  }

  /** Builds a {@link GossipConfig}; every setting starts at its default. */
  public static final class Builder {
    private Duration interval = Duration.ofSeconds(1);
    private double jitter = 0.1;
    private int fanout = 3;
    private Duration suspectAfter = Duration.ofSeconds(5);
    private Duration deadAfter = Duration.ofSeconds(15);
    private Duration forgetAfter = Duration.ofSeconds(60);
    private int maxPeers = 4_096;
    private long maxBlocksPerPeer = 262_144;
    private long maxBlocksTotal = 4_194_304;
    private long deltaLogMaxHashes = 65_536;
    private long relayLogMaxHashesPerOrigin = 8_192;
    private long relayLogMaxHashesTotal = 1_048_576;
    private int messageByteCap = 65_536;
    private int snapshotBytesPerExchange = 1 << 20;
    private int snapshotChunksPerExchange = DEFAULT_SNAPSHOT_CHUNKS_PER_EXCHANGE;
    private int highWatermark = 64;
    private int lowWatermark = 32;
    private double rttSmoothing = 0.2;
    private long maxGenerationJump = 1L << 40;
    private long maxSequenceJump = 1L << 32;
    private boolean fullSnapshotsOnly;

    private Builder() {}

    public Builder interval(Duration v) { interval = v; return this; }
    public Builder jitter(double v) { jitter = v; return this; }
    public Builder fanout(int v) { fanout = v; return this; }
    public Builder suspectAfter(Duration v) { suspectAfter = v; return this; }
    public Builder deadAfter(Duration v) { deadAfter = v; return this; }
    public Builder forgetAfter(Duration v) { forgetAfter = v; return this; }
    public Builder maxPeers(int v) { maxPeers = v; return this; }
    public Builder maxBlocksPerPeer(long v) { maxBlocksPerPeer = v; return this; }
    public Builder maxBlocksTotal(long v) { maxBlocksTotal = v; return this; }
    public Builder deltaLogMaxHashes(long v) { deltaLogMaxHashes = v; return this; }
    public Builder relayLogMaxHashesPerOrigin(long v) { relayLogMaxHashesPerOrigin = v; return this; }
    public Builder relayLogMaxHashesTotal(long v) { relayLogMaxHashesTotal = v; return this; }
    public Builder messageByteCap(int v) { messageByteCap = v; return this; }
    public Builder snapshotBytesPerExchange(int v) { snapshotBytesPerExchange = v; return this; }
    public Builder snapshotChunksPerExchange(int v) { snapshotChunksPerExchange = v; return this; }
    public Builder highWatermark(int v) { highWatermark = v; return this; }
    public Builder lowWatermark(int v) { lowWatermark = v; return this; }
    public Builder rttSmoothing(double v) { rttSmoothing = v; return this; }
    public Builder maxGenerationJump(long v) { maxGenerationJump = v; return this; }
    public Builder maxSequenceJump(long v) { maxSequenceJump = v; return this; }
    /** See {@link GossipConfig#fullSnapshotsOnly()}: a baseline for benchmarks only. */
    public Builder fullSnapshotsOnly(boolean v) { fullSnapshotsOnly = v; return this; }

    /** Validates and builds; throws {@link IllegalArgumentException} naming a bad setting. */
    public GossipConfig build() {
      return new GossipConfig(this);
    }
  }
}
