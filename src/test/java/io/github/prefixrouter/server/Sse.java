package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.internal.json.Json;
import java.io.BufferedReader;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** Server-sent events as the client endpoint writes them, parsed back strictly. */
final class Sse {

  static final String DONE = "[DONE]";

  private Sse() {}

  /**
   * The events of a whole stream body: each must be {@code data: <payload>\n\n}, the payload a
   * JSON object or {@code [DONE]}; returns the objects, and {@link #DONE} for the marker.
   */
  static List<Object> parse(String body) {
    List<Object> events = new ArrayList<>();
    int i = 0;
    while (i < body.length()) {
      int end = body.indexOf("\n\n", i);
      if (end < 0) {
        fail("an event without its blank line at " + i + ": " + body.substring(i));
      }
      events.add(payload(body.substring(i, end)));
      i = end + 2;
    }
    return events;
  }

  /**
   * The JSON objects of a whole stream body ({@link #parse}), which must end with
   * {@code [DONE]} and have it nowhere else.
   */
  static List<Map<?, ?>> chunks(String body) {
    List<Object> events = parse(body);
    assertEquals(DONE, events.get(events.size() - 1), "[DONE] last: " + events);
    List<Map<?, ?>> out = new ArrayList<>();
    for (Object e : events.subList(0, events.size() - 1)) {
      out.add((Map<?, ?>) e);
    }
    return out;
  }

  /** The next event from {@code in}, or null at the end of the stream. */
  static Object next(BufferedReader in) throws IOException {
    String line = in.readLine();
    if (line == null) {
      return null;
    }
    String blank = in.readLine();
    assertEquals("", blank, "an event is one data line and a blank line");
    return payload(line);
  }

  private static Object payload(String event) {
    assertTrue(event.startsWith("data: "), "not a data line: " + event);
    assertTrue(!event.contains("\n"), "one line per event: " + event);
    String p = event.substring("data: ".length());
    if (p.equals(DONE)) {
      return DONE;
    }
    Object o = Json.parse(p);
    assertTrue(o instanceof Map<?, ?>, "each event is a JSON object: " + p);
    return o;
  }

  /** The token ids of an event. */
  static int[] tokens(Object event) {
    return Json.asIntArray(((Map<?, ?>) event).get("token_ids"), "token_ids");
  }

  /** The text of an event. */
  static String text(Object event) {
    return (String) ((Map<?, ?>) event).get("text");
  }
}
