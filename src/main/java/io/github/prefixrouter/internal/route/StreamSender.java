package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Transport;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The sink of a request a peer forwarded with streaming asked for: sends its output back to
 * that peer as STREAM messages ({@link Transport#send}, best effort), tagged with the tag of the
 * peer's attempt. The first piece goes at once; later pieces are gathered and sent at most once
 * per {@code interval} (timed by the node's scheduler), so an engine that streams token by token
 * does not cost a message per token. A text that ends in the first half of a UTF-16 surrogate
 * pair (an engine's piece may end inside a character) keeps that half for a later message, with
 * its second half: a STREAM's text is UTF-8, which cannot carry half a pair. What is still
 * gathered when the request completes is not sent: the final answer carries the whole output.
 * Never throws.
 *
 * <p>A duplicate FORWARD of the request from the same peer that joins it with another tag
 * (the peer sent it again, as a new attempt or for another execution of the same request) adds
 * that tag ({@link #addTag}): what was already sent is sent again under it at once, from offset
 * 0, and every later piece goes to each tag, so each stream the peer may be awaiting is whole
 * (the peer accepts a STREAM only with the tag of an attempt it still awaits, and drops the
 * others as stray). At most {@link #MAX_TAGS} tags are kept, the oldest dropped first.
 */
final class StreamSender implements OutputListener {

  private static final Logger LOG = LoggerFactory.getLogger(StreamSender.class);

  /** Tokens and text chars per STREAM message when a gathered piece is split. */
  static final int CHUNK_TOKENS = 16_384;
  static final int CHUNK_CHARS = 65_536;
  /** Most stream tags one request's output is sent to (duplicates of it that joined it). */
  static final int MAX_TAGS = 4;

  private final Transport transport;
  private final Scheduler scheduler;
  private final Clock clock;
  private final PeerAddress to;
  private final String requestId;
  /** The tags the output goes to, oldest first ({@code tagCount} of them). */
  private final long[] tags = new long[MAX_TAGS];
  private int tagCount;
  private final long intervalNanos;

  private int sentTokens;
  private int sentChars;
  private int[] pendingTokens = new int[0];
  private final StringBuilder pendingText = new StringBuilder();
  private boolean sentFirst;
  private long lastSentAt;
  private Scheduler.Cancellable timer;
  private boolean closed;
  private long messages;

  StreamSender(Transport transport, Scheduler scheduler, Clock clock, PeerAddress to,
      String requestId, long tag, long intervalNanos) {
    this.transport = transport;
    this.scheduler = scheduler;
    this.clock = clock;
    this.to = to;
    this.requestId = requestId;
    this.tags[0] = tag;
    this.tagCount = 1;
    this.intervalNanos = intervalNanos;
  }

  @Override
  public void onOutput(int[] tokens, String text) {
    List<byte[]> out;
    synchronized (this) {
      if (closed) {
        return;
      }
      if (tokens.length > 0) {
        int n = pendingTokens.length;
        pendingTokens = Arrays.copyOf(pendingTokens, n + tokens.length);
        System.arraycopy(tokens, 0, pendingTokens, n, tokens.length);
      }
      pendingText.append(text);
      if (timer != null) {
        return; // a flush is due
      }
      long now = clock.nanoTime();
      long wait = sentFirst ? lastSentAt + intervalNanos - now : 0;
      if (intervalNanos > 0 && wait > 0) {
        try {
          timer = scheduler.schedule(wait, this::flushLater);
        } catch (Throwable e) {
          LOG.debug("stream of {} to {}: the scheduler refused; sending at once", requestId, to, e);
          timer = null;
        }
        if (timer != null) {
          return;
        }
      }
      out = takePending(now);
    }
    send(out);
  }

  private void flushLater() {
    List<byte[]> out;
    synchronized (this) {
      timer = null;
      if (closed) {
        return;
      }
      out = takePending(clock.nanoTime());
    }
    send(out);
  }

  /** The request completed: nothing more is sent. */
  void close() {
    Scheduler.Cancellable t;
    synchronized (this) {
      closed = true;
      t = timer;
      timer = null;
      pendingTokens = new int[0];
      pendingText.setLength(0);
    }
    if (t != null) {
      try {
        t.cancel();
      } catch (Throwable e) {
        LOG.debug("stream of {}: cancelling its timer failed", requestId, e);
      }
    }
  }

  /**
   * A duplicate of the request joined it asking for STREAM messages with {@code tag}: what was
   * already sent goes again under that tag at once (from offset 0), and later pieces go to it
   * too. {@code given} and {@code givenText} are everything this sink was given so far (it
   * holds no copy of what it sent). A tag already served is not added again; past
   * {@link #MAX_TAGS}, the oldest tag is dropped.
   */
  void addTag(long tag, int[] given, String givenText) {
    List<byte[]> out;
    synchronized (this) {
      if (closed) {
        return;
      }
      for (int i = 0; i < tagCount; i++) {
        if (tags[i] == tag) {
          return;
        }
      }
      if (tagCount == MAX_TAGS) {
        System.arraycopy(tags, 1, tags, 0, MAX_TAGS - 1);
        tagCount--;
      }
      tags[tagCount++] = tag;
      // what is still gathered goes to every tag with the next flush
      int nt = Math.min(sentTokens, given.length);
      int nc = Math.min(sentChars, givenText.length());
      out = new ArrayList<>(1);
      chunks(new long[] {tag}, 1, Arrays.copyOf(given, nt), 0, givenText.substring(0, nc), 0,
          out);
      messages += out.size();
    }
    send(out);
  }

  /** STREAM messages sent so far. */
  synchronized long messages() {
    return messages;
  }

  private List<byte[]> takePending(long now) {
    List<byte[]> out = new ArrayList<>(1);
    int nc = pendingText.length();
    if (nc > 0 && Character.isHighSurrogate(pendingText.charAt(nc - 1))) {
      nc--; // UTF-8 cannot carry half a pair: it waits for its second half, in a later piece
    }
    if (pendingTokens.length == 0 && nc == 0) {
      return out;
    }
    chunks(tags, tagCount, pendingTokens, sentTokens, pendingText.substring(0, nc), sentChars,
        out);
    sentTokens += pendingTokens.length;
    sentChars += nc;
    pendingTokens = new int[0];
    pendingText.delete(0, nc);
    sentFirst = true;
    lastSentAt = now;
    messages += out.size();
    return out;
  }

  /**
   * Adds to {@code out} the STREAM messages carrying {@code tokens} from {@code tokenBase} and
   * {@code text} from {@code charBase} of the output, split into chunks, for each of the first
   * {@code count} of {@code to}. Past the limits of a STREAM (longer than any answer may be)
   * the stream is closed: the answer carries the rest.
   */
  private void chunks(long[] to, int count, int[] tokens, int tokenBase, String text,
      int charBase, List<byte[]> out) {
    int t = 0;
    int c = 0;
    int nt = tokens.length;
    int nc = text.length();
    while (t < nt || c < nc) {
      int te = Math.min(nt, t + CHUNK_TOKENS);
      int ce = Math.min(nc, c + CHUNK_CHARS);
      if (ce < nc && ce > c && Character.isHighSurrogate(text.charAt(ce - 1))) {
        ce--; // never split a surrogate pair
      }
      int[] piece = Arrays.copyOfRange(tokens, t, te);
      String pieceText = text.substring(c, ce);
      try {
        for (int k = 0; k < count; k++) {
          out.add(ForwardCodec.stream(requestId, to[k], tokenBase + t, piece, charBase + c,
              pieceText));
        }
      } catch (IllegalArgumentException e) {
        LOG.debug("stream of {}: {}", requestId, e.getMessage());
        closed = true;
        return;
      }
      t = te;
      c = ce;
    }
  }

  private void send(List<byte[]> out) {
    for (byte[] m : out) {
      try {
        transport.send(to, m);
      } catch (Throwable e) {
        LOG.debug("stream of {} to {} failed", requestId, to, e);
      }
    }
  }
}
