package io.github.prefixrouter.transport.http;

import io.github.prefixrouter.contract.TransportContractTest;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.net.ServerSocket;

/** The HTTP transport, authenticated, against the Transport contract. */
class HttpTransportContractTest extends TransportContractTest {

  @Override
  protected Transport createTransport(String nodeId) {
    return HttpTransport.builder().nodeId(nodeId).listen("127.0.0.1", 0).clusterKey(HttpTransportTest.KEY).build();
  }

  @Override
  protected int requestLimitBytes() {
    return 4 << 20; // maxMessageBytes, by default
  }

  @Override
  protected PeerAddress unreachableAddress() {
    try (ServerSocket s = new ServerSocket(0)) {
      return new PeerAddress("ghost", "127.0.0.1:" + s.getLocalPort());
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
