package io.github.prefixrouter.spi;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/**
 * Moves opaque byte payloads between nodes. Host applications implement it over their network
 * stack; the library ships an HTTP implementation and an in-memory one for tests.
 *
 * <p>Contract (checked by {@code io.github.prefixrouter.contract.TransportContractTest}):
 * <ul>
 *   <li>{@link #send} is one-way and best effort: it never blocks the caller on the network and
 *       never throws for delivery problems (the message is simply lost). It carries messages of
 *       up to {@link #maxMessageBytes()} bytes; the node's largest gossip message is its
 *       {@code RouterConfig.gossipMessageBytes()} (64 KiB by default), which the node's build
 *       refuses above that.
 *   <li>{@link #request} returns a future that completes exactly once: with the peer's answer,
 *       or exceptionally with a {@link TransportException} ({@code TIMEOUT} when no answer came
 *       within {@code timeout}). It never blocks the caller's thread. The node cancels the
 *       future of a request it no longer awaits: the transport then lets go of the request as of
 *       a failed one (whatever it holds for it, such as an in-flight slot for the peer). The
 *       future's callbacks may call the transport ({@link #send}, {@link #request},
 *       {@link #close}), on whichever thread completed it: the node cancels a failed forward
 *       and forwards to the next peer from there.
 *   <li>A {@link #request} reaches the peer's handler at most once: the transport never
 *       delivers it again on its own (no retry of a request that failed, was refused or had no
 *       answer in time, even within its timeout; no redelivery of a request whose answer or
 *       acknowledgement went missing). The node runs every request it is given, so a request
 *       delivered twice runs twice on the peer's engine (unless the first run is still going,
 *       which it joins), and a failure or a timeout does not mean the engine did nothing; the
 *       node does its retrying itself, by falling back to another peer or its own engine.
 *   <li>Inbound messages and requests go to the {@link InboundHandler} given to {@link #start};
 *       {@code from} names the sender as the transport authenticated it, with the address it
 *       is reached at (the sender's {@link #localAddress}): the node sends its replies there,
 *       and its gossip adopts {@code from} as the peer's address.
 *   <li>A request's handler failing with a {@link TransportException} of kind
 *       {@code PROTOCOL} fails the request {@code PROTOCOL}, its message containing the
 *       handler's (printable ASCII, up to 100 characters; spaces at its ends may be dropped, as
 *       an HTTP header drops them): the node says there why it refused a request (another model
 *       id, an unknown message version), and the requester reads it.
 *   <li>The handler may call {@link #send} and {@link #request} of the same transport from
 *       inside {@code onMessage} and {@code onRequest}: the node answers gossip, streams output
 *       and relays requests from there.
 *   <li>A payload passed to {@link #send} or {@link #request} is read-only: the transport never
 *       changes it (the node sends one array again, and to several peers), and the node never
 *       changes it after the call, so the transport may read it after the call returns.
 *   <li>{@link #close} completes every pending request (exceptionally, {@code CLOSED}) and
 *       stops delivering inbound messages. The node itself does not rely on the first: it
 *       closes its transport only once every request it accepted is answered, having cancelled
 *       the future of every forward it no longer awaits, and it ends a forward the transport
 *       never completes at a guard timer a quarter past the timeout it gave the request (the
 *       request falls back), or at the end of a stop's grace period.
 *   <li>Implementations are thread-safe: the node calls {@link #send} and {@link #request}
 *       from many threads at once. The node never passes null arguments.
 * </ul>
 */
public interface Transport extends AutoCloseable {

  /**
   * Starts delivering inbound traffic to {@code handler}. Called once, before any send.
   *
   * <p>A start that gives up may ask the node to stop ({@code stop()}), but must not wait for
   * the stop: the node closes the transport, and the stop completes, only after this call has
   * returned. Such a wait on the thread the node called it on ({@code close()}, or
   * {@code join()} or {@code get()} of the stop's future) throws an
   * {@link IllegalStateException} naming the problem, and the node stops once this returns.
   *
   * @param handler the node's handler of inbound messages and requests
   */
  void start(InboundHandler handler);

  /**
   * The address peers use to reach this node. Valid after {@link #start}.
   *
   * @return this node's address; never null
   */
  PeerAddress localAddress();

