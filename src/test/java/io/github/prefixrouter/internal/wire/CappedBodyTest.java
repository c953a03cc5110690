package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.Flow;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

class CappedBodyTest {

  /** A subscription that records what the subscriber asked of it. */
  static final class Recording implements Flow.Subscription {
    long requested;
    boolean cancelled;

    @Override
    public void request(long n) {
      requested += n;
    }

    @Override
    public void cancel() {
      cancelled = true;
    }
  }

  static final class TooLarge extends IOException {
    TooLarge(String message) {
      super(message);
    }
  }

  static HttpResponse.ResponseInfo info(long contentLength) {
    Map<String, List<String>> h = contentLength < 0 ? Map.of()
        : Map.of("Content-Length", List.of(Long.toString(contentLength)));
    HttpHeaders headers = HttpHeaders.of(h, (k, v) -> true);
    return new HttpResponse.ResponseInfo() {
      @Override
      public int statusCode() {
        return 200;
      }

      @Override
      public HttpHeaders headers() {
        return headers;
      }

      @Override
      public HttpClient.Version version() {
        return HttpClient.Version.HTTP_1_1;
      }
    };
  }

  static CompletableFuture<byte[]> body(HttpResponse.BodySubscriber<byte[]> s) {
    return s.getBody().toCompletableFuture();
  }

  /**
   * Whatever the pieces, the body is their concatenation when it stays within the cap; above
   * it, the subscription is cancelled and the body is null (or fails with the caller's
   * exception); both subscribers agree.
   */
  @Property(tries = 300)
  void aBodyIsWholeWithinTheCapAndRefusedAboveIt(
      @ForAll @Size(max = 6) List<@Size(max = 40) List<Byte>> pieces,
      @ForAll @IntRange(min = 0, max = 120) int cap) {
    int total = pieces.stream().mapToInt(List::size).sum();
    byte[] expected = new byte[total];
    int at = 0;
    for (List<Byte> p : pieces) {
      for (Byte b : p) {
        expected[at++] = b;
      }
    }
    HttpResponse.BodySubscriber<byte[]> orNull = CappedBody.orNull(info(-1), cap);
    HttpResponse.BodySubscriber<byte[]> orFail =
        CappedBody.orFail(info(-1), cap, TooLarge::new);
    for (HttpResponse.BodySubscriber<byte[]> s : List.of(orNull, orFail)) {
      Recording sub = new Recording();
      s.onSubscribe(sub);
      assertEquals(Long.MAX_VALUE, sub.requested);
      for (List<Byte> p : pieces) {
        byte[] b = new byte[p.size()];
        for (int i = 0; i < b.length; i++) {
          b[i] = p.get(i);
        }
        s.onNext(List.of(ByteBuffer.wrap(b)));
      }
      s.onComplete();
      assertEquals(total > cap, sub.cancelled, "cancelled");
      if (total <= cap) {
        assertArrayEquals(expected, body(s).join());
      } else if (s == orNull) {
        assertNull(body(s).join());
      } else {
        CompletionException e = assertThrows(CompletionException.class, body(s)::join);
        assertEquals("answer exceeds " + cap + " bytes",
            assertInstanceOf(TooLarge.class, e.getCause()).getMessage());
      }
    }
  }

  @Test
  void aDeclaredLengthAboveTheCapIsRefusedBeforeReading() {
    Recording sub = new Recording();
    HttpResponse.BodySubscriber<byte[]> s = CappedBody.orNull(info(11), 10);
    s.onSubscribe(sub);
    assertTrue(sub.cancelled);
    assertEquals(0, sub.requested);
    assertNull(body(s).join());

    Recording sub2 = new Recording();
    HttpResponse.BodySubscriber<byte[]> f = CappedBody.orFail(info(11), 10, TooLarge::new);
    f.onSubscribe(sub2);
    assertTrue(sub2.cancelled);
    CompletionException e = assertThrows(CompletionException.class, body(f)::join);
    assertEquals("answer's Content-Length exceeds 10 bytes",
        assertInstanceOf(TooLarge.class, e.getCause()).getMessage());
  }

  @Test
  void aDeclaredLengthAtTheCapIsRead() {
    Recording sub = new Recording();
    HttpResponse.BodySubscriber<byte[]> s = CappedBody.orNull(info(3), 3);
    s.onSubscribe(sub);
    assertEquals(Long.MAX_VALUE, sub.requested);
    s.onNext(List.of(ByteBuffer.wrap(new byte[] {1, 2}), ByteBuffer.wrap(new byte[] {3})));
    s.onComplete();
    assertArrayEquals(new byte[] {1, 2, 3}, body(s).join());
  }

  @Test
  void aFailedReadFailsTheBody() {
    HttpResponse.BodySubscriber<byte[]> s = CappedBody.orNull(info(-1), 10);
    s.onSubscribe(new Recording());
    IOException cause = new IOException("reset");
    s.onError(cause);
    CompletionException e = assertThrows(CompletionException.class, body(s)::join);
    assertEquals(cause, e.getCause());
  }
}
