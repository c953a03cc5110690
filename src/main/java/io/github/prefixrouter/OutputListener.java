package io.github.prefixrouter;

/**
 * Receives a request's output while it is generated: streaming. Given to
 * {@link PrefixRouterNode#submit(InferenceRequest, OutputListener)} by a client that wants its
 * tokens as they come, and to
 * {@link io.github.prefixrouter.spi.InferenceEngine#execute(InferenceRequest, OutputListener)} by
 * the node, for engines that can stream.
 *
 * <p>Each call carries the output that follows what earlier calls carried: the tokens generated
 * since the last call and their text (either may be empty, for example the text of a token that
 * ends inside a multi-byte character, or the tokens of an engine that reports only text).
 * The calls for one request are made one at a time, in order, never after the request's future
 * completes: each returns before the next for that request starts, and what it did is visible
 * to the next, which may come on another thread (an engine's threads, an HTTP client's, a
 * transport's, for a request that runs again elsewhere after a failure). The
 * concatenation of all calls' tokens and of all calls' texts is the request's output, or a
 * prefix of it if the request fails.
 *
 * <p>Nothing orders the calls for different requests: a listener given to several requests (a
 * listener object shared by several {@code submit} or {@code execute} calls) may be called for
 * them at once, on different threads, and must then be thread-safe. A listener of its own for
 * each request needs no synchronization.
 *
 * <p>Implementations must not block: the caller may be a transport or engine thread. A listener
 * that hands the pieces to a writer queue, for example an HTTP response streamed to the client,
 * fits that rule. The arrays passed are not reused by the caller and may be kept. One that
 * blocks all the same holds its request's answer, and a {@link PrefixRouterNode#stop()}, until
 * it returns; {@link PrefixRouterNode#stop(java.time.Duration)} does not wait for it past its
 * grace period: the request then completes with {@link NodeNotRunningException} while the call
 * is still in progress, and the listener is not called again.
 *
 * <p>In particular a listener given to {@link PrefixRouterNode#submit(InferenceRequest,
 * OutputListener)} must not wait for the node's stop ({@link PrefixRouterNode#close()}, or
 * {@code join()} or {@code get()} of {@link PrefixRouterNode#stop()}'s future): the stop waits
 * for the request's answer, which is given only after the piece being delivered. Such a wait
 * throws an {@link IllegalStateException} naming the listener instead of waiting for ever; let
 * through, it abandons the request as any exception the listener throws does. A listener that
 * wants the node stopped calls {@code stop()} without waiting.
 */
@FunctionalInterface
public interface OutputListener {

  /** A listener that ignores every piece. */
  OutputListener IGNORE = (tokens, text) -> {};

  /**
   * The next piece of the output.
   *
   * @param tokens the token ids generated since the previous call; never null, possibly empty
   * @param text their text, since the previous call's; never null, possibly empty
   */
  void onOutput(int[] tokens, String text);
}