  /**
   * Sends a one-way message (gossip). Best effort: it may be lost, duplicated or reordered.
   *
   * <p>The node also sends a request's CANCEL and pieces of its streamed output here, some of
   * them while it holds the request's answer, which its stop waits for, until this returns: a
   * wait for the node's stop here then, on the thread the node called it on, throws an
   * {@link IllegalStateException} instead of waiting for ever, as in {@link #close()}.
   *
   * @param to the receiving peer
   * @param payload the message bytes
   */
  void send(PeerAddress to, byte[] payload);

  /**
   * The largest payload this transport carries, in bytes: {@link #send} and {@link #request}
   * of a larger one lose or fail it. The node's build refuses a configuration whose gossip
   * messages ({@code RouterConfig.gossipMessageBytes()}) may be larger, and gossip goes by
   * {@link #send}, whose losses nobody sees: a transport must carry one-way messages of every
   * size up to this too, not only requests. The default, {@link Integer#MAX_VALUE}, declares
   * no limit, and promises that: the node accepts gossip messages up to its largest, 16 MiB
   * ({@code RouterConfig.MAX_GOSSIP_MESSAGE_BYTES}), on such a transport, so its one-way
   * messages of up to 16 MiB must arrive (as reliably as any one-way message) and its requests
   * of any size must be carried or fail. A transport with a limit should return it. The node
   * reads it once, as it is built: it must be positive and must not throw (the build fails
   * with an {@code IllegalArgumentException} or an {@code IllegalStateException} otherwise);
   * {@code TransportContractTest} checks that it stays the same, that a request of that size
   * (up to 64 MiB) is answered, and that a one-way message of that size, or of 16 MiB if it is
   * larger, arrives.
   *
   * @return the largest payload carried, in bytes
   */
  default int maxMessageBytes() {
    return Integer.MAX_VALUE;
  }

  /**
   * Sends a request and returns a future of the peer's answer (forwarded inference).
   *
   * @param to the receiving peer
   * @param payload the request bytes
   * @param timeout how long to wait for the answer before failing with {@code TIMEOUT}; one that
   *     is not positive fails the request at once with {@code TIMEOUT}, and one longer than the
   *     transport's timers can count waits as long as they can
   * @return a future of the answer's bytes, completed once; never null, and never completed with
   *     null (a node takes a null answer for a malformed one, and logs that its transport gave
   *     it)
   */
  CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout);

  /**
   * Fails every pending request with {@code CLOSED} and releases the transport's resources
   * (checked by the contract test kit; the node, which closes its transport once nothing it
   * sent is awaited, answers its requests without it: see the class documentation). Must
   * return promptly (release, do not wait for, in-flight exchanges): the node calls it from
   * {@code stop()}, or from whichever thread completes the node's last in-flight request, which
   * may be one of the transport's own (in a callback of the future it completes). The node's
   * stop completes after this returns: a wait for it here, on the thread the node called it on,
   * throws an {@link IllegalStateException} instead of waiting for ever.
   */
  @Override
  void close();

  /** Receives what peers send. Implemented by the library's node. */
  interface InboundHandler {

    /**
     * A one-way message arrived. Must not block; may call the transport's
     * {@link Transport#send} and {@link Transport#request}.
     *
     * @param from the sender, as the transport authenticated it
     * @param payload the message bytes
     */
    default void onMessage(PeerAddress from, byte[] payload) {}

    /**
     * A request arrived; the returned future's value is sent back as the answer, and an
     * exceptional completion is reported to the requester as a failure (one with a
     * {@code PROTOCOL} {@link TransportException} as {@code PROTOCOL}, with its message). Must
     * not block; may call the transport's {@link Transport#send} and {@link Transport#request}.
     *
     * <p>The node completes the returned future holding the request's answer, which its stop
     * waits for: a wait for the node's stop in what depends on the future, on the thread that
     * completes it, throws an {@link IllegalStateException} instead of waiting for ever.
     *
     * @param from the sender, as the transport authenticated it
     * @param payload the request bytes
     * @return a future of the answer's bytes; never null
     */
    CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload);
  }
}
