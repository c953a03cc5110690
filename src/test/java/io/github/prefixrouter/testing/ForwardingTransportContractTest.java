package io.github.prefixrouter.testing;

import io.github.prefixrouter.contract.TransportContractTest;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;

/**
 * {@link ForwardingTransport}, the base of the transport wrappers of the tests and the
 * benchmarks, keeps the transport contract around the HTTP transport on loopback.
 */
class ForwardingTransportContractTest extends TransportContractTest {

  private static final byte[] KEY =
      "0123456789abcdef0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

  @Override
  protected Transport createTransport(String nodeId) {
    return new ForwardingTransport(HttpTransport.builder().nodeId(nodeId)
        .listen("127.0.0.1", 0).clusterKey(KEY).build());
  }

  @Override
  protected int requestLimitBytes() {
    return 4 << 20; // the HTTP transport's maxMessageBytes, by default
  }

  @Override
  protected PeerAddress unreachableAddress() {
    try (ServerSocket s = new ServerSocket(0)) {
      return new PeerAddress("ghost", "127.0.0.1:" + s.getLocalPort());
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
