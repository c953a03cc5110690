package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.testing.AnsweringHttpClient;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ProtocolException;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
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
    return info(contentLength < 0 ? Map.of()
        : Map.of("Content-Length", List.of(Long.toString(contentLength))));
  }

  static HttpResponse.ResponseInfo info(Map<String, List<String>> h) {
    return AnsweringHttpClient.responseInfo(200, HttpHeaders.of(h, (k, v) -> true));
  }

  static CompletableFuture<byte[]> body(HttpResponse.BodySubscriber<byte[]> s) {
    return s.getBody().toCompletableFuture();
  }

  /**
   * Whatever the pieces, the body is their concatenation when it stays within the cap; above
   * it, the subscription is cancelled and the body is null (or fails with the caller's
   * exception); the subscribers agree, those that take the body's heap from a share too, whose
   * share then holds the body's exact length.
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
    BodyBudget budget = new BodyBudget(1 << 20, Duration.ZERO, () -> { });
    BodyBudget.Share nullShare = budget.share();
    BodyBudget.Share failShare = budget.share();
    HttpResponse.BodySubscriber<byte[]> orNullShared = CappedBody.orNull(info(-1), cap, nullShare);
    HttpResponse.BodySubscriber<byte[]> orFailShared =
        CappedBody.orFail(info(-1), cap, TooLarge::new, failShare);
    for (HttpResponse.BodySubscriber<byte[]> s
        : List.of(orNull, orFail, orNullShared, orFailShared)) {
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
        if (s == orNullShared || s == orFailShared) {
          assertEquals(total, (s == orNullShared ? nullShare : failShare).held(),
              "the share holds the body");
        }
      } else if (s == orNull || s == orNullShared) {
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

    // with a share of a budget, as the engine's answers are read: nothing taken from it
    BodyBudget.Share share = new BodyBudget(1 << 20, Duration.ZERO, () -> { }).share();
    Recording sub3 = new Recording();
    HttpResponse.BodySubscriber<byte[]> n = CappedBody.orNull(info(11), 10, share);
    n.onSubscribe(sub3);
    assertTrue(sub3.cancelled);
    assertEquals(0, sub3.requested);
    assertNull(body(n).join());
    Recording sub4 = new Recording();
    HttpResponse.BodySubscriber<byte[]> g = CappedBody.orFail(info(11), 10, TooLarge::new, share);
    g.onSubscribe(sub4);
    assertTrue(sub4.cancelled);
    assertEquals(0, sub4.requested);
    e = assertThrows(CompletionException.class, body(g)::join);
    assertEquals("answer's Content-Length exceeds 10 bytes",
        assertInstanceOf(TooLarge.class, e.getCause()).getMessage());
    assertEquals(0, share.held());
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

  /**
   * A Content-Length that is no number (a broken proxy's or peer's answer) reaches the body
   * handler: the JDK's client checks it only afterwards. Reading it threw a
   * NumberFormatException out of the handler, and the exchange failed with it, naming only "For
   * input string"; it is refused as the protocol error it is, naming the header.
   */
  @Test
  void aContentLengthThatIsNoNumberIsAProtocolError() {
    for (String bad : List.of("abc", "99999999999999999999", "1,2")) {
      HttpResponse.ResponseInfo info = info(Map.of("Content-Length", List.of(bad)));
      for (int k = 0; k < 2; k++) {
        int which = k;
        UncheckedIOException e = assertThrows(UncheckedIOException.class, () -> {
          if (which == 0) {
            CappedBody.orNull(info, 10);
          } else {
            CappedBody.orFail(info, 10, TooLarge::new);
          }
        });
        assertEquals("answer's Content-Length is not a length: \"" + bad + "\"",
            assertInstanceOf(ProtocolException.class, e.getCause()).getMessage());
      }
    }
  }

  /** The same through the JDK's client, from a server that sends such a header. */
  @Test
  void theClientHandsAContentLengthThatIsNoNumberToTheHandler() throws Exception {
    try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      Thread t = new Thread(() -> {
        try (Socket s = server.accept()) {
          s.getInputStream().read(new byte[4096]);
          s.getOutputStream().write(("HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\nhello")
              .getBytes(StandardCharsets.US_ASCII));
          s.getOutputStream().flush();
          s.getInputStream().read(); // until the client closes
        } catch (IOException ignored) {
          // the client went away
        }
      });
      t.setDaemon(true);
      t.start();
      HttpClient client = HttpClient.newHttpClient();
      HttpRequest r = HttpRequest.newBuilder(
          URI.create("http://127.0.0.1:" + server.getLocalPort() + "/"))
          .timeout(Duration.ofSeconds(10)).build();
      CompletableFuture<HttpResponse<byte[]>> f =
          client.sendAsync(r, info -> CappedBody.orFail(info, 10, TooLarge::new));
      ExecutionException e = assertThrows(ExecutionException.class,
          () -> f.get(10, TimeUnit.SECONDS));
      assertInstanceOf(ProtocolException.class,
          assertInstanceOf(UncheckedIOException.class, e.getCause()).getCause(),
          e.getCause().toString());
    }
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
