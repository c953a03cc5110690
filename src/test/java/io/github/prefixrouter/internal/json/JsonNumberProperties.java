package io.github.prefixrouter.internal.json;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Assume;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * The reader's numbers against two references: {@link #classify}, the values RFC 8259's number
 * grammar and {@link BigDecimal} give (a {@code Long} when an integer fits, else the nearest
 * {@code Double}; out of the double range, or longer than 400 characters, rejected), and
 * {@link Legacy}, the reader's number scanning as it was when every number went through its
 * text, for the message and offset of each rejection. Arrays of int-range integers (held as
 * ints) are compared with the same elements read as a general array, and object keys (kept in
 * a shared cache) with the same strings read as values.
 */
class JsonNumberProperties {

  private static final Pattern GRAMMAR =
      Pattern.compile("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?");

  // ------------------------------------------------------------------ properties

  @Property(tries = 2000)
  void aNumberParsesAsBigDecimalClassifiesIt(@ForAll("numberTexts") String text) {
    Object expected = classify(text);
    Object actual;
    try {
      actual = Json.parse(text);
    } catch (Json.JsonException e) {
      if (expected != null) {
        fail(text + " was rejected (" + e.getMessage() + "), expected " + expected);
      }
      return;
    }
    if (expected == null) {
      fail(text + " parsed as " + actual + ", expected a rejection");
    }
    assertEquals(expected.getClass(), actual.getClass(), text);
    assertEquals(expected, actual, text); // Double.equals tells -0.0 from 0.0
  }

  @Property(tries = 3000)
  void aShortDecimalParsesAsBigDecimalClassifiesIt(@ForAll("shortDecimals") String text) {
    // 13 to 17 significant digits, leading and trailing zeros, powers of ten around 10^±22:
    // both sides of where a decimal is computed from its digits instead of its text
    Object actual = Json.parse(text);
    assertEquals(Double.class, actual.getClass(), text);
    assertEquals(classify(text), actual, text); // Double.equals compares the bits
  }

  @Property(tries = 2000)
  void aRejectionHasTheSameMessageAndOffsetAsBefore(@ForAll("numberTexts") String text) {
    assertSameOutcome(() -> Legacy.parse(text), () -> Json.parse(text), 0, text);
  }

  @Property(tries = 1000)
  void anArrayOfNumbersReadsAsTheSameArrayReadInGeneral(@ForAll("arrayBodies") String body) {
    // a string first makes the whole array a general one, three characters further on (an
    // empty array has no first element to put it before)
    Assume.that(!body.strip().startsWith("]"));
    String ints = "[" + body;
    String general = "[\"\"," + body;
    assertSameOutcome(() -> Json.parse(general), () -> {
      Object v = Json.parse(ints);
      List<Object> withString = new ArrayList<>();
      withString.add("");
      withString.addAll((List<?>) v);
      return withString;
    }, 3, ints);
    Object a;
    Object b;
    try {
      a = Json.parse(ints);
      b = ((List<?>) Json.parse(general)).subList(1, ((List<?>) Json.parse(general)).size());
    } catch (Json.JsonException rejected) {
      return;
    }
    assertEquals(b, a, ints);
    assertEquals(b.hashCode(), a.hashCode(), ints);
    assertEquals(b.toString(), a.toString(), ints);
    assertSameOutcome(() -> Json.asIntArray(b, "ids"), () -> Json.asIntArray(a, "ids"), 0, ints);
  }

