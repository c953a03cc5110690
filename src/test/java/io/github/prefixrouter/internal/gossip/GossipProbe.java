package io.github.prefixrouter.internal.gossip;

import java.util.Arrays;

/**
 * Test access to a gossip engine's exact state, for the fault campaign's convergence and
 * resource checks (the engine's accessors are package-private).
 */
public final class GossipProbe {

  private final GossipEngine engine;

  public GossipProbe(Object engine) {
    this.engine = (GossipEngine) engine;
  }

  public long generation() {
    return engine.generation();
  }

  /** Claims of a higher generation of this node that it refuted by continuing above them. */
  public long generationsRefuted() {
    return engine.counter(GossipCounter.GENERATIONS_REFUTED);
  }

  /** Times this node began to report its id in use by another process. */
  public long nodeIdInUseReports() {
    return engine.counter(GossipCounter.NODE_ID_IN_USE_REPORTS);
  }

  /** This node's own advertised block hashes, sorted, and their version. */
  public long[] ownBlocks() {
    long[] h = engine.localSummary().snapshot().hashes();
    Arrays.sort(h);
    return h;
  }

  public long ownVersion() {
    return engine.localSummary().version();
  }

  /** The replica of {@code nodeId}, sorted, or null if it is not a live member. */
  public long[] replicaOf(String nodeId) {
    long[] r = engine.replicaOf(nodeId);
    if (r != null) {
      Arrays.sort(r);
    }
    return r;
  }

  /** (generation, version) of the replica of {@code nodeId}, or null. */
  public long[] replicaVersion(String nodeId) {
    return engine.replicaVersion(nodeId);
  }

  /**
   * The distinct fingerprints, sorted, that a node publishes for a tree holding
   * {@code blockHashes}: what {@link #ownBlocks()} must be once the summary has caught up.
   */
  public static long[] fingerprintsOf(long[] blockHashes) {
    return Arrays.stream(blockHashes).map(BlockFingerprint::of).distinct().sorted().toArray();
  }

  /**
   * The secret keying the replica index's home slots and the known ids' table, drawn from the
   * node's random source when the engine was made (a private field: read reflectively).
   */
  public long secret() {
    try {
      java.lang.reflect.Field f = GossipEngine.class.getDeclaredField("knownIdsSeed");
      f.setAccessible(true);
      return f.getLong(engine);
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("GossipEngine changed shape: " + e, e);
    }
  }

  /** Members tracked, tombstones included. */
  public int memberCount() {
    return engine.memberCount();
  }

  /** Estimated bytes held by replicas, relay logs, membership and snapshot buffers. */
  public long retainedBytes() {
    return engine.retainedBytesEstimate();
  }

  /** Throws IllegalStateException if an internal invariant or cap is violated. */
  public void checkInvariants() {
    engine.checkInvariants();
  }
}
