package io.github.prefixrouter.server;

import io.github.prefixrouter.InferenceResponse;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.function.LongSupplier;

/**
 * How long the client endpoint's requests took, by where they were served: the histograms of
 * {@code prefix_router_client_request_duration_seconds} and
 * {@code prefix_router_client_time_to_first_output_seconds} ({@link StatsTables#CLIENT_LATENCY}).
 *
 * <p>A request is timed from its arrival ({@link #arrived}: the endpoint starts handling it, its
 * headers read) to the end of writing its answer ({@link Request#answered}): its last byte
 * written, or the write given up (the client went away, or the endpoint stopped). A streamed one
 * also from its arrival to its first event of output written. Each request is counted once, by
 * where it was {@linkplain #served served}.
 */
final class ClientLatency {

  /** The {@code served} of a request answered by this node's engine. */
  static final String LOCAL = "local";
  /** The {@code served} of a request answered by a peer. */
  static final String FORWARDED = "forwarded";
  /** The {@code served} of a request answered with an error (or whose stream was cut). */
  static final String FAILED = "failed";
  /** A stream's first output time when none was written (a clock's reading may be negative). */
  static final long NO_OUTPUT = Long.MIN_VALUE;
  /** The values of {@code served}, each always present. */
  static final List<String> SERVED = List.of(LOCAL, FORWARDED, FAILED);

  private final LongSupplier nanoClock;
  private final Map<String, LatencyHistogram> durations = histograms();
  private final Map<String, LatencyHistogram> firstOutputs = histograms();

  /** @param nanoClock a monotonic clock in nanoseconds ({@code System::nanoTime}) */
  ClientLatency(LongSupplier nanoClock) {
    this.nanoClock = nanoClock;
  }

  private static Map<String, LatencyHistogram> histograms() {
    Map<String, LatencyHistogram> m = new LinkedHashMap<>();
    for (String s : SERVED) {
      m.put(s, new LatencyHistogram());
    }
    return Map.copyOf(m);
  }

  /** A request arrived now. */
  Request arrived() {
    return new Request(nanoClock.getAsLong());
  }

  /** The clock's reading now. */
  long now() {
    return nanoClock.getAsLong();
  }

  /** Where a successful answer was served: {@link #FORWARDED} or {@link #LOCAL}. */
  static String served(InferenceResponse r) {
    return r.forwarded() ? FORWARDED : LOCAL;
  }

  /** The histograms now, in the order of {@link #SERVED}. */
  Snapshot snapshot() {
    Map<String, LatencyHistogram.Snapshot> d = new LinkedHashMap<>();
    Map<String, LatencyHistogram.Snapshot> f = new LinkedHashMap<>();
    for (String s : SERVED) {
      d.put(s, durations.get(s).snapshot());
      f.put(s, firstOutputs.get(s).snapshot());
    }
    return new Snapshot(d, f);
  }

  /**
   * The histograms at one moment, by {@code served}.
   *
   * @param durations arrival to the end of the answer, every request
   * @param firstOutputs arrival to the first event of output written, streamed requests
   */
  record Snapshot(Map<String, LatencyHistogram.Snapshot> durations,
      Map<String, LatencyHistogram.Snapshot> firstOutputs) {}

  /** Sets a request's {@code counted} from 0 to 1, once: no atomic object per request. */
  private static final AtomicIntegerFieldUpdater<Request> COUNTED =
      AtomicIntegerFieldUpdater.newUpdater(Request.class, "counted");

  /** One request being timed; counted once, by the first {@link #answered} call. */
  final class Request {
    private final long arrivedNanos;
    /** 1 once counted ({@link #COUNTED}). */
    private volatile int counted;

    private Request(long arrivedNanos) {
      this.arrivedNanos = arrivedNanos;
    }

    /** Its answer is written, or given up, now; {@code served} says where it was served. */
    void answered(String served) {
      answered(served, NO_OUTPUT);
    }

    /**
     * As above, for a streamed request.
     *
     * @param firstOutputNanos when its first event of output was written (the clock's
     *     reading), or {@link #NO_OUTPUT} if none was
     */
    void answered(String served, long firstOutputNanos) {
      LatencyHistogram d = durations.get(served);
      if (d == null) {
        throw new IllegalArgumentException("served is one of " + SERVED + ", was " + served);
      }
      if (!COUNTED.compareAndSet(this, 0, 1)) {
        return;
      }
      d.record(nanoClock.getAsLong() - arrivedNanos);
      if (firstOutputNanos != NO_OUTPUT) {
        firstOutputs.get(served).record(firstOutputNanos - arrivedNanos);
      }
    }
  }
}
