package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.internal.json.Json;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The OpenAI routes end to end, as an OpenAI client library or curl talks to them: raw HTTP/1.1
 * on a socket, with the headers the official Python client sends, to a real node running the
 * reference engine, tokenized by the test tokenizer. Checks the status line and headers as
 * written on the wire, the chunked event stream, and that a seed makes a sampled answer
 * reproducible while requests without one get different seeds.
 */
class OpenAiRawHttpTest {

  /** An answer: {@code body} is {@code bytes} read as UTF-8. */
  private record Raw(int status, Map<String, String> headers, String body, byte[] bytes) {}

  /**
   * The body as Python's {@code requests} reads it for {@code iter_lines(decode_unicode=True)}
   * or {@code .text}: in the charset the Content-Type names; without one, ISO-8859-1 for a
   * {@code text/} type and UTF-8 for JSON.
   */
  private static String asRequestsReads(Raw r) {
    String type = r.headers().get("content-type").toLowerCase(Locale.ROOT);
    int at = type.indexOf("charset=");
    String charset = at >= 0 ? type.substring(at + 8).split(";")[0].trim()
        : type.startsWith("text/") ? "ISO-8859-1" : "UTF-8";
    return new String(r.bytes(), java.nio.charset.Charset.forName(charset));
  }

  /** Sends {@code request} as it is and reads the answer to the end (Connection: close). */
  private static Raw send(String address, String request) throws IOException {
    int colon = address.lastIndexOf(':');
    byte[] all;
    try (Socket s = new Socket(address.substring(0, colon),
        Integer.parseInt(address.substring(colon + 1)))) {
      s.setSoTimeout(20_000);
      s.getOutputStream().write(request.getBytes(StandardCharsets.UTF_8));
      s.getOutputStream().flush();
      all = s.getInputStream().readAllBytes();
    }
    int end = indexOf(all, "\r\n\r\n".getBytes(StandardCharsets.US_ASCII), 0);
    assertTrue(end > 0, "no header end in: " + new String(all, StandardCharsets.UTF_8));
    String[] lines = new String(all, 0, end, StandardCharsets.US_ASCII).split("\r\n");
    String[] statusLine = lines[0].split(" ", 3);
    assertEquals("HTTP/1.1", statusLine[0], lines[0]);
    Map<String, String> headers = new TreeMap<>();
    for (int i = 1; i < lines.length; i++) {
      int c = lines[i].indexOf(':');
      headers.put(lines[i].substring(0, c).trim().toLowerCase(Locale.ROOT),
          lines[i].substring(c + 1).trim());
    }
    byte[] body = java.util.Arrays.copyOfRange(all, end + 4, all.length);
    if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
      body = dechunk(body);
    } else {
      assertEquals(String.valueOf(body.length), headers.get("content-length"));
    }
    return new Raw(Integer.parseInt(statusLine[1]), headers,
        new String(body, StandardCharsets.UTF_8), body);
  }

  private static byte[] dechunk(byte[] b) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    int i = 0;
    while (true) {
      int eol = indexOf(b, new byte[] {'\r', '\n'}, i);
      int size = Integer.parseInt(new String(b, i, eol - i, StandardCharsets.US_ASCII).trim(), 16);
      i = eol + 2;
      if (size == 0) {
        return out.toByteArray();
      }
      out.write(b, i, size);
      i += size + 2; // the chunk and its CRLF
    }
  }

  private static int indexOf(byte[] b, byte[] what, int from) {
    outer:
    for (int i = from; i <= b.length - what.length; i++) {
      for (int j = 0; j < what.length; j++) {
        if (b[i + j] != what[j]) {
          continue outer;
        }
      }
      return i;
    }
    return -1;
  }

  /** A request as the openai Python client (httpx) writes it, but for Connection: close. */
  private static String post(String address, String path, String json) {
    byte[] body = json.getBytes(StandardCharsets.UTF_8);
    return "POST " + path + " HTTP/1.1\r\n"
        + "Host: " + address + "\r\n"
        + "Accept-Encoding: gzip, deflate\r\n"
        + "Connection: close\r\n"
        + "Accept: application/json\r\n"
        + "Content-Type: application/json\r\n"
        + "User-Agent: OpenAI/Python 1.54.0\r\n"
        + "X-Stainless-Lang: python\r\n"
        + "X-Stainless-Retry-Count: 0\r\n"
        + "Authorization: Bearer EMPTY\r\n"
        + "Content-Length: " + body.length + "\r\n"
        + "\r\n" + json;
  }

  private static Map<?, ?> choice(Map<?, ?> answer) {
    return (Map<?, ?>) ((List<?>) answer.get("choices")).get(0);
  }

  @Test
  void aChatWholeAndStreamedOverRawHttpToARealNode() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--model", "base"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      // the node's own endpoint, with the tokenizer --tokenizer auto gives the reference engine
      ClientEndpoint endpoint = r.endpoint;
      String address = r.clientAddress;
      {
        String chat = "{\"messages\":[{\"role\":\"system\",\"content\":\"You are terse.\"},"
            + "{\"role\":\"user\",\"content\":\"Name a prime.\"}],\"model\":\"base\","
            + "\"max_tokens\":12,\"temperature\":1,\"seed\":5";
        Raw whole = send(address, post(address, "/v1/chat/completions", chat + "}"));
        assertEquals(200, whole.status(), whole.body());
        assertEquals("application/json", whole.headers().get("content-type"));
        assertEquals("solo", whole.headers().get("x-prefix-router-served-by"));
        assertEquals("false", whole.headers().get("x-prefix-router-forwarded"));
        assertEquals("5", whole.headers().get("x-prefix-router-seed"));
        Map<?, ?> answer = (Map<?, ?>) Json.parse(whole.body());
        assertEquals("chat.completion", answer.get("object"));
        // the node's id, its run (its gossip generation) and a counter
        String run = Long.toString(r.node.stats().gossip().generation(), 36);
        assertEquals("chatcmpl-solo-" + run + "-c1", answer.get("id"));
        String text = (String) ((Map<?, ?>) choice(answer).get("message")).get("content");
        Map<?, ?> usage = (Map<?, ?>) answer.get("usage");
        assertEquals(12L, usage.get("completion_tokens"));
        assertEquals("length", choice(answer).get("finish_reason"));
        ReferenceTokenizer characters = new ReferenceTokenizer(NodeMain.REFERENCE_VOCABULARY,
            NodeMain.REFERENCE_MAX_OUTPUT_TOKENS);
        assertEquals(12, text.codePointCount(0, text.length()), "one character per token");
        int[] prompt = characters.tokenizeChat("base", List.of(
            Map.of("role", "system", "content", "You are terse."),
            Map.of("role", "user", "content", "Name a prime.")), Map.of()).join().tokens();
        assertEquals((long) prompt.length, usage.get("prompt_tokens"));
        // the text is the reference engine's output for the chat template's tokens
        try (ReferenceEngine reference = ReferenceEngine.builder().build()) {
          int[] want = reference.execute(new InferenceRequest("check", prompt,
              new GenerationParams(12, 1.0, 1.0, 5))).get(30, TimeUnit.SECONDS).outputTokens();
          assertEquals(characters.outputText(want, ""), text);
        }

        // the same request streamed: the same output, as OpenAI's chunks, chunked on the wire
        Raw streamed = send(address, post(address, "/v1/chat/completions",
            chat + ",\"stream\":true,\"stream_options\":{\"include_usage\":true}}"));
        assertEquals(200, streamed.status());
        assertEquals("text/event-stream; charset=utf-8", streamed.headers().get("content-type"));
        assertEquals("chunked", streamed.headers().get("transfer-encoding"));
        // the reference engine's text is not ASCII: a client that decodes as the header says
        // reads the same events (without a charset, requests reads ISO-8859-1, and splits a
        // line at the U+0085 a UTF-8 byte 0x85 becomes)
        assertTrue(text.chars().anyMatch(ch -> ch > 0x7f), text);
        assertEquals(streamed.body(), asRequestsReads(streamed));
        assertEquals(whole.body(), asRequestsReads(whole));
        List<Object> events = Sse.parse(streamed.body());
        assertEquals(Sse.DONE, events.get(events.size() - 1));
        StringBuilder joined = new StringBuilder();
        int roles = 0;
        String finish = null;
        for (Object e : events.subList(0, events.size() - 2)) {
          Map<?, ?> c = (Map<?, ?>) e;
          assertEquals("chat.completion.chunk", c.get("object"));
          assertEquals("chatcmpl-solo-" + run + "-c2", c.get("id"));
          Map<?, ?> delta = (Map<?, ?>) choice(c).get("delta");
          roles += delta.containsKey("role") ? 1 : 0;
          joined.append(delta.containsKey("content") ? delta.get("content") : "");
          if (choice(c).get("finish_reason") != Json.NULL) {
            finish = (String) choice(c).get("finish_reason");
          }
        }
        assertEquals(1, roles, "the role in the first delta only");
        assertEquals(text, joined.toString());
        assertEquals("length", finish);
        Map<?, ?> usageChunk = (Map<?, ?>) events.get(events.size() - 2);
        assertEquals(List.of(), usageChunk.get("choices"));
        assertEquals(usage.get("completion_tokens"),
            ((Map<?, ?>) usageChunk.get("usage")).get("completion_tokens"));
        assertEquals(usage.get("prompt_tokens"),
            ((Map<?, ?>) usageChunk.get("usage")).get("prompt_tokens"));

        // without a seed: each request gets one of its own
        Raw first = send(address, post(address, "/v1/chat/completions",
            chat.replace(",\"seed\":5", "") + "}"));
        Raw second = send(address, post(address, "/v1/chat/completions",
            chat.replace(",\"seed\":5", "") + "}"));
        assertEquals(200, first.status());
        assertEquals(200, second.status());
        String s1 = first.headers().get("x-prefix-router-seed");
        String s2 = second.headers().get("x-prefix-router-seed");
        assertNotEquals(s1, s2);
        assertEquals(Long.parseLong(s1),
            ((Map<?, ?>) ((Map<?, ?>) Json.parse(first.body())).get("prefix_router")).get("seed"));
        // and a drawn seed, given back, reproduces its answer
        Raw again = send(address, post(address, "/v1/chat/completions",
            chat.replace(",\"seed\":5", ",\"seed\":" + s1) + "}"));
        assertEquals(choice((Map<?, ?>) Json.parse(first.body())).get("message"),
            choice((Map<?, ?>) Json.parse(again.body())).get("message"));

        // a refusal on the wire: 400 in OpenAI's shape
        Raw refused = send(address, post(address, "/v1/chat/completions",
            chat + ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]}"));
        assertEquals(400, refused.status());
        assertEquals("tools", Json.path(Json.parse(refused.body()), "error", "param"));
        assertEquals(0, endpoint.inFlight());
      }
    }
  }

  /**
   * A request the demo engine can never serve (more output tokens than its limit, a prompt
   * longer than it takes) is the client's fault: 400 in OpenAI's shape, which clients do not
   * retry, not a 502 they would send again and again.
   */
  @Test
  void whatTheDemoEngineCannotServeIsA400() throws Exception {
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "solo", "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--model", "base"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX));
    try (NodeMain.Running r = NodeMain.start(o)) {
      String address = r.clientAddress;
      String tooLong = "x".repeat(16_385); // the reference engine takes 16,384 prompt tokens
      String[] bodies = {
        "{\"prompt\":[1,2,3],\"max_tokens\":" + (NodeMain.REFERENCE_MAX_OUTPUT_TOKENS + 1) + "}",
        "{\"prompt\":\"" + tooLong + "\",\"max_tokens\":1}",
      };
      for (String body : bodies) {
        Raw answer = send(address, post(address, "/v1/completions", body));
        String what = body.length() > 80 ? body.substring(0, 80) : body;
        assertEquals(400, answer.status(), what + ": " + answer.body());
        Object error = ((Map<?, ?>) Json.parse(answer.body())).get("error");
        assertEquals("invalid_request_error", ((Map<?, ?>) error).get("type"), what);
        assertEquals("invalid_request", ((Map<?, ?>) error).get("code"), what);
      }
      assertEquals(0, r.endpoint.inFlight());
    }
  }
}
