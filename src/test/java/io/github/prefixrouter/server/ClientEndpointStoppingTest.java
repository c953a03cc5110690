package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeNotRunningException;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.Await;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A request that arrives while {@link ClientEndpoint#stop} waits for the answers being written
 * (the port still open) is answered 503, as the node's refusal of new requests while it stops:
 * its answer went to the writers, which were shutting down, and the connection was closed
 * without one.
 */
class ClientEndpointStoppingTest {

  @Test
  void aRequestArrivingWhileStopWaitsForTheWritersIsAnswered503() throws Exception {
    aRequestArrivingWhileStopWaitsIsAnswered503(ClientEndpoint.COMPLETIONS, "{\"prompt\":[4,5]}");
  }

  /**
   * A streamed request ({@code "stream": true}) arriving in the same window gets its 503 too:
   * its refusal went to the writers as the stream's failure, they refused it, the stream was
   * abandoned and the connection closed without an answer.
   */
  @ParameterizedTest
  @ValueSource(strings = {
      ClientEndpoint.COMPLETIONS + " {\"prompt\":[4,5],\"stream\":true}",
      ClientEndpoint.OPENAI_COMPLETIONS + " {\"prompt\":\"hi\",\"stream\":true}",
      ClientEndpoint.OPENAI_CHAT + " {\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
          + "\"stream\":true}"})
  void aStreamedRequestArrivingWhileStopWaitsForTheWritersIsAnswered503(String pathAndBody)
      throws Exception {
    int space = pathAndBody.indexOf(' ');
    aRequestArrivingWhileStopWaitsIsAnswered503(pathAndBody.substring(0, space),
        pathAndBody.substring(space + 1));
  }

  private void aRequestArrivingWhileStopWaitsIsAnswered503(String path, String late)
      throws Exception {
    StubNode stub = new StubNode();
    ClientEndpoint endpoint = new ClientEndpoint(stub.node, List::of, 64, Duration.ofSeconds(30),
        null, ClientEndpoint.DEFAULT_READER_THREADS,
        ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS, new FakeTokenizer(), () -> 0L, 7L);
    InetSocketAddress a = endpoint.start("127.0.0.1", 0);
    Thread stopper = null;
    try (Socket slow = new Socket()) {
      // a client that never reads its answer holds a writer, and so stop(), in its write
      slow.setReceiveBufferSize(4096);
      slow.connect(a);
      byte[] body = "{\"prompt\":[1,2,3]}".getBytes(StandardCharsets.UTF_8);
      OutputStream out = slow.getOutputStream();
      out.write(("POST " + ClientEndpoint.COMPLETIONS + " HTTP/1.1\r\nHost: x\r\n"
          + "Content-Length: " + body.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
      out.write(body);
      out.flush();
      stub.awaitSubmitted(1);
      stub.futures.get(0).complete(new InferenceResponse(stub.requests.get(0).id(),
          new EngineResult(new int[] {1}, "x".repeat(32 << 20), 3, 0, 1, 1), "solo", false, 1,
          FallbackCause.NONE, StubNode.LOCAL_DECISION));
      // the node has stopped (as the process stops it before its endpoint); the endpoint stops
      refuseAsStopped(stub);
      Thread s = new Thread(endpoint::stop, "stopper");
      stopper = s;
      s.start();
      Await.until(() -> s.getState() == Thread.State.TIMED_WAITING, "stop() waits for the writer");
      HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      HttpResponse<String> r = client.send(HttpRequest.newBuilder(
          URI.create("http://127.0.0.1:" + a.getPort() + path))
          .timeout(Duration.ofSeconds(20))
          .POST(HttpRequest.BodyPublishers.ofString(late)).build(),
          HttpResponse.BodyHandlers.ofString());
      assertEquals(503, r.statusCode(), r.body());
      assertTrue(r.body().contains("not RUNNING"), r.body());
    } finally {
      if (stopper != null) {
        stopper.join(TimeUnit.SECONDS.toMillis(40));
      } else {
        endpoint.stop();
      }
    }
  }

  /** From now on the node refuses requests as a stopped node does. */
  private static void refuseAsStopped(StubNode stub) {
    when(stub.node.submit(any(), any())).thenAnswer(inv -> CompletableFuture.failedFuture(
        new NodeNotRunningException("solo", PrefixRouterNode.State.STOPPED)));
    when(stub.node.submit(any())).thenAnswer(inv -> CompletableFuture.failedFuture(
        new NodeNotRunningException("solo", PrefixRouterNode.State.STOPPED)));
  }
}
