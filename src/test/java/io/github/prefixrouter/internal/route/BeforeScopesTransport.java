package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;

/**
 * The transport of a node from before cache scopes, for tests of rolling upgrades: while
 * {@code old} says so, a FORWARD of any version but 1 is refused as that node's decoder refused
 * it (UNKNOWN_VERSION, which RouterNode.onForwardRequest passed back as a protocol failure, word
 * for word); version 1 and everything else reach the node.
 */
public final class BeforeScopesTransport {

  /** What the node from before scopes was sent; both callbacks do nothing by default. */
  public interface Observer {
    /** A FORWARD of a version other than 1 (scoped, streamed or with stops) was refused. */
    default void rejected() {}

    /**
     * A FORWARD of {@code version} was refused; by default {@link #rejected()}.
     *
     * @param version the refused frame's version (2 to 5)
     */
    default void rejected(int version) {
      rejected();
    }

    /**
     * A FORWARD of {@code version} was refused; by default {@link #rejected(int)}.
     *
     * @param version the refused frame's version (2 to 5)
     * @param withStops whether the refused request has stops (version 4 always does; version
     *     5, sent by a node with a model id, may or may not)
     */
    default void rejected(int version, boolean withStops) {
      rejected(version);
    }

    /** An unscoped FORWARD reached the node. */
    default void acceptedForward() {}
  }

  private BeforeScopesTransport() {}

  /**
   * The failure the node answers a FORWARD of {@code version} with.
   *
   * @param version the frame's version
   * @return the protocol failure, with the decoder's message
   */
  public static TransportException rejection(int version) {
    return new TransportException(TransportException.Kind.PROTOCOL,
        MalformedMessageException.of(MalformedMessageException.Reason.UNKNOWN_VERSION, "version",
            version, 1, "forwarding messages speak version 1").getMessage());
  }

  /**
   * Wraps {@code t} so that its node behaves as one from before scopes while {@code old} is true.
   *
   * @param t the node's transport
   * @param old whether the node is still from before scopes (read per request)
   * @param observer told of each FORWARD refused or let through
   * @return the wrapping transport
   */
  public static Transport wrap(Transport t, BooleanSupplier old, Observer observer) {
    return wrap(t, ForwardCodec.VERSION, old, observer);
  }

  /**
   * Wraps {@code t} so that its node behaves, while {@code old} is true, as one whose decoder
   * speaks FORWARD versions 1 to {@code highestVersion}: 1 from before scopes, 3 from before
   * stops.
   *
   * @param t the node's transport
   * @param highestVersion the highest FORWARD version the old node decodes
   * @param old whether the node is still old (read per request)
   * @param observer told of each FORWARD refused or let through
   * @return the wrapping transport
   */
  public static Transport wrap(Transport t, int highestVersion, BooleanSupplier old,
      Observer observer) {
    return new ForwardingTransport(t) {
      @Override
      public void start(InboundHandler h) {
        t.start(new InboundHandler() {
          @Override
          public void onMessage(PeerAddress from, byte[] payload) {
            h.onMessage(from, payload);
          }

          @Override
          public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
            boolean forward = payload.length > 1 && payload[0] == ForwardCodec.FORWARD;
            if (forward && old.getAsBoolean()) {
              if (payload[1] > highestVersion) {
                observer.rejected(payload[1], hasStops(payload));
                return CompletableFuture.failedFuture(rejection(payload[1]));
              }
              observer.acceptedForward();
            }
            return h.onRequest(from, payload);
          }
        });
      }
    };
  }

  private static boolean hasStops(byte[] payload) {
    try {
      return ForwardCodec.decode(payload) instanceof ForwardCodec.Forward f
          && f.request().params().hasStops();
    } catch (MalformedMessageException e) {
      return false;
    }
  }

  /**
   * {@link #wrap(Transport, BooleanSupplier, Observer)} for a node that stays from before scopes,
   * observed by nobody.
   *
   * @param t the node's transport
   * @return the wrapping transport
   */
  public static Transport wrap(Transport t) {
    return wrap(t, () -> true, new Observer() {});
  }
}
