package io.github.prefixrouter.internal.json;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/** Fuzzes the JSON reader: round trips, random text and mutations of valid documents. */
class JsonFuzzProperties {

  @Property
  void writeThenParseIsIdentity(@ForAll("values") Object value) {
    assertEquals(value, Json.parse(Json.write(value)));
  }

  @Property
  void randomTextOnlyEverThrowsJsonException(@ForAll("jsonishText") String text) {
    parseOrTypedError(text);
  }

  @Property
  void mutatedDocumentsOnlyEverThrowJsonException(
      @ForAll("values") Object value,
      @ForAll @IntRange(min = 0, max = 10_000) int where,
      @ForAll @IntRange(min = 0, max = 5) int how,
      @ForAll("jsonishChars") char c) {
    StringBuilder sb = new StringBuilder(Json.write(value));
    int i = sb.length() == 0 ? 0 : where % sb.length();
    switch (how) {
      case 0 -> sb.insert(i, c);
      case 1 -> sb.setCharAt(i, c);
      case 2 -> sb.deleteCharAt(i);
      case 3 -> sb.setLength(i); // truncation
      case 4 -> sb.insert(i, "[".repeat(100));
      default -> sb.append(c);
    }
    parseOrTypedError(sb.toString());
  }

  /**
   * The writer refuses exactly the values nested deeper than {@link Json#DEFAULT_MAX_DEPTH}
   * arrays and objects, as a parse with the default limits counts them (the model: one level per
   * container, whatever the innermost one holds), and what it writes parses back. Few enough
   * cases around the limit that they are all tried.
   */
  @Property
  void writeRefusesExactlyTheNestingParseRefuses(
      @ForAll @IntRange(min = Json.DEFAULT_MAX_DEPTH - 8, max = Json.DEFAULT_MAX_DEPTH + 4)
          int wrappers,
      @ForAll @IntRange(min = 0, max = 6) int innermost) {
    Object v;
    int levels;
    switch (innermost) {
      case 0 -> { v = 7L; levels = 0; }
      case 1 -> { v = "s"; levels = 0; }
      case 2 -> { v = new ArrayList<>(); levels = 1; }
      case 3 -> { v = new LinkedHashMap<>(); levels = 1; }
      case 4 -> { v = new int[] {1, 2}; levels = 1; }
      case 5 -> { v = new long[] {3}; levels = 1; }
      default -> { v = List.of(List.of(Json.NULL)); levels = 2; }
    }
    for (int i = 0; i < wrappers; i++) {
      v = i % 3 == 0 ? Map.of("k", v) : List.of(v);
      levels++;
    }
    Object value = v;
    if (levels > Json.DEFAULT_MAX_DEPTH) {
      assertThrows(IllegalArgumentException.class, () -> Json.write(value));
    } else {
      String text = Json.write(value);
      assertEquals(text, Json.write(Json.parse(text)));
    }
  }

  /**
   * A parse with a memory limit succeeds, with the value a parse without one gives, exactly when
   * the limit is at least what a model of the charges gives for that value (computed from the
   * parsed Java value, not from the reader's counting), and is refused with a
   * {@link Json.JsonException} one byte below it.
   */
  @Property
  void theMemoryLimitRefusesExactlyTheValuesChargedMoreThanIt(@ForAll("values") Object value) {
    String text = Json.write(value);
    Object parsed = Json.parse(text);
    long charged = charge(parsed);
    assertEquals(parsed, Json.parse(text, text.length(), 64, Math.max(1, charged)));
    if (charged > 1) {
      Json.ParsedSizeException e = assertThrows(Json.ParsedSizeException.class,
          () -> Json.parse(text, text.length(), 64, charged - 1));
      assertTrue(e.getMessage().contains("bytes of memory once parsed"), e.getMessage());
      assertEquals(charged - 1, e.maxParsedBytes());
    }
  }

