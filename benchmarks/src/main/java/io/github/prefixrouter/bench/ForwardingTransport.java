package io.github.prefixrouter.bench;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;

/** A transport passing every call to another; a benchmark overrides what it measures. */
public class ForwardingTransport implements Transport {

  protected final Transport delegate;

  public ForwardingTransport(Transport delegate) {
    this.delegate = delegate;
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
  public void close() {
    delegate.close();
  }
}
