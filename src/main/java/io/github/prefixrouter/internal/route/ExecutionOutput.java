package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.spi.EngineResult;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

/**
 * The streamed output of one execution: what its sink (a client's {@link OutputListener}, or
 * the STREAM messages back to the peer that sent the request) has been given, and the order in
 * which it is given.
 *
 * <p>Every attempt of the execution (a run on the local engine, a forward) reports its output
 * as pieces placed at absolute offsets in that attempt's output ({@link Attempt}). The part of a
 * piece beyond what the execution already emitted goes to the sink; the part it already emitted
 * must equal what was emitted, else the attempt's output <em>diverged</em> (an engine that
 * breaks the determinism contract) and the execution must fail: what the sink has cannot be
 * taken back. Pieces of an attempt that arrive ahead of a gap wait in a small buffer
 * ({@link #MAX_BUFFERED_PIECES}); further ones are dropped (the final answer fills the gap).
 *
 * <p>Locking: {@link #offer}, {@link #finish} and {@link #close} are called under the
 * execution's lock, so that they are ordered with the claims of its attempts; they only queue
 * the sink's calls. {@link #drain} runs the queue without that lock, one call at a time (from
 * whichever thread gets there first), so the sink is never called concurrently, in the order the
 * pieces were accepted, and never after the queued completion of the execution's future.
 *
 * <p>A sink that blocks (against the listener's contract) holds the queue, and the completion
 * queued behind it, for as long as it blocks. {@link #cutShort} ends that wait: the end of a
 * stop's grace period runs the completion's replacement at once, on its own thread; the call
 * in progress may still finish, and the sink is not called again.
 */
final class ExecutionOutput {

  private static final org.slf4j.Logger LOG =
      org.slf4j.LoggerFactory.getLogger(ExecutionOutput.class);

  /** Pieces of one attempt held while an earlier one is missing. */
  static final int MAX_BUFFERED_PIECES = 8;
  /** Longest output text, in UTF-16 chars, a stream may carry. */
  static final int MAX_TEXT_CHARS = ForwardCodec.MAX_STREAM_OFFSET;

  /** What an offered piece did. */
  enum Verdict {
    /** Accepted (possibly buffered, possibly nothing new). */
    ACCEPTED,
    /** Dropped: it overflows the request's limits, or the buffer is full. */
    DROPPED,
    /** It contradicts what was already emitted: the execution cannot go on streaming. */
    DIVERGED
  }

  /** The output received from one attempt so far. */
  static final class Attempt {
    /** Tokens and chars of the attempt's output received without a gap. */
    int tokens;
    int chars;
    /** Set when the attempt sent an impossible piece: its further pieces are ignored. */
    boolean broken;
    final List<Piece> ahead = new ArrayList<>(0);
  }

  /** A piece of an attempt's output, placed at absolute offsets. */
  record Piece(int tokenOffset, int[] tokens, int charOffset, String text) {}

  private final OutputListener sink;
  private final int maxTokens;
  private final CompletableFuture<?> future;
  private final Consumer<Throwable> onSinkFailure;

  private int[] emitted = new int[16];
  private int emittedTokens;
  private final StringBuilder emittedText = new StringBuilder();
  private boolean closed;
  /** The first disagreement found, for the failure's message. */
  private String divergence;

  private final ConcurrentLinkedQueue<Runnable> queue = new ConcurrentLinkedQueue<>();
  private final AtomicInteger wip = new AtomicInteger();
  /** The completion of the execution's future once queued ({@link #complete}), else null. */
  private volatile Runnable completion;
  /** What runs instead of {@link #completion} when it is cut short (set before it). */
  private volatile Runnable completionCutShort;
  /** Claimed by whichever runs first: the queued completion, or its replacement. */
  private final AtomicBoolean completionClaimed = new AtomicBoolean();
  /** What the sink threw, once it did (it is not called again). */
  private volatile Throwable sinkFailure;
  /**
   * The thread inside the sink's call, while it runs, else null: set and cleared by that
   * thread, which alone drains at a time, so it reads its own marker right (a plain field).
   */
  private Thread deliveringOn;

  /**
   * @param sink where the output goes
   * @param maxTokens the request's {@code maxTokens}: no attempt's output is longer
   * @param future the execution's future: once it is done, the sink is not called
   * @param onSinkFailure called (once, while draining) when the sink throws
   */
  ExecutionOutput(OutputListener sink, int maxTokens, CompletableFuture<?> future,
      Consumer<Throwable> onSinkFailure) {
    this.sink = sink;
    this.maxTokens = maxTokens;
    this.future = future;
    this.onSinkFailure = onSinkFailure;
  }

  OutputListener sink() {
    return sink;
  }

  /** Tokens emitted so far (under the execution's lock). */
  int emittedTokens() {
    return emittedTokens;
  }

