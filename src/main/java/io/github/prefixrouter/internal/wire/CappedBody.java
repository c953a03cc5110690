package io.github.prefixrouter.internal.wire;

import java.io.UncheckedIOException;
import java.net.ProtocolException;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Flow;
import java.util.function.Function;

/**
 * Collects an HTTP response body up to a cap, refusing one above it before reading (when its
 * {@code Content-Length} says so) or while reading it (cancelling the subscription). A refused
 * body completes with null, or with the failure the caller makes of a description of what was
 * too large. A {@code Content-Length} that is not a number is a protocol error: the handler
 * throws an {@link UncheckedIOException} of a {@link ProtocolException} naming it, with which
 * the exchange fails.
 *
 * <p>With a {@link BodyBudget.Share} ({@link #orNull(HttpResponse.ResponseInfo, int,
 * BodyBudget.Share)}, {@link #orFail(HttpResponse.ResponseInfo, int, Function,
 * BodyBudget.Share)}), the body takes the heap of its buffer from the share as its
 * bytes arrive, as {@link BodyBudget.Share#read} does: in steps from 64 KiB, each twice the
 * last, up to its {@code Content-Length} or the cap (while a step is copied to, the share holds
 * the last one as well), and, once whole, the body's exact length; the body returned stays held
 * until the share gives it back. A step the share cannot get fails the body with the
 * {@link BodyBudget.Refused}, its subscription cancelled (the connection is closed).
 */
public final class CappedBody implements HttpResponse.BodySubscriber<byte[]> {
  /** The first step of a body's heap taken from its share. */
  static final int FIRST_STEP = 64 << 10;
  private final int cap;
  private final boolean refuse;
  /** What a body above the cap fails with; null: it completes with null. */
  private final Function<String, ? extends Throwable> tooLarge;
  private final CompletableFuture<byte[]> body = new CompletableFuture<>();
  private final java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
  /** Where the heap of the body's buffer is taken from; null: nowhere, {@link #buf} holds it. */
  private final BodyBudget.Share share;
  /** The body's length at most: its Content-Length or the cap. */
  private final int limit;
  /** The buffer of a body taken from {@link #share}, and the bytes of it filled. */
  private byte[] taken = new byte[0];
  private int length;
  private Flow.Subscription subscription;

  private CappedBody(int cap, boolean refuse, Function<String, ? extends Throwable> tooLarge) {
    this(cap, refuse, tooLarge, null, cap);
  }

  private CappedBody(int cap, boolean refuse, Function<String, ? extends Throwable> tooLarge,
      BodyBudget.Share share, int limit) {
    this.cap = cap;
    this.refuse = refuse;
    this.tooLarge = tooLarge;
    this.share = share;
    this.limit = limit;
  }

  /**
   * A body of at most {@code cap} bytes; a larger one completes with null.
   *
   * @param info the response's status and headers
   * @param cap the largest body accepted, in bytes
   * @return the subscriber
   */
  public static HttpResponse.BodySubscriber<byte[]> orNull(HttpResponse.ResponseInfo info,
      int cap) {
    return new CappedBody(cap, declaredAbove(info, cap), null);
  }

  /**
   * A body of at most {@code cap} bytes; a larger one completes exceptionally with what
   * {@code tooLarge} makes of a description ("answer exceeds N bytes").
   *
   * @param info the response's status and headers
   * @param cap the largest body accepted, in bytes
   * @param tooLarge the failure of a body above the cap, from its description
   * @return the subscriber
   */
  public static HttpResponse.BodySubscriber<byte[]> orFail(HttpResponse.ResponseInfo info,
      int cap, Function<String, ? extends Throwable> tooLarge) {
    return new CappedBody(cap, declaredAbove(info, cap), tooLarge);
  }

  /**
   * A body of at most {@code cap} bytes whose buffer's heap is taken from {@code share} as its
   * bytes arrive (see the class comment); a larger one completes with null.
   *
   * @param info the response's status and headers
   * @param cap the largest body accepted, in bytes
   * @param share where the body's heap is taken from, given back by its owner
   * @return the subscriber
   */
  public static HttpResponse.BodySubscriber<byte[]> orNull(HttpResponse.ResponseInfo info,
      int cap, BodyBudget.Share share) {
    return budgeted(info, cap, null, share);
  }

