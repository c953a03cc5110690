package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.IntSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's engine's {@link InferenceEngine#load()} as the node reads it, for its refusal of
 * forwarded work, its routing and its gossip alike. A reading that fails (it throws a
 * RuntimeException, an Error or a checked exception thrown undeclared, or it is null) is read
 * as the last good reading, its queue raised to the runs the node has outstanding on the engine
 * beyond those that reading had running: {@code max(queueDepth, outstanding - inFlight)}. So a
 * node whose engine's load cannot be read still refuses forwarded work once the work it gave the
 * engine since reaches its high watermark, and never takes a failing reading for an idle engine.
 * Before the first good reading, the last good one is {@link EngineLoad#IDLE}: every run
 * outstanding counts as queued.
 *
 * <p>Every failure is counted ({@link #failures}); the first is logged at ERROR with what was
 * thrown, later ones at WARN when their count reaches a power of two (as {@code GuardedClock}
 * logs its clock's), so a load that fails at every call does not fill the log. Thread-safe;
 * a good reading costs one volatile write.
 */
final class EngineLoadGuard {

  private static final Logger LOG = LoggerFactory.getLogger(EngineLoadGuard.class);

  private final String nodeId;
  private final InferenceEngine engine;
  /** Runs the node has handed to the engine and not ended. */
  private final IntSupplier outstanding;
  private volatile EngineLoad last = EngineLoad.IDLE;
  private final AtomicLong failures = new AtomicLong();

  /**
   * @param nodeId the node, for the log
   * @param engine the node's engine
   * @param outstanding the runs the node has handed to the engine and not ended
   */
  EngineLoadGuard(String nodeId, InferenceEngine engine, IntSupplier outstanding) {
    this.nodeId = nodeId;
    this.engine = engine;
    this.outstanding = outstanding;
  }

  /** The engine's load now, or, if reading it fails, the estimate described above. */
  EngineLoad read() {
    EngineLoad l;
    try {
      l = engine.load();
    } catch (Throwable e) { // an Error, a checked exception thrown undeclared too
      return failed(e);
    }
    if (l == null) {
      return failed(null);
    }
    last = l;
    return l;
  }

  /** A reading failed with {@code e} (null: it was null): counted, logged rarely, estimated. */
  private EngineLoad failed(Throwable e) {
    long n = failures.incrementAndGet();
    EngineLoad l = last;
    if (n == 1) {
      LOG.error("node {}: its engine's load() {}; the node reads the last good load, {}, its"
          + " queue raised to the runs it has outstanding on the engine, until load() answers"
          + " again", nodeId, e == null ? "returned null" : "threw", l, e);
    } else if ((n & (n - 1)) == 0) {
      LOG.warn("node {}: its engine's load() has failed {} times, the latest: {}", nodeId, n,
          e == null ? "it returned null" : String.valueOf(e));
    }
    int queued = Math.max(l.queueDepth(), outstanding.getAsInt() - l.inFlight());
    return queued == l.queueDepth() ? l : new EngineLoad(queued, l.inFlight());
  }

  /** How many readings of the engine's load failed since the node was built. */
  long failures() {
    return failures.get();
  }
}