  @Property(tries = 500)
  void anArrayOfIntsReadsAsTheListOfLongs(@ForAll("intArrays") int[] values) {
    List<Long> expected = new ArrayList<>();
    for (int v : values) {
      expected.add((long) v);
    }
    Object parsed = Json.parse(Json.write(values));
    List<?> list = Json.asList(parsed, "ids");
    assertEquals(expected, list);
    assertEquals(list, expected);
    assertEquals(expected.hashCode(), list.hashCode());
    assertEquals(expected.toString(), list.toString());
    for (int i = 0; i < values.length; i++) {
      assertEquals(Long.class, list.get(i).getClass());
    }
    int index = values.length;
    assertThrows(IndexOutOfBoundsException.class, () -> list.get(index));
    assertThrows(IndexOutOfBoundsException.class, () -> list.get(-1));
    assertThrows(UnsupportedOperationException.class, () -> ((List<Object>) list).add(1L));
    if (values.length > 0) {
      assertThrows(UnsupportedOperationException.class, () -> ((List<Object>) list).set(0, 1L));
      assertThrows(UnsupportedOperationException.class, () -> list.remove(0));
    }
    int[] copy = Json.asIntArray(parsed, "ids");
    assertArrayEquals(values, copy);
    if (copy.length > 0) {
      copy[0]++; // a copy: the parsed list is unchanged
      assertEquals(expected.get(0), list.get(0));
      assertNotSame(copy, Json.asIntArray(parsed, "ids"));
    }
    assertEquals(Json.write(values), Json.write(parsed));
  }

  @Example
  void boundaries() {
    assertEquals(Long.MIN_VALUE, Json.parse("-9223372036854775808"));
    assertEquals(Long.MAX_VALUE, Json.parse("9223372036854775807"));
    assertEquals(9.223372036854775808E18, Json.parse("9223372036854775808"));
    assertEquals(-9.223372036854775809E18, Json.parse("-9223372036854775809"));
    assertEquals(999_999_999_999_999_999L, Json.parse("999999999999999999"));
    assertEquals(-999_999_999_999_999_999L, Json.parse("-999999999999999999"));
    assertEquals(0L, Json.parse("-0"));
    assertEquals(-0.0, Json.parse("-0.0"));
    assertEquals(1e308, Json.parse("1e308"));
    assertEquals("number out of range: 1e309 at offset 0",
        assertThrows(Json.JsonException.class, () -> Json.parse("1e309")).getMessage());
    assertEquals(List.of(2147483647L, -2147483648L, 2147483648L, -2147483649L),
        Json.parse("[2147483647,-2147483648,2147483648,-2147483649]"));
    assertArrayEquals(new int[] {Integer.MAX_VALUE, Integer.MIN_VALUE, 0},
        Json.asIntArray(Json.parse("[2147483647, -2147483648 ,-0]"), "ids"));
    assertEquals("ids[2] must be an integer in int range, was 2147483648",
        assertThrows(Json.JsonException.class,
            () -> Json.asIntArray(Json.parse("[1,2,2147483648]"), "ids")).getMessage());
    assertEquals("ids[1] must be an integer in int range, was 1.5",
        assertThrows(Json.JsonException.class,
            () -> Json.asIntArray(Json.parse("[1,1.5]"), "ids")).getMessage());
    assertEquals("expected ',' or ']' in an array at offset 5",
        assertThrows(Json.JsonException.class, () -> Json.parse("[1,2 3]")).getMessage());
    assertEquals("truncated number at offset 6",
        assertThrows(Json.JsonException.class, () -> Json.parse("[1,2,-")).getMessage());
  }

  @Property(tries = 1000)
  void aKeyReadsAsTheSameStringAsAValue(@ForAll("stringTexts") String text) {
    // with nothing after it, a string that is not well formed fails in an object as in an array;
    // a well-formed string followed by more text fails at the same offset, where an array
    // wants a ',' or ']' and an object a ':'
    Json.JsonException inArray = assertThrows(Json.JsonException.class, () -> Json.parse("[" + text));
    if (!inArray.getMessage().startsWith("unexpected end of input inside an array")) {
      Json.JsonException inObject = assertThrows(Json.JsonException.class,
          () -> Json.parse("{" + text), text);
      String afterValue = "expected ',' or ']' in an array";
      String expected = inArray.getMessage().startsWith(afterValue)
          ? "expected ':' after key" + inArray.getMessage().substring(afterValue.length())
          : inArray.getMessage();
      assertEquals(expected, inObject.getMessage(), text);
      return;
    }
    Object asValue = ((List<?>) Json.parse("[" + text + "]")).get(0);
    Map<?, ?> m = (Map<?, ?>) Json.parse("{" + text + ":1}");
    assertEquals(Map.of(asValue, 1L), m, text);
    assertEquals(asValue, m.keySet().iterator().next(), text);
  }

