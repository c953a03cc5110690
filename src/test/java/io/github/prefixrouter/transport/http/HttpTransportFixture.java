package io.github.prefixrouter.transport.http;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;

/** What the HTTP transport's tests share: transports and sockets closed after each test. */
abstract class HttpTransportFixture {

  /** Closed, in order, after each test. */
  final List<AutoCloseable> toClose = new ArrayList<>();

  @AfterEach
  void closeAll() throws Exception {
    for (AutoCloseable c : toClose) {
      c.close();
    }
  }

  /** Builds, registers for closing and starts a transport. */
  HttpTransport start(HttpTransport.Builder b, Transport.InboundHandler h) {
    HttpTransport t = b.build();
    toClose.add(t);
    t.start(h);
    return t;
  }

  /** A transport on a free loopback port with the tests' cluster key. */
  static HttpTransport.Builder node(String id) {
    return HttpTransport.builder().nodeId(id).listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY);
  }

  /**
   * Adds to {@code problems} unless a request "after" from {@code b} to {@code at}, sent with
   * {@code timeout}, is answered "echo b after" within twice that; a failure is added as
   * {@code failed} and the exception.
   */
  static void requestAfterAnswered(HttpTransport b, PeerAddress at, Duration timeout,
      String failed, List<String> problems) throws InterruptedException {
    CompletableFuture<byte[]> after =
        b.request(at, "after".getBytes(StandardCharsets.UTF_8), timeout);
    try {
      String answer = new String(after.get(2 * timeout.toMillis(), TimeUnit.MILLISECONDS),
          StandardCharsets.UTF_8);
      if (!answer.equals("echo b after")) {
        problems.add("request after answered " + answer);
      }
    } catch (ExecutionException | TimeoutException e) {
      problems.add(failed + " " + e);
    }
  }
}
