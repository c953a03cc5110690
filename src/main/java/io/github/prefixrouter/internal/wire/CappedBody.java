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
 */
public final class CappedBody implements HttpResponse.BodySubscriber<byte[]> {
  private final int cap;
  private final boolean refuse;
  /** What a body above the cap fails with; null: it completes with null. */
  private final Function<String, ? extends Throwable> tooLarge;
  private final CompletableFuture<byte[]> body = new CompletableFuture<>();
  private final java.io.ByteArrayOutputStream buf = new java.io.ByteArrayOutputStream();
  private Flow.Subscription subscription;

  private CappedBody(int cap, boolean refuse, Function<String, ? extends Throwable> tooLarge) {
    this.cap = cap;
    this.refuse = refuse;
    this.tooLarge = tooLarge;
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

  private static boolean declaredAbove(HttpResponse.ResponseInfo info, int cap) {
    String value = info.headers().firstValue("Content-Length").orElse(null);
    if (value == null) {
      return false;
    }
    long declared;
    try {
      declared = Long.parseLong(value);
    } catch (NumberFormatException e) {
      // the JDK's client hands such a header to the handler and fails on it only afterwards
      throw new UncheckedIOException(new ProtocolException(
          "answer's Content-Length is not a length: \"" + value + "\""));
    }
    return declared > cap;
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
      if (buf.size() + (long) b.remaining() > cap) {
        subscription.cancel();
        refused("answer exceeds " + cap + " bytes");
        return;
      }
      byte[] chunk = new byte[b.remaining()];
      b.get(chunk);
      buf.write(chunk, 0, chunk.length);
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
    body.complete(buf.toByteArray());
  }
}
