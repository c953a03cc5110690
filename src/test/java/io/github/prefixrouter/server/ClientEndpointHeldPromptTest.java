package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.internal.json.Json;
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
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * An accepted request keeps a share of the client port's body budget sized to what it still
 * holds: its prompt's text while it is tokenized, its token ids (4 bytes each) while it runs,
 * until it ends. Requests beyond the budget are refused 503 with {@code Retry-After} and counted
 * in {@code body_budget_refused}; the heap the prompts hold is bounded by the budget.
 */
class ClientEndpointHeldPromptTest {

  private static final int KIB = 1 << 10;
  private static final int MIB = 1 << 20;
  private final StubNode stub = new StubNode();
  private final FakeTokenizer tokenizer = new FakeTokenizer();
  private final HttpClient client =
      HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
  private final List<Socket> held = new ArrayList<>();
  private ClientEndpoint endpoint;
  private String address;

  private void start() throws Exception {
    when(stub.node.stats()).thenReturn(StatsFixtures.nodeStats());
    endpoint = new ClientEndpoint(stub.node, List::of, 4096, Duration.ofSeconds(30), "base",
        ClientEndpoint.DEFAULT_READER_THREADS, ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
        tokenizer, () -> 0L, 7L, ClientEndpoint.MIN_BODY_BUDGET);
    InetSocketAddress a = endpoint.start("127.0.0.1", 0);
    address = "127.0.0.1:" + a.getPort();
  }

  /**
   * Has a step that does not come free be refused after 200 ms with none given back, not 1 s:
   * the requests here are sent one at a time, each tokenized, submitted or refused (or its body
   * stalled) before the next, so none waits for a share that another gives back.
   */
  private void refuseSoon() {
    endpoint.bodyBudgetWait(Duration.ofMillis(200));
  }

  @AfterEach
  void stop() throws Exception {
    for (Socket s : held) {
      s.close();
    }
    if (endpoint != null) {
      endpoint.stop();
    }
  }

