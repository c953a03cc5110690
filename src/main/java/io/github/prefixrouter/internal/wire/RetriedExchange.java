package io.github.prefixrouter.internal.wire;

import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.ProtocolException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.function.BooleanSupplier;
import javax.net.ssl.SSLHandshakeException;

/**
 * One HTTP exchange with a model server, sent once more, at once, when its first try fails with
 * an I/O error before any byte of the answer came ({@link #beforeAnswer}): the race of a pooled
 * connection with the server's idle close. A try whose connection ends after part of the
 * answer's status line or headers came is not sent again: the server read the request and began
 * to answer it. Nor is a request the JDK client has sent again itself ({@link #sentAgainByClient}:
 * a GET whose connection ended before any byte of the answer), so that a server that reads
 * every request and closes its connection unanswered gets each request twice, not more: this
 * class cannot tell a pooled connection the server closed as idle from a new one (the client
 * does not say which it used).
 *
 * <p>uvicorn, which serves vLLM and SGLang, closes a connection idle for 5 s; the JDK client
 * keeps an idle connection in its pool for {@code jdk.httpclient.keepalive.timeout} seconds (20
 * as the library sets it). A request written to a pooled connection as the server closes it
 * fails with {@code "HTTP/1.1 header parser received no bytes"} or a connection reset, and the
 * JDK's client (17 to 25) sends only idempotent requests again, never a POST (unless the host sets
 * {@code jdk.httpclient.enableAllMethodRetry}, {@link #sentAgainByClient}). The server never read that
 * request. The second try goes out on a new connection (the client drops the closed one from
 * its pool), within what is left of the exchange's timeout, and is the last: a server that is
 * really gone then refuses the connection and the exchange fails with that at once.
 *
 * <p>Sending again cannot run a generation twice on a healthy server: the first try either
 * reached no live handler (the server had closed the connection) or lost its connection, and
 * vLLM and SGLang abort a request whose connection closes. Against a server that crashed while
 * it held the first try, it costs one more connection, refused.
 */
public final class RetriedExchange<T> {

  private final HttpClient client;
  private final HttpRequest http;
  private final HttpResponse.BodyHandler<T> handler;
  private final long timeoutNanos;
  private final BooleanSupplier wanted;
  private final Runnable onRetry;
  private final long start = System.nanoTime();
  private final CompletableFuture<HttpResponse<T>> done = new CompletableFuture<>();
  private volatile boolean answered;
  private volatile CompletableFuture<HttpResponse<T>> current;

  private RetriedExchange(HttpClient client, HttpRequest http, HttpResponse.BodyHandler<T> handler,
      long timeoutNanos, BooleanSupplier wanted, Runnable onRetry) {
    this.client = client;
    this.http = http;
    this.handler = handler;
    this.timeoutNanos = timeoutNanos;
    this.wanted = wanted;
    this.onRetry = onRetry;
    // cancelling the exchange's future cancels the try in progress, which closes its connection
    done.whenComplete((r, e) -> {
      if (done.isCancelled()) {
        CompletableFuture<HttpResponse<T>> c = current;
        if (c != null) {
          c.cancel(true);
        }
      }
    });
  }

  /**
   * Sends {@code http} on {@code client}.
   *
   * @param client the HTTP client
   * @param http the request, whose timeout is {@code timeoutNanos}
   * @param handler the answer's body handler, called once the answer's headers came
   * @param timeoutNanos the request's timeout, in ns: a second try waits for its answer's
   *     headers at most what is left of it, and is not sent once none is left
   * @param wanted whether the exchange is still wanted (its request not ended, its owner not
   *     closed): a second try is sent only then
   * @param onRetry run as the second try is sent (to count it)
   * @return the exchange; {@link #future()} completes with the last try's answer or failure
   * @throws RuntimeException what the client throws as the first try is sent (an
   *     {@link Error} too)
   */
  public static <T> RetriedExchange<T> send(HttpClient client, HttpRequest http,
      HttpResponse.BodyHandler<T> handler, long timeoutNanos, BooleanSupplier wanted,
      Runnable onRetry) {
    RetriedExchange<T> x = new RetriedExchange<>(client, http, handler, timeoutNanos, wanted,
        onRetry);
    x.attempt(http, false);
    return x;
  }

  /**
   * The exchange's answer, or its last try's failure (a {@link CompletionException} around it,
   * or it). Cancelling it cancels the try in progress, closing its connection.
   *
   * @return the future of the answer
   */
  public CompletableFuture<HttpResponse<T>> future() {
    return done;
  }

  private void attempt(HttpRequest request, boolean again) {
    CompletableFuture<HttpResponse<T>> c = client.sendAsync(request, info -> {
      answered = true;
      return handler.apply(info);
    });
    current = c;
    if (done.isCancelled()) { // cancelled as it was sent
      c.cancel(true);
    }
    c.whenComplete((resp, err) -> {
      if (err == null) {
        done.complete(resp);
        return;
      }
      Throwable cause = err instanceof CompletionException && err.getCause() != null
          ? err.getCause() : err;
      if (!again && !answered && beforeAnswer(cause) && !sentAgainByClient(request, cause)
          && !done.isDone() && wanted.getAsBoolean()) {
        long left = timeoutNanos - (System.nanoTime() - start);
        if (left > 0) {
          try {
            HttpRequest retry = HttpRequest.newBuilder(request, (name, value) -> true)
                .timeout(Duration.ofNanos(left)).build();
            onRetry.run();
            attempt(retry, true);
          } catch (Throwable e) { // an Error too: the exchange's one failure, not lost
            done.completeExceptionally(e);
          }
          return;
        }
      }
      done.completeExceptionally(err);
    });
  }