  /**
   * A body of at most {@code cap} bytes whose buffer's heap is taken from {@code share} as its
   * bytes arrive (see the class comment); a larger one completes exceptionally with what
   * {@code tooLarge} makes of a description, as {@link #orFail(HttpResponse.ResponseInfo, int,
   * Function)}.
   *
   * @param info the response's status and headers
   * @param cap the largest body accepted, in bytes
   * @param tooLarge the failure of a body above the cap, from its description
   * @param share where the body's heap is taken from, given back by its owner
   * @return the subscriber
   */
  public static HttpResponse.BodySubscriber<byte[]> orFail(HttpResponse.ResponseInfo info,
      int cap, Function<String, ? extends Throwable> tooLarge, BodyBudget.Share share) {
    return budgeted(info, cap, java.util.Objects.requireNonNull(tooLarge), share);
  }

  /**
   * A body taking its buffer's heap from {@code share}: {@code tooLarge} null answers a body
   * above the cap with null, else with what it makes of a description.
   */
  private static CappedBody budgeted(HttpResponse.ResponseInfo info, int cap,
      Function<String, ? extends Throwable> tooLarge, BodyBudget.Share share) {
    long declared = declared(info);
    return new CappedBody(cap, declared > cap, tooLarge, java.util.Objects.requireNonNull(share),
        declared >= 0 ? (int) Math.min(declared, cap) : cap);
  }

  private static boolean declaredAbove(HttpResponse.ResponseInfo info, int cap) {
    return declared(info) > cap;
  }

  /** The Content-Length, or -1 for none. */
  private static long declared(HttpResponse.ResponseInfo info) {
    String value = info.headers().firstValue("Content-Length").orElse(null);
    if (value == null) {
      return -1;
    }
    long declared;
    try {
      declared = Long.parseLong(value);
    } catch (NumberFormatException e) {
      // the JDK's client hands such a header to the handler and fails on it only afterwards
      throw new UncheckedIOException(new ProtocolException(
          "answer's Content-Length is not a length: \"" + value + "\""));
    }
    return declared;
  }

  @Override
  public CompletionStage<byte[]> getBody() {
    return body;
  }

  @Override
  public void onSubscribe(Flow.Subscription s) {
    subscription = s;
    if (refuse) {
      s.cancel();
      refused("answer's Content-Length exceeds " + cap + " bytes");
    } else {
      s.request(Long.MAX_VALUE);
    }
  }

  @Override
  public void onNext(List<ByteBuffer> items) {
    if (body.isDone()) {
      return;
    }
    for (ByteBuffer b : items) {
      if ((share == null ? buf.size() : length) + (long) b.remaining() > cap) {
        subscription.cancel();
        refused("answer exceeds " + cap + " bytes");
        return;
      }
      if (share != null) {
        try {
          takeInto(b);
        } catch (BodyBudget.Refused e) {
          subscription.cancel();
          body.completeExceptionally(e);
          return;
        }
        continue;
      }
      byte[] chunk = new byte[b.remaining()];
      b.get(chunk);
      buf.write(chunk, 0, chunk.length);
    }
  }

  /** Copies {@code b} into {@link #taken}, growing it in steps taken from the share. */
  private void takeInto(ByteBuffer b) {
    while (b.hasRemaining()) {
      if (length == taken.length) {
        int grown;
        if (taken.length < limit) {
          grown = taken.length == 0 ? Math.min(limit, FIRST_STEP)
              : (int) Math.min(limit, 2L * taken.length);
        } else { // past its Content-Length (the client does not pass that on): up to the cap
          grown = (int) Math.min(cap, Math.max(FIRST_STEP, 2L * taken.length));
        }
        taken = share.grow(taken, grown);
      }
      int n = Math.min(b.remaining(), taken.length - length);
      b.get(taken, length, n);
      length += n;
    }
  }

  private void refused(String what) {
    if (tooLarge == null) {
      body.complete(null);
    } else {
      body.completeExceptionally(tooLarge.apply(what));
    }
  }

  @Override
  public void onError(Throwable t) {
    body.completeExceptionally(t);
  }

  @Override
  public void onComplete() {
    if (share == null) {
      body.complete(buf.toByteArray());
      return;
    }
    if (body.isDone()) {
      return;
    }
    try {
      if (length != taken.length) {
        share.take(length);
        byte[] old = taken;
        taken = java.util.Arrays.copyOf(old, length);
        share.give(old.length);
      }
      body.complete(taken);
    } catch (BodyBudget.Refused e) {
      body.completeExceptionally(e);
    }
  }
}