  private CompletableFuture<HttpResponse<String>> post(String path, String body) {
    return client.sendAsync(HttpRequest.newBuilder(URI.create("http://" + address + path))
        .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  private static InferenceResponse response(InferenceRequest r) {
    return new InferenceResponse(r.id(), new EngineResult(new int[] {7}, "a",
        r.tokens().length, 0, 1, 1), "solo", false, 1, FallbackCause.NONE,
        StubNode.LOCAL_DECISION);
  }

  private long budgetHeld() {
    return endpoint.bodyBudget() - endpoint.bodyBudgetAvailable();
  }

  /** Asserts that every answered request of {@code answers} was refused by the budget. */
  private void assertRefusedByTheBudget(List<CompletableFuture<HttpResponse<String>>> answers,
      boolean openAi) throws Exception {
    int refused = 0;
    for (CompletableFuture<HttpResponse<String>> a : answers) {
      if (a.isDone()) {
        HttpResponse<String> r = a.get();
        assertEquals(503, r.statusCode(), r.body());
        assertEquals("1", r.headers().firstValue("Retry-After").orElse(""), r.body());
        assertTrue(r.body().contains("try again"), r.body());
        if (openAi) {
          assertEquals("busy", ((Map<?, ?>) ((Map<?, ?>) Json.parse(r.body())).get("error"))
              .get("code"), r.body());
        }
        refused++;
      }
    }
    assertTrue(refused > 0, "more prompts than the budget holds, none refused");
    assertEquals(refused, endpoint.bodyBudgetRefused(), "refusals counted");
  }

  /**
   * Text prompts being tokenized hold their text's share: 24 prompts of 4 MiB (96 MiB) do not
   * all fit the smallest budget (73 MiB), and those under way hold at least their text of it.
   * They used to give their share back once parsed: all 24 were tokenized at once, holding
   * 96 MiB of text the budget counted as 0.
   */
  @Test
  void textPromptsBeingTokenizedHoldTheirShareAndThoseBeyondAreRefused() throws Exception {
    start();
    refuseSoon();
    tokenizer.mode = FakeTokenizer.Mode.NEVER; // a slow tokenizer: answers within ioTimeout
    String body = "{\"prompt\":\"" + "a".repeat(4 * MIB) + "\",\"max_tokens\":1}";
    int n = 24;
    List<CompletableFuture<HttpResponse<String>>> answers = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      CompletableFuture<HttpResponse<String>> a = post(ClientEndpoint.OPENAI_COMPLETIONS, body);
      answers.add(a);
      int before = endpoint.tokenizationsUnderWay();
      Await.until(() -> endpoint.tokenizationsUnderWay() > before || a.isDone(),
          "request " + i + " tokenized or answered");
    }
    long held = 0;
    synchronized (tokenizer.calls) {
      for (FakeTokenizer.Call c : tokenizer.calls) {
        held += c.prompt().length(); // ASCII: a byte a character
      }
    }
    assertEquals(tokenizer.calls.size(), endpoint.tokenizationsUnderWay());
    assertTrue(held <= budgetHeld() && budgetHeld() <= endpoint.bodyBudget(), "prompt chars "
        + "held by " + endpoint.tokenizationsUnderWay() + " tokenizations under way: " + held
        + ", body budget " + endpoint.bodyBudget() + " (of which the budget counts as held: "
        + budgetHeld() + ")");
    assertRefusedByTheBudget(answers, true);
    assertEquals(n, tokenizer.calls.size() + endpoint.bodyBudgetRefused());

    endpoint.stop(); // the tokenizations end, answered 503: their shares come back
    ClientEndpoint stopped = endpoint;
    endpoint = null; // stopped once
    for (int i = 0; i < n; i++) {
      assertEquals(503, answers.get(i).get(30, TimeUnit.SECONDS).statusCode());
    }
    assertEquals(stopped.bodyBudget(), stopped.bodyBudgetAvailable(),
        "the whole budget is back once the tokenizations ended");
  }

  /**
   * Token-id prompts hold 4 bytes an id while they run: 24 requests of 2 MiB bodies, 1 Mi ids
   * each (96 MiB of ids), do not all fit the smallest budget. Those submitted hold their ids'
   * share until their answers come, failed or not. They used to give it back once parsed: all
   * 24 ran, holding 96 MiB of ids outside the budget.
   */
  @Test
  void tokenIdPromptsHoldTheirShareWhileTheyRunAndThoseBeyondAreRefused() throws Exception {
    start();
    refuseSoon();
    StringBuilder b = new StringBuilder("{\"prompt\":[");
    for (int i = 0; i < InferenceRequest.MAX_PROMPT_TOKENS; i++) {
      b.append(i == 0 ? "0" : ",0");
    }
    String body = b.append("]}").toString(); // 2 MiB
    int n = 24;
    List<CompletableFuture<HttpResponse<String>>> answers = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      CompletableFuture<HttpResponse<String>> a = post(ClientEndpoint.COMPLETIONS, body);
      answers.add(a);
      int before = stub.futures.size();
      Await.until(() -> stub.futures.size() > before || a.isDone(),
          "request " + i + " submitted or answered");
    }
    long held = 0;
    synchronized (stub.requests) {
      for (InferenceRequest r : stub.requests) {
        held += 4L * r.tokens().length;
      }
    }
    assertTrue(held <= budgetHeld() && budgetHeld() <= endpoint.bodyBudget(), "prompt bytes "
        + "(int ids) held by " + stub.requests.size() + " submitted requests: " + held
        + ", body budget " + endpoint.bodyBudget() + " (of which the budget counts as held: "
        + budgetHeld() + ") from bodies of " + body.length() + " bytes each");
    assertRefusedByTheBudget(answers, false);
    assertEquals(n, stub.requests.size() + endpoint.bodyBudgetRefused());

    // each one's share comes back as its answer comes, failed or not
    for (int i = 0; i < stub.futures.size(); i++) {
      long before = budgetHeld();
      if (i % 2 == 0) {
        stub.futures.get(i).complete(response(stub.requests.get(i)));
      } else {
        stub.futures.get(i).completeExceptionally(new IllegalStateException("engine failed"));
      }
      Await.until(() -> budgetHeld() <= before - 4L * InferenceRequest.MAX_PROMPT_TOKENS,
          "the share of request " + i + " is back");
    }
    assertEquals(0, budgetHeld(), "the whole budget is back once every request ended");
  }

