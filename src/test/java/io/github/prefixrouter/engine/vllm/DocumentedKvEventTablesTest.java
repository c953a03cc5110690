package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.testing.DocTables;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.RecordComponent;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The tables of docs/vllm-kv-events.md are the code's: the subscriber's limits and timeouts
 * (each a public method of {@link VllmKvEventSubscriber.Builder}, with the builder's default),
 * and the counters of {@link VllmKvEventSubscriber.Stats} and {@link VllmKvEventReceiver.Stats}
 * (every component listed, nothing listed that is none). A default changed in the code, a
 * counter added, or a row mistyped in the guide fails here with the row.
 */
class DocumentedKvEventTablesTest {

  private static final Path DOC = Path.of("docs", "vllm-kv-events.md");

  @Test
  void theLimitsTableShowsTheBuildersMethodsAndDefaults() throws Exception {
    // each row's builder method, and the builder fields holding its default(s)
    Map<String, List<String>> fields = new LinkedHashMap<>();
    fields.put("maxMessageBytes", List.of("maxMessageBytes"));
    fields.put("maxFramesPerMessage", List.of("maxFrames"));
    fields.put("connectTimeout", List.of("connectTimeout"));
    fields.put("handshakeTimeout", List.of("handshakeTimeout"));
    fields.put("readTimeout", List.of("readTimeout"));
    fields.put("idleTimeout", List.of("idleTimeout"));
    fields.put("replayTimeout", List.of("replayTimeout"));
    fields.put("reconnectBackoff", List.of("minBackoff", "maxBackoff"));
    fields.put("replayBackoff", List.of("minReplayBackoff", "maxReplayBackoff"));
    fields.put("silenceLimit", List.of("silenceRequests", "silenceTime"));

    Map<String, String> rows = table("### Limits and timeouts");
    assertEquals(fields.keySet(), rows.keySet(), "the rows of the limits table");
    VllmKvEventSubscriber.Builder defaults = VllmKvEventSubscriber.builder();
    Set<String> publicMethods = new LinkedHashSet<>();
    for (Method m : VllmKvEventSubscriber.Builder.class.getMethods()) {
      publicMethods.add(m.getName());
    }
    for (Map.Entry<String, List<String>> e : fields.entrySet()) {
      String method = e.getKey();
      assertTrue(publicMethods.contains(method), "no public builder method " + method);
      List<Object> expected = new ArrayList<>();
      for (String name : e.getValue()) {
        Field f = VllmKvEventSubscriber.Builder.class.getDeclaredField(name);
        assertTrue(!Modifier.isStatic(f.getModifiers()), name);
        f.setAccessible(true);
        expected.add(f.get(defaults));
      }
      String cell = rows.get(method);
      List<Object> stated = new ArrayList<>();
      for (String part : cell.split(" to | and ")) {
        stated.add(parse(part.trim(), method, cell));
      }
      assertEquals(expected, stated, "docs/vllm-kv-events.md, row " + method
          + ": the default cell says " + cell);
    }
  }

  @Test
  void theSubscribersCountersTableListsEveryComponentOfItsStats() throws IOException {
    assertEquals(components(VllmKvEventSubscriber.Stats.class),
        counterNames(table("### Counters")),
        "the subscriber's counters in docs/vllm-kv-events.md");
  }

  @Test
  void theReceiversCountersTableListsEveryComponentOfItsStats() throws IOException {
    assertEquals(components(VllmKvEventReceiver.Stats.class),
        counterNames(table("## Counters")),
        "the receiver's counters in docs/vllm-kv-events.md");
  }

  private static Set<String> components(Class<? extends Record> type) {
    Set<String> names = new LinkedHashSet<>();
    for (RecordComponent rc : type.getRecordComponents()) {
      names.add(rc.getName());
    }
    return Set.copyOf(names);
  }

  /** The counters a table's first column names: each in backquotes, several to a row. */
  private static Set<String> counterNames(Map<String, String> rows) {
    Set<String> names = new LinkedHashSet<>();
    for (String first : rows.keySet()) {
      names.addAll(Arrays.asList(first.split(", ")));
    }
    return Set.copyOf(names);
  }

  /** The rows of the first table after {@code heading}: first column to second. */
  private static Map<String, String> table(String heading) throws IOException {
    return DocTables.firstTwoColumns(DOC.getFileName().toString(), heading);
  }

  private static final Pattern VALUE = Pattern.compile("(\\d+)(?: (ms|s|min|MiB))?");

  /** A default: {@code none} (no timeout), a count, {@code n MiB} or a duration. */
  private static Object parse(String v, String row, String cell) {
    if (v.equals("none")) {
      return Duration.ZERO;
    }
    Matcher m = VALUE.matcher(v);
    if (!m.matches()) {
      fail("docs/vllm-kv-events.md, row " + row + ": cannot read the default cell " + cell);
    }
    long n = Long.parseLong(m.group(1));
    String unit = m.group(2);
    if (unit == null) {
      return (int) n;
    }
    return switch (unit) {
      case "MiB" -> (int) (n << 20);
      case "ms" -> Duration.ofMillis(n);
      case "s" -> Duration.ofSeconds(n);
      default -> Duration.ofMinutes(n);
    };
  }
}