  @Example
  void keysReadOnManyThreadsAreTheirOwn() throws Exception {
    // many keys in few slots of the shared key cache, read at once on four threads
    List<String> docs = new ArrayList<>();
    for (int i = 0; i < 4000; i++) {
      docs.add("{\"k" + i + "\":" + i + ",\"key " + (i % 7) + "\":[" + i + "]}");
    }
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(4);
    try {
      List<java.util.concurrent.Future<Integer>> done = new ArrayList<>();
      for (int t = 0; t < 4; t++) {
        int shift = t;
        done.add(pool.submit(() -> {
          int checked = 0;
          for (int round = 0; round < 5; round++) {
            for (int j = 0; j < docs.size(); j++) {
              int i = (j + 1000 * shift) % docs.size();
              Map<?, ?> m = (Map<?, ?>) Json.parse(docs.get(i));
              assertEquals(List.of("k" + i, "key " + (i % 7)), new ArrayList<>(m.keySet()));
              assertEquals((long) i, m.get("k" + i));
              checked++;
            }
          }
          return checked;
        }));
      }
      for (java.util.concurrent.Future<Integer> f : done) {
        assertEquals(5 * docs.size(), f.get());
      }
    } finally {
      pool.shutdownNow();
    }
  }

  // ------------------------------------------------------------------ references

  /** The value the grammar and BigDecimal give {@code text}, or null if it is rejected. */
  static Object classify(String json) {
    String text = json.replaceAll("^[ \\t\\n\\r]+|[ \\t\\n\\r]+$", ""); // JSON's whitespace around
    if (!GRAMMAR.matcher(text).matches() || text.length() > 400) {
      return null;
    }
    if (text.indexOf('.') < 0 && text.indexOf('e') < 0 && text.indexOf('E') < 0) {
      BigInteger i = new BigInteger(text);
      if (i.bitLength() < 64) {
        return i.longValue();
      }
    }
    double d = new BigDecimal(text).doubleValue();
    if (Double.isInfinite(d)) {
      return null;
    }
    return d == 0 && text.startsWith("-") ? -0.0 : d; // BigDecimal has no negative zero
  }

  /** Both succeed with equal values, or both throw the same message at offsets {@code shift} apart. */
  private static void assertSameOutcome(
      java.util.function.Supplier<Object> expected, java.util.function.Supplier<Object> actual,
      int shift, String text) {
    Object e;
    try {
      e = expected.get();
    } catch (Json.JsonException ex) {
      Json.JsonException ac = assertThrows(Json.JsonException.class, actual::get, text);
      String message = ex.getMessage();
      if (ex.offset() >= 0) {
        message = message.substring(0, message.lastIndexOf(" at offset "))
            + " at offset " + (ex.offset() - shift);
      }
      assertEquals(message, ac.getMessage(), text);
      assertEquals(ex.offset() < 0 ? -1 : ex.offset() - shift, ac.offset(), text);
      return;
    }
    Object a = actual.get();
    if (e instanceof int[] ei) {
      assertArrayEquals(ei, (int[]) a, text);
    } else {
      assertEquals(e, a, text);
    }
  }

  /**
   * The reader's number scanning before integers were read without their text: the literal
   * scanned, then {@code Long.parseLong} or {@code Double.parseDouble} of its text.
   */
  static final class Legacy {
    private final String s;
    private int pos;

    private Legacy(String s) {
      this.s = s;
    }

    /** A whole text that is a number or starts with something else than a value's start. */
    static Object parse(String text) {
      Legacy r = new Legacy(text);
      if (text.isEmpty()) {
        throw new Json.JsonException("unexpected end of input, expected a value", 0);
      }
      char c = text.charAt(0);
      if (!(c == '-' || (c >= '0' && c <= '9'))) {
        return Json.parse(text); // not a number: the reader's other paths
      }
      Object v = r.readNumber();
      while (r.pos < text.length() && " \t\n\r".indexOf(text.charAt(r.pos)) >= 0) {
        r.pos++;
      }
      if (r.pos != text.length()) {
        throw new Json.JsonException("unexpected content after the JSON value", r.pos);
      }
      return v;
    }

