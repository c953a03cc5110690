package io.github.prefixrouter.internal.json;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class JsonTest {

  @Test
  void parsesEveryKindOfValue() {
    Object v = Json.parse(" {\"a\": [1, -2.5, 3e2, true, false, null, \"x\\n\\u00e9\\ud83d\\ude00\"], \"b\": {}} ");
    Map<?, ?> m = (Map<?, ?>) v;
    List<?> a = (List<?>) m.get("a");
    assertEquals(1L, a.get(0));
    assertEquals(-2.5, a.get(1));
    assertEquals(300.0, a.get(2));
    assertEquals(Boolean.TRUE, a.get(3));
    assertEquals(Boolean.FALSE, a.get(4));
    assertSame(Json.NULL, a.get(5));
    assertEquals("x\n\u00e9\ud83d\ude00", a.get(6));
    assertEquals(Map.of(), m.get("b"));
  }

  /**
   * A parse takes its heap from its memory in doubling steps as it goes, and a memory that
   * cannot give a step ends the parse with its own exception.
   */
  @Test
  void aParseTakesItsHeapInStepsAndEndsWhenItsMemoryRefuses() {
    String text = "[\"" + "a".repeat(1 << 20) + "\"]"; // a string of 2 MiB + 48 once parsed
    List<Long> takes = new java.util.ArrayList<>();
    assertEquals(List.of("a".repeat(1 << 20)), Json.parse(text, text.length(), 4, 4L << 20,
        takes::add));
    assertEquals(List.of(Json.MEMORY_STEP, (2L << 20) + 112 - Json.MEMORY_STEP,
        (2L << 20) - 112), takes, "a first step for the array's 64 bytes; the string's rest at "
        + "once; then for the element's 12 bytes as much again as taken, up to the limit");
    takes.clear();
    Json.parse("[1,2]", 5, 4, 4L << 20, takes::add);
    assertEquals(List.of(Json.MEMORY_STEP), takes);
    IllegalStateException refused = new IllegalStateException("no memory");
    assertSame(refused, assertThrows(IllegalStateException.class,
        () -> Json.parse(text, text.length(), 4, 4L << 20, b -> {
          throw refused;
        })));
  }

  @Test
  void integersBeyondLongBecomeDoubles() {
    assertEquals(9223372036854775807L, Json.parse("9223372036854775807"));
    assertEquals(9.223372036854775808E18, Json.parse("9223372036854775808"));
    assertEquals(Long.MIN_VALUE, Json.parse("-9223372036854775808"));
    assertEquals(-9.223372036854775809E18, Json.parse("-9223372036854775809"));
    assertEquals(-1_000_000_000_000_000_000L, Json.parse("-1000000000000000000"));
    assertEquals(1_000_000_000_000_000_000L, Json.parse("1000000000000000000"));
    assertEquals(0L, Json.parse("-0"));
    assertEquals(1.0E19, Json.parse("10000000000000000000"));
    assertEquals(-9.999999999999999999E19, Json.parse("-99999999999999999999"));
    java.util.SplittableRandom random = new java.util.SplittableRandom(7);
    for (int i = 0; i < 10_000; i++) {
      long x = random.nextLong() >> random.nextInt(64);
      assertEquals(x, Json.parse(Long.toString(x)));
      java.math.BigInteger past = java.math.BigInteger.valueOf(x).signum() < 0
          ? java.math.BigInteger.valueOf(Long.MIN_VALUE).subtract(java.math.BigInteger.valueOf(-x))
          : java.math.BigInteger.valueOf(Long.MAX_VALUE).add(java.math.BigInteger.valueOf(x));
      if (x != 0) {
        assertEquals(past.doubleValue(), Json.parse(past.toString()), past.toString());
      }
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "", " ", "[1,]", "{\"a\":1,}", "[01]", "-", "1.", ".5", "1e", "+1", "NaN", "Infinity",
      "'a'", "\"a", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "[1 2]", "{\"a\" 1}",
      "{1:2}", "tru", "nul", "[1]]", "{\"a\":1,\"a\":2}", "\"tab\there\"", "/*c*/1", "1e999",
      "[", "{", "{\"a\":", "\"\\ud800\\u0041\""})
  void rejectsInvalidInputWithTypedException(String text) {
    assertThrows(Json.JsonException.class, () -> Json.parse(text));
  }

  /**
   * A text that is not Unicode (a lone surrogate char, which no UTF-8 decoding yields) is
   * rejected, in values and keys, so whatever parses can be written back; a pair is kept.
   */
  @Test
  void rawLoneSurrogatesAreRejectedAndPairsKept() {
    // the first: the fuzz test's find, U+10000 as a surrogate pair with its high half replaced
    for (String text : List.of("\"{\udc00\"", "\"a\ud800\"", "\"\udc00b\"", "\"\ud800\"",
        "[\"x\ud83d\"]", "{\"\ud800\":1}", "{\"k\udc00\":1}", "\"\ud83d\\n\"")) {
      Json.JsonException e = assertThrows(Json.JsonException.class, () -> Json.parse(text),
          text);
      assertTrue(e.getMessage().contains("lone surrogate"), e.getMessage());
    }
    assertEquals("a\ud83d\ude00b", Json.parse("\"a\ud83d\ude00b\""));
    assertEquals(Map.of("\ud83d\ude00", 1L), Json.parse("{\"\ud83d\ude00\":1}"));
    assertEquals("\"\ud83d\ude00\"", Json.write(Json.parse("\"\ud83d\ude00\"")));
  }

  @Test
  void depthLimitIsEnforced() {
    String deep = "[".repeat(65) + "]".repeat(65);
    Json.JsonException e = assertThrows(Json.JsonException.class, () -> Json.parse(deep));
    assertTrue(e.getMessage().contains("nesting"), e.getMessage());
    assertEquals(List.of(List.of()), Json.parse("[[]]", 100, 2));
    assertThrows(Json.JsonException.class, () -> Json.parse("[[[]]]", 100, 2));
    // a nesting bomb far deeper than the limit fails fast, without a stack overflow
    assertThrows(Json.JsonException.class, () -> Json.parse("[".repeat(1_000_000)));
  }

  @Test
  void aMaxDepthBeyondWhatTheStackHoldsIsRefusedInsteadOfOverflowingIt() throws Exception {
    // nesting is read by recursion: a caller's maxDepth of a million let a deep enough text
    // overflow the stack with a StackOverflowError instead of failing with a typed error
    String bomb = "[".repeat(1_000_000);
    for (int maxDepth : new int[] {Integer.MAX_VALUE, 1_000_000, Json.MAX_DEPTH + 1}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> Json.parse(bomb, Json.DEFAULT_MAX_LENGTH, maxDepth), () -> "maxDepth " + maxDepth);
      assertTrue(e.getMessage().contains("maxDepth must be <= " + Json.MAX_DEPTH), e.getMessage());
    }
    // the bound itself is safe: nesting that deep parses, and one more level is refused, on a
    // thread with a small stack of 256 KB
    String deepest = "[".repeat(Json.MAX_DEPTH) + "]".repeat(Json.MAX_DEPTH);
    java.util.concurrent.atomic.AtomicReference<Object> parsed = new java.util.concurrent.atomic.AtomicReference<>();
    java.util.concurrent.atomic.AtomicReference<Throwable> failed = new java.util.concurrent.atomic.AtomicReference<>();
    Thread t = new Thread(null, () -> {
      try {
        parsed.set(Json.parse(deepest, Json.DEFAULT_MAX_LENGTH, Json.MAX_DEPTH));
        assertThrows(Json.JsonException.class,
            () -> Json.parse("[" + deepest + "]", Json.DEFAULT_MAX_LENGTH, Json.MAX_DEPTH));
        assertThrows(Json.JsonException.class,
            () -> Json.parse(bomb, Json.DEFAULT_MAX_LENGTH, Json.MAX_DEPTH));
      } catch (Throwable e) {
        failed.set(e);
      }
    }, "small-stack", 256 << 10);
    t.start();
    t.join(30_000);
    assertEquals(null, failed.get());
    Object v = parsed.get();
    for (int i = 1; i < Json.MAX_DEPTH; i++) {
      v = ((List<?>) v).get(0);
    }
    assertEquals(List.of(), v);
  }

  @Test
  void writeRefusesTheNumbersParseRefuses() {
    // a BigDecimal or BigInteger beyond the double range, or longer than a number may be, was
    // written with all its digits, and that text was then refused by parse
    Object[] refused = {
        new java.math.BigDecimal("1E+400"),
        new java.math.BigDecimal("-1.5E+309"),
        java.math.BigInteger.TEN.pow(400),
        new java.math.BigDecimal("0." + "1".repeat(400)),
    };
    for (Object n : refused) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> Json.write(List.of(n)), () -> "wrote " + n);
      assertTrue(e.getMessage().contains("JSON cannot represent"), e.getMessage());
    }
    // what it writes, parse reads back: the largest finite values, and tiny ones read as 0
    Object[] written = {
        new java.math.BigDecimal("1.7976931348623157E+308"),
        new java.math.BigDecimal("-1E-400"),
        java.math.BigInteger.TEN.pow(300),
        new java.math.BigDecimal("0." + "1".repeat(398)),
    };
    for (Object n : written) {
      Object back = Json.parse(Json.write(n));
      assertEquals(((Number) n).doubleValue(), ((Number) back).doubleValue(), 0.0, n::toString);
    }
  }

  @Test
  void writeRefusesTheNestingParseRefuses() {
    // DEFAULT_MAX_DEPTH arrays and objects inside one another are written and read back
    Object deepest = List.of();
    for (int i = 1; i < Json.DEFAULT_MAX_DEPTH; i++) {
      deepest = i % 2 == 0 ? List.of(deepest) : Map.of("k", deepest);
    }
    assertEquals(deepest, Json.parse(Json.write(deepest)));
    // one more is refused, whatever the innermost container holds: parse would refuse the text
    Object[] innermost = {List.of(), Map.of(), new int[] {1}, new long[0], List.of(1L)};
    for (Object in : innermost) {
      Object v = in;
      for (int i = 0; i < Json.DEFAULT_MAX_DEPTH; i++) {
        v = List.of(v);
      }
      Object tooDeep = v;
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> Json.write(tooDeep),
              () -> "wrote " + (Json.DEFAULT_MAX_DEPTH + 1) + " levels ending in "
                  + in.getClass().getSimpleName());
      assertTrue(e.getMessage().contains("deeper than " + Json.DEFAULT_MAX_DEPTH), e.getMessage());
    }
  }

  @Test
  void writesABigIntegerWithAllItsDigits() {
    java.math.BigInteger big = new java.math.BigInteger("123456789012345678901234567890");
    assertEquals("123456789012345678901234567890", Json.write(big));
    assertEquals("[-18446744073709551616]",
        Json.write(List.of(java.math.BigInteger.TWO.pow(64).negate())));
    assertEquals(1.2345678901234568e29, Json.parse(Json.write(big)));
  }

  @Test
  void lengthLimitIsCheckedBeforeParsing() {
    Json.JsonException e = assertThrows(Json.JsonException.class, () -> Json.parse("[1,2,3]", 5, 10));
    assertTrue(e.getMessage().contains("limit 5"), e.getMessage());
  }

  @Test
  void writesCompactEscapedJson() {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("prompt", new int[] {1, 2, 3});
    m.put("t", 0.5);
    m.put("s", "q\"\\\u0001\n");
    m.put("n", null);
    m.put("l", List.of(true, 7L));
    assertEquals(
        "{\"prompt\":[1,2,3],\"t\":0.5,\"s\":\"q\\\"\\\\\\u0001\\n\",\"n\":null,\"l\":[true,7]}",
        Json.write(m));
    assertThrows(IllegalArgumentException.class, () -> Json.write(Double.NaN));
    assertThrows(IllegalArgumentException.class, () -> Json.write(Map.of(1, 2)));
    assertThrows(IllegalArgumentException.class, () -> Json.write(new Object()));
  }

  @Test
  void typedAccessorsNameTheField() {
    Object root = Json.parse("{\"usage\":{\"prompt_tokens\":\"x\"}}");
    Json.JsonException e =
        assertThrows(Json.JsonException.class,
            () -> Json.asInt(Json.path(root, "usage", "prompt_tokens"), "usage.prompt_tokens"));
    assertTrue(e.getMessage().contains("usage.prompt_tokens"), e.getMessage());
    assertEquals(null, Json.path(root, "usage", "missing", "deeper"));
  }
}
