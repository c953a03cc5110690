package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineResult;

/**
 * Test access to the package-private forwarding codec, for the fault simulation (which watches
 * forwarded hops on the wire) and the hostile-input tests (which forge frames).
 */
public final class ForwardFrames {

  private ForwardFrames() {}

  /** The type byte of a FORWARD frame. */
  public static final int FORWARD = ForwardCodec.FORWARD;

  /** What a FORWARD frame says about hops. */
  public record ForwardHeader(String requestId, String origin, int hops) {}

  /** True if {@code payload} is in the forwarding type range. */
  public static boolean isForwarding(byte[] payload) {
    return ForwardCodec.isForwarding(payload);
  }

  /** The header of a FORWARD frame, or null if {@code payload} is another or a bad frame. */
  public static ForwardHeader peekForward(byte[] payload) {
    try {
      if (ForwardCodec.decode(payload) instanceof ForwardCodec.Forward f) {
        return new ForwardHeader(f.requestId(), f.origin(), f.hops());
      }
    } catch (MalformedMessageException e) {
      return null;
    }
    return null;
  }

  /** Decodes any forwarding frame; the result is a record describing it. */
  public static Object decode(byte[] payload) throws MalformedMessageException {
    return ForwardCodec.decode(payload);
  }

  /** A FORWARD frame as a peer would send it. */
  public static byte[] forward(InferenceRequest r, String origin, int hops) {
    return ForwardCodec.forward(r, origin, hops);
  }

  /** A RESULT frame. */
  public static byte[] result(String requestId, String servedBy, long serverNanos,
      EngineResult result) {
    return ForwardCodec.result(requestId, servedBy, serverNanos, result);
  }

  /** A BUSY frame. */
  public static byte[] busy(String requestId, int queueDepth) {
    return ForwardCodec.busy(requestId, queueDepth);
  }

  /** A FAILED frame. */
  public static byte[] failed(String requestId, boolean retryable, String message) {
    return ForwardCodec.failed(requestId, retryable, message);
  }

  /** A CANCEL frame. */
  public static byte[] cancel(String requestId, String origin) {
    return ForwardCodec.cancel(requestId, origin);
  }

  /** The engine result of a decoded RESULT frame, else null. */
  public static EngineResult resultOf(Object decoded) {
    return decoded instanceof ForwardCodec.Result r ? r.result() : null;
  }

  /** Whether a decoded frame is a BUSY answer. */
  public static boolean isBusy(Object decoded) {
    return decoded instanceof ForwardCodec.Busy;
  }

  /** Whether a decoded frame is a FAILED answer. */
  public static boolean isFailed(Object decoded) {
    return decoded instanceof ForwardCodec.Failed;
  }
}