  /** Chars of text emitted so far (under the execution's lock). */
  int emittedChars() {
    return emittedText.length();
  }

  /**
   * What the sink threw, or null while it has not thrown. Read by a queued completion, it
   * covers every piece queued before it.
   */
  Throwable sinkFailure() {
    return sinkFailure;
  }

  /**
   * The thread calling the sink now, or null; right when read by the thread it names (the
   * execution's answer waits for that call: a wait for the node's stop there never ends).
   */
  Thread deliveringOn() {
    return deliveringOn;
  }

  /** What the disagreement was, once {@link Verdict#DIVERGED} was returned. */
  String divergence() {
    return divergence;
  }

  /**
   * The next piece of {@code a}'s output, right after what it reported before (an engine's
   * pieces carry no offsets: they follow each other).
   */
  Verdict offerNext(Attempt a, int[] tokens, String text) {
    return offer(a, a.tokens, tokens, a.chars, text);
  }

  /** A piece of {@code a}'s output at the given offsets. Under the execution's lock. */
  Verdict offer(Attempt a, int tokenOffset, int[] tokens, int charOffset, String text) {
    if (closed || a.broken) {
      return Verdict.DROPPED;
    }
    if (tokenOffset < 0 || charOffset < 0
        || (long) tokenOffset + tokens.length > maxTokens
        || (long) charOffset + text.length() > MAX_TEXT_CHARS || hasNegative(tokens)) {
      a.broken = true; // no engine answers so: its result will be refused too
      return Verdict.DROPPED;
    }
    Piece p = new Piece(tokenOffset, tokens, charOffset, text);
    if (tokenOffset > a.tokens || charOffset > a.chars) {
      if (a.ahead.size() >= MAX_BUFFERED_PIECES) {
        return Verdict.DROPPED;
      }
      a.ahead.add(p);
      return Verdict.ACCEPTED;
    }
    if (!apply(a, p)) {
      return Verdict.DIVERGED;
    }
    // pieces that waited for this one
    boolean progress = true;
    while (progress && !a.ahead.isEmpty()) {
      progress = false;
      for (int i = 0; i < a.ahead.size(); i++) {
        Piece q = a.ahead.get(i);
        if (q.tokenOffset() <= a.tokens && q.charOffset() <= a.chars) {
          a.ahead.remove(i);
          if (!apply(a, q)) {
            return Verdict.DIVERGED;
          }
          progress = true;
          break;
        }
      }
    }
    return Verdict.ACCEPTED;
  }

  /** Applies a piece that starts within what {@code a} has: checks, emits what is new. */
  private boolean apply(Attempt a, Piece p) {
    int[] t = p.tokens();
    int tEnd = p.tokenOffset() + t.length;
    int from = a.tokens; // the attempt's own earlier tokens are not compared again
    for (int i = from; i < Math.min(tEnd, emittedTokens); i++) {
      if (emitted[i] != t[i - p.tokenOffset()]) {
        divergence = "token " + i + " is " + t[i - p.tokenOffset()] + " where " + emitted[i]
            + " was already streamed";
        return false;
      }
    }
    String s = p.text();
    int cEnd = p.charOffset() + s.length();
    int cFrom = a.chars;
    int have = emittedText.length();
    int cmpEnd = Math.min(cEnd, have);
    if (cFrom < cmpEnd && !emittedText.substring(cFrom, cmpEnd)
        .equals(s.substring(cFrom - p.charOffset(), cmpEnd - p.charOffset()))) {
      divergence = "the text from char " + cFrom + " differs from what was already streamed";
      return false;
    }
    int[] newTokens = tEnd > emittedTokens
        ? Arrays.copyOfRange(t, Math.max(from, emittedTokens) - p.tokenOffset(), t.length)
        : EMPTY;
    String newText = cEnd > have ? s.substring(Math.max(cFrom, have) - p.charOffset()) : "";
    a.tokens = Math.max(a.tokens, tEnd);
    a.chars = Math.max(a.chars, cEnd);
    emit(newTokens, newText);
    return true;
  }

  /**
   * The final result: checks that what was emitted is a prefix of it and emits the rest.
   * Returns false (emitting nothing) if it is not a prefix. Under the execution's lock; the
   * output is closed afterwards either way.
   */
  boolean finish(EngineResult result) {
    if (closed) {
      return true;
    }
    int[] out = result.outputTokens();
    String text = result.text();
    boolean prefix = out.length >= emittedTokens && text.length() >= emittedText.length();
    for (int i = 0; prefix && i < emittedTokens; i++) {
      if (out[i] != emitted[i]) {
        divergence = "token " + i + " of the answer is " + out[i] + " where " + emitted[i]
            + " was already streamed";
        prefix = false;
      }
    }
    if (prefix && !text.startsWith(emittedText.toString())) {
      divergence = "the answer's text does not start with the text already streamed";
      prefix = false;
    } else if (!prefix && divergence == null) {
      divergence = "the answer (" + out.length + " tokens, " + text.length()
          + " chars) is shorter than what was already streamed (" + emittedTokens + " tokens, "
          + emittedText.length() + " chars)";
    }
    if (prefix) {
      emit(Arrays.copyOfRange(out, emittedTokens, out.length),
          text.substring(emittedText.length()));
    }
    closed = true;
    return prefix;
  }

