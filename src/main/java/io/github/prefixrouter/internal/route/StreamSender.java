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
 * does not cost a message per token. What is still gathered when the request completes is not
 * sent: the final answer carries the whole output. Never throws.
 */
final class StreamSender implements OutputListener {

  private static final Logger LOG = LoggerFactory.getLogger(StreamSender.class);

  /** Tokens and text chars per STREAM message when a gathered piece is split. */
  static final int CHUNK_TOKENS = 16_384;
  static final int CHUNK_CHARS = 65_536;

  private final Transport transport;
  private final Scheduler scheduler;
  private final Clock clock;
  private final PeerAddress to;
  private final String requestId;
  private final long tag;
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
    this.tag = tag;
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
        } catch (RuntimeException | Error e) {
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
      } catch (RuntimeException | Error e) {
        LOG.debug("stream of {}: cancelling its timer failed", requestId, e);
      }
    }
  }

  /** STREAM messages sent so far. */
  synchronized long messages() {
    return messages;
  }

  private List<byte[]> takePending(long now) {
    List<byte[]> out = new ArrayList<>(1);
    int t = 0;
    int c = 0;
    int nt = pendingTokens.length;
    int nc = pendingText.length();
    if (nt == 0 && nc == 0) {
      return out;
    }
    while (t < nt || c < nc) {
      int te = Math.min(nt, t + CHUNK_TOKENS);
      int ce = Math.min(nc, c + CHUNK_CHARS);
      if (ce < nc && ce > c && Character.isHighSurrogate(pendingText.charAt(ce - 1))) {
        ce--; // never split a surrogate pair
      }
      try {
        out.add(ForwardCodec.stream(requestId, tag, sentTokens + t,
            Arrays.copyOfRange(pendingTokens, t, te), sentChars + c,
            pendingText.substring(c, ce)));
      } catch (IllegalArgumentException e) {
        // past the limits of a STREAM (longer than any answer may be): the answer carries it
        LOG.debug("stream of {}: {}", requestId, e.getMessage());
        closed = true;
        break;
      }
      t = te;
      c = ce;
    }
    sentTokens += t;
    sentChars += c;
    pendingTokens = new int[0];
    pendingText.setLength(0);
    sentFirst = true;
    lastSentAt = now;
    messages += out.size();
    return out;
  }

  private void send(List<byte[]> out) {
    for (byte[] m : out) {
      try {
        transport.send(to, m);
      } catch (RuntimeException | Error e) {
        LOG.debug("stream of {} to {} failed", requestId, to, e);
      }
    }
  }
}
