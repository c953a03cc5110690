package io.github.prefixrouter.server;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.http.HttpClient;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;

/**
 * What the client endpoint's tests share: a stub node, a fake tokenizer, an HTTP/1.1 client,
 * and the endpoint a test starts on a free loopback port, stopped after each test.
 */
abstract class ClientEndpointFixture {

  final StubNode stub = new StubNode();
  final PrefixRouterNode node = stub.node;
  /** The request, listener and future of every request submitted, in order. */
  final List<InferenceRequest> requests = stub.requests;
  final List<OutputListener> listeners = stub.listeners;
  final List<CompletableFuture<InferenceResponse>> futures = stub.futures;
  final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  final FakeTokenizer tokenizer = new FakeTokenizer();
  /** The endpoint started ({@link #start(ClientEndpoint)}), null before. */
  ClientEndpoint endpoint;
  /** Its host and port. */
  String address;

  /** Starts {@code e} on a free loopback port, as {@link #endpoint} at {@link #address}. */
  void start(ClientEndpoint e) throws IOException {
    endpoint = e;
    InetSocketAddress a = e.start("127.0.0.1", 0);
    address = "127.0.0.1:" + a.getPort();
  }

  @AfterEach
  void stop() {
    if (endpoint != null) {
      endpoint.stop();
    }
  }

  /** Waits until {@code n} requests were submitted to the stub node. */
  void awaitSubmitted(int n) throws InterruptedException {
    stub.awaitSubmitted(n);
  }
}
