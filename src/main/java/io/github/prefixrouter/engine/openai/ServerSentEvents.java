package io.github.prefixrouter.engine.openai;

import io.github.prefixrouter.internal.wire.BodyBudget;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * An incremental parser of a server-sent event stream (the {@code text/event-stream} format of
 * the HTML standard), fed the body's bytes as they arrive in chunks of any size.
 *
 * <p>Lines end with CRLF, LF or CR (a CRLF split between two chunks is one line end). A line
 * starting with {@code :} is a comment; {@code field:value} sets a field (one space after the
 * colon is dropped; a line without a colon is a field with an empty value). {@code data} lines
 * append to the event's data, joined by LF; {@code event} sets its type; {@code id},
 * {@code retry} and unknown fields are ignored, but for {@code error}, which the standard does
 * not know: an {@code error} line appends to the data as a {@code data} line does, and makes the
 * event's type {@code error} (llama.cpp's server reported a failure once its stream had begun
 * with an {@code error: {...}} line, then {@code data: [DONE]}; ignored, the failure went
 * unseen). An empty line dispatches the event, if it has
 * data. An event not ended by an empty line when the stream ends is not dispatched. A UTF-8 byte
 * order mark opening the stream is skipped. A handler that has read the stream's last event calls
 * {@link #stop()}: the parser then reads no further, not even the rest of the bytes it was
 * being fed (they are left in the buffer).
 *
 * <p>Bounded: a line, and the data of one event, may hold at most {@code maxEventBytes} bytes;
 * the stream must be strict UTF-8. Breaches throw {@link MalformedStreamException}. The room a
 * larger line or event took is given up once it has been read: at most {@link #KEPT_CAPACITY}
 * is kept for the next. Not thread-safe: one stream, fed by one thread at a time.
 */
final class ServerSentEvents {

  /** Receives each dispatched event. */
  interface Handler {
    /**
     * One event.
     *
     * @param type its {@code event} field, or {@code "message"} when it had none
     * @param data its data lines joined by LF
     */
    void onEvent(String type, String data);
  }

  /** The stream breaks the format or its bounds. */
  static final class MalformedStreamException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    MalformedStreamException(String message) {
      super(message);
    }
  }

  /**
   * The most room a buffer keeps once the line or event that needed more has been read: a
   * stream's events are a few hundred bytes, but for the first (vLLM repeats the prompt's token
   * ids in it), and a stream lasts as long as its generation.
   */
  static final int KEPT_CAPACITY = 64 << 10;

  private final int maxEventBytes;
  private final Handler handler;
  private final CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
      .onMalformedInput(CodingErrorAction.REPORT)
      .onUnmappableCharacter(CodingErrorAction.REPORT);
  private byte[] line = new byte[256];
  private int lineLength;
  private boolean afterCr;
  private boolean started;
  private StringBuilder data = new StringBuilder();
  private long dataBytes;
  private boolean hasData;
  private String type;
  private boolean stopped;
  /** Where the heap of the buffers is taken from, before they grow; null: nowhere. */
  private final BodyBudget.Share share;
  /** The bytes of {@link #share} taken for {@link #line} and for {@link #data}. */
  private long lineTaken;
  private long dataTaken;

  /**
   * A parser.
   *
   * @param maxEventBytes the most bytes a line, and the data of one event, may hold
   * @param handler where the events go
   */
  ServerSentEvents(int maxEventBytes, Handler handler) {
    this(maxEventBytes, handler, null);
  }

  /**
   * A parser, as {@link #ServerSentEvents(int, Handler)}, whose buffers take their heap from
   * {@code share} before they grow: its line (a byte a byte), its text (two bytes a character)
   * and its event's data (two bytes a character of its room), the data again while its event
   * is handled; given back as they are dropped. A {@link BodyBudget.Refused} of the share is
   * thrown on from {@link #feed}.
   *
   * @param maxEventBytes the most bytes a line, and the data of one event, may hold
   * @param handler where the events go
   * @param share where the heap is taken from, or null for nowhere
   */
  ServerSentEvents(int maxEventBytes, Handler handler, BodyBudget.Share share) {
    if (maxEventBytes < 1) {
      throw new IllegalArgumentException("maxEventBytes must be positive, was " + maxEventBytes);
    }
    this.maxEventBytes = maxEventBytes;
    this.handler = handler;
    this.share = share;
  }

  /**
   * Parses the next bytes of the stream, dispatching the events they complete.
   *
   * @param bytes the bytes, consumed up to the end, or up to where the handler called
   *     {@link #stop()}
   * @throws MalformedStreamException if the stream breaks the format or its bounds
   */
  void feed(ByteBuffer bytes) {
    if (bytes.hasArray()) {
      byte[] a = bytes.array();
      int from = bytes.arrayOffset() + bytes.position();
      int to = bytes.arrayOffset() + bytes.limit();
      bytes.position(bytes.limit());
      int end = feed(a, from, to);
      bytes.position(end - bytes.arrayOffset());
    } else {
      int start = bytes.position();
      byte[] copy = new byte[bytes.remaining()];
      bytes.get(copy);
      int end = feed(copy, 0, copy.length);
      bytes.position(start + end);
    }
  }

  /**
   * Stops parsing: called by the handler from {@link Handler#onEvent} once the stream's last
   * event has come, the parser reads nothing after it.
   */
  void stop() {
    stopped = true;
  }

  /** Parses {@code a[from, to)}; returns where it stopped ({@code to} unless stopped). */
  private int feed(byte[] a, int from, int to) {
    int i = from;
    while (i < to && !stopped) {
      byte b = a[i];
      if (b == '\n') {
        if (afterCr) {
          afterCr = false; // the LF of a CRLF
        } else {
          endLine();
        }
        i++;
      } else if (b == '\r') {
        endLine();
        afterCr = true;
        i++;
      } else {
        afterCr = false;
        // the rest of the line in this buffer, copied at once
        int end = i;
        while (end < to && a[end] != '\n' && a[end] != '\r') {
          end++;
        }
        int n = end - i;
        if (lineLength + (long) n > maxEventBytes) {
          throw new MalformedStreamException("a line of the event stream is longer than "
              + maxEventBytes + " bytes");
        }
        if (lineLength + n > line.length) {
          int grown = (int) Math.min(maxEventBytes, Math.max(lineLength + n, 2L * line.length));
          take(grown);
          line = Arrays.copyOf(line, grown);
          give(lineTaken);
          lineTaken = grown;
        }
        System.arraycopy(a, i, line, lineLength, n);
        lineLength += n;
        i = end;
      }
    }
    return i;
  }

  /**
   * The room its buffers hold now, the line's (bytes) and the event data's (chars), whatever
   * they are filled with.
   *
   * @return the buffers' capacity
   */
  long capacity() {
    return line.length + (long) data.capacity();
  }

  /**
   * Parses the next bytes of the stream.
   *
   * @param bytes the bytes
   * @throws MalformedStreamException if the stream breaks the format or its bounds
   */
  void feed(byte[] bytes) {
    feed(bytes, 0, bytes.length);
  }

  private void take(long bytes) {
    if (share != null) {
      share.take(bytes);
    }
  }

  private void give(long bytes) {
    if (share != null) {
      share.give(bytes);
    }
  }

  private void endLine() {
    // the line's text and its value: two bytes a character each at most, until it is appended
    long strings = 4L * lineLength;
    take(strings);
    try {
      readLine();
    } finally {
      give(strings);
    }
  }

  private void readLine() {
    String s;
    if (ascii(line, lineLength)) {
      s = new String(line, 0, lineLength, StandardCharsets.ISO_8859_1);
    } else {
      try {
        s = utf8.reset().decode(ByteBuffer.wrap(line, 0, lineLength)).toString();
      } catch (CharacterCodingException e) {
        throw new MalformedStreamException("the event stream is not valid UTF-8");
      }
    }
    int bytes = lineLength;
    lineLength = 0;
    if (line.length > KEPT_CAPACITY) {
      line = new byte[256]; // a large line was read: its room is not kept for the stream's life
      give(lineTaken);
      lineTaken = 0;
    }
    if (!started) {
      started = true;
      if (s.startsWith("\uFEFF")) {
        s = s.substring(1);
      }
    }
    if (s.isEmpty()) {
      dispatch();
      return;
    }
    if (s.charAt(0) == ':') {
      return; // a comment
    }
    int colon = s.indexOf(':');
    String field = colon < 0 ? s : s.substring(0, colon);
    String value = "";
    if (colon >= 0) {
      int from = colon + 1;
      if (from < s.length() && s.charAt(from) == ' ') {
        from++;
      }
      value = s.substring(from);
    }
    switch (field) {
      case "data", "error" -> {
        if (field.equals("error")) {
          type = "error"; // llama.cpp's line for a failure once its stream has begun
        }
        dataBytes += bytes + 1L;
        if (dataBytes > maxEventBytes + 1L) {
          throw new MalformedStreamException("an event of the stream holds more than "
              + maxEventBytes + " bytes of data");
        }
        int needed = data.length() + value.length() + 1;
        if (needed > data.capacity()) {
          // no more than the data of one event may hold (its bytes are at least its characters)
          int grown = (int) Math.min(maxEventBytes + 1L,
              Math.max(needed, 2L * data.capacity() + 2));
          take(2L * grown);
          data = new StringBuilder(grown).append(data); // of that room exactly
          give(dataTaken);
          dataTaken = 2L * grown;
        }
        data.append(value).append('\n');
        hasData = true;
      }
      case "event" -> type = value;
      default -> {
        // id, retry and unknown fields: nothing to do
      }
    }
  }

  private static boolean ascii(byte[] a, int n) {
    for (int i = 0; i < n; i++) {
      if (a[i] < 0) {
        return false;
      }
    }
    return true;
  }

  private void dispatch() {
    if (!hasData) {
      type = null;
      return;
    }
    long copy = 2L * data.length(); // the data handed on, until the handler is done with it
    take(copy);
    try {
      String d = data.substring(0, data.length() - 1);
      String t = type == null || type.isEmpty() ? "message" : type;
      data.setLength(0);
      if (data.capacity() > KEPT_CAPACITY) {
        data = new StringBuilder();
        give(dataTaken);
        dataTaken = 0;
      }
      dataBytes = 0;
      hasData = false;
      type = null;
      handler.onEvent(t, d);
    } finally {
      give(copy);
    }
  }
}