  /** No more pieces: every later offer is dropped. Under the execution's lock. */
  void close() {
    closed = true;
  }

  /** Queues the completion of the execution's future after every piece queued so far. */
  void complete(Runnable completion) {
    complete(completion, completion);
  }

  /**
   * Queues the completion of the execution's future after every piece queued so far, with
   * what runs instead if the wait for those pieces is cut short ({@link #cutShort}). Once per
   * execution; exactly one of the two runs.
   */
  void complete(Runnable completion, Runnable instead) {
    this.completionCutShort = instead;
    this.completion = completion; // after its replacement: cutShort reads them in this order
    queue.add(COMPLETION);
  }

  /**
   * Runs the replacement of the queued completion now, on this thread, unless the completion
   * has run or is running already, or is not queued yet: the wait for the pieces queued before
   * it (a sink that blocks) ends. The sink is not called after it (a call in progress on another
   * thread may still finish), as the execution's future is then done. Never under the
   * execution's lock.
   *
   * @return whether the replacement ran
   */
  boolean cutShort() {
    if (completion == null || !completionClaimed.compareAndSet(false, true)) {
      return false;
    }
    try {
      completionCutShort.run();
    } catch (Throwable e) { // as for the completion: a stop waits on it
      LOG.error("completing an execution failed", e);
    }
    return true;
  }

  /**
   * Queues {@code action}, to be run while draining (after every piece emitted so far has gone
   * to the sink, before any later one) with a copy of what was emitted so far: the tokens and
   * the text. It runs even if the execution is done by then. Under the execution's lock.
   */
  void afterEmitted(java.util.function.BiConsumer<int[], String> action) {
    int[] tokens = Arrays.copyOf(emitted, emittedTokens);
    String text = emittedText.toString();
    queue.add(() -> action.accept(tokens, text));
  }

  private void emit(int[] tokens, String text) {
    if (tokens.length == 0 && text.isEmpty()) {
      return;
    }
    if (emittedTokens + tokens.length > emitted.length) {
      emitted = Arrays.copyOf(emitted,
          Math.min(maxTokens, Math.max(emittedTokens + tokens.length, emitted.length * 2)));
    }
    System.arraycopy(tokens, 0, emitted, emittedTokens, tokens.length);
    emittedTokens += tokens.length;
    emittedText.append(text);
    queue.add(new Delivery(tokens, text));
  }

  /**
   * Runs the queued sink calls and completion, one at a time; returns at once if another thread
   * is running them (it runs what this one queued too). Never under the execution's lock.
   */
  void drain() {
    if (wip.getAndIncrement() != 0) {
      return;
    }
    do {
      Runnable r;
      while ((r = queue.poll()) != null) {
        if (r instanceof Delivery d) {
          if (sinkFailure != null || future.isDone()) {
            continue;
          }
          deliveringOn = Thread.currentThread();
          try {
            sink.onOutput(d.tokens, d.text);
            deliveringOn = null;
          } catch (Throwable e) { // a checked exception thrown undeclared too: else it left
            // the queue taken for ever, and the completion queued behind this piece never ran
            deliveringOn = null;
            sinkFailure = e;
            fail(e);
          }
        } else {
          if (r == COMPLETION) {
            if (!completionClaimed.compareAndSet(false, true)) {
              continue; // cut short: its replacement ran instead
            }
            r = completion;
          }
          try {
            r.run();
          } catch (Throwable e) { // the queue must go on: a future waits on it
            LOG.error("completing an execution failed", e);
          }
        }
      }
    } while (wip.decrementAndGet() != 0);
  }

  private void fail(Throwable e) {
    try {
      onSinkFailure.accept(e);
    } catch (Throwable x) { // the queue must go on: a future waits on it
      LOG.error("handling a failed output sink failed", x);
    }
  }

  private static boolean hasNegative(int[] tokens) {
    for (int t : tokens) {
      if (t < 0) {
        return true;
      }
    }
    return false;
  }

  private static final int[] EMPTY = new int[0];

  /** The place of the queued completion in the queue ({@link #complete}). */
  private static final Runnable COMPLETION = () -> { };

  /** One call of the sink. */
  private record Delivery(int[] tokens, String text) implements Runnable {
    @Override
    public void run() {
      throw new AssertionError("drained by drain()");
    }
  }
}