  /**
   * A parse that takes its heap from a {@link Json.Memory} gives the same value, and takes at
   * least what the model charges it, at most the larger of one step and twice that, and never
   * more than its limit; with a limit below the charge it is refused as without a memory,
   * having taken no more than the limit.
   */
  @Property
  void aParseTakesFromItsMemoryWhatItChargesInFewSteps(@ForAll("values") Object value) {
    String text = Json.write(value);
    Object parsed = Json.parse(text);
    long charged = charge(parsed);
    List<Long> takes = new ArrayList<>();
    long limit = Math.max(1, charged);
    assertEquals(parsed, Json.parse(text, text.length(), 64, limit, takes::add));
    long taken = takes.stream().mapToLong(Long::longValue).sum();
    assertTrue(taken >= charged && taken <= Math.max(Json.MEMORY_STEP, 2 * charged)
        && taken <= limit, "took " + takes + " for " + charged);
    assertTrue(takes.size() <= 1 + 64 - Long.numberOfLeadingZeros(Math.max(1, charged)),
        "took " + takes.size() + " times for " + charged);
    if (charged > 1) {
      takes.clear();
      assertThrows(Json.ParsedSizeException.class,
          () -> Json.parse(text, text.length(), 64, charged - 1, takes::add));
      assertTrue(takes.stream().mapToLong(Long::longValue).sum() <= charged - 1);
    }
  }

  /** The charges {@link Json#parse(String, int, int, long)} documents, from a parsed value. */
  private static long charge(Object v) {
    if (v instanceof Map<?, ?> m) {
      long c = 128;
      for (Map.Entry<?, ?> e : m.entrySet()) {
        c += 48 + 48 + 2L * ((String) e.getKey()).length() + charge(e.getValue());
      }
      return c;
    }
    if (v instanceof java.util.List<?> l) {
      // an array of integers in int range only is held unboxed: its elements cost no number
      boolean ints = l.stream().allMatch(x -> x instanceof Long n && n == n.intValue());
      long c = 64;
      for (Object x : l) {
        c += 12 + (ints ? 0 : charge(x));
      }
      return c;
    }
    if (v instanceof String str) {
      return 48 + 2L * str.length();
    }
    if (v instanceof Number) {
      return 20;
    }
    return 0; // true, false, null
  }

  private static void parseOrTypedError(String text) {
    try {
      Object v = Json.parse(text, 1 << 20, 32);
      // whatever parsed must write back and parse to the same value
      assertEquals(v, Json.parse(Json.write(v)));
    } catch (Json.JsonException expected) {
      // the only failure allowed
    }
  }

  @Provide
  Arbitrary<String> jsonishText() {
    return jsonishChars().list().ofMaxSize(40).map(l -> {
      StringBuilder sb = new StringBuilder();
      l.forEach(sb::append);
      return sb.toString();
    });
  }

  @Provide
  Arbitrary<Character> jsonishChars() {
    return Arbitraries.oneOf(
        Arbitraries.of('{', '}', '[', ']', ',', ':', '"', '\\', '-', '+', '.', 'e', 'E', '0', '1',
            '9', 't', 'r', 'u', 'n', 'l', 'f', 'a', 's', ' ', '\n', 'x', '/'),
        Arbitraries.chars());
  }

  @Provide
  Arbitrary<Object> values() {
    return value(3);
  }

  private Arbitrary<Object> value(int depth) {
    Arbitrary<Object> leaf =
        Arbitraries.oneOf(
            Arbitraries.longs().map(x -> (Object) x),
            Arbitraries.doubles().filter(Double::isFinite).map(x -> (Object) x),
            Arbitraries.strings().all().ofMaxLength(12).filter(JsonFuzzProperties::wellFormed)
                .map(x -> (Object) x),
            Arbitraries.of(Boolean.TRUE, Boolean.FALSE, Json.NULL));
    if (depth == 0) {
      return leaf;
    }
    Arbitrary<Object> list = value(depth - 1).list().ofMaxSize(4).map(l -> (Object) new ArrayList<>(l));
    Arbitrary<Object> map =
        Combinators.combine(Arbitraries.strings().ofMaxLength(6).list().ofMaxSize(4).uniqueElements(),
                value(depth - 1).list().ofSize(4))
            .as((keys, vals) -> {
              Map<String, Object> m = new LinkedHashMap<>();
              for (int i = 0; i < keys.size(); i++) {
                m.put(keys.get(i), vals.get(i));
              }
              return (Object) m;
            });
    return Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(3, leaf), net.jqwik.api.Tuple.of(1, list), net.jqwik.api.Tuple.of(1, map));
  }

  private static boolean wellFormed(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (Character.isHighSurrogate(c)) {
        if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) {
          return false;
        }
        i++;
      } else if (Character.isLowSurrogate(c)) {
        return false;
      }
    }
    return true;
  }
}