    private Json.JsonException error(String message) {
      return new Json.JsonException(message, pos);
    }

    private Object readNumber() {
      int start = pos;
      if (s.charAt(pos) == '-') {
        pos++;
      }
      if (pos >= s.length()) {
        throw error("truncated number");
      }
      char c = s.charAt(pos);
      if (c == '0') {
        pos++;
        if (pos < s.length() && isDigit(s.charAt(pos))) {
          throw error("leading zero in a number");
        }
      } else if (c >= '1' && c <= '9') {
        skipDigits();
      } else {
        throw error("expected a digit");
      }
      boolean integral = true;
      if (pos < s.length() && s.charAt(pos) == '.') {
        integral = false;
        pos++;
        if (pos >= s.length() || !isDigit(s.charAt(pos))) {
          throw error("expected a digit after the decimal point");
        }
        skipDigits();
      }
      if (pos < s.length() && (s.charAt(pos) == 'e' || s.charAt(pos) == 'E')) {
        integral = false;
        pos++;
        if (pos < s.length() && (s.charAt(pos) == '+' || s.charAt(pos) == '-')) {
          pos++;
        }
        if (pos >= s.length() || !isDigit(s.charAt(pos))) {
          throw error("expected a digit in the exponent");
        }
        skipDigits();
      }
      if (pos - start > 400) {
        throw new Json.JsonException("number longer than 400 characters", start);
      }
      String lit = s.substring(start, pos);
      if (integral && lit.length() <= 20) {
        try {
          return Long.parseLong(lit);
        } catch (NumberFormatException overflow) {
          // falls through to double
        }
      }
      double d = Double.parseDouble(lit);
      if (Double.isInfinite(d)) {
        throw new Json.JsonException("number out of range: "
            + (lit.length() > 40 ? lit.substring(0, 40) + "..." : lit), start);
      }
      return d;
    }

    private void skipDigits() {
      while (pos < s.length() && isDigit(s.charAt(pos))) {
        pos++;
      }
    }

    private static boolean isDigit(char c) {
      return c >= '0' && c <= '9';
    }
  }

  @Example
  void theReferencesAgreeOnValidNumbers() {
    for (String t : List.of("0", "-0", "1", "-9223372036854775808", "9223372036854775808",
        "0.1", "-0.0", "1e308", "4.9e-324", "2e-400", "123456789012345678901234567890")) {
      Object viaBigDecimal = classify(t);
      assertTrue(viaBigDecimal != null, t);
      assertEquals(viaBigDecimal, Legacy.parse(t), t);
    }
  }

  // ------------------------------------------------------------------ generators

