package io.github.prefixrouter;

/**
 * A request whose output was being streamed failed because two attempts at it produced
 * different outputs: the output of the attempt that would have answered contradicts what the
 * {@link OutputListener} had already received (for example, a forward failed mid-stream and
 * the engine that took the request over generated other tokens than the first one had). Engines
 * must answer a request deterministically (the engine contract); this is an engine that does not
 * (nondeterministic batching on GPUs, an unseeded sampler).
 *
 * <p>Unlike other failures, what the listener received is <em>not</em> a prefix of any answer
 * the request would get: a client that showed it should discard it. Retrying may succeed. Only
 * requests submitted with a listener (or forwarded with streaming asked for) can fail so; the
 * node counts them.
 */
public class OutputDivergedException extends RequestFailedException {

  private static final long serialVersionUID = 1L;

  /**
   * Creates the exception.
   *
   * @param requestId the id of the request that failed
   * @param detail where the outputs disagree
   */
  public OutputDivergedException(String requestId, String detail) {
    super(requestId, "the output diverged from what was already streamed (engines must be"
        + " deterministic): " + detail, null);
  }
}