  /**
   * The message of the JDK client's {@link IOException} for a connection that ended before any
   * byte of the answer came (JDK 17 to 25).
   */
  static final String NO_ANSWER = "HTTP/1.1 header parser received no bytes";

  /**
   * Whether the JDK client has sent {@code request} a second time itself already before it
   * failed with {@code c}: it does so, once, for a connection that ended before any byte of the
   * answer ({@link #NO_ANSWER}), with a GET or a HEAD, or any method when the host set
   * {@code jdk.httpclient.enableAllMethodRetry} ({@link #CLIENT_RESENDS_ALL_METHODS}: as the
   * client reads it, so that a POST is sent again once, not twice and not never). Sent again
   * here too, such a request would reach a server that drops every request four times.
   *
   * @param request the request the try sent
   * @param c what the try failed with, unwrapped
   * @return true if the exchange is not to be sent again
   */
  static boolean sentAgainByClient(HttpRequest request, Throwable c) {
    String method = request.method();
    boolean clientRetries = method.equals("GET") || method.equals("HEAD")
        || CLIENT_RESENDS_ALL_METHODS;
    return clientRetries && NO_ANSWER.equals(c.getMessage());
  }

  /** The JDK client's setting that makes it send a request of any method again, a POST too. */
  static final String ALL_METHOD_RETRY = "jdk.httpclient.enableAllMethodRetry";

  /**
   * Whether the JDK client sends a request of any method again ({@link #ALL_METHOD_RETRY}), as
   * the client reads it: from the system property or, without one, from the JDK's
   * {@code conf/net.properties} ({@link #clientResendsAllMethods}), once, as the JVM's first
   * exchange of a JDK client starts. This class reads it once too, as the first exchange it
   * sends starts: the same moment, unless the host's own code sent one before. A value the
   * host sets later changes neither.
   */
  static final boolean CLIENT_RESENDS_ALL_METHODS =
      clientResendsAllMethods(System.getProperty(ALL_METHOD_RETRY, netProperty(ALL_METHOD_RETRY)));

  /**
   * {@link #ALL_METHOD_RETRY}'s value read as JDK 17 to 25 read it
   * ({@code jdk.internal.net.http.MultiExchange}): unset is false, an empty value (a bare
   * {@code -Djdk.httpclient.enableAllMethodRetry}) true, any other true only if it is
   * {@code true} in any case ({@link Boolean#parseBoolean}).
   *
   * @param value the setting, or null if it is not set
   * @return whether the client sends a POST again itself
   */
  static boolean clientResendsAllMethods(String value) {
    if (value == null) {
      return false;
    }
    return value.isEmpty() || Boolean.parseBoolean(value);
  }

  /**
   * A setting of the JDK's {@code conf/net.properties} (under {@code java.home}), where the
   * JDK's client reads the networking settings the system properties do not give; null if it
   * has none or the file cannot be read.
   */
  static String netProperty(String name) {
    try {
      String home = System.getProperty("java.home");
      if (home == null) {
        return null;
      }
      Properties p = new Properties();
      try (InputStream in = Files.newInputStream(Path.of(home, "conf", "net.properties"))) {
        p.load(in);
      }
      return p.getProperty(name);
    } catch (IOException | RuntimeException unreadable) {
      return null; // as the JDK: no file, no defaults
    }
  }

  /**
   * The start of the message of the JDK client's {@link IOException} for a connection that ended
   * in the answer's status line or headers, after some of them came ({@code "parsing HTTP/1.1
   * status line, receiving [...], parser state [...]"}, {@code "parsing HTTP/1.1 header, ..."},
   * JDK 17 to 25); one that ended before any byte says {@code "HTTP/1.1 header parser received
   * no bytes"}. The JDK has no type of its own for either.
   */
  static final String ANSWER_CUT = "parsing HTTP/1.1 ";

  /**
   * Whether {@code c}, the failure of a try whose answer's headers did not come, may be the race
   * with the server's idle close: an {@link IOException} (no bytes of an answer, a reset) but a
   * refused connection ({@link ConnectException}), a timeout ({@link HttpTimeoutException}, a
   * connect timeout too), an answer out of form ({@link ProtocolException}: the server sent
   * something), a connection that ended after part of the answer's status line or headers came
   * ({@link #ANSWER_CUT}: the server read the request and began to answer it) and a TLS
   * handshake that failed.
   *
   * @param c what the try failed with, unwrapped
   * @return true if the exchange may be sent again
   */
  static boolean beforeAnswer(Throwable c) {
    return c instanceof IOException && !(c instanceof ConnectException)
        && !(c instanceof HttpTimeoutException) && !(c instanceof ProtocolException)
        && !(c instanceof SSLHandshakeException)
        && !(c.getMessage() != null && c.getMessage().startsWith(ANSWER_CUT));
  }
}
