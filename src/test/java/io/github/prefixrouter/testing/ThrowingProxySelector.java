package io.github.prefixrouter.testing;

import java.io.IOException;
import java.net.Proxy;
import java.net.ProxySelector;
import java.net.SocketAddress;
import java.net.URI;
import java.util.List;
import java.util.function.Supplier;

/**
 * A host's default {@link ProxySelector} that throws. The JDK's HTTP client takes the default
 * selector as it is built and asks it for every request's route as the request is sent: a client
 * built while it is the default fails each of its sends with what it throws.
 */
public final class ThrowingProxySelector {

  private ThrowingProxySelector() {}

  /**
   * Runs {@code run} with a default selector that throws {@code thrown} for every route, and puts
   * the host's default back after it, even if it throws.
   *
   * @param thrown what the selector throws
   * @param run builds an HTTP client's owner, or makes a call that builds a client and sends
   * @return what {@code run} returns
   */
  public static <T> T asDefault(Error thrown, Supplier<T> run) {
    ProxySelector host = ProxySelector.getDefault();
    ProxySelector.setDefault(new ProxySelector() {
      @Override
      public List<Proxy> select(URI uri) {
        throw thrown;
      }

      @Override
      public void connectFailed(URI uri, SocketAddress sa, IOException e) {}
    });
    try {
      return run.get();
    } finally {
      ProxySelector.setDefault(host);
    }
  }
}
