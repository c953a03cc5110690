package io.github.prefixrouter.internal.json;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.RandomAccess;

/**
 * A small, strict JSON (RFC 8259) reader and writer with hard limits, used by the
 * OpenAI-compatible engine adapter and the node's client endpoint, so the core needs no JSON
 * library.
 *
 * <p>Values map to Java as: object → unmodifiable {@link Map} (insertion order), array →
 * unmodifiable {@link List}, string → {@link String}, number → {@link Long} when it is an
 * integer that fits, else {@link Double} (a number outside the double range is rejected), true
 * / false → {@link Boolean}, null → {@link #NULL}.
 *
 * <p>Strict means: exactly one value with optional surrounding whitespace; no comments, no
 * trailing commas, no single quotes, no leading zeros, no control characters inside strings, no
 * lone surrogates (escaped, or in a text that is not Unicode), no duplicate keys, no NaN or
 * Infinity. Every violation and every exceeded limit throws {@link JsonException} with the
 * offset of the problem; no other exception escapes {@link #parse} for any input (but what a
 * {@link Memory} given to it throws).
 *
 * <p>Thread-safe; parsed maps and lists are unmodifiable. An array whose elements are all
 * integers in int range (token ids, the common case) is held as an {@code int} array behind its
 * list, which boxes an element only when it is read; {@link #asIntArray} copies it without
 * boxing. Object keys of up to 32 characters with no escape are kept in a small cache shared by
 * all parses, so the keys that every chunk of a stream and every request repeat are not
 * allocated again.
 */
public final class Json {

  /** The JSON {@code null} value (maps cannot hold Java null as a value here). */
  public static final Object NULL =
      new Object() {
        @Override
        public String toString() {
          return "null";
        }
      };

  /** Default cap on the input length, in characters. */
  public static final int DEFAULT_MAX_LENGTH = 16 << 20;

  /** Default cap on nesting depth of arrays and objects. */
  public static final int DEFAULT_MAX_DEPTH = 64;

  /**
   * The deepest nesting a parse may be asked to accept: nesting is read by recursion, and this
   * many levels are read on a thread with a stack of 256 KB (a JVM's threads have 1 MB by
   * default; 128 levels took 144 to 176 KB of stack, interpreted or compiled, where 256 took
   * all of 256 KB), so a text nested deeper than its caller's limit fails with a
   * {@link JsonException}, never a {@link StackOverflowError}. The deepest limit a caller in this
   * library passes is {@link #DEFAULT_MAX_DEPTH}.
   */
  public static final int MAX_DEPTH = 128;

  /** Cap on the number of digits in a number literal. */
  private static final int MAX_NUMBER_CHARS = 400;

