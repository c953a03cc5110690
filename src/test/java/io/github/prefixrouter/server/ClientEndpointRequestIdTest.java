package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.RequestFailedException;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The id a client chooses on {@code /v1/route/completions} is its answer's; the node gets an id
 * the endpoint makes, unique at this node. Ids are unique per origin node only as long as the
 * origin's host makes them so: peers key forwarded requests, and their CANCELs, by origin and
 * id, and engines cancel by id, so two clients that chose the same id would meet there (one's
 * cancel ending the other's run at a peer, whose origin then runs it again, or fails it when
 * its own engine fails it).
 */
class ClientEndpointRequestIdTest extends ClientEndpointFixture {

  private CompletableFuture<HttpResponse<String>> post(String body) {
    return client.sendAsync(HttpRequest.newBuilder(
            URI.create("http://" + address + ClientEndpoint.COMPLETIONS))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static InferenceResponse response(InferenceRequest r, int token) {
    return new InferenceResponse(r.id(), new EngineResult(new int[] {token}, "t" + token,
        r.length(), 0, 1, 1), "solo", false, 1, FallbackCause.NONE, StubNode.LOCAL_DECISION);
  }

  @Test
  void clientsThatChooseOneIdSubmitRequestsOfDistinctIdsAndEachGetsItsOwnIdBack()
      throws Exception {
    start(new ClientEndpoint(node, List::of, 64, Duration.ofSeconds(10)));
    // two clients of one id, a third that chose the id the endpoint would make, one streamed
    // and one without an id
    CompletableFuture<HttpResponse<String>> a = post("{\"id\":\"q1\",\"prompt\":[1,2,3]}");
    awaitSubmitted(1);
    CompletableFuture<HttpResponse<String>> b = post("{\"id\":\"q1\",\"prompt\":[1,2,3]}");
    awaitSubmitted(2);
    CompletableFuture<HttpResponse<String>> c =
        post("{\"id\":\"q1\",\"prompt\":[4],\"stream\":true}");
    awaitSubmitted(3);
    CompletableFuture<HttpResponse<String>> d = post("{\"id\":\"solo-c5\",\"prompt\":[5]}");
    awaitSubmitted(4);
    CompletableFuture<HttpResponse<String>> e = post("{\"prompt\":[6]}");
    awaitSubmitted(5);

    List<String> ids = requests.stream().map(InferenceRequest::id).toList();
    assertEquals(5, new HashSet<>(ids).size(), "the ids submitted: " + ids);
    for (String id : ids) {
      assertTrue(id.startsWith("solo-c"), id);
    }
    assertEquals(List.of(1, 2, 3), toList(requests.get(0).tokens()));
    assertEquals(List.of(1, 2, 3), toList(requests.get(1).tokens()));

    futures.get(0).complete(response(requests.get(0), 10));
    futures.get(1).completeExceptionally(new RequestFailedException(requests.get(1).id(),
        "failed everywhere", new EngineException("server answered HTTP 500", true)));
    listeners.get(2).onOutput(new int[] {12}, "t12");
    futures.get(2).complete(response(requests.get(2), 12));
    futures.get(3).complete(response(requests.get(3), 13));
    futures.get(4).complete(response(requests.get(4), 14));

    Map<?, ?> ma = json(a.get(20, TimeUnit.SECONDS));
    assertEquals("q1", ma.get("id"));
    assertEquals(List.of(10L), ma.get("token_ids"));
    HttpResponse<String> rb = b.get(20, TimeUnit.SECONDS);
    assertEquals(502, rb.statusCode(), rb.body());
    assertEquals("q1", ((Map<?, ?>) Json.parse(rb.body())).get("id"), rb.body());
    HttpResponse<String> rc = c.get(20, TimeUnit.SECONDS);
    List<Map<?, ?>> events = Sse.chunks(rc.body());
    assertEquals(2, events.size(), rc.body());
    for (Map<?, ?> event : events) {
      assertEquals("q1", event.get("id"), rc.body());
    }
    assertEquals(List.of(12L), events.get(0).get("token_ids"));
    assertEquals("solo-c5", json(d.get(20, TimeUnit.SECONDS)).get("id"));
    // without an id of its own, a client gets the node's
    assertEquals(requests.get(4).id(), json(e.get(20, TimeUnit.SECONDS)).get("id"));
  }

  /** The id of the first request a node process of id "r" answers, without a client's id. */
  private static String firstRequestIdOfARun() throws Exception {
    try (NodeMain.Running r = NodeMain.start(NodeOptions.parse(new String[] {"--id", "r",
            "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0"},
            Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX)),
        new PrintStream(OutputStream.nullOutputStream()))) {
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      HttpResponse<String> resp = c.send(HttpRequest.newBuilder(
              URI.create("http://" + r.clientAddress + ClientEndpoint.COMPLETIONS))
          .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\":[1,2,3]}")).build(),
          HttpResponse.BodyHandlers.ofString());
      return (String) json(resp).get("id");
    }
  }

  /**
   * Peers remember a node's requests by its id and theirs for minutes after they ended (a
   * CANCEL that crossed the answer, or came before its FORWARD, stops that request arriving
   * again: EarlyCancelTest), and know nothing of the run that sent them: a node process that
   * restarts must not submit its requests under its previous run's ids, or a peer takes them
   * for that run's and answers them cancelled (or joins them to a run still under way there).
   */
  @Test
  void aNodeStartedAgainNumbersItsRequestsApartFromItsEarlierRun() throws Exception {
    String first = firstRequestIdOfARun();
    String again = firstRequestIdOfARun();
    assertTrue(first.startsWith("r-") && again.startsWith("r-"), first + ", " + again);
    assertNotEquals(first, again, "two runs of node r submitted their first requests under "
        + "one id");
  }

  private static Map<?, ?> json(HttpResponse<String> resp) {
    assertEquals(200, resp.statusCode(), resp.body());
    return (Map<?, ?>) Json.parse(resp.body());
  }

  private static List<Integer> toList(int[] a) {
    return java.util.Arrays.stream(a).boxed().toList();
  }
}
