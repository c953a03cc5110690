package io.github.prefixrouter.testing;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * A {@link Transport} passing every call to another, unchanged: a base for a transport that
 * changes one call and keeps the rest, such as one that drops, delays or counts the requests of
 * a test or a simulation. A subclass overrides the calls it changes and reaches the wrapped
 * transport through {@link #delegate}.
 *
 * <p>It adds no state, thread or check of its own: it keeps the transport contract exactly as far
 * as the wrapped transport does.
 */
public class ForwardingTransport implements Transport {

  /** The transport every call goes to. */
  protected final Transport delegate;

  /**
   * Wraps {@code delegate}.
   *
   * @param delegate the transport every call goes to
   * @throws NullPointerException if {@code delegate} is null
   */
  public ForwardingTransport(Transport delegate) {
    this.delegate = Objects.requireNonNull(delegate, "delegate");
  }

  @Override
  public void start(InboundHandler handler) {
    delegate.start(handler);
  }

  @Override
  public PeerAddress localAddress() {
    return delegate.localAddress();
  }

  @Override
  public void send(PeerAddress to, byte[] payload) {
    delegate.send(to, payload);
  }

  @Override
  public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
    return delegate.request(to, payload, timeout);
  }

  @Override
  public int maxMessageBytes() {
    return delegate.maxMessageBytes();
  }

  @Override
  public void close() {
    delegate.close();
  }
}
