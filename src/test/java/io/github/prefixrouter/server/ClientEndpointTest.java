package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.engine.openai.Json;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Whatever a client sends, it gets exactly one answer, and a bad request is a 400. */
class ClientEndpointTest {

  private static HttpResponse<String> post(HttpClient c, String address, String body) throws Exception {
    return c.send(HttpRequest.newBuilder(URI.create("http://" + address + "/v1/route/completions"))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void everyMalformedBodyIsAnswered400WithTheProblem() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      HttpClient c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
      List<String> bodies = List.of(
          "",                                      // not JSON at all
          "not json",
          "{\"prompt\":[1,2,",                    // truncated
          "{\"prompt\":\"1 2 3\"}",                // wrong shape
          "{\"prompt\":[1,2.5]}",                  // not an integer
          "{\"prompt\":[1],\"id\":7}",             // id not a string
          "{\"prompt\":[1],\"prompt\":[2]}",       // duplicate key
          "{\"prompt\":[1],\"max_tokens\":1e999}", // out of range
          "{\"prompt\":[[[[[[[[[[[[1]]]]]]]]]]]]}", // too deep
          "[1,2,3]");                              // not an object
      for (String body : bodies) {
        HttpResponse<String> resp = post(c, r.clientAddress, body);
        assertEquals(400, resp.statusCode(), body + " -> " + resp.body());
        Map<?, ?> m = (Map<?, ?>) Json.parse(resp.body());
        assertTrue(m.get("error") instanceof String e && !e.isEmpty(), resp.body());
      }
      // the endpoint still serves well-formed requests afterwards
      HttpResponse<String> ok = post(c, r.clientAddress, "{\"prompt\":[5,6,7],\"max_tokens\":1}");
      assertEquals(200, ok.statusCode(), ok.body());
    }
  }
}
