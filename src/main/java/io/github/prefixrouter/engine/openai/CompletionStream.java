package io.github.prefixrouter.engine.openai;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.internal.SecretText;
import io.github.prefixrouter.internal.ShortText;
import io.github.prefixrouter.internal.json.AnswerHeap;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.internal.wire.BodyBudget;
import io.github.prefixrouter.spi.EngineBusyException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InvalidRequestException;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One streamed completion: the server-sent events of {@code POST /v1/completions} with
 * {@code "stream": true}, as vLLM, SGLang and llama.cpp send them, turned into pieces for the
 * request's {@link OutputListener} and, at the end, its {@link EngineResult}.
 *
 * <p>Each event's data (of an event without a type, or of type {@code message}; other named
 * events, but {@code error}, are ignored; an {@code error:} line, llama.cpp's, is an
 * {@code error} event's data, {@link ServerSentEvents}) is a JSON chunk; of its
 * {@code choices[0]} (its
 * choice of index 0, if it has one) it takes {@code text} (the text since the previous chunk),
 * {@code token_ids} (their token ids, sent by vLLM with {@code return_token_ids}) and
 * {@code finish_reason} (the choice of the first chunk that gives one, a non-empty string, is
 * the output's last: the choices of later chunks are ignored); of its {@code usage} (vLLM sends
 * it in a last chunk with no choices when asked with {@code stream_options.include_usage}) the
 * prompt and cached-token counts, as the non-streamed answer's ({@link
 * OpenAiCompatibleEngine#usage}: a count left out of the usage of a server that has reported
 * one is 0; without a usage chunk, -1). An event whose data is empty or
 * blank (a proxy's keep-alive) is no chunk and is ignored. {@code data: [DONE]} ends the stream.
 * Any of these is a retryable {@link EngineException}: an {@code error} event, a chunk with an
 * {@code error} member or {@code "object": "error"} (how vLLM reports a failure once the stream
 * has begun; with the code 429 or 503, {@code error.code} or {@code code}, and before any output,
 * an {@link EngineBusyException}: the server is overloaded and ran none of the request; with
 * another 4xx code but 401, 403, 404, 405 and 408, and before any output, an
 * {@link InvalidRequestException}, not retryable: the server refuses the request itself, as
 * SGLang's scheduler does a prompt longer than it allows, once the stream has begun), a
 * {@code finish_reason} of {@code abort} or {@code error}, token ids past the request's
 * {@code maxTokens} or a negative one (that chunk gives no piece), a chunk that is not
 * strict JSON of that shape (or that would take more heap parsed than
 * {@link AnswerHeap#maxParsedBytes} allows), a line or an event larger than the byte
 * limit, an output (its text in characters plus its tokens) larger than it, a stream that ends before {@code [DONE]} and
 * before choice 0's {@code finish_reason}, one none of whose chunks has a choice of index 0
 * (a plain answer without one fails alike), and one that reaches {@code [DONE]} without choice
 * 0's {@code finish_reason} (vLLM, SGLang and llama.cpp give every choice they end one, in its
 * last chunk before {@code [DONE]}: an output without it may be cut). A stream that ends after
 * choice 0's {@code finish_reason} but before {@code [DONE]} (a proxy that drops it) gives its output: the
 * server said the generation is over; only a usage chunk that did not come is missing. What
 * {@link #feed} throws after that {@code finish_reason} leaves {@link #whole} as it was: the
 * engine completes the request with it.
 *
 * <p>The listener is called from {@link #feed} only, one chunk's piece at a time, and never once
 * {@link #close()} returned: the engine closes the stream before it completes the request's
 * future. A listener that throws (an exception or an {@link Error}) is not called again (the
 * request runs on). Feeding is for one thread at a time; {@link #close()} may be called from
 * any.
 */
final class CompletionStream {

  private static final Logger log = LoggerFactory.getLogger(CompletionStream.class);

  private final InferenceRequest request;
  private final int maxBytes;
  private final String apiKey;
  private final ServerSentEvents events;
  private final Object lock = new Object();
  private OutputListener listener; // guarded by lock
  private boolean closed; // guarded by lock
  private int[] tokens = new int[16];
  private int tokenCount;
  private StringBuilder text = new StringBuilder();
  /**
   * The usage of the last usage chunk, checked as it came: read by {@link #whole}, on any thread.
   */
  private volatile Object usage;
  /** Whether a chunk had a choice of index 0: a stream without one is misshapen. */
  private boolean choiceZero;
  /** Whether a chunk's choice gave a {@code finish_reason}: later choices are no output. */
  private boolean finished;
  private boolean done;
  private long bytesAfterDone;
  /**
   * The output once choice 0 gave its {@code finish_reason}, copied once then (no later chunk
   * changes it): read by {@link #whole}, on the engine's timer too, another thread than the
   * feeding one. Each chunk after the finish used to build the whole result again, a copy of
   * the whole output, so a server sending tiny chunks then made the feeding thread work in
   * proportion to the output's length per chunk.
   */
  private volatile Output output;
  /** Where the stream's heap is taken from, before it grows; null: nowhere. */
  private final BodyBudget.Share share;
  /** Whether the server has reported its cached tokens ({@link OpenAiCompatibleEngine#usage}). */
  private final AtomicBoolean cachedTokensReported;
  /** The bytes of {@link #share} taken for {@link #text} and {@link #tokens}. */
  private long textTaken;
  private long tokensTaken;
  /** How many times the whole output was copied ({@link #outputCopies}). */
  private final AtomicInteger outputCopies = new AtomicInteger();

  /**
   * A stream.
   *
   * @param request the request it answers
   * @param maxBytes the most bytes a line or an event may hold, and the largest output
   * @param apiKey the key the engine sends the server, taken out of its error messages; or null
   * @param listener where the pieces go
   */
  CompletionStream(InferenceRequest request, int maxBytes, String apiKey,
      OutputListener listener) {
    this(request, maxBytes, apiKey, listener, null);
  }

  /**
   * A stream whose heap is taken from {@code share} before it grows: its parser's buffers
   * ({@link ServerSentEvents}), each chunk's parse as it goes (given back once the chunk is
   * read), and its output, two bytes a character of its text's capacity and four a token of
   * its tokens', and once more when the output is whole (the copy {@link #whole} reads). A
   * {@link BodyBudget.Refused} of the share is thrown on from {@link #feed}.
   *
   * @param request the request it answers
   * @param maxBytes the most bytes a line or an event may hold, and the largest output
   * @param apiKey the key the engine sends the server, taken out of its error messages; or null
   * @param listener where the pieces go
   * @param share where the heap is taken from, or null for nowhere
   */
  CompletionStream(InferenceRequest request, int maxBytes, String apiKey,
      OutputListener listener, BodyBudget.Share share) {
    this(request, maxBytes, apiKey, listener, share, new AtomicBoolean());
  }

  /**
   * A stream as above, of a server whose earlier answers may have reported its cached tokens.
   *
   * @param request the request it answers
   * @param maxBytes the most bytes a line or an event may hold, and the largest output
   * @param apiKey the key the engine sends the server, taken out of its error messages; or null
   * @param listener where the pieces go
   * @param share where the heap is taken from, or null for nowhere
   * @param cachedTokensReported whether the server has reported its cached tokens, set once the
   *     stream's usage chunk reports them ({@link OpenAiCompatibleEngine#usage})
   */
  CompletionStream(InferenceRequest request, int maxBytes, String apiKey,
      OutputListener listener, BodyBudget.Share share, AtomicBoolean cachedTokensReported) {
    this.cachedTokensReported = cachedTokensReported;
    this.request = request;
    this.maxBytes = maxBytes;
    this.apiKey = apiKey;
    this.listener = listener;
    this.share = share;
    this.events = new ServerSentEvents(maxBytes, this::onEvent, share);
  }

  /**
   * Parses the next bytes of the body, giving the listener the output they complete.
   *
   * @param bytes the bytes, consumed
   * @throws EngineException (retryable) if the stream is malformed, too large or reports an
   *     error
   */
  void feed(ByteBuffer bytes) {
    if (done) {
      // the stream is over; a server that goes on sending is cut off at the limit
      bytesAfterDone += bytes.remaining();
      bytes.position(bytes.limit());
      if (bytesAfterDone > maxBytes) {
        throw failure("more than " + maxBytes + " bytes after [DONE]", null);
      }
      return;
    }
    try {
      events.feed(bytes);
    } catch (ServerSentEvents.MalformedStreamException e) {
      throw failure(e.getMessage(), e);
    }
    if (done && bytes.hasRemaining()) {
      feed(bytes); // what follows [DONE] in the same read: not parsed, counted
    }
  }

  /**
   * Whether {@code data: [DONE]} arrived.
   *
   * @return true once the stream is complete
   */
  boolean done() {
    return done;
  }

  /**
   * Whether choice 0 gave its {@code finish_reason}: the output is whole, though the usage chunk
   * and {@code [DONE]} may still follow.
   *
   * @return true once the server said the generation is over
   */
  boolean finished() {
    return finished;
  }

  /**
   * The output once choice 0 gave its {@code finish_reason} and its piece went to the listener,
   * with the usage if its chunk came since; null before. Unlike the rest of the stream, safe to
   * call from any thread while it is fed. Each call builds the result (a copy of the output).
   *
   * @return the result so far of a finished stream, or null
   * @throws EngineException (retryable) if the usage is unusable (it was checked as it came)
   */
  EngineResult whole() {
    Output o = output;
    return o == null ? null : build(o.tokens(), o.text());
  }

  /**
   * The result the stream carried, once choice 0 gave its {@code finish_reason} (whether
   * {@code [DONE]} came or not).
   *
   * @return the output, text and usage of the stream
   * @throws EngineException (retryable) if choice 0 gave no {@code finish_reason}: the stream
   *     was cut before {@code [DONE]}, or reached it without one (its output may be cut), or no
   *     chunk had a choice of index 0 (as a plain answer without one, it is misshapen)
   */
  EngineResult result() {
    if (!done && !finished) {
      throw failure("the stream ended before [DONE], after " + tokenCount + " tokens and "
          + text.length() + " characters", null);
    }
    if (!choiceZero) {
      // as for a plain answer: no choice of index 0 is no output, not an empty one
      throw failure("unexpected answer shape: no chunk had a choice of index 0", null);
    }
    if (!finished) {
      // vLLM, SGLang and llama.cpp end every choice with a chunk that gives its finish_reason,
      // before [DONE]: without it the output may be cut (a proxy that lost the last chunks)
      throw failure("the stream reached [DONE] without a finish_reason for choice 0, after "
          + tokenCount + " tokens and " + text.length() + " characters: its output may be cut",
          null);
    }
    Output o = output;
    return o != null ? build(o.tokens(), o.text())
        : build(Arrays.copyOf(tokens, tokenCount), text.toString());
  }

  /** The result of the output {@code outputTokens} and {@code outputText} and the usage. */
  private EngineResult build(int[] outputTokens, String outputText) {
    Object u = usage;
    try {
      int[] counts = OpenAiCompatibleEngine.usage(u == null ? Map.of() : Map.of("usage", u),
          request, cachedTokensReported);
      outputCopies.incrementAndGet();
      return new EngineResult(outputTokens, outputText, counts[0], counts[1], -1, -1);
    } catch (Json.JsonException e) {
      throw failure("unexpected usage: " + e.getMessage(), e);
    }
  }

  /**
   * Gives the listener a whole answer as one piece: for a server that answered a streamed
   * request with a plain JSON answer.
   *
   * @param r the answer
   */
  void deliverWhole(EngineResult r) {
    if (r.outputTokens().length > 0 || !r.text().isEmpty()) {
      deliver(r.outputTokens(), r.text());
    }
  }

  /**
   * How many times the stream copied its whole output (into a result, or to keep it): work in
   * proportion to the output's length.
   *
   * @return the copies so far
   */
  int outputCopies() {
    return outputCopies.get();
  }

  /** No call of the listener starts after this returns; a call in progress has ended. */
  void close() {
    synchronized (lock) {
      closed = true;
    }
  }

  private void deliver(int[] pieceTokens, String pieceText) {
    synchronized (lock) {
      if (closed || listener == OutputListener.IGNORE) {
        return;
      }
      try {
        listener.onOutput(pieceTokens, pieceText);
      } catch (Throwable e) {
        // an Error too: thrown on, it failed a streamed request and left one answered by a
        // plain JSON body never completed (its deadline was already off); and a checked
        // exception thrown undeclared, which failed the request as an I/O failure
        listener = OutputListener.IGNORE;
        log.warn("request {}: output listener failed, no more output streamed to it: {}",
            request.id(), e.toString());
      }
    }
  }

  private void onEvent(String type, String data) {
    if (done) {
      return;
    }
    if ("error".equals(type)) {
      throw serverError("the server sent an error event", data);
    }
    if (!"message".equals(type)) {
      return; // a named event (a keep-alive, say) is no chunk, as for an EventSource
    }
    if ("[DONE]".equals(data.strip())) {
      done = true;
      events.stop(); // what follows is not parsed, wherever the reads split it
      return;
    }
    if (data.isBlank()) {
      return; // an event with empty data (a proxy's keep-alive) is legal, and no chunk
    }
    try (ParseHeap heap = parseHeap()) { // the chunk is read: its parse is dropped
      chunk(data, heap);
    }
  }

  /** Reads the chunk of {@code data}, its parse taking its heap from {@code heap} (or none). */
  private void chunk(String data, ParseHeap heap) {
    Object root;
    try {
      root = Json.parse(data, maxBytes, 32, AnswerHeap.maxParsedBytes(data.length()), heap);
    } catch (Json.ParsedSizeException e) {
      throw failure(OpenAiCompatibleEngine.tooLargeOnceParsed("a chunk", e), e);
    } catch (Json.JsonException e) {
      throw failure("malformed chunk: " + e.getMessage(), e);
    }
    try {
      if (!(root instanceof Map<?, ?> chunk)) {
        throw new Json.JsonException("a chunk must be an object", -1);
      }
      Object error = chunk.get("error");
      if (error != null && error != Json.NULL || "error".equals(chunk.get("object"))) {
        throw serverError("the server reported an error in the stream", data);
      }
      Object choices = chunk.get("choices");
      if (choices != null && choices != Json.NULL) {
        Object choice = OpenAiCompatibleEngine.choiceZero(Json.asList(choices, "choices"));
        if (choice != null) {
          choiceZero = true;
          choice(choice);
        }
      }
      Object u = chunk.get("usage");
      if (u != null && u != Json.NULL) {
        // checked now, used at the end
        OpenAiCompatibleEngine.usage(Map.of("usage", u), request, cachedTokensReported);
        usage = u;
      }
    } catch (Json.JsonException e) {
      throw failure("unexpected chunk shape: " + e.getMessage(), e);
    }
    if (finished && output == null) {
      // the finishing piece was given: the output is whole, copied once for whole(), which
      // reads it with the usage of a later chunk; the chunks after this one copy nothing
      if (share != null) {
        share.take(2L * text.length() + 4L * tokenCount); // the copy, kept
      }
      outputCopies.incrementAndGet();
      output = new Output(Arrays.copyOf(tokens, tokenCount), text.toString());
    }
  }

  /** The output of a finished stream, as its tokens and text. */
  private record Output(int[] tokens, String text) {}

  private void choice(Object choice) {
    if (finished) {
      return; // the generation ended with an earlier chunk: what a server sends after is no output
    }
    Object t = Json.member(choice, "text");
    String pieceText = t == null || t == Json.NULL ? "" : Json.asString(t, "choices[0].text");
    pieceText += OpenAiCompatibleEngine.stopString(choice, request.params());
    Object ids = Json.member(choice, "token_ids");
    int[] pieceTokens = ids == null || ids == Json.NULL
        ? new int[0] : Json.asIntArray(ids, "choices[0].token_ids");
    String impossible = OpenAiCompatibleEngine.impossibleOutput(pieceTokens, tokenCount,
        request.params());
    if (impossible != null) {
      throw failure("the server streamed " + impossible, null);
    }
    Object finish = Json.member(choice, "finish_reason");
    if ("abort".equals(finish) || "error".equals(finish)) {
      throw failure("the server ended the generation with finish_reason " + finish, null);
    }
    if ((long) text.length() + pieceText.length() + tokenCount + pieceTokens.length > maxBytes) {
      throw failure("output larger than " + maxBytes + " characters and tokens", null);
    }
    if (finish instanceof String reason && !reason.isEmpty()) {
      finished = true; // this chunk's piece is the last
    }
    if (pieceTokens.length == 0 && pieceText.isEmpty()) {
      return;
    }
    int needed = text.length() + pieceText.length();
    if (share != null && needed > text.capacity()) {
      // no more than the output may hold (its characters and tokens, checked above)
      int grown = (int) Math.min(maxBytes, Math.max(needed, 2L * text.capacity() + 2));
      share.take(2L * grown);
      text = new StringBuilder(grown).append(text); // of that room exactly
      share.give(textTaken);
      textTaken = 2L * grown;
    }
    text.append(pieceText);
    if (tokenCount + pieceTokens.length > tokens.length) {
      int grown = (int) Math.min(maxBytes,
          Math.max(tokenCount + pieceTokens.length, 2L * tokens.length));
      if (share != null) {
        share.take(4L * grown);
      }
      tokens = Arrays.copyOf(tokens, grown);
      if (share != null) {
        share.give(tokensTaken);
        tokensTaken = 4L * grown;
      }
    }
    System.arraycopy(pieceTokens, 0, tokens, tokenCount, pieceTokens.length);
    tokenCount += pieceTokens.length;
    deliver(pieceTokens, pieceText);
  }

  /**
   * The failure of an error event or chunk, before any output as the same status before the
   * stream: an {@link EngineBusyException} when its code is 429 or 503 (the server is
   * overloaded), an {@link InvalidRequestException} when it is another 4xx but 401, 403, 404,
   * 405 and 408 (the server refuses the request itself: SGLang's scheduler refuses a prompt
   * longer than it allows once the stream has begun, with the code 400); else, and once output
   * has come (the server ran the request), a retryable {@link EngineException}.
   */
  private EngineException serverError(String what, String data) {
    // its parse takes its heap from the share too (a parse it cannot get is the budget's refusal)
    try (ParseHeap heap = parseHeap()) {
      Object root = errorRoot(data, heap);
      String message = what + ": " + errorMessage(data, root, apiKey);
      if (tokenCount == 0 && text.length() == 0) {
        Object code = errorCode(root);
        long status = wholeCode(code);
        if (status == 429 || status == 503) {
          return new EngineBusyException("request " + request.id() + ": " + message + " (code "
              + code + ": the server is overloaded)");
        }
        if (OpenAiCompatibleEngine.refusesTheRequest(status)) {
          return new InvalidRequestException("request " + request.id() + ": " + message
              + " (code " + code + ": the server refuses the request)");
        }
      }
      return failure(message, null);
    }
  }

  /** An account of one parse's heap on the share, or null without a share. */
  private ParseHeap parseHeap() {
    return share == null ? null : new ParseHeap(share);
  }

  /** What one parse takes of a share, given back when the parse is dropped. */
  private static final class ParseHeap implements Json.Memory, AutoCloseable {
    private final BodyBudget.Share share;
    private long taken;

    ParseHeap(BodyBudget.Share share) {
      this.share = share;
    }

    @Override
    public void take(long bytes) {
      share.take(bytes);
      taken += bytes;
    }

    @Override
    public void close() {
      share.give(taken);
    }
  }

  /**
   * An error event's or chunk's data parsed, taking its heap from {@code memory} (null: from
   * nowhere), or null if it is not JSON within the limits. A parse the memory refuses throws the
   * {@link BodyBudget.Refused} on, as a chunk's does: the node had no heap to read the server's
   * error, which says nothing of the server (it was taken for an error that is not JSON, a
   * failure of the server, a 503's "overloaded" lost).
   */
  private static Object errorRoot(String data, Json.Memory memory) {
    try {
      return Json.parse(data, 1 << 20, 32, AnswerHeap.maxParsedBytes(data.length()), memory);
    } catch (BodyBudget.Refused refused) {
      throw refused;
    } catch (RuntimeException notJson) {
      return null;
    }
  }

  /** The code of an error event or chunk ({@code error.code} or {@code code}), or null. */
  private static Object errorCode(Object root) {
    Object code = Json.path(root, "error", "code");
    return code != null ? code : Json.path(root, "code");
  }

  /**
   * An error's {@code code} as a status, or -1. The code may be a JSON integer, a JSON number
   * with a fraction or an exponent whose value is whole ({@code 503.0}, {@code 4.29e2}: the
   * parse gives a {@link Double}, which was not taken for an overload), or a string of three
   * digits ({@code "429"}); a value that is not whole ({@code 503.5}) is none.
   */
  private static long wholeCode(Object code) {
    if (code instanceof Long l) {
      return l;
    }
    if (code instanceof Double d && d == Math.rint(d) && Math.abs(d) < 1e9) {
      return d.longValue();
    }
    if (code instanceof String s && s.length() == 3
        && s.chars().allMatch(c -> c >= '0' && c <= '9')) {
      return Long.parseLong(s);
    }
    return -1;
  }

  private EngineException failure(String what, Throwable cause) {
    return new EngineException("request " + request.id() + ": " + what, true, cause);
  }

  /**
   * The message of an error event or chunk ({@code data}, parsed as {@code root}, or null if it
   * is not JSON), without the API key ({@link SecretText}), printable and at most 300
   * characters.
   */
  private static String errorMessage(String data, Object root, String apiKey) {
    Object message = Json.path(root, "error", "message");
    if (message == null) {
      message = Json.path(root, "message");
    }
    if (message == null && Json.path(root, "error") instanceof String s) {
      message = s;
    }
    return shownServerText(message instanceof String s ? s : data, apiKey);
  }

  /**
   * A server's text as an error message shows it: without the API key ({@link SecretText}, taken
   * out before the cut), at most 300 characters, never cut between the halves of a pair (the
   * message would not be text any more), control characters as spaces.
   */
  static String shownServerText(String text, String apiKey) {
    String cut = ShortText.prefix(SecretText.without(text, apiKey), 300);
    StringBuilder sb = new StringBuilder(cut.length());
    for (int i = 0; i < cut.length(); i++) {
      char c = cut.charAt(i);
      sb.append(c < 0x20 ? ' ' : c);
    }
    return sb.toString();
  }
}
