package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.DoublingLog;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.function.IntSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's engine's {@link InferenceEngine#load()} as the node reads it, for its refusal of
 * forwarded work, its routing and its gossip alike. A reading that fails (it throws a
 * RuntimeException, an Error or a checked exception thrown undeclared, or it is null) is read
 * as the last good reading followed by the node's own runs since: its queue less the runs of the
 * node's that ended since (each freed a place), or the runs the node has outstanding beyond
 * those that reading had running, whichever is more: {@code max(queueDepth - ended, outstanding -
 * inFlight)}, at least 0, where {@code ended} is how far the node's outstanding runs fell below
 * their count at the reading. So a node whose engine's load cannot be read still refuses
 * forwarded work once the work it gave the engine since reaches its high watermark, never takes
 * a failing reading for an idle engine, and does not keep a queue of its own runs after they
 * ended (a queue of other clients' work that the last reading saw stays until they are seen to
 * end, which they cannot be). Before the first good reading, the last good one is {@link
 * EngineLoad#IDLE}: every run outstanding counts as queued.
 *
 * <p>Every failure is counted ({@link #failures}); the first is logged at ERROR with what was
 * thrown, later ones at WARN when their count reaches a power of two ({@link DoublingLog}, as
 * {@code GuardedClock} logs its clock's), so a load that fails at every call does not fill the log. Thread-safe;
 * a good reading costs one volatile write.
 */
final class EngineLoadGuard {

  private static final Logger LOG = LoggerFactory.getLogger(EngineLoadGuard.class);

  private final String nodeId;
  private final InferenceEngine engine;
  /** Runs the node has handed to the engine and not ended. */
  private final IntSupplier outstanding;
  /** The last good reading and the runs the node had outstanding when it was taken. */
  private record Reading(EngineLoad load, int outstanding) {}

  private volatile Reading last = new Reading(EngineLoad.IDLE, 0);
  private final DoublingLog failures = new DoublingLog();

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
    last = new Reading(l, outstanding.getAsInt());
    return l;
  }

  /** A reading failed with {@code e} (null: it was null): counted, logged rarely, estimated. */
  private EngineLoad failed(Throwable e) {
    long n = failures.failed(); // 0 unless logged
    Reading r = last;
    EngineLoad l = r.load();
    if (n == 1) {
      LOG.error("node {}: its engine's load() {}; the node reads the last good load, {}, its"
          + " queue raised to the runs it has outstanding on the engine, until load() answers"
          + " again", nodeId, e == null ? "returned null" : "threw", l, e);
    } else if (n > 1) {
      LOG.warn("node {}: its engine's load() has failed {} times, the latest: {}", nodeId, n,
          e == null ? "it returned null" : String.valueOf(e));
    }
    int now = outstanding.getAsInt();
    // each of the node's runs ended since the reading freed a place in the queue at least;
    // each given since takes one beyond those the reading had running
    long ended = Math.max(0L, (long) r.outstanding() - now);
    int queued = (int) Math.max(0L,
        Math.max(l.queueDepth() - ended, (long) now - l.inFlight()));
    return queued == l.queueDepth() ? l : new EngineLoad(queued, l.inFlight());
  }

  /** How many readings of the engine's load failed since the node was built. */
  long failures() {
    return failures.count();
  }
}
