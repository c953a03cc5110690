package io.github.prefixrouter.sim;

import io.github.prefixrouter.InferenceRequest;
import java.util.concurrent.CompletableFuture;

/** A simulated cluster running one policy: where requests enter and how they are served. */
interface SimCluster {

  /**
   * Submits a request at node {@code entry}; the future completes when the client at that node
   * has the answer (exceptionally if it cannot be served).
   */
  CompletableFuture<?> submit(int entry, InferenceRequest request);

  /** Bytes of routing metadata (gossip) sent by all nodes so far. */
  long gossipBytesSent();

  /** Releases the cluster's resources at the end of a run. */
  default void close() {}
}