  /**
   * A tokenized prompt holds its ids' share while it runs, streamed or not, and gives it back
   * when it ends, however it ends: answered, failed, or cancelled as its client left.
   */
  @Test
  void aTokenizedPromptHoldsItsIdsWhileItRunsAndGivesThemBackWhenItEnds() throws Exception {
    start();
    String text = "b".repeat(100_000);
    CompletableFuture<HttpResponse<String>> whole = post(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"" + text + "\",\"max_tokens\":1}");
    stub.awaitSubmitted(1);
    assertTrue(budgetHeld() >= 4L * text.length(), "ids held while the request runs: "
        + budgetHeld());
    assertTrue(budgetHeld() < 4L * text.length() + 64 * KIB, "its share is its ids, not its "
        + "body's: " + budgetHeld());
    stub.futures.get(0).complete(response(stub.requests.get(0)));
    assertEquals(200, whole.get(30, TimeUnit.SECONDS).statusCode());
    Await.until(() -> budgetHeld() == 0, "the share is back once answered");

    CompletableFuture<HttpResponse<String>> streamed = post(ClientEndpoint.OPENAI_CHAT,
        "{\"messages\":[{\"role\":\"user\",\"content\":\"" + text + "\"}],\"stream\":true}");
    stub.awaitSubmitted(2);
    assertTrue(budgetHeld() >= 4L * text.length(), "ids held while the stream runs: "
        + budgetHeld());
    stub.futures.get(1).cancel(true); // as when its client left
    streamed.get(30, TimeUnit.SECONDS);
    Await.until(() -> budgetHeld() == 0, "the share is back once cancelled");
  }

  /**
   * A prompt whose ids need a larger share than its text had, once tokenized, waits for it as a
   * body's step does, and is refused 503 {@code busy} with {@code Retry-After} (counted as
   * {@code body_budget_refused}) when it does not come: nothing is submitted.
   */
  @Test
  void aTokenizedPromptWhoseLargerShareDoesNotComeIsRefused() throws Exception {
    start();
    refuseSoon();
    tokenizer.mode = FakeTokenizer.Mode.NEVER;
    CompletableFuture<HttpResponse<String>> a = post(ClientEndpoint.OPENAI_COMPLETIONS,
        "{\"prompt\":\"hello\",\"max_tokens\":1}");
    Await.until(() -> endpoint.tokenizationsUnderWay() == 1, "tokenized");
    // stalled bodies hold the rest of the budget, 64 KiB short at most
    int port = Integer.parseInt(address.split(":")[1]);
    while (endpoint.bodyBudgetAvailable() >= 64 * KIB) {
      long free = endpoint.bodyBudgetAvailable();
      // a body that has sent a power of two copies it to twice that: thrice it while it copies
      int sent = (int) Math.min(4L * MIB, Long.highestOneBit(free / 3));
      long step = sent < 64 * KIB ? 64 * KIB : 2L * sent;
      Socket s = new Socket();
      held.add(s);
      s.bind(new InetSocketAddress("127.0.0." + (2 + held.size() % 2), 0)); // 16 per address
      s.connect(new InetSocketAddress("127.0.0.1", port), 5_000);
      OutputStream out = s.getOutputStream();
      out.write(("POST " + ClientEndpoint.COMPLETIONS + " HTTP/1.1\r\nHost: x\r\n"
          + "Content-Length: " + 8 * MIB + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
      out.write(new byte[sent]);
      out.flush();
      Await.until(() -> endpoint.bodyBudgetAvailable() == free - step,
          "a stalled body holds its step (available " + endpoint.bodyBudgetAvailable() + ")");
    }
    int[] ids = new int[100_000]; // 400 KB of ids: more than is free
    Arrays.fill(ids, 3);
    tokenizer.calls.get(0).future().complete(new PromptTokenizer.Tokenized(ids, -1));
    HttpResponse<String> r = a.get(30, TimeUnit.SECONDS);
    assertEquals(503, r.statusCode(), r.body());
    assertEquals("1", r.headers().firstValue("Retry-After").orElse(""));
    assertEquals("busy", ((Map<?, ?>) ((Map<?, ?>) Json.parse(r.body())).get("error"))
        .get("code"), r.body());
    assertEquals(1, endpoint.bodyBudgetRefused());
    assertEquals(0, stub.futures.size(), "nothing submitted");
    for (Socket s : held) {
      s.close();
    }
    Await.until(() -> budgetHeld() == 0, "the whole budget is back");
  }
}