  @Provide
  Arbitrary<String> numberTexts() {
    Arbitrary<String> sign = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(6, Arbitraries.just("")),
        net.jqwik.api.Tuple.of(4, Arbitraries.just("-")),
        net.jqwik.api.Tuple.of(1, Arbitraries.of("+", "--", " ")));
    Arbitrary<String> digits = Arbitraries.strings().withChars("0123456789").ofMinLength(1).ofMaxLength(22);
    Arbitrary<String> intPart = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(3, Arbitraries.of("0", "1", "9", "00", "01", "007", "")),
        net.jqwik.api.Tuple.of(6, Arbitraries.integers().between(1, 999_999).map(String::valueOf)),
        net.jqwik.api.Tuple.of(4, Arbitraries.longs().map(l -> String.valueOf(l).replace("-", ""))),
        net.jqwik.api.Tuple.of(4, digits),
        net.jqwik.api.Tuple.of(3, Arbitraries.of("2147483647", "2147483648", "4294967296",
            "9223372036854775807", "9223372036854775808", "9223372036854775806",
            "9223372036854775809", "18446744073709551615", "18446744073709551616",
            "99999999999999999", "999999999999999999", "1000000000000000000",
            "9999999999999999999", "99999999999999999999", "100000000000000000000")),
        net.jqwik.api.Tuple.of(1, Arbitraries.integers().between(395, 405).map(n -> "1" + "0".repeat(n - 1))));
    Arbitrary<String> frac = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(8, Arbitraries.just("")),
        net.jqwik.api.Tuple.of(1, Arbitraries.of(".", ".x", "..5")),
        net.jqwik.api.Tuple.of(3, digits.map(d -> "." + d)));
    Arbitrary<String> exp = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(8, Arbitraries.just("")),
        net.jqwik.api.Tuple.of(1, Arbitraries.of("e", "E", "e+", "e-", "E-", "ee1", "e+-1")),
        net.jqwik.api.Tuple.of(3, Combinators.combine(Arbitraries.of("e", "E"),
            Arbitraries.of("", "+", "-"), Arbitraries.integers().between(0, 400))
            .as((e, s, n) -> e + s + n)),
        net.jqwik.api.Tuple.of(1, Arbitraries.of("e308", "e309", "e-324", "e-325", "e00", "e0400")));
    Arbitrary<String> suffix = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(12, Arbitraries.just("")),
        net.jqwik.api.Tuple.of(1, Arbitraries.of(" ", "\n", "x", ",", "]", ".5", "0", "-", " 1")));
    Arbitrary<String> composed = Combinators.combine(sign, intPart, frac, exp, suffix)
        .as((a, b, c, d, e) -> a + b + c + d + e);
    Arbitrary<String> edges = Arbitraries.of("-9223372036854775808", "-9223372036854775809",
        "9223372036854775807", "9223372036854775808", "1e308", "1e309", "-1e309", "-0", "0.0",
        "-0.0", "01", "-01", "-", "1.", ".5", "1e", "1e+", "1E-", "-.5", "1.7976931348623157e308",
        "1.7976931348623158e308", "1.7976931348623159e308", "4.9e-324", "2e-324", "0e0", "-0e-0",
        "0.000000000000000000000000000001", "123456789012345678", "1234567890123456789",
        "-1234567890123456789", "12345678901234567890", "-12345678901234567890");
    return Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(8, composed), net.jqwik.api.Tuple.of(2, edges));
  }

  @Provide
  Arbitrary<String> shortDecimals() {
    Arbitrary<String> sign = Arbitraries.of("", "-");
    Arbitrary<String> zeros = Arbitraries.integers().between(0, 24).map("0"::repeat);
    Arbitrary<String> significant = Arbitraries.integers().between(1, 17)
        .flatMap(n -> Arbitraries.strings().withChars("0123456789").ofLength(n))
        .map(d -> (char) ('1' + Math.floorMod(d.hashCode(), 9)) + d.substring(1));
    Arbitrary<String> exp = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(3, Arbitraries.just("")),
        net.jqwik.api.Tuple.of(6, Combinators.combine(Arbitraries.of("e", "E"),
            Arbitraries.of("", "+", "-"), Arbitraries.integers().between(0, 26),
            Arbitraries.of("", "0", "00"))
            .as((e, s, n, z) -> e + s + z + n)));
    Arbitrary<String> mantissa = Combinators.combine(significant, zeros,
        Arbitraries.integers().between(0, 17), Arbitraries.integers().between(0, 3))
        .as((d, z, point, form) -> switch (form) {
          case 0 -> "0." + z + d; // 0.000ddd
          case 1 -> d + "." + z; // ddd.000 (an empty fraction is not a number: see below)
          case 2 -> d.substring(0, Math.min(point, d.length() - 1) + 1) + "."
              + d.substring(Math.min(point, d.length() - 1) + 1) + z; // dd.ddd000
          default -> d + z; // an integer with an exponent
        })
        .map(m -> m.endsWith(".") ? m + "0" : m);
    return Combinators.combine(sign, mantissa, exp)
        .as((s, m, e) -> s + m + e)
        .filter(t -> t.contains(".") || t.contains("e") || t.contains("E"));
  }

  @Example
  void shortDecimalsAtTheEdges() {
    for (String t : List.of("0.1", "0.5", "-0.5", "12.75", "1e22", "1e23", "1e-22", "1e-23",
        "123456789012345e-22", "1234567890123456e-22", "123456789012345.6", "9007199254740993.0",
        "0.000000000000000000001", "1.00000000000000000000", "-0.0", "0.0e5", "-0e-0",
        "999999999999999e22", "999999999999999e-22", "3e-7", "8.589973e9", "0.3", "2.2250738585072014e-308")) {
      Object expected = classify(t);
      assertEquals(expected, Json.parse(t), t);
      assertEquals(Double.doubleToRawLongBits(Double.parseDouble(t)),
          Double.doubleToRawLongBits((Double) Json.parse(t)), t);
    }
  }

  @Provide
  Arbitrary<String> arrayBodies() {
    Arbitrary<String> element = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(8, Arbitraries.integers().between(0, 152_063).map(String::valueOf)),
        net.jqwik.api.Tuple.of(2, Arbitraries.integers().map(String::valueOf)),
        net.jqwik.api.Tuple.of(2, Arbitraries.of("2147483647", "-2147483648", "2147483648",
            "-2147483649", "-0", "0", "9223372036854775807", "9223372036854775808")),
        net.jqwik.api.Tuple.of(3, numberTexts()),
        net.jqwik.api.Tuple.of(1, Arbitraries.of("\"a\"", "true", "null", "[1,2]", "[]", "{}",
            "[1,[2]]", "", "nul", "[1")));
    Arbitrary<String> separator = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(12, Arbitraries.just(",")),
        net.jqwik.api.Tuple.of(3, Arbitraries.of(", ", " ,", ",\n\t", "\r\n,\r\n")),
        net.jqwik.api.Tuple.of(1, Arbitraries.of("", " ", ",,", ";")));
    Arbitrary<String> end = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(8, Arbitraries.just("]")),
        net.jqwik.api.Tuple.of(2, Arbitraries.of(" ]", "\n]")),
        net.jqwik.api.Tuple.of(1, Arbitraries.of("", ",]", ",", " ", "]]", "] x", "}")));
    return Combinators.combine(element.list().ofMinSize(1).ofMaxSize(12),
        separator.list().ofSize(12), end)
        .as((els, seps, e) -> {
          StringBuilder b = new StringBuilder();
          for (int i = 0; i < els.size(); i++) {
            b.append(i == 0 ? "" : seps.get(i)).append(els.get(i));
          }
          return b.append(e).toString();
        });
  }

  @Provide
  Arbitrary<String> stringTexts() {
    Arbitrary<String> piece = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(10, Arbitraries.strings().withCharRange('a', 'z').ofMaxLength(12)),
        net.jqwik.api.Tuple.of(2, Arbitraries.of("\\n", "\\\"", "\\\\", "\\u0041", "\\ud83d\\ude00",
            "\\ud83d", "\\x", "\\u12", "\\", "\u0001", "\t", " ", "\u00e9", "\ud83d\ude00")),
        net.jqwik.api.Tuple.of(1, Arbitraries.integers().between(28, 40).map("k"::repeat)));
    return piece.list().ofMaxSize(4).map(l -> "\"" + String.join("", l))
        .flatMap(t -> Arbitraries.of(t + "\"", t + "\"", t + "\"", t));
  }

  @Provide
  Arbitrary<int[]> intArrays() {
    Arbitrary<Integer> id = Arbitraries.frequencyOf(
        net.jqwik.api.Tuple.of(6, Arbitraries.integers().between(0, 152_063)),
        net.jqwik.api.Tuple.of(2, Arbitraries.integers()),
        net.jqwik.api.Tuple.of(1, Arbitraries.of(Integer.MIN_VALUE, Integer.MAX_VALUE, -1, 0, 127, 128)));
    return id.list().ofMaxSize(200).map(l -> l.stream().mapToInt(Integer::intValue).toArray());
  }
}