  /** 10^0 to 10^22, every one exact as a double. */
  private static final double[] POWERS_OF_TEN = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22
  };

  private Json() {}

  /**
   * Parses {@code text} with the default limits.
   *
   * @param text the JSON text
   * @return the value, mapped to Java as the class comment says
   * @throws JsonException if the text is not exactly one strict JSON value within the limits
   */
  public static Object parse(String text) {
    return parse(text, DEFAULT_MAX_LENGTH, DEFAULT_MAX_DEPTH);
  }

  /**
   * Parses {@code text}.
   *
   * @param text the JSON text
   * @param maxLength longest input accepted, in characters
   * @param maxDepth deepest nesting of arrays and objects accepted (1 allows {@code [1]}), at
   *     most {@link #MAX_DEPTH}
   * @return the value, as for {@link #parse(String)}
   * @throws JsonException if the text is not exactly one strict JSON value within the limits
   * @throws IllegalArgumentException if a limit is out of range
   */
  public static Object parse(String text, int maxLength, int maxDepth) {
    return parse(text, maxLength, maxDepth, Long.MAX_VALUE);
  }

  /**
   * Parses {@code text}, refusing a value that would take more than {@code maxParsedBytes} of
   * heap once parsed. Parsed JSON can take far more memory than its text: a text of tiny values
   * ({@code [{},{},...]}: an object per three characters) takes about 30 bytes per character,
   * where text, token ids and the objects of ordinary requests take a few. The estimate charges
   * every value as it is read (an object 128 bytes and 48 per member, its keys as strings; an
   * array 64 bytes and 12 per element, integers in int range included; a string 48 bytes and 2
   * per character; a number 20 bytes), at or above what the JVM holds for it with compressed
   * references, so the limit bounds what the parse allocates for its result.
   *
   * @param text the JSON text
   * @param maxLength longest input accepted, in characters
   * @param maxDepth deepest nesting of arrays and objects accepted (1 allows {@code [1]}), at
   *     most {@link #MAX_DEPTH}
   * @param maxParsedBytes the most heap the parsed value may take, as estimated above
   * @return the value, as for {@link #parse(String)}
   * @throws JsonException if the text is not exactly one strict JSON value within the limits:
   *     a {@link ParsedSizeException} if the value would take more than {@code maxParsedBytes}
   * @throws IllegalArgumentException if a limit is out of range
   */
  public static Object parse(String text, int maxLength, int maxDepth, long maxParsedBytes) {
    return parse(text, maxLength, maxDepth, maxParsedBytes, null);
  }

  /**
   * Heap that a parse takes as it goes from a pool shared with other work, such as a budget of
   * the memory that the requests being read at once may hold.
   */
  @FunctionalInterface
  public interface Memory {
    /**
     * Takes {@code bytes} more of heap for the parse, which then charges them value by value.
     * May block until the pool has them; throws to end the parse.
     *
     * @param bytes the bytes asked for, at least 1
     * @throws RuntimeException when the pool cannot give them: the parse ends, and the
     *     exception escapes {@link #parse(String, int, int, long, Memory)} unchanged
     */
    void take(long bytes);
  }

  /** The least a parse takes from its {@link Memory} at a time. */
  static final long MEMORY_STEP = 64 << 10;

  /**
   * Parses {@code text} as {@link #parse(String, int, int, long)} does, taking the heap its
   * estimate charges from {@code memory} as it goes: in steps of at least
   * {@value #MEMORY_STEP} bytes that double with what it has taken, so it asks a few times and
   * takes at most the larger of {@value #MEMORY_STEP} bytes and twice what it charges, and never
   * more than {@code maxParsedBytes}. What was taken stays taken; the caller gives it back to its
   * pool, whether the parse returned or threw.
   *
   * @param text the JSON text
   * @param maxLength longest input accepted, in characters
   * @param maxDepth deepest nesting of arrays and objects accepted (1 allows {@code [1]}), at
   *     most {@link #MAX_DEPTH}
   * @param maxParsedBytes the most heap the parsed value may take, as estimated
   * @param memory where the parse takes its heap from; null: nowhere, the parse may take up to
   *     {@code maxParsedBytes} without asking
   * @return the value, as for {@link #parse(String)}
   * @throws JsonException if the text is not exactly one strict JSON value within the limits;
   *     or what {@code memory} throws
   * @throws IllegalArgumentException if a limit is out of range: {@code maxLength} or
   *     {@code maxParsedBytes} below 1, {@code maxDepth} below 0 or above {@link #MAX_DEPTH}
   */
  public static Object parse(String text, int maxLength, int maxDepth, long maxParsedBytes,
      Memory memory) {
    Objects.requireNonNull(text, "text");
    if (maxLength < 1 || maxDepth < 0 || maxParsedBytes < 1) {
      throw new IllegalArgumentException(
          "maxLength must be >= 1, maxDepth >= 0 and maxParsedBytes >= 1");
    }
    if (maxDepth > MAX_DEPTH) {
      // deeper nesting would be read on as deep a stack, and overflow it
      throw new IllegalArgumentException("maxDepth must be <= " + MAX_DEPTH + ", was " + maxDepth);
    }
    if (text.length() > maxLength) {
      throw new JsonException(
          "input has " + text.length() + " characters, limit " + maxLength, 0);
    }
    Reader r = new Reader(text, maxDepth, maxParsedBytes, memory);
    r.skipWhitespace();
    Object v = r.readValue(0);
    r.skipWhitespace();
    if (r.pos != text.length()) {
      throw r.error("unexpected content after the JSON value");
    }
    return v;
  }

  /**
   * Writes {@code value} as compact JSON. Accepts {@link Map} with {@link String} keys,
   * {@link Iterable}, {@code int[]}, {@code long[]}, {@link CharSequence}, {@link Number}
   * (finite), {@link Boolean}, {@link #NULL} and Java {@code null}. A {@link Double} or
   * {@link Float} is written as a double, a {@link BigDecimal} or {@link BigInteger} with all its
   * digits (only one that {@link #parse} reads back: within the double range and of at most 400
   * characters), any other {@code Number} as its {@code longValue()}.
   *
   * @param value a value of the types {@link #parse(String)} returns, or any {@code Number},
   *     {@code Map} with string keys, {@code Iterable}, {@code int[]} or {@code long[]}
   * @return the compact JSON text
   * @throws IllegalArgumentException for a non-finite number (or a {@code BigDecimal} or
   *     {@code BigInteger} beyond the double range or of more than 400 characters), a
   *     non-string key, a string with a lone surrogate, an unsupported type or arrays and
   *     objects nested deeper than
   *     {@link #DEFAULT_MAX_DEPTH} (more than {@link #parse(String)} accepts)
   */
  public static String write(Object value) {
    StringBuilder sb = new StringBuilder();
    write(sb, value, 0);
    return sb.toString();
  }

  /**
   * {@code text}, the literal of {@code n}, if {@link #parse} reads it back; else an
   * {@link IllegalArgumentException}, as for a non-finite double.
   */
  private static String readable(String text, Number n) {
    if (text.length() > MAX_NUMBER_CHARS || Double.isInfinite(n.doubleValue())) {
      throw new IllegalArgumentException("JSON cannot represent " + shorten(text)
          + ": parse reads numbers of at most " + MAX_NUMBER_CHARS
          + " characters within the double range");
    }
    return text;
  }

  /**
   * Writes {@code v}, which lies inside {@code depth} arrays and objects: an array or object
   * there is nested {@code depth + 1} deep, as {@link #parse} counts it.
   */
  private static void write(StringBuilder sb, Object v, int depth) {
    if (depth >= DEFAULT_MAX_DEPTH && isContainer(v)) {
      throw new IllegalArgumentException("value nests deeper than " + DEFAULT_MAX_DEPTH);
    }
    if (v == null || v == NULL) {
      sb.append("null");
    } else if (v instanceof CharSequence s) {
      writeString(sb, s);
    } else if (v instanceof Boolean b) {
      sb.append(b.booleanValue());
    } else if (v instanceof Double || v instanceof Float) {
      double d = ((Number) v).doubleValue();
      if (!Double.isFinite(d)) {
        throw new IllegalArgumentException("JSON cannot represent " + d);
      }
      sb.append(d); // Double.toString of a finite value is a valid JSON number
    } else if (v instanceof BigDecimal bd) {
      sb.append(readable(bd.toString(), bd));
    } else if (v instanceof BigInteger bi) {
      sb.append(readable(bi.toString(), bi)); // all its digits: its longValue is its low 64 bits
    } else if (v instanceof Number n) {
      sb.append(n.longValue());
    } else if (v instanceof IntList l) {
      write(sb, l.toIntArray(), depth);
    } else if (v instanceof int[] a) {
      sb.append('[');
      for (int i = 0; i < a.length; i++) {
        if (i > 0) {
          sb.append(',');
        }
        sb.append(a[i]);
      }
      sb.append(']');
    } else if (v instanceof long[] a) {
      sb.append('[');
      for (int i = 0; i < a.length; i++) {
        if (i > 0) {
          sb.append(',');
        }
        sb.append(a[i]);
      }
      sb.append(']');
    } else if (v instanceof Map<?, ?> m) {
      sb.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!(e.getKey() instanceof String k)) {
          throw new IllegalArgumentException("JSON object keys must be strings, got " + e.getKey());
        }
        if (!first) {
          sb.append(',');
        }
        first = false;
        writeString(sb, k);
        sb.append(':');
        write(sb, e.getValue(), depth + 1);
      }
      sb.append('}');
    } else if (v instanceof Iterable<?> it) {
      sb.append('[');
      boolean first = true;
      for (Object o : it) {
        if (!first) {
          sb.append(',');
        }
        first = false;
        write(sb, o, depth + 1);
      }
      sb.append(']');
    } else {
      throw new IllegalArgumentException("cannot write " + v.getClass().getName() + " as JSON");
    }
  }

  /** Whether {@link #write} writes {@code v} as an array or an object. */
  private static boolean isContainer(Object v) {
    return v instanceof Map || v instanceof Iterable<?> && !(v instanceof CharSequence)
        || v instanceof int[] || v instanceof long[];
  }

  private static void writeString(StringBuilder sb, CharSequence s) {
    sb.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        case '\r' -> sb.append("\\r");
        case '\t' -> sb.append("\\t");
        case '\b' -> sb.append("\\b");
        case '\f' -> sb.append("\\f");
        default -> {
          if (Character.isSurrogate(c) && !validSurrogateAt(s, i)) {
            throw new IllegalArgumentException("string has a lone surrogate at index " + i);
          } else if (c < 0x20) {
            sb.append(String.format("\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    sb.append('"');
  }

  private static boolean validSurrogateAt(CharSequence s, int i) {
    char c = s.charAt(i);
    if (Character.isHighSurrogate(c)) {
      return i + 1 < s.length() && Character.isLowSurrogate(s.charAt(i + 1));
    }
    return i > 0 && Character.isHighSurrogate(s.charAt(i - 1));
  }

  // ---------------------------------------------------------------- typed accessors

  /**
   * The member {@code key} of {@code object}, or null if absent; throws if not an object.
   *
   * @param object a parsed JSON object
   * @param key the member's name
   * @return the member's value, or null if absent
   */
  public static Object member(Object object, String key) {
    if (!(object instanceof Map<?, ?> m)) {
      throw new JsonException("expected an object holding \"" + key + "\"", -1);
    }
    return m.get(key);
  }

  /**
   * Follows a path of object keys; null if any step is absent or JSON null.
   *
   * @param root a parsed JSON value
   * @param keys the object keys to follow, outermost first
   * @return the value at the end of the path, or null
   */
  public static Object path(Object root, String... keys) {
    Object cur = root;
    for (String k : keys) {
      if (!(cur instanceof Map<?, ?> m)) {
        return null;
      }
      cur = m.get(k);
      if (cur == null || cur == NULL) {
        return null;
      }
    }
    return cur;
  }

  /**
   * {@code value} as an int, or a {@link JsonException} naming {@code what}.
   *
   * @param value a parsed value
   * @param what the value's name, for the exception's message
   * @return the value as an int
   */
  public static int asInt(Object value, String what) {
    if (value instanceof Long l && l >= Integer.MIN_VALUE && l <= Integer.MAX_VALUE) {
      return l.intValue();
    }
    throw new JsonException(what + " must be an integer in int range, was " + describe(value), -1);
  }

  /**
   * {@code value} as a string, or a {@link JsonException} naming {@code what}.
   *
   * @param value a parsed value
   * @param what the value's name, for the exception's message
   * @return the value as a string
   */
  public static String asString(Object value, String what) {
    if (value instanceof String s) {
      return s;
    }
    throw new JsonException(what + " must be a string, was " + describe(value), -1);
  }

  /**
   * {@code value} as a list, or a {@link JsonException} naming {@code what}.
   *
   * @param value a parsed value
   * @param what the value's name, for the exception's message
   * @return the value as a list
   */
  public static List<?> asList(Object value, String what) {
    if (value instanceof List<?> l) {
      return l;
    }
    throw new JsonException(what + " must be an array, was " + describe(value), -1);
  }

  /**
   * {@code value} as a double, or a {@link JsonException} naming {@code what}.
   *
   * @param value a parsed value
   * @param what the value's name, for the exception's message
   * @return the value as a double
   */
  public static double asDouble(Object value, String what) {
    if (value instanceof Long l) {
      return l;
    }
    if (value instanceof Double d) {
      return d;
    }
    throw new JsonException(what + " must be a number, was " + describe(value), -1);
  }

  /**
   * {@code value} as an array of ints, or a {@link JsonException} naming {@code what}.
   *
   * @param value a parsed value
   * @param what the value's name, for the exception's message
   * @return the value as a new int array
   */
  public static int[] asIntArray(Object value, String what) {
    if (value instanceof IntList l) {
      return l.toIntArray();
    }
    List<?> l = asList(value, what);
    int[] out = new int[l.size()];
    for (int i = 0; i < out.length; i++) {
      Object e = l.get(i);
      if (e instanceof Long x && x >= Integer.MIN_VALUE && x <= Integer.MAX_VALUE) {
        out[i] = x.intValue();
      } else {
        out[i] = asInt(e, what + "[" + i + "]"); // throws, naming the element
      }
    }
    return out;
  }

  private static String describe(Object v) {
    if (v == null) {
      return "absent";
    }
    if (v instanceof Map) {
      return "an object";
    }
    if (v instanceof List) {
      return "an array";
    }
    if (v instanceof String) {
      return "a string";
    }
    String s = String.valueOf(v);
    return s.length() > 40 ? s.substring(0, 40) + "..." : s;
  }

  // ---------------------------------------------------------------- reader

  /** The longest object key kept in {@link #KEYS}. */
  private static final int MAX_KEPT_KEY = 32;

  /**
   * Object keys read lately, by hash: shared by all parses without a lock, since a string is
   * immutable and safely published (a race only costs a miss).
   */
  private static final String[] KEYS = new String[512];

  private static final class Reader {
    /** {@link #smallInt}'s answer when there is no small integer at the position. */
    static final long NOT_SMALL = Long.MIN_VALUE;

    /** Estimated bytes of heap per parsed value, {@link #charge}d (see the 4-argument parse). */
    static final int OBJECT_BYTES = 128;
    static final int MEMBER_BYTES = 48;
    static final int ARRAY_BYTES = 64;
    static final int ELEMENT_BYTES = 12;
    static final int STRING_BYTES = 48;
    static final int NUMBER_BYTES = 20;

    final String s;
    final int maxDepth;
    final long maxParsedBytes;
    /** Where the parse takes its heap from; null: it has {@link #maxParsedBytes} at the start. */
    final Memory memory;
    /** What the parsed value takes so far, in estimated bytes. */
    long charged;
    /** What it may take before asking {@link #memory} for more. */
    long taken;
    int pos;
    /** The last number read, when it was an integer that fits a long. */
    long number;
    /** The last number read, when it was not. */
    double fraction;

    Reader(String s, int maxDepth, long maxParsedBytes, Memory memory) {
      this.s = s;
      this.maxDepth = maxDepth;
      this.maxParsedBytes = maxParsedBytes;
      this.memory = memory;
      this.taken = memory == null ? maxParsedBytes : 0;
    }

    /**
     * Counts {@code bytes} more of the parsed value against {@link #maxParsedBytes}, taking more
     * from {@link #memory} when what was taken runs out.
     */
    void charge(long bytes) {
      charged += bytes;
      if (charged > maxParsedBytes) {
        throw new ParsedSizeException(maxParsedBytes, pos);
      }
      if (charged > taken) {
        long more = Math.min(maxParsedBytes - taken,
            Math.max(charged - taken, Math.max(MEMORY_STEP, taken)));
        memory.take(more);
        taken += more;
      }
    }

    /** {@link #charge}s a string of {@code length} characters. */
    void chargeString(int length) {
      charge(STRING_BYTES + 2L * length);
    }

    JsonException error(String message) {
      return new JsonException(message, pos);
    }

    void skipWhitespace() {
      while (pos < s.length()) {
        char c = s.charAt(pos);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
          pos++;
        } else {
          break;
        }
      }
    }

    Object readValue(int depth) {
      if (pos >= s.length()) {
        throw error("unexpected end of input, expected a value");
      }
      char c = s.charAt(pos);
      switch (c) {
        case '{':
          return readObject(depth + 1);
        case '[':
          return readArray(depth + 1);
        case '"': {
          String str = readString();
          chargeString(str.length());
          return str;
        }
        case 't':
          expectLiteral("true");
          return Boolean.TRUE;
        case 'f':
          expectLiteral("false");
          return Boolean.FALSE;
        case 'n':
          expectLiteral("null");
          return NULL;
        default:
          if (c == '-' || (c >= '0' && c <= '9')) {
            charge(NUMBER_BYTES);
            return readNumber() ? (Object) Long.valueOf(number) : (Object) Double.valueOf(fraction);
          }
          throw error("unexpected character '" + printable(c) + "', expected a value");
      }
    }

    void expectLiteral(String lit) {
      if (!s.startsWith(lit, pos)) {
        throw error("invalid literal, expected " + lit);
      }
      pos += lit.length();
    }

    Map<String, Object> readObject(int depth) {
      if (depth > maxDepth) {
        throw error("nesting deeper than " + maxDepth);
      }
      charge(OBJECT_BYTES);
      pos++; // '{'
      LinkedHashMap<String, Object> m = new LinkedHashMap<>();
      skipWhitespace();
      if (pos < s.length() && s.charAt(pos) == '}') {
        pos++;
        return Collections.unmodifiableMap(m);
      }
      while (true) {
        skipWhitespace();
        if (pos >= s.length() || s.charAt(pos) != '"') {
          throw error("expected a string key");
        }
        int keyPos = pos;
        String key = readKey();
        charge(MEMBER_BYTES);
        chargeString(key.length());
        skipWhitespace();
        if (pos >= s.length() || s.charAt(pos) != ':') {
          throw error("expected ':' after key");
        }
        pos++;
        skipWhitespace();
        Object v = readValue(depth);
        if (m.putIfAbsent(key, v) != null) {
          throw new JsonException("duplicate key \"" + shorten(key) + "\"", keyPos);
        }
        if (closes('}', "an object")) {
          return Collections.unmodifiableMap(m);
        }
      }
    }

    List<Object> readArray(int depth) {
      if (depth > maxDepth) {
        throw error("nesting deeper than " + maxDepth);
      }
      charge(ARRAY_BYTES);
      pos++; // '['
      skipWhitespace();
      if (pos < s.length() && s.charAt(pos) == ']') {
        pos++;
        return Collections.unmodifiableList(new ArrayList<>());
      }
      // while every element is an integer in int range, they go to an int array, unboxed
      int[] ints = new int[8];
      int n = 0;
      Object other;
      while (true) {
        skipWhitespace();
        long small = smallInt();
        if (small != NOT_SMALL) {
          charge(ELEMENT_BYTES);
          if (n == ints.length) {
            ints = Arrays.copyOf(ints, 2 * n);
          }
          ints[n++] = (int) small;
          if (closes(']', "an array")) {
            return new IntList(ints, n);
          }
          continue;
        }
        char c = pos < s.length() ? s.charAt(pos) : ' ';
        if (c == '-' || (c >= '0' && c <= '9')) {
          if (!readNumber()) {
            charge(NUMBER_BYTES);
            other = fraction;
            break;
          }
          if ((int) number != number) {
            charge(NUMBER_BYTES);
            other = number;
            break;
          }
          charge(ELEMENT_BYTES);
          if (n == ints.length) {
            ints = Arrays.copyOf(ints, 2 * n);
          }
          ints[n++] = (int) number;
          if (closes(']', "an array")) {
            return new IntList(ints, n);
          }
        } else {
          other = readValue(depth);
          break;
        }
      }
      // an element of another kind: the elements so far, boxed, and the rest as they come
      charge((long) n * NUMBER_BYTES + ELEMENT_BYTES); // the ints so far boxed, and the new one
      ArrayList<Object> l = new ArrayList<>(Math.max(10, n + 1));
      for (int i = 0; i < n; i++) {
        l.add(Long.valueOf(ints[i]));
      }
      l.add(other);
      return readElements(l, depth);
    }

    /** The rest of an array after its elements {@code l}, at the ',' or ']' that follows. */
    private List<Object> readElements(ArrayList<Object> l, int depth) {
      while (!closes(']', "an array")) {
        skipWhitespace();
        charge(ELEMENT_BYTES);
        l.add(readValue(depth));
      }
      return Collections.unmodifiableList(l);
    }

    /**
     * After a member of an object or an element of an array: consumes {@code close} (true) or
     * a comma (false); anything else, or the end of the input, is an error naming {@code what}.
     */
    private boolean closes(char close, String what) {
      skipWhitespace();
      if (pos >= s.length()) {
        throw error("unexpected end of input inside " + what);
      }
      char c = s.charAt(pos++);
      if (c == close) {
        return true;
      }
      if (c != ',') {
        pos--;
        throw error("expected ',' or '" + close + "' in " + what);
      }
      return false;
    }

    /**
     * An object's key, as {@link #readString} reads it; a key of up to {@link #MAX_KEPT_KEY}
     * characters with no escape is taken from {@link #KEYS} when it is there (the same keys come
     * in every chunk of a stream and every request), else kept there: no string to allocate and
     * its hash already computed for the map.
     */
    String readKey() {
      final String s = this.s;
      final int start = pos + 1;
      final int end = Math.min(s.length(), start + MAX_KEPT_KEY + 1);
      int h = 0;
      for (int p = start; p < end; p++) {
        char c = s.charAt(p);
        if (c == '"') {
          int n = p - start;
          int slot = (h ^ (h >>> 16)) & (KEYS.length - 1);
          String k = KEYS[slot];
          if (k == null || k.length() != n || !s.regionMatches(start, k, 0, n)) {
            k = s.substring(start, p);
            KEYS[slot] = k;
          }
          pos = p + 1;
          return k;
        }
        if (c == '\\' || c < 0x20 || Character.isSurrogate(c)) {
          break;
        }
        h = 31 * h + c;
      }
      return readString(); // escapes, a long key, or an error: the general way
    }

    String readString() {
      pos++; // opening quote
      StringBuilder sb = null;
      int start = pos;
      while (true) {
        if (pos >= s.length()) {
          throw error("unterminated string");
        }
        char c = s.charAt(pos);
        if (c == '"') {
          String out = sb == null ? s.substring(start, pos) : sb.append(s, start, pos).toString();
          pos++;
          return out;
        }
        if (c < 0x20) {
          throw error("unescaped control character in a string");
        }
        if (c == '\\') {
          if (sb == null) {
            sb = new StringBuilder();
          }
          sb.append(s, start, pos);
          pos++;
          if (pos >= s.length()) {
            throw error("unterminated escape");
          }
          char e = s.charAt(pos++);
          switch (e) {
            case '"' -> sb.append('"');
            case '\\' -> sb.append('\\');
            case '/' -> sb.append('/');
            case 'b' -> sb.append('\b');
            case 'f' -> sb.append('\f');
            case 'n' -> sb.append('\n');
            case 'r' -> sb.append('\r');
            case 't' -> sb.append('\t');
            case 'u' -> readUnicodeEscape(sb);
            default -> {
              pos--;
              throw error("invalid escape '\\" + printable(e) + "'");
            }
          }
          start = pos;
        } else if (Character.isSurrogate(c)) {
          // a text that is not Unicode (a String made from chars, not decoded from UTF-8,
          // which never yields one) could not be written back
          if (!Character.isHighSurrogate(c) || pos + 1 >= s.length()
              || !Character.isLowSurrogate(s.charAt(pos + 1))) {
            throw error("lone surrogate in a string");
          }
          pos += 2;
        } else {
          pos++;
        }
      }
    }

    void readUnicodeEscape(StringBuilder sb) {
      char c = (char) readHex4();
      if (Character.isHighSurrogate(c)) {
        if (!s.startsWith("\\u", pos)) {
          throw error("high surrogate escape not followed by a low surrogate escape");
        }
        pos += 2;
        char low = (char) readHex4();
        if (!Character.isLowSurrogate(low)) {
          throw error("high surrogate escape not followed by a low surrogate escape");
        }
        sb.append(c).append(low);
      } else if (Character.isLowSurrogate(c)) {
        throw error("lone low surrogate escape");
      } else {
        sb.append(c);
      }
    }

    int readHex4() {
      if (pos + 4 > s.length()) {
        throw error("truncated \\u escape");
      }
      int v = 0;
      for (int i = 0; i < 4; i++) {
        int d = Character.digit(s.charAt(pos), 16);
        if (d < 0 || s.charAt(pos) > 'f') {
          throw error("invalid hex digit in \\u escape");
        }
        v = v * 16 + d;
        pos++;
      }
      return v;
    }

    /**
     * The integer of 1 to 9 digits at {@code pos} (the common token id), {@code pos} then after
     * it; or {@link #NOT_SMALL}, {@code pos} unchanged, for anything else (a longer number, a
     * fraction, an exponent, a leading zero, no number at all), which {@link #readNumber} or
     * {@link #readValue} then reads or rejects.
     */
    long smallInt() {
      final String s = this.s;
      final int len = s.length();
      int p = pos;
      if (p >= len) {
        return NOT_SMALL;
      }
      char c = s.charAt(p);
      final boolean negative = c == '-';
      if (negative) {
        if (++p >= len) {
          return NOT_SMALL;
        }
        c = s.charAt(p);
      }
      int d = c - '0';
      if (d < 0 || d > 9) {
        return NOT_SMALL;
      }
      int v = d;
      p++;
      if (d != 0) {
        final int end = Math.min(len, p + 8);
        while (p < end && (d = s.charAt(p) - '0') >= 0 && d <= 9) {
          v = 10 * v + d;
          p++;
        }
      }
      if (p < len && ((c = s.charAt(p)) == '.' || c == 'e' || c == 'E' || (c >= '0' && c <= '9'))) {
        return NOT_SMALL;
      }
      pos = p;
      return negative ? -v : v;
    }

    /**
     * Reads the number at {@code pos}: true if it is an integer that fits a long, left in
     * {@link #number}; false if not, its double left in {@link #fraction}. The integer part's
     * digits go straight into a long; a fraction, an exponent, or 19 digits or more take the
     * literal's text through {@link Long#parseLong} and {@link Double#parseDouble}.
     */
    boolean readNumber() {
      final String s = this.s;
      final int len = s.length();
      final int start = pos;
      int p = start;
      boolean negative = s.charAt(p) == '-';
      if (negative) {
        p++;
        if (p >= len) {
          pos = p;
          throw error("truncated number");
        }
      }
      final int digits = p;
      char c = s.charAt(p);
      long v;
      if (c == '0') {
        p++;
        if (p < len && isDigit(s.charAt(p))) {
          pos = p;
          throw error("leading zero in a number");
        }
        v = 0;
      } else if (c >= '1' && c <= '9') {
        v = c - '0';
        p++;
        // past 18 digits v may wrap: it is then not used
        while (p < len && (c = s.charAt(p)) >= '0' && c <= '9') {
          v = 10 * v + (c - '0');
          p++;
        }
      } else {
        pos = p;
        throw error("expected a digit");
      }
      pos = p;
      if (p < len && ((c = s.charAt(p)) == '.' || c == 'e' || c == 'E')) {
        return readFractionAndExponent(start, p - digits <= 15 ? v : -1);
      }
      if (p - digits <= 18) {
        number = negative ? -v : v;
        return true;
      }
      return literal(start, true);
    }

    /**
     * The rest of a number at {@code pos}, a fraction and/or an exponent, and its value.
     * {@code integer} is the value of the integer part's digits, or -1 if it has more than 15.
     *
     * <p>A decimal of at most 15 significant digits whose power of ten is within 10^±22 (as
     * {@code 0.5}, {@code 12.75} or {@code 3e-7}) is computed as one multiplication or division
     * of two doubles that are both exact, the digits (below 2^53) and the power of ten (exact up
     * to 10^22), so IEEE rounding of that one operation gives the correctly rounded value, the
     * same bits as {@link Double#parseDouble} (Clinger's fast path); others go through the
     * literal's text.
     */
    private boolean readFractionAndExponent(int start, long integer) {
      final String s = this.s;
      final int len = s.length();
      long m = integer;
      int digits = m < 0 ? 16 : significantDigits(m);
      int scale = 0;
      int p = pos;
      if (p < len && s.charAt(p) == '.') {
        p++;
        if (p >= len || !isDigit(s.charAt(p))) {
          pos = p;
          throw error("expected a digit after the decimal point");
        }
        char c;
        while (p < len && (c = s.charAt(p)) >= '0' && c <= '9') {
          if (digits < 16) {
            m = 10 * m + (c - '0');
            if (m != 0) {
              digits++;
            }
            scale--;
          }
          p++;
        }
      }
      boolean exact = digits <= 15;
      if (p < len && (s.charAt(p) == 'e' || s.charAt(p) == 'E')) {
        p++;
        boolean negativeExponent = false;
        if (p < len && (s.charAt(p) == '+' || s.charAt(p) == '-')) {
          negativeExponent = s.charAt(p) == '-';
          p++;
        }
        if (p >= len || !isDigit(s.charAt(p))) {
          pos = p;
          throw error("expected a digit in the exponent");
        }
        int e = 0;
        char c;
        while (p < len && (c = s.charAt(p)) >= '0' && c <= '9') {
          if (e < 1000) {
            e = 10 * e + (c - '0');
          }
          p++;
        }
        scale += negativeExponent ? -e : e;
      }
      pos = p;
      if (exact && scale >= -22 && scale <= 22 && p - start <= MAX_NUMBER_CHARS) {
        double d = m;
        d = scale < 0 ? d / POWERS_OF_TEN[-scale] : d * POWERS_OF_TEN[scale];
        fraction = s.charAt(start) == '-' ? -d : d;
        return false;
      }
      return literal(start, false);
    }

    /** How many significant digits {@code v} (0 to 10^15) has: none for 0. */
    private static int significantDigits(long v) {
      int n = 0;
      while (v != 0) {
        v /= 10;
        n++;
      }
      return n;
    }

    /** The value of the number literal from {@code start} to {@code pos}, from its text. */
    private boolean literal(int start, boolean integral) {
      if (pos - start > MAX_NUMBER_CHARS) {
        throw new JsonException("number longer than " + MAX_NUMBER_CHARS + " characters", start);
      }
      String lit = s.substring(start, pos);
      if (integral && fitsInLong(lit)) {
        number = Long.parseLong(lit);
        return true;
      }
      double d = Double.parseDouble(lit);
      if (Double.isInfinite(d)) {
        throw new JsonException("number out of range: " + shorten(lit), start);
      }
      fraction = d;
      return false;
    }

    /**
     * Whether the integer literal {@code lit} (JSON: an optional minus, no leading zero) is a
     * {@code long}, decided without the exception {@code parseLong} would throw: a body of
     * 20-digit numbers must not cost an exception per number.
     */
    static boolean fitsInLong(String lit) {
      boolean negative = lit.charAt(0) == '-';
      int digits = lit.length() - (negative ? 1 : 0);
      if (digits != 19) {
        return digits < 19;
      }
      String limit = negative ? "9223372036854775808" : "9223372036854775807";
      return lit.substring(negative ? 1 : 0).compareTo(limit) <= 0;
    }

    static boolean isDigit(char c) {
      return c >= '0' && c <= '9';
    }
  }

  private static String printable(char c) {
    return c >= 0x20 && c < 0x7f ? String.valueOf(c) : String.format("\\u%04x", (int) c);
  }

  private static String shorten(String s) {
    return s.length() > 40 ? s.substring(0, 40) + "..." : s;
  }

  /**
   * A parsed array of integers in int range: an unmodifiable list of {@link Long}, as every
   * parsed array of integers is, held as ints and boxed when read.
   */
  private static final class IntList extends AbstractList<Object> implements RandomAccess {
    private final int[] values;
    private final int size;

    IntList(int[] values, int size) {
      this.values = values;
      this.size = size;
    }

    @Override
    public Object get(int index) {
      return Long.valueOf(values[Objects.checkIndex(index, size)]);
    }

    @Override
    public int size() {
      return size;
    }

    int[] toIntArray() {
      return Arrays.copyOf(values, size);
    }
  }

  /** The input is not strict JSON, exceeds a limit, or does not have the expected shape. */
  public static class JsonException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    /** Character offset of the problem, or -1. */
    private final int offset;

    /**
     * Creates the exception.
     *
     * @param message what is wrong
     * @param offset character offset of the problem in the input, or -1 for shape errors
     */
    public JsonException(String message, int offset) {
      super(offset >= 0 ? message + " at offset " + offset : message);
      this.offset = offset;
    }

    /**
     * Character offset of the problem, or -1 when it concerns a value's shape.
     *
     * @return the character offset, or -1
     */
    public int offset() {
      return offset;
    }
  }

  /**
   * The value would take more heap once parsed than the parse's {@code maxParsedBytes} (as
   * {@link #parse(String, int, int, long)} estimates it): the text may well be strict JSON, of
   * values too small for their number.
   */
  public static final class ParsedSizeException extends JsonException {
    private static final long serialVersionUID = 1L;
    private final long maxParsedBytes;

    ParsedSizeException(long maxParsedBytes, int offset) {
      super("the value would take more than " + maxParsedBytes
          + " bytes of memory once parsed (estimated)", offset);
      this.maxParsedBytes = maxParsedBytes;
    }

    /**
     * The limit the value passed.
     *
     * @return the parse's {@code maxParsedBytes}
     */
    public long maxParsedBytes() {
      return maxParsedBytes;
    }
  }
}
