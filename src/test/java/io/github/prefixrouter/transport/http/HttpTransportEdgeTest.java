package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.common.util.concurrent.Uninterruptibles;
import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.contract.TransportContractTest;
import io.github.prefixrouter.internal.wire.BodyBudget;
import io.github.prefixrouter.internal.wire.JdkHttpServers;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Proxy;
import java.net.ProxySelector;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiFunction;
import java.util.function.LongSupplier;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** Arguments and settings at the edges of their ranges, and the transport's life cycle. */
class HttpTransportEdgeTest extends HttpTransportFixture {

  /**
   * A request's in-flight slot is free by the time its future's callbacks run: a node that
   * retries or forwards again from the callback, at the peer's limit, is not refused BUSY. The
   * slot was given back by a callback of its own, which ran after the ones the caller registered.
   */
  @Test
  void aCompletedRequestsSlotIsFreeWhenItsCallbacksRun() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b").maxInFlightPerPeer(1), new HttpTransportTest.Recorder());
    byte[] answer = b.request(a.localAddress(), "1".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10))
        .thenCompose(x -> b.request(a.localAddress(), "2".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10)))
        .get(20, TimeUnit.SECONDS);
    assertArrayEquals("echo b 2".getBytes(StandardCharsets.UTF_8), answer);
    // and after a failure (the peer's handler refuses)
    ra.busy = true;
    answer = b.request(a.localAddress(), "3".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10))
        .handle((x, e) -> e)
        .thenCompose(e -> {
          ra.busy = false;
          return b.request(a.localAddress(), "4".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
        })
        .get(20, TimeUnit.SECONDS);
    assertArrayEquals("echo b 4".getBytes(StandardCharsets.UTF_8), answer);
    assertEquals(0, b.stats().outboundBusy());
  }

  /**
   * A request whose future its caller cancels has given its in-flight slot back by the time the
   * future's callbacks run, as a failed one has: a node that sends the peer a CANCEL, or forwards
   * again, from the callback of the forward it let go of is not refused as busy. The slot was
   * given back by a callback of the transport's own, which ran after the ones the caller had
   * registered, so at the peer's limit the request made from there failed BUSY.
   */
  @Test
  void aCancelledRequestsSlotIsFreeWhenItsCallbacksRun() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    ra.hold = true;
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b").maxInFlightPerPeer(1), new HttpTransportTest.Recorder());
    CompletableFuture<byte[]> f = b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(30));
    CompletableFuture<CompletableFuture<byte[]>> next = new CompletableFuture<>();
    f.whenComplete((v, e) -> next.complete(
        b.request(a.localAddress(), new byte[] {2}, Duration.ofSeconds(30))));
    assertTrue(f.cancel(false));
    CompletableFuture<byte[]> again = next.get(10, TimeUnit.SECONDS);
    if (again.isCompletedExceptionally()) {
      ExecutionException e = assertThrows(ExecutionException.class, again::get);
      throw new AssertionError("the request made where the cancelled one completed: " + e.getCause());
    }
    assertEquals(0, b.stats().outboundBusy());
    again.cancel(false);
    assertEquals(0, b.stats().pendingRequests());
    assertEquals(0, b.peersInFlight());
  }

  /**
   * A timeout longer than a long of nanoseconds (about 292 years) means "wait as long as it
   * takes". It made request() throw ArithmeticException after the request had taken one of the
   * peer's in-flight slots and joined the pending requests, so both stayed taken until close:
   * with maxInFlightPerPeer 1, every later request to that peer failed BUSY.
   */
  @Test
  void aTimeoutBeyondTheRangeOfNanosecondsIsAnsweredAndReleasesItsSlot() throws Exception {
    HttpTransport a = start(node("a"), new HttpTransportTest.Recorder());
    HttpTransport b = start(node("b").maxInFlightPerPeer(1), new HttpTransportTest.Recorder());
    for (Duration forever : List.of(ChronoUnit.FOREVER.getDuration(), Duration.ofSeconds(Long.MAX_VALUE),
        Duration.ofNanos(Long.MAX_VALUE).plusNanos(1), Duration.ofNanos(Long.MAX_VALUE))) {
      byte[] answer = b.request(a.localAddress(), "x".getBytes(StandardCharsets.UTF_8), forever)
          .get(10, TimeUnit.SECONDS);
      assertArrayEquals("echo b x".getBytes(StandardCharsets.UTF_8), answer, "timeout " + forever);
      assertEquals(0, b.stats().pendingRequests(), "timeout " + forever);
    }
    assertEquals(0, b.stats().outboundBusy());
    assertEquals(0, b.stats().requestsFailed());
  }

  /**
   * Durations no clock can count are refused by build(), naming the setting. They were accepted:
   * an inboundIoTimeout made start() throw ArithmeticException with the port already bound, a
   * connectTimeout failed every request UNREACHABLE ("long overflow"), a messageTimeout counted
   * every message as failed, and a replayWindow of Long.MAX_VALUE ms turned the replay check off
   * (its horizon arithmetic overflowed, so every remembered nonce was forgotten at once and a
   * replayed message was delivered again).
   */
  @Test
  void durationsBeyondADayAreRefusedByBuildNamingTheSetting() {
    Map<String, BiFunction<HttpTransport.Builder, Duration, HttpTransport.Builder>> settings = Map.of(
        "connectTimeout", HttpTransport.Builder::connectTimeout,
        "messageTimeout", HttpTransport.Builder::messageTimeout,
        "maxHandlingTime", HttpTransport.Builder::maxHandlingTime,
        "inboundIoTimeout", HttpTransport.Builder::inboundIoTimeout,
        "replayWindow", HttpTransport.Builder::replayWindow);
    for (var e : settings.entrySet()) {
      for (Duration d : List.of(ChronoUnit.FOREVER.getDuration(), Duration.ofMillis(Long.MAX_VALUE),
          Duration.ofDays(1).plusNanos(1))) {
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
            () -> e.getValue().apply(node("a"), d).build(), e.getKey() + " " + d);
        assertTrue(x.getMessage().contains(e.getKey()), x.getMessage());
      }
      HttpTransport t = start(e.getValue().apply(node("a"), Duration.ofDays(1)), new HttpTransportTest.Recorder());
      t.close();
    }
  }

  /**
   * The threads a transport creates are the ones its documentation lists, all daemon threads,
   * and close() ends them (the HTTP client's selector too, which ended only when the client was
   * garbage collected). Started from a thread that is not a daemon (as a host's main thread), the JDK
   * server's dispatcher thread was not a daemon either, and kept the JVM alive when the host
   * ended without closing the transport.
   */
  @Test
  void theThreadsCreatedAreTheDocumentedDaemonsAndCloseEndsThem() throws Exception {
    Set<Thread> before = Set.copyOf(Thread.getAllStackTraces().keySet());
    List<HttpTransport> nodes = new ArrayList<>();
    Thread host = new Thread(() -> {
      nodes.add(start(node("threads-a"), new HttpTransportTest.Recorder()));
      nodes.add(start(node("threads-b"), new HttpTransportTest.Recorder()));
    }, "host-main");
    host.setDaemon(false);
    host.start();
    host.join();
    HttpTransport a = nodes.get(0);
    HttpTransport b = nodes.get(1);
    b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS);
    a.request(b.localAddress(), new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS);
    // threads of other tests' leftovers may start meanwhile: only the names the transport's
    // threads can have are looked at
    List<Thread> created = new ArrayList<>();
    for (Thread t : Thread.getAllStackTraces().keySet()) {
      if (!before.contains(t) && t.getName().matches("prefix-router-http-threads-.*|HTTP-Dispatcher"
          + "|idle-timeout-task|HttpClient-\\d+-SelectorManager")) {
        created.add(t);
      }
    }
    assertEquals(2, created.stream().filter(t -> t.getName().equals("HTTP-Dispatcher")).count());
    Pattern own = Pattern.compile("prefix-router-http-threads-[ab]-(server|reader|client|timer)-\\d+");
    for (Thread t : created) {
      assertTrue(!t.getName().startsWith("prefix-router") || own.matcher(t.getName()).matches(),
          "undocumented thread " + t.getName());
      assertTrue(t.isDaemon(), t.getName() + " is not a daemon thread");
    }
    a.close();
    b.close();
    for (Thread t : created) {
      t.join(10_000);
      assertFalse(t.isAlive(), t.getName() + " still runs after close()");
    }
  }

  /**
   * A close() called while start() is binding leaves nothing running: it waits for start() to
   * finish, then releases the port and ends the transport's threads; a start() after close()
   * fails. close() read the server and executors before start() had made them, found none, and
   * start() then went on to serve on the port until the JVM ended.
   */
  @Test
  void aCloseWhileStartIsBindingLeavesNothingRunning() throws Exception {
    HttpTransport t = node("closing-in-start").build();
    toClose.add(t);
    AtomicReference<Thread> closer = new AtomicReference<>();
    t.beforeBind = () -> {
      Thread c = new Thread(t::close, "closer");
      closer.set(c);
      c.start();
      // on until close() has returned, or waits for this start()
      while (c.getState() == Thread.State.NEW || c.getState() == Thread.State.RUNNABLE) {
        Thread.onSpinWait();
      }
    };
    t.start(new HttpTransportTest.Recorder());
    closer.get().join(20_000);
    assertFalse(closer.get().isAlive(), "close() did not return");
    InetSocketAddress port = HttpTransportTest.hostPort(t.localAddress().address());
    try (java.net.ServerSocket s = new java.net.ServerSocket()) {
      s.bind(port); // the port is free again
    }
    for (Thread th : Thread.getAllStackTraces().keySet()) {
      if (th.getName().startsWith("prefix-router-http-closing-in-start-")) {
        th.join(10_000);
        assertFalse(th.isAlive(), th.getName() + " still runs after close()");
      }
    }
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> t.start(new HttpTransportTest.Recorder()));
    assertEquals("transport is closed", e.getMessage());
  }

  /**
   * A start() that fails once the server is bound (a thread that cannot be created, say) leaves
   * nothing running: the port is free again and the transport's threads end. It threw with the
   * port bound and the threads started, which only a close() the caller had no reason to call
   * released.
   */
  @Test
  void aStartThatFailsAfterBindingLeavesNothingRunning() throws Exception {
    HttpTransport t = node("failing-start").build();
    toClose.add(t);
    t.whileStarting = () -> {
      throw new IllegalStateException("no thread for the dispatcher");
    };
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> t.start(new HttpTransportTest.Recorder()));
    assertEquals("no thread for the dispatcher", e.getMessage());
    InetSocketAddress port = HttpTransportTest.hostPort(t.localAddress().address());
    try (java.net.ServerSocket s = new java.net.ServerSocket()) {
      s.bind(port); // the port is free again
    }
    for (Thread th : Thread.getAllStackTraces().keySet()) {
      if (th.getName().startsWith("prefix-router-http-failing-start-")) {
        th.join(10_000);
        assertFalse(th.isAlive(), th.getName() + " still runs after start() failed");
      }
    }
    e = assertThrows(IllegalStateException.class, () -> t.start(new HttpTransportTest.Recorder()));
    assertEquals("transport is closed", e.getMessage());
  }

  /**
   * A message that arrives while start() runs (from a peer that knew the node's address before it
   * restarted) may reach the handler as soon as the server accepts connections, and the handler
   * may answer through the transport then. The server was started before the HTTP client was
   * built and the node's address set, so from there the handler found localAddress() throwing
   * "transport not started" and its request failed UNREACHABLE, and a send or request made just
   * after the client was built failed with a NullPointerException, keeping the peer's
   * in-flight slot for good.
   */
  @Test
  void aHandlerCalledWhileStartRunsCanUseTheTransport() throws Exception {
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    int port;
    try (java.net.ServerSocket free = new java.net.ServerSocket(0, 1,
        java.net.InetAddress.getByName("127.0.0.1"))) {
      port = free.getLocalPort();
    }
    AtomicReference<String> address = new AtomicReference<>();
    CompletableFuture<CompletableFuture<byte[]>> asked = new CompletableFuture<>();
    HttpTransport a = node("a").listen("127.0.0.1", port).build();
    toClose.add(a);
    a.whileStarting = () -> {
      b.send(new PeerAddress("a", "127.0.0.1:" + port), new byte[] {1});
      try {
        asked.get(10, TimeUnit.SECONDS);
      } catch (Exception e) {
        throw new AssertionError("the message sent while start() ran did not arrive", e);
      }
    };
    a.start(new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        try {
          address.set(a.localAddress().address());
        } catch (RuntimeException e) {
          address.set(e.toString());
        }
        try {
          asked.complete(a.request(from, "x".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10)));
        } catch (RuntimeException e) {
          asked.complete(CompletableFuture.failedFuture(e));
        }
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    });
    CompletableFuture<byte[]> f = asked.get(10, TimeUnit.SECONDS);
    try {
      assertArrayEquals("echo a x".getBytes(StandardCharsets.UTF_8), f.get(10, TimeUnit.SECONDS));
    } catch (ExecutionException e) {
      throw new AssertionError("the request the handler made while start() ran: " + e.getCause());
    }
    assertEquals("127.0.0.1:" + port, address.get(), "localAddress() in the handler");
    assertEquals(0, a.stats().pendingRequests());
    assertEquals(0, a.peersInFlight());
  }

  /**
   * A message or request that a reader thread is still checking when close() returns is not
   * delivered. The transport looked at its closed flag only before reading the body, so one
   * whose check was under way (here held in the replay check's clock until close() returned)
   * reached the handler after close(), on a thread close() had interrupted.
   */
  @Test
  void nothingReachesTheHandlerAfterCloseReturned() throws Exception {
    for (boolean request : new boolean[] {false, true}) {
      CountDownLatch checking = new CountDownLatch(1);
      CountDownLatch closed = new CountDownLatch(1);
      AtomicReference<Thread> reader = new AtomicReference<>();
      LongSupplier clock = () -> {
        if (Thread.currentThread().getName().contains("-reader-")) {
          reader.set(Thread.currentThread());
          checking.countDown();
          Uninterruptibles.awaitUninterruptibly(closed); // close() interrupts the readers
        }
        return System.currentTimeMillis();
      };
      AtomicInteger delivered = new AtomicInteger();
      HttpTransport a = start(node("a").wallClockMillis(clock), TransportContractTest.counting(delivered));
      MessageAuthenticator auth = new MessageAuthenticator(List.of(HttpTransportTest.KEY));
      String ts = Long.toString(System.currentTimeMillis());
      String tag = request ? "request" : "message";
      String mac = auth.sign(new byte[] {1}, tag, "b", "127.0.0.1:1", "a", ts, "n1");
      CompletableFuture<Integer> posted = CompletableFuture.supplyAsync(() -> {
        try {
          return HttpTransportTest.post(a, "/prefix-router/v1/" + tag, new byte[] {1}, "b", "127.0.0.1:1",
              "a", ts, "n1", mac);
        } catch (Exception e) {
          return -1; // the connection was closed under the request
        }
      });
      assertTrue(checking.await(10, TimeUnit.SECONDS), "the " + tag + " reached the replay check");
      a.close();
      closed.countDown();
      reader.get().join(10_000); // the reader ends after its task: close() shut its pool down
      assertFalse(reader.get().isAlive());
      int status = posted.get(20, TimeUnit.SECONDS);
      assertEquals(0, delivered.get(), "the " + tag + " was delivered after close(), answered " + status);
    }
  }

  /**
   * close() called on one of the transport's own threads (the node closes it from whichever
   * thread completes its last request: here the timer's, which completes a request with
   * TIMEOUT) leaves that thread's interrupt status as it found it. Shutting its own pool down
   * interrupted the calling thread, so the host's code that ran after close() on it found
   * itself interrupted (its next blocking call failed at once).
   */
  @Test
  void closeOnTheTransportsOwnThreadDoesNotInterruptIt() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    ra.hold = true;
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    CompletableFuture<String> after = new CompletableFuture<>();
    b.request(a.localAddress(), new byte[] {1}, Duration.ofMillis(100)).whenComplete((v, e) -> {
      b.close();
      after.complete(Thread.currentThread().getName() + " interrupted: "
          + Thread.currentThread().isInterrupted());
    });
    String seen = after.get(20, TimeUnit.SECONDS);
    assertTrue(seen.endsWith("interrupted: false"), seen);
  }

  /**
   * The text of a peer's error answer ({@code PR-Error}, not authenticated) reaches the request's
   * failure printable and shortened, as the peer's id in {@code PR-Node} already did: it was
   * copied whole, so anyone answering at a peer's address put 100,000 characters and terminal
   * escapes into every failure the node logs.
   */
  @Test
  void aPeersErrorTextIsShortenedAndPrintableInTheFailure() throws Exception {
    String error = "\u001b[31m" + "x".repeat(100_000);
    HttpServer fake = JdkHttpServers.create(new InetSocketAddress("127.0.0.1", 0), 0);
    fake.createContext("/", ex -> {
      ex.getRequestBody().readAllBytes();
      ex.getResponseHeaders().add("PR-Error", error);
      ex.sendResponseHeaders(ex.getRequestURI().getPath().endsWith("request") ? 503 : 401, -1);
      ex.close();
    });
    fake.start();
    toClose.add(() -> fake.stop(0));
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    ExecutionException e = assertThrows(ExecutionException.class, () -> b.request(
        new PeerAddress("a", "127.0.0.1:" + fake.getAddress().getPort()), new byte[1], Duration.ofSeconds(10))
        .get(20, TimeUnit.SECONDS));
    String message = e.getCause().getMessage();
    assertTrue(message.contains("xxxxxxxx"), message.length() > 300 ? message.substring(0, 300) : message);
    assertTrue(message.length() < 1_000, "failure of " + message.length() + " characters");
    assertTrue(message.chars().allMatch(c -> c >= 0x20 && c < 0x7f), "unprintable characters");
  }

  /**
   * A request handler that throws an Error (an assertion, a stack overflow) fails that request
   * like one that throws an exception, and gives its inbound slot back. Only exceptions were
   * caught: the Error escaped to the JDK server, which closed the connection, and the slot
   * stayed taken; with maxInboundRequests 1 every later request was answered busy.
   */
  @Test
  void aRequestHandlerThatThrowsAnErrorFailsOnlyThatRequest() throws Exception {
    handlerThatThrowsFailsOnlyThatRequest(new AssertionError("a handler with a bug"));
  }


  /**
   * A request handler that throws a checked exception without declaring it (as code in a
   * language without checked exceptions may) fails that request like one that throws an
   * unchecked exception, and gives its inbound slot back. It got past the catch of exceptions
   * and Errors, out to the reading of the request, which took it for the body failing to be
   * read: the request was answered 400 and its slot stayed taken, so that with
   * maxInboundRequests 1 every later request was answered busy.
   */
  @Test
  void aRequestHandlerThatThrowsACheckedExceptionFailsOnlyThatRequest() throws Exception {
    handlerThatThrowsFailsOnlyThatRequest(new java.io.IOException("a handler's own I/O failed"));
  }

  /**
   * With maxInboundRequests 1, a handler that throws {@code thrown} on request 0: that request
   * fails as a protocol failure, and the next is answered (the slot was given back).
   */
  private void handlerThatThrowsFailsOnlyThatRequest(Throwable thrown) throws Exception {
    HttpTransport a = start(node("a").maxInboundRequests(1), new Transport.InboundHandler() {
      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        if (payload[0] == 0) {
          throw ThrowingCacheEventListener.<RuntimeException>undeclared(thrown);
        }
        return CompletableFuture.completedFuture(payload);
      }
    });
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> b.request(a.localAddress(), new byte[] {0}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.PROTOCOL, ((TransportException) e.getCause()).kind(),
        e.getCause().getMessage());
    assertArrayEquals(new byte[] {1},
        b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS));
    assertEquals(0, a.stats().inboundBusy());
  }


  /**
   * A message handler that throws an Error (an assertion, a stack overflow) loses that message
   * only: the sender has its 204, the Error is logged, and the reader thread that delivered it
   * lives on to read the next message. Only exceptions were caught: the Error escaped to the JDK
   * server and ended the reader thread, reported on the thread's uncaught-exception handler
   * (standard error) rather than the transport's log.
   */
  @Test
  void aMessageHandlerThatThrowsAnErrorLosesOnlyThatMessage() throws Exception {
    BlockingQueue<Thread> failed = new LinkedBlockingQueue<>();
    BlockingQueue<String> delivered = new LinkedBlockingQueue<>();
    HttpTransport a = start(node("a"), new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        if (payload[0] < 2) {
          failed.add(Thread.currentThread());
          throw payload[0] == 0 ? new AssertionError("a handler with a bug")
              : new StackOverflowError();
        }
        delivered.add(from.nodeId());
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return CompletableFuture.completedFuture(payload);
      }
    });
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    for (byte kind : new byte[] {0, 1}) {
      b.send(a.localAddress(), new byte[] {kind});
      Thread reader = failed.poll(20, TimeUnit.SECONDS);
      assertTrue(reader != null && reader.getName().contains("-reader-"), "delivered on " + reader);
      reader.join(1_000);
      assertTrue(reader.isAlive(), "the Error ended reader thread " + reader.getName());
      b.send(a.localAddress(), new byte[] {2});
      assertEquals("b", delivered.poll(20, TimeUnit.SECONDS));
    }
    assertEquals(4, a.stats().messagesReceived());
    assertEquals(0, b.stats().messagesFailed(), "every message was answered 204");
  }

  /**
   * A peer address is host:port alone. It was put in front of the protocol's path with only its
   * host and port checked, so an address from a peer list or gossip such as
   * {@code host:port/other?} sent the node's requests and messages to another path of that host
   * ({@code POST /other?/prefix-router/v1/request}), a signed envelope naming such an address as
   * its sender's was delivered (for the node to reply to and its gossip to spread), and
   * {@code advertisedAddress} took one.
   */
  @Test
  void anAddressWithAPathQueryOrUserInfoIsNeitherSentToNorAccepted() throws Exception {
    AtomicInteger hits = new AtomicInteger();
    HttpServer other = JdkHttpServers.create(new InetSocketAddress("127.0.0.1", 0), 0);
    other.createContext("/", ex -> {
      hits.incrementAndGet();
      ex.getRequestBody().readAllBytes();
      ex.sendResponseHeaders(204, -1);
      ex.close();
    });
    other.start();
    toClose.add(() -> other.stop(0));
    String hostPort = "127.0.0.1:" + other.getAddress().getPort();
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    List<String> bad = List.of(hostPort + "/other?", hostPort + "/other#", hostPort + "?x=",
        hostPort + "/..", "user@" + hostPort);
    for (String address : bad) {
      PeerAddress to = new PeerAddress("a", address);
      ExecutionException e = assertThrows(ExecutionException.class,
          () -> b.request(to, new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS));
      TransportException te = (TransportException) e.getCause();
      assertEquals(TransportException.Kind.UNREACHABLE, te.kind(),
          address + ": " + te.getMessage());
      assertTrue(te.getMessage().contains("host:port"), te.getMessage());
      b.send(to, new byte[] {1});
    }
    assertEquals(bad.size(), b.stats().messagesDropped());
    assertEquals(0, b.stats().messagesSent());
    assertEquals(0, b.stats().requestsSent());
    assertEquals(0, hits.get(), "requests reached another path of the host");
    assertEquals(0, b.peersInFlight());

    // a signed envelope whose sender address is not host:port is malformed
    AtomicInteger delivered = new AtomicInteger();
    HttpTransport a = start(node("a"), TransportContractTest.counting(delivered));
    MessageAuthenticator auth = new MessageAuthenticator(List.of(HttpTransportTest.KEY));
    String ts = Long.toString(System.currentTimeMillis());
    String from = hostPort + "/other?";
    String mac = auth.sign(new byte[] {1}, "message", "b", from, "a", ts, "n1");
    assertEquals(400, HttpTransportTest.post(a, "/prefix-router/v1/message", new byte[] {1}, "b",
        from, "a", ts, "n1", mac));
    assertEquals(0, delivered.get());
    assertEquals(1, a.stats().malformedRejected());

    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> node("c").advertisedAddress("10.0.0.5:7070/other").build());
    assertTrue(e.getMessage().contains("advertisedAddress"), e.getMessage());
  }

  /**
   * Peers are reached directly, whatever proxy the host's JVM is set up with for its own traffic
   * ({@code -Dhttp.proxyHost}, {@code java.net.useSystemProxies}, a default
   * {@link ProxySelector}). The transport's HTTP client took the host's default selector, so
   * every message and request to a peer went through such a proxy: the payloads through it in
   * the clear without TLS, every peer seen at the receiver under the proxy's one address (which
   * shares one address's limits), and nothing delivered through a proxy that cannot reach the
   * peers.
   */
  @Test
  void peersAreReachedDirectlyWhateverProxyTheHostSetsUp() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransport a = start(node("a"), ra);
    // a "proxy" that counts the connections it is given and closes them
    ServerSocket proxy = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
    toClose.add(proxy);
    AtomicInteger proxied = new AtomicInteger();
    Thread accepting = new Thread(() -> {
      try {
        while (true) {
          proxy.accept().close();
          proxied.incrementAndGet();
        }
      } catch (java.io.IOException closed) {
        // the test is over
      }
    }, "proxy");
    accepting.setDaemon(true);
    accepting.start();
    ProxySelector host = ProxySelector.getDefault();
    ProxySelector.setDefault(new ProxySelector() {
      @Override
      public List<Proxy> select(URI uri) {
        return List.of(new Proxy(Proxy.Type.HTTP, proxy.getLocalSocketAddress()));
      }

      @Override
      public void connectFailed(URI uri, SocketAddress sa, java.io.IOException e) {}
    });
    HttpTransport b;
    try {
      b = start(node("b"), new HttpTransportTest.Recorder()); // its client is built here
    } finally {
      ProxySelector.setDefault(host);
    }
    CompletableFuture<byte[]> f =
        b.request(a.localAddress(), "direct".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
    try {
      assertEquals("echo b direct", new String(f.get(20, TimeUnit.SECONDS), StandardCharsets.UTF_8));
    } catch (ExecutionException e) {
      throw new AssertionError("a request to a peer on the host's proxy's route failed ("
          + proxied.get() + " connections reached the proxy): " + e.getCause(), e);
    }
    b.send(a.localAddress(), "m".getBytes(StandardCharsets.UTF_8));
    assertEquals("b@" + b.localAddress().address() + ":m", ra.messages.poll(10, TimeUnit.SECONDS),
        "a message delivered");
    assertEquals(0, proxied.get(), "connections that went to the host's proxy");
  }

  /**
   * A chunked body whose chunk size is 2^31 or more (the JDK server parses it into an int, which
   * overflows) is answered 400 as a body that cannot be read, and its connection is closed after
   * the answer. The server's stream threw {@link IndexOutOfBoundsException} at the first read:
   * the transport answered 500 ("internal error", logged with its stack trace at warning level
   * for anyone who sent one), and the server's draining of the body threw it again, so that the
   * exchange never finished and the connection stayed open past the I/O timeout and the idle
   * interval, until the transport closed: a stranger could hold as many connections as it
   * liked.
   */
  @Test
  void aChunkSizeThatOverflowsAnIntIsRefusedAndItsConnectionClosed() throws Exception {
    AtomicInteger delivered = new AtomicInteger();
    HttpTransport a = start(node("a").inboundIoTimeout(Duration.ofSeconds(60)),
        TransportContractTest.counting(delivered));
    for (String size : List.of("80000000", "ffffffff", "fffffffff0")) {
      for (String path : List.of("message", "request")) {
        try (Socket s = new Socket()) {
          s.connect(HttpTransportTest.hostPort(a.localAddress().address()), 5_000);
          s.setSoTimeout(10_000);
          OutputStream out = s.getOutputStream();
          out.write(("POST /prefix-router/v1/" + path + " HTTP/1.1\r\nHost: x\r\n"
              + "Transfer-Encoding: chunked\r\n\r\n" + size + "\r\nabc\r\n0\r\n\r\n")
              .getBytes(StandardCharsets.US_ASCII));
          out.flush();
          InputStream in = s.getInputStream();
          ByteArrayOutputStream answer = new ByteArrayOutputStream();
          byte[] buf = new byte[1024];
          try {
            for (int n; (n = in.read(buf)) >= 0; ) {
              answer.write(buf, 0, n);
            }
          } catch (java.net.SocketTimeoutException e) {
            answer.write("<still open after 10 s>".getBytes(StandardCharsets.US_ASCII));
          }
          String text = answer.toString(StandardCharsets.US_ASCII);
          assertTrue(text.startsWith("HTTP/1.1 400"), size + " " + path + ": " + text);
          assertTrue(text.contains("cannot read body"), size + " " + path + ": " + text);
          assertFalse(text.contains("<still open"), size + " " + path
              + ": the connection was left open after the answer: " + text);
        }
      }
    }
    assertEquals(0, delivered.get());
    assertEquals(0, a.stats().bodyBudgetHeldBytes());
  }

  /**
   * A body the peer port cannot read is counted in {@code malformedRejected}, as every other
   * malformed request is: a chunked body cut off mid-chunk, a chunk longer than its size says,
   * a chunk size that is no number, a body shorter than its {@code Content-Length} (the sender
   * closing its side), and a connection reset mid-body. Such bodies were answered 400 and
   * counted nowhere.
   */
  @Test
  void aBodyThatCannotBeReadIsCountedAsMalformed() throws Exception {
    AtomicInteger delivered = new AtomicInteger();
    HttpTransport a = start(node("a").inboundIoTimeout(Duration.ofSeconds(60)),
        TransportContractTest.counting(delivered));
    String chunked = "Transfer-Encoding: chunked\r\n\r\n";
    Map<String, String> bodies = new java.util.LinkedHashMap<>();
    bodies.put("cut off mid-chunk", chunked + "10\r\nabc");
    bodies.put("a chunk longer than its size", chunked + "3\r\nabcdef\r\n0\r\n\r\n");
    bodies.put("a chunk size that is no number", chunked + "zz\r\nabc\r\n0\r\n\r\n");
    bodies.put("shorter than its Content-Length", "Content-Length: 100\r\n\r\nabc");
    long expected = 0;
    for (Map.Entry<String, String> e : bodies.entrySet()) {
      String what = e.getKey();
      String body = e.getValue();
      for (String path : List.of("message", "request")) {
        try (Socket s = new Socket()) {
          s.connect(HttpTransportTest.hostPort(a.localAddress().address()), 5_000);
          s.setSoTimeout(10_000);
          OutputStream out = s.getOutputStream();
          out.write(("POST /prefix-router/v1/" + path + " HTTP/1.1\r\nHost: x\r\n" + body)
              .getBytes(StandardCharsets.US_ASCII));
          out.flush();
          s.shutdownOutput();
          String text = new String(s.getInputStream().readAllBytes(), StandardCharsets.US_ASCII);
          assertTrue(text.startsWith("HTTP/1.1 400"), what + " " + path + ": " + text);
          assertTrue(text.contains("cannot read body"), what + " " + path + ": " + text);
        }
        expected++;
        assertEquals(expected, a.stats().malformedRejected(), what + " " + path);
      }
    }
    // reset mid-body: no answer can be read, the count shows that it was refused
    try (Socket s = new Socket()) {
      s.connect(HttpTransportTest.hostPort(a.localAddress().address()), 5_000);
      s.getOutputStream().write(("POST /prefix-router/v1/message HTTP/1.1\r\nHost: x\r\n"
          + "Content-Length: 100\r\n\r\nabc").getBytes(StandardCharsets.US_ASCII));
      s.getOutputStream().flush();
      s.setSoLinger(true, 0);
    }
    expected++;
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (a.stats().malformedRejected() < expected && System.nanoTime() < deadline) {
      Thread.sleep(10);
    }
    assertEquals(expected, a.stats().malformedRejected(), "a connection reset mid-body");
    assertEquals(0, delivered.get());
    assertEquals(0, a.stats().slowConnectionsClosed());
    assertEquals(0, a.stats().bodyBudgetHeldBytes());
  }

  /**
   * A request whose handler blocks in {@code onRequest} (which the handler must not do) is
   * answered 504 after {@code maxHandlingTime} all the same, and once, when the handler returns
   * late. The limit's timer was started only once {@code onRequest} had returned a future, so
   * such a request went unanswered for as long as the handler blocked: here the requester's own
   * timeout, a minute, and for ever for a handler that never returns.
   */
  @Test
  void aHandlerThatBlocksInOnRequestIsAnswered504AfterMaxHandlingTime() throws Exception {
    CountDownLatch release = new CountDownLatch(1);
    AtomicInteger calls = new AtomicInteger();
    HttpTransport a = start(node("a").maxHandlingTime(Duration.ofMillis(300)),
        new Transport.InboundHandler() {
          @Override
          public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
            calls.incrementAndGet();
            Uninterruptibles.awaitUninterruptibly(release, 30, TimeUnit.SECONDS);
            return CompletableFuture.completedFuture(new byte[] {7});
          }
        });
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    try {
      CompletableFuture<byte[]> f = b.request(a.localAddress(), new byte[] {1}, Duration.ofMinutes(1));
      ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS),
          "answered within 10 s, not left waiting for the handler");
      TransportException te = (TransportException) e.getCause();
      assertEquals(TransportException.Kind.TIMEOUT, te.kind(), te.getMessage());
      assertTrue(te.getMessage().contains("timed out handling"), te.getMessage());
    } finally {
      release.countDown();
    }
    // the handler's late answer is not written a second time, and its slot is free again
    CompletableFuture<byte[]> again = b.request(a.localAddress(), new byte[] {2}, Duration.ofMinutes(1));
    assertArrayEquals(new byte[] {7}, again.get(10, TimeUnit.SECONDS));
    assertEquals(2, calls.get());
  }
  /**
   * A send or request the HTTP client refuses to start (its executor shut down by a concurrent
   * close) was counted as sent, with its bytes, as well as failed: it is counted only as what
   * happened to it, a message dropped before sending and a request failed.
   */
  @Test
  void aSendTheClientRefusesIsNotCountedAsSent() throws Exception {
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    Object real = swapClient(b, clientThatThrows(
        new java.util.concurrent.RejectedExecutionException("shut down")));
    PeerAddress to = new PeerAddress("a", "127.0.0.1:9");
    ExecutionException e;
    try {
      b.send(to, new byte[] {1, 2, 3});
      e = assertThrows(ExecutionException.class,
          () -> b.request(to, new byte[] {1, 2}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS));
    } finally {
      swapClient(b, real);
    }
    assertEquals(TransportException.Kind.CLOSED, ((TransportException) e.getCause()).kind());
    HttpTransport.Stats st = b.stats();
    assertEquals(0, st.messagesSent(), st.toString());
    assertEquals(1, st.messagesDropped(), st.toString());
    assertEquals(0, st.messagesFailed(), st.toString());
    assertEquals(0, st.requestsSent(), st.toString());
    assertEquals(1, st.requestsFailed(), st.toString());
    assertEquals(0, st.bytesOut(), st.toString());
    assertEquals(0, b.peersInFlight());
  }

  /**
   * What {@code requestsFailed} counts, as its documentation says: requests refused before they
   * were sent (too large; too many in flight to the peer, also counted in {@code outboundBusy})
   * as well as those that failed after sending; not those asked of a closed transport, nor
   * those its close ended.
   */
  @Test
  void requestsFailedCountsRequestsRefusedBeforeSendingButNotThoseOfTheClose() throws Exception {
    Transport.InboundHandler holding = new Transport.InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        return new CompletableFuture<>(); // never answered
      }
    };
    HttpTransport a = start(node("a"), holding);
    HttpTransport b = start(node("b").maxInFlightPerPeer(1).maxMessageBytes(1024),
        new HttpTransportTest.Recorder());
    PeerAddress to = a.localAddress();
    ExecutionException large = assertThrows(ExecutionException.class,
        () -> b.request(to, new byte[2048], Duration.ofSeconds(10)).get(10, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.TOO_LARGE, ((TransportException) large.getCause()).kind());
    CompletableFuture<byte[]> held = b.request(to, new byte[] {1}, Duration.ofMinutes(1));
    ExecutionException busy = assertThrows(ExecutionException.class,
        () -> b.request(to, new byte[] {2}, Duration.ofSeconds(10)).get(10, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.BUSY, ((TransportException) busy.getCause()).kind());
    HttpTransport.Stats st = b.stats();
    assertEquals(1, st.requestsSent(), st.toString());
    assertEquals(1, st.outboundBusy(), st.toString());
    assertEquals(2, st.requestsFailed(), st.toString());

    b.close();
    ExecutionException closed = assertThrows(ExecutionException.class,
        () -> held.get(10, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.CLOSED, ((TransportException) closed.getCause()).kind());
    ExecutionException after = assertThrows(ExecutionException.class,
        () -> b.request(to, new byte[] {3}, Duration.ofSeconds(10)).get(10, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.CLOSED, ((TransportException) after.getCause()).kind());
    st = b.stats();
    assertEquals(1, st.requestsSent(), st.toString());
    assertEquals(2, st.requestsFailed(), st.toString());
  }

  /**
   * A send or request whose handing to the HTTP client throws an Error (a thread its executor
   * cannot start) fails the request with a typed error or drops the message, never throws, and
   * gives back its in-flight slot: more of them than {@code maxInFlightPerPeer}, then a request
   * and a message through the working client reach the peer.
   */
  @Test
  void aSendOrRequestTheClientThrowsAnErrorForGivesItsSlotBack() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransport a = start(node("a"), ra);
    HttpTransport b = start(node("b").maxInFlightPerPeer(4), new HttpTransportTest.Recorder());
    Object real = swapClient(b, clientThatThrows(
        new OutOfMemoryError("unable to create native thread: possibly out of memory")));
    PeerAddress to = a.localAddress();
    List<String> problems = new ArrayList<>();
    try {
      for (int i = 0; i < 6; i++) {
        try {
          b.send(to, new byte[] {1, 2, 3});
        } catch (Throwable e) {
          problems.add("send " + i + " threw " + e);
        }
        CompletableFuture<byte[]> f;
        try {
          f = b.request(to, new byte[] {1, 2}, Duration.ofSeconds(10));
        } catch (Throwable e) {
          problems.add("request " + i + " threw " + e);
          continue;
        }
        ExecutionException e = assertThrows(ExecutionException.class,
            () -> f.get(20, TimeUnit.SECONDS), "request " + i + " answered");
        if (!(e.getCause() instanceof TransportException te)
            || te.kind() != TransportException.Kind.UNREACHABLE
            || !(te.getCause() instanceof OutOfMemoryError)) {
          problems.add("request " + i + " failed with " + e.getCause());
        }
      }
    } finally {
      swapClient(b, real);
    }
    CompletableFuture<byte[]> after =
        b.request(to, "after".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
    try {
      assertEquals("echo b after", new String(after.get(20, TimeUnit.SECONDS), StandardCharsets.UTF_8));
    } catch (ExecutionException e) {
      throw new AssertionError("a request through the working client, after 6 requests and 6 "
          + "messages the client threw an Error for, was not answered: " + e.getCause(), e);
    }
    b.send(to, "m".getBytes(StandardCharsets.UTF_8));
    assertEquals("b@" + b.localAddress().address() + ":m", ra.messages.poll(10, TimeUnit.SECONDS),
        "a message through the working client delivered");
    assertEquals(List.of(), problems, "what the client's Error did");
    HttpTransport.Stats st = b.stats();
    assertEquals(6, st.messagesDropped(), st.toString());
    assertEquals(6, st.requestsFailed(), st.toString());
    assertEquals(1, st.requestsSent(), st.toString());
  }

  /**
   * Whatever is thrown as an inbound request or message is read, checked or handed on, outside
   * the handler and the MAC check (each an Error, or a checked exception thrown undeclared): a
   * share of the body budget that cannot be made, a replay guard that runs out of heap as it
   * remembers a nonce, a timer that cannot start its thread as the request's handling limit is
   * set. It is this node's failure: the request or message is answered 500 at once (the request
   * fails {@code PROTOCOL} at its sender, the message counts as failed there), counted neither as
   * malformed nor as busy, and the reader slot, body share and inbound slot it held are given
   * back, so that with one inbound request and one unfinished read per address allowed, a
   * request and a message afterwards are answered and delivered. An Error escaped to the JDK
   * server with the exchange unanswered, so its sender waited for its timeout, and the reader or
   * inbound slot it held stayed taken; a checked exception was answered 400 and counted as
   * malformed, taken for a body that could not be read.
   */
  @Test
  void anythingThrownAsARequestIsReadCheckedOrHandedOnIsAnswered500() throws Exception {
    BodyBudget noShare = org.mockito.Mockito.mock(BodyBudget.class);
    org.mockito.Mockito.when(noShare.share())
        .thenThrow(new OutOfMemoryError("Java heap space"));
    ReplayGuard guardOutOfHeap = org.mockito.Mockito.mock(ReplayGuard.class);
    org.mockito.Mockito.when(guardOutOfHeap.check(org.mockito.ArgumentMatchers.any(),
            org.mockito.ArgumentMatchers.any(), org.mockito.ArgumentMatchers.anyLong(),
            org.mockito.ArgumentMatchers.anyLong()))
        .thenThrow(new OutOfMemoryError("Java heap space"));
    ReplayGuard guardUndeclared = org.mockito.Mockito.mock(ReplayGuard.class);
    org.mockito.Mockito.when(guardUndeclared.check(org.mockito.ArgumentMatchers.any(),
            org.mockito.ArgumentMatchers.any(), org.mockito.ArgumentMatchers.anyLong(),
            org.mockito.ArgumentMatchers.anyLong()))
        .thenAnswer(inv -> {
          throw ThrowingCacheEventListener.<RuntimeException>undeclared(
              new java.io.IOException("a nonce store's own I/O"));
        });
    java.util.concurrent.ScheduledExecutorService noTimerThread =
        org.mockito.Mockito.mock(java.util.concurrent.ScheduledExecutorService.class);
    org.mockito.Mockito.when(noTimerThread.schedule(org.mockito.ArgumentMatchers.any(Runnable.class),
            org.mockito.ArgumentMatchers.anyLong(), org.mockito.ArgumentMatchers.any()))
        .thenThrow(new OutOfMemoryError("unable to create native thread: possibly out of memory"));
    // field of the receiver, what replaces it, and whether messages pass through it
    List<Object[]> seams = List.of(
        new Object[] {"bodies", noShare, true},
        new Object[] {"replayGuard", guardOutOfHeap, true},
        new Object[] {"replayGuard", guardUndeclared, true},
        new Object[] {"timer", noTimerThread, false});
    List<String> problems = new ArrayList<>();
    for (int i = 0; i < seams.size(); i++) {
      String field = (String) seams.get(i)[0];
      boolean messages = (Boolean) seams.get(i)[2];
      HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
      HttpTransport a = start(node("a" + i).maxInboundRequests(1).maxUnfinishedReadsPerAddress(1),
          ra);
      HttpTransport b = start(node("b" + i).messageTimeout(Duration.ofSeconds(60)),
          new HttpTransportTest.Recorder());
      PeerAddress at = a.localAddress();
      String seam = field + " throwing " + (i == 2 ? "an undeclared IOException" : "an Error");
      Object real = swapField(a, field, seams.get(i)[1]);
      try {
        CompletableFuture<byte[]> f = b.request(at, "r".getBytes(StandardCharsets.UTF_8),
            Duration.ofSeconds(60));
        try {
          problems.add(seam + ": request answered "
              + new String(f.get(5, TimeUnit.SECONDS), StandardCharsets.UTF_8));
        } catch (ExecutionException e) {
          if (!(e.getCause() instanceof TransportException te)
              || te.kind() != TransportException.Kind.PROTOCOL
              || !te.getMessage().contains("HTTP 500")) {
            problems.add(seam + ": request failed " + e.getCause());
          }
        } catch (java.util.concurrent.TimeoutException e) {
          problems.add(seam + ": request not answered within 5 s");
        }
        if (messages) {
          b.send(at, "m".getBytes(StandardCharsets.UTF_8));
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
          while (b.stats().messagesFailed() == 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
          }
          if (b.stats().messagesFailed() != 1) {
            problems.add(seam + ": message not refused within 5 s");
          }
        }
      } finally {
        swapField(a, field, real);
      }
      // a 500 written by a server thread gives its request's inbound slot back just after
      long freed = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      while (a.inboundSlotsHeld() != 0 && System.nanoTime() < freed) {
        Thread.sleep(5);
      }
      CompletableFuture<byte[]> after =
          b.request(at, "after".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
      try {
        String answer = new String(after.get(20, TimeUnit.SECONDS), StandardCharsets.UTF_8);
        if (!answer.equals("echo b" + i + " after")) {
          problems.add(seam + ": request after answered " + answer);
        }
      } catch (ExecutionException e) {
        problems.add(seam + ": request after failed " + e.getCause());
      }
      b.send(at, "m-after".getBytes(StandardCharsets.UTF_8));
      String got = ra.messages.poll(10, TimeUnit.SECONDS);
      if (!("b" + i + "@" + b.localAddress().address() + ":m-after").equals(got)) {
        problems.add(seam + ": message after not delivered (" + got + ")");
      }
      HttpTransport.Stats st = a.stats();
      if (st.malformedRejected() != 0 || st.inboundBusy() != 0 || st.readsRefused() != 0
          || st.bodyBudgetHeldBytes() != 0 || st.internalErrors() != (messages ? 2 : 1)) {
        problems.add(seam + ": at the receiver malformed " + st.malformedRejected()
            + ", inbound busy " + st.inboundBusy() + ", reads refused " + st.readsRefused()
            + ", body budget held " + st.bodyBudgetHeldBytes() + ", internal errors "
            + st.internalErrors());
      }
    }
    assertEquals(List.of(), problems, "what a throw as requests and messages were received did");
  }

  /**
   * An answer the receiver cannot hand to a server thread to be written (its pool cannot start
   * a thread: an OutOfMemoryError) ends its exchange at once: the connection is closed without
   * an answer, never written to on the thread that completed the handler's future, so the
   * request fails at once at its sender; the inbound slot is given back, and the failure is
   * counted and logged as this node's own. Only a RuntimeException (the pool shut down by
   * close()) was caught there: anything else was lost in the future of the handler's answer, and
   * the exchange stayed pending until close(), its sender waiting for its timeout and its inbound
   * slot taken, so that with one inbound request allowed every later one was refused busy. So
   * for an answer the handler gives at once (handed on by the reader thread), for one it gives
   * later (by the thread that completes it), and for the 504 of a handler that does not answer
   * within maxHandlingTime (by the timer thread), whose exchange
   * stayed open, unanswered, until its sender's timeout.
   */
  @Test
  void anAnswerThatCannotBeHandedToAServerThreadEndsItsExchangeAtOnce() throws Exception {
    List<String> problems = new ArrayList<>();
    List<String> cases = List.of("an answer given at once", "an answer given later",
        "the 504 of the handling limit");
    for (int i = 0; i < cases.size(); i++) {
      String how = cases.get(i);
      boolean later = i == 1;
      HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
      ra.hold = i > 0;
      HttpTransport a = start(node("a" + i).maxInboundRequests(1)
          .maxHandlingTime(Duration.ofMillis(i == 2 ? 300 : 60_000)), ra);
      HttpTransport b = start(node("b" + i).messageTimeout(Duration.ofSeconds(60)),
          new HttpTransportTest.Recorder());
      PeerAddress at = a.localAddress();
      java.util.concurrent.ThreadPoolExecutor noThread = executorThatStartsNoThread();
      Object real = swapField(a, "serverExecutor", noThread);
      try {
        CompletableFuture<byte[]> f = b.request(at, "r".getBytes(StandardCharsets.UTF_8),
            Duration.ofSeconds(60));
        if (later) {
          long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
          while (ra.held.isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(10);
          }
          ra.held.forEach(h -> h.complete("late".getBytes(StandardCharsets.UTF_8)));
        }
        try {
          problems.add(how + ": request answered "
              + new String(f.get(5, TimeUnit.SECONDS), StandardCharsets.UTF_8));
        } catch (ExecutionException e) {
          if (!(e.getCause() instanceof TransportException te)
              || te.kind() != TransportException.Kind.UNREACHABLE) {
            problems.add(how + ": request failed " + e.getCause());
          }
        } catch (java.util.concurrent.TimeoutException e) {
          problems.add(how + ": request not ended within 5 s");
        }
      } finally {
        swapField(a, "serverExecutor", real);
        noThread.shutdownNow();
      }
      ra.hold = false;
      ra.held.forEach(h -> h.complete("too late".getBytes(StandardCharsets.UTF_8)));
      CompletableFuture<byte[]> after =
          b.request(at, "after".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
      try {
        String answer = new String(after.get(20, TimeUnit.SECONDS), StandardCharsets.UTF_8);
        if (!answer.equals("echo " + b.localAddress().nodeId() + " after")) {
          problems.add(how + ": request after answered " + answer);
        }
      } catch (ExecutionException e) {
        problems.add(how + ": request after failed " + e.getCause());
      }
      HttpTransport.Stats st = a.stats();
      if (st.inboundBusy() != 0 || st.internalErrors() != 1) {
        problems.add(how + ": at the receiver inbound busy " + st.inboundBusy()
            + ", internal errors " + st.internalErrors());
      }
    }
    assertEquals(List.of(), problems, "what an answer that could not be handed on did");
  }

  /**
   * The 500 of a request whose handling limit cannot be set (a timer that cannot start its
   * thread) is written by a server thread and holds its request's inbound slot until then, as
   * every other answer does: with the server threads' executor holding the 500 back, the slot
   * stays taken (one of {@code maxInboundRequests} 1) and the request unanswered; once the 500
   * is written, the request fails {@code PROTOCOL} at its sender and the slot is free. Before,
   * the slot was given back first, and the 500 written on the reader thread after.
   */
  @Test
  void a500OfARequestThatCannotBeHandedOnHoldsItsSlotUntilWritten() throws Exception {
    HttpTransport a = start(node("a").maxInboundRequests(1), new HttpTransportTest.Recorder());
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    java.util.concurrent.ScheduledExecutorService noTimerThread =
        org.mockito.Mockito.mock(java.util.concurrent.ScheduledExecutorService.class);
    org.mockito.Mockito.when(noTimerThread.schedule(org.mockito.ArgumentMatchers.any(Runnable.class),
            org.mockito.ArgumentMatchers.anyLong(), org.mockito.ArgumentMatchers.any()))
        .thenThrow(new OutOfMemoryError("unable to create native thread: possibly out of memory"));
    BlockingQueue<Runnable> heldBack = new LinkedBlockingQueue<>();
    java.util.concurrent.ThreadPoolExecutor holding = new java.util.concurrent.ThreadPoolExecutor(
        1, 1, 0, TimeUnit.SECONDS, new LinkedBlockingQueue<>()) {
      @Override
      public void execute(Runnable task) {
        heldBack.add(task);
      }
    };
    Object realTimer = swapField(a, "timer", noTimerThread);
    Object realExecutor = swapField(a, "serverExecutor", holding);
    CompletableFuture<byte[]> f;
    try {
      f = b.request(a.localAddress(), "r".getBytes(StandardCharsets.UTF_8),
          Duration.ofSeconds(60));
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
      while (a.stats().internalErrors() == 0 && System.nanoTime() < deadline) {
        Thread.sleep(5);
      }
      assertEquals(1, a.stats().internalErrors(), "the request failed to be handed on");
      assertEquals(1, a.inboundSlotsHeld(), "inbound slots held while the 500 is not written");
      assertFalse(f.isDone(), "the request answered while its 500 is held back");
    } finally {
      swapField(a, "timer", realTimer);
      swapField(a, "serverExecutor", realExecutor);
      holding.shutdownNow();
    }
    Runnable r500 = heldBack.poll(20, TimeUnit.SECONDS);
    assertTrue(r500 != null, "the 500 handed to the server threads");
    r500.run();
    ExecutionException e = assertThrows(ExecutionException.class,
        () -> f.get(20, TimeUnit.SECONDS));
    assertTrue(e.getCause() instanceof TransportException te
        && te.kind() == TransportException.Kind.PROTOCOL
        && te.getMessage().contains("HTTP 500"), e.getCause().toString());
    assertEquals(0, a.inboundSlotsHeld(), "inbound slots held once the 500 is written");
    assertEquals(0, a.answerLanes());
  }

  /**
   * An executor that takes no task: each {@code execute} fails as a JVM out of native threads
   * does, with an {@link OutOfMemoryError}.
   */
  static java.util.concurrent.ThreadPoolExecutor executorThatStartsNoThread() {
    return new java.util.concurrent.ThreadPoolExecutor(
        1, 1, 0, TimeUnit.SECONDS, new LinkedBlockingQueue<>()) {
      @Override
      public void execute(Runnable task) {
        throw new OutOfMemoryError("unable to create native thread: possibly out of memory");
      }
    };
  }

  /**
   * An answer the server threads' executor does not take gives its place in its peer address's
   * lane back: with two server threads (one writer per address), the next answer to the same
   * address is written, and no lane is left behind.
   */
  @Test
  void anAnswerThatCannotBeHandedOnGivesItsPlaceInItsLaneBack() throws Exception {
    HttpTransport a = start(node("a").serverThreads(2), new HttpTransportTest.Recorder());
    HttpTransport b = start(node("b").messageTimeout(Duration.ofSeconds(60)),
        new HttpTransportTest.Recorder());
    PeerAddress at = a.localAddress();
    java.util.concurrent.ThreadPoolExecutor noThread = executorThatStartsNoThread();
    Object real = swapField(a, "serverExecutor", noThread);
    try {
      CompletableFuture<byte[]> f = b.request(at, "r".getBytes(StandardCharsets.UTF_8),
          Duration.ofSeconds(60));
      ExecutionException e = assertThrows(ExecutionException.class,
          () -> f.get(20, TimeUnit.SECONDS));
      assertTrue(e.getCause() instanceof TransportException te
          && te.kind() == TransportException.Kind.UNREACHABLE, e.getCause().toString());
    } finally {
      swapField(a, "serverExecutor", real);
      noThread.shutdownNow();
    }
    // the 500 reaches b as it is written, a moment before a ends that exchange and its lane
    io.github.prefixrouter.testing.Await.until(
        () -> a.answerLanes() == 0 && a.inboundSlotsHeld() == 0,
        "no lane or slot left once the answer that was not taken ended");
    CompletableFuture<byte[]> after =
        b.request(at, "after".getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(10));
    assertEquals("echo b after",
        new String(after.get(20, TimeUnit.SECONDS), StandardCharsets.UTF_8));
  }

  /**
   * An {@link Error} thrown as an answer is written (the heap running out as its headers are
   * sent), on a server thread (a request's answer) or a reader thread (a message's 204), is this
   * node's failure: the exchange is closed, so its sender fails at once, the failure is counted
   * ({@code internalErrors}) and logged through the bounded log of this node's own failures, and
   * the thread goes on; the message, received whole and authenticated, is delivered all the
   * same, and the inbound slot is given back, so that with one inbound request and one server
   * thread allowed the next request is answered. Only an IOException or a RuntimeException was
   * caught there: the Error ended the server thread, counted nowhere and printed by the JVM, a
   * stack trace each; on a reader thread the message was lost, and the 500 tried then threw
   * again, out to the JDK server.
   */
  @Test
  void anErrorThrownAsAnAnswerIsWrittenIsCountedAndEndsOnlyItsExchange() throws Exception {
    HttpTransportTest.Recorder ra = new HttpTransportTest.Recorder();
    HttpTransport a = start(node("a").maxInboundRequests(1).serverThreads(1), ra);
    HttpTransport b = start(node("b").messageTimeout(Duration.ofSeconds(60)),
        new HttpTransportTest.Recorder());
    PeerAddress at = a.localAddress();
    java.util.concurrent.atomic.AtomicBoolean armed =
        new java.util.concurrent.atomic.AtomicBoolean(true);
    answersThatThrow(a, armed);
    List<String> problems = new ArrayList<>();
    List<String> lines = failsThenAnswered(b, at, "request not ended within 5 s", () -> {
      b.send(at, "m".getBytes(StandardCharsets.UTF_8));
      String got = ra.messages.poll(5, TimeUnit.SECONDS);
      if (!("b@" + b.localAddress().address() + ":m").equals(got)) {
        problems.add("message whose 204 threw not delivered (" + got + ")");
      }
    }, armed, problems);
    List<String> counted = lines.stream().filter(l -> l.contains("a: cannot answer")).toList();
    if (counted.size() != 2 || !counted.stream().allMatch(l -> l.contains(" ERROR "))) {
      problems.add("logged as this node's failures, at ERROR: " + counted);
    }
    noThreadEnded(lines, problems);
    HttpTransport.Stats st = a.stats();
    if (st.internalErrors() != 2 || st.inboundBusy() != 0 || st.malformedRejected() != 0) {
      problems.add("at the receiver internal errors " + st.internalErrors() + " (not 2), inbound "
          + "busy " + st.inboundBusy() + ", malformed " + st.malformedRejected());
    }
    assertEquals(List.of(), problems, "what an Error as an answer was written did");
  }

  /**
   * An {@link Error} thrown as a request's answer gets its key-id header (the heap running out
   * as the header is added) is this node's failure as one thrown as the answer is written: the
   * exchange is closed, so its sender fails at once, the failure is counted
   * ({@code internalErrors}) and logged through the bounded log of this node's own failures,
   * and the server thread goes on. The header was added outside the guard of the answer's
   * write: the {@code Error} left the exchange open (the sender waited for its own timeout),
   * counted nowhere, and ended the server thread, the JVM printing its stack trace.
   */
  @Test
  void anErrorAsAnAnswersKeyIdIsAddedIsCountedAndClosesItsExchange() throws Exception {
    HttpTransport a = start(node("a").serverThreads(1), new HttpTransportTest.Recorder());
    HttpTransport b = start(node("b"), new HttpTransportTest.Recorder());
    PeerAddress at = a.localAddress();
    java.util.concurrent.atomic.AtomicBoolean armed =
        new java.util.concurrent.atomic.AtomicBoolean(true);
    answersThatThrow(a, armed, HttpTransport.H_KEY_ID);
    List<String> problems = new ArrayList<>();
    List<String> lines = failsThenAnswered(b, at,
        "request not ended within 5 s, its exchange left open", () -> {}, armed, problems);
    List<String> counted = lines.stream().filter(l -> l.contains("a: cannot answer")).toList();
    if (counted.size() != 1 || !counted.get(0).contains(" ERROR ")) {
      problems.add("logged as this node's failure, at ERROR: " + counted);
    }
    noThreadEnded(lines, problems);
    HttpTransport.Stats st = a.stats();
    if (st.internalErrors() != 1 || st.inboundBusy() != 0) {
      problems.add("at the receiver internal errors " + st.internalErrors() + " (not 1), inbound "
          + "busy " + st.inboundBusy());
    }
    assertEquals(List.of(), problems, "what an Error as an answer's key id was added did");
  }

  /** A step of {@link #failsThenAnswered} between its two requests. */
  private interface Step {
    void run() throws InterruptedException;
  }

  /**
   * With what is logged captured: a request from {@code b} to {@code at} that must fail at once
   * ({@link #requestFailsAtOnce}), then {@code between}, then, {@code armed} turned off, one
   * that must be answered ({@link #requestAfterAnswered}); returns the lines logged.
   */
  private static List<String> failsThenAnswered(HttpTransport b, PeerAddress at,
      String notEnded, Step between, java.util.concurrent.atomic.AtomicBoolean armed,
      List<String> problems) {
    return io.github.prefixrouter.testing.LoggedLines.logged("", () -> {
      try {
        requestFailsAtOnce(b, at, notEnded, problems);
        between.run();
        armed.set(false);
        requestAfterAnswered(b, at, Duration.ofSeconds(10), "request after failed", problems);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        problems.add("interrupted");
      }
    });
  }

  /**
   * Sends a request from {@code b} to {@code at}, whose answer throws as it is written; adds to
   * {@code problems} unless it fails within 5 s, {@code notEnded} if it does not end.
   */
  private static void requestFailsAtOnce(HttpTransport b, PeerAddress at, String notEnded,
      List<String> problems) throws InterruptedException {
    CompletableFuture<byte[]> f = b.request(at, "r".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(60));
    try {
      problems.add("request answered "
          + new String(f.get(5, TimeUnit.SECONDS), StandardCharsets.UTF_8));
    } catch (ExecutionException e) {
      // its exchange closed: the sender fails it at once
    } catch (java.util.concurrent.TimeoutException e) {
      problems.add(notEnded);
    }
  }

  /** Adds to {@code problems} the lines, among {@code lines}, of threads ended by a throw. */
  private static void noThreadEnded(List<String> lines, List<String> problems) {
    List<String> uncaught = lines.stream().filter(l -> l.startsWith("Exception in thread"))
        .toList();
    if (!uncaught.isEmpty()) {
      problems.add("threads ended by what they threw: " + uncaught);
    }
  }

  /**
   * Has {@code t} read its requests and messages through exchanges whose
   * {@code sendResponseHeaders} throws an OutOfMemoryError while {@code armed}: its server's
   * contexts are made again, each calling its inbound handling with such an exchange.
   */
  private static void answersThatThrow(HttpTransport t,
      java.util.concurrent.atomic.AtomicBoolean armed) throws ReflectiveOperationException {
    answersThatThrow(t, armed, null);
  }

  /**
   * {@link #answersThatThrow(HttpTransport, java.util.concurrent.atomic.AtomicBoolean)}, the
   * OutOfMemoryError thrown instead as the answer's header {@code header} is added, if not null.
   */
  private static void answersThatThrow(HttpTransport t,
      java.util.concurrent.atomic.AtomicBoolean armed, String header)
      throws ReflectiveOperationException {
    java.lang.reflect.Field field = HttpTransport.class.getDeclaredField("server");
    field.setAccessible(true);
    HttpServer server = (HttpServer) field.get(t);
    java.lang.reflect.Method inbound = HttpTransport.class.getDeclaredMethod("handleInbound",
        com.sun.net.httpserver.HttpExchange.class, boolean.class);
    inbound.setAccessible(true);
    for (String path : List.of(HttpTransport.MESSAGE_PATH, HttpTransport.REQUEST_PATH)) {
      server.removeContext(path);
      server.createContext(path, ex -> {
        try {
          inbound.invoke(t, new AnswerThatThrows(ex, armed, header),
              path.equals(HttpTransport.REQUEST_PATH));
        } catch (java.lang.reflect.InvocationTargetException e) {
          if (e.getCause() instanceof Error err) {
            throw err; // as the handler itself would have thrown it
          }
          throw new IllegalStateException(e.getCause());
        } catch (IllegalAccessException e) {
          throw new IllegalStateException(e);
        }
      });
    }
  }

  /**
   * An exchange whose {@code sendResponseHeaders} throws an OutOfMemoryError while armed; or,
   * given a header's name, whose response headers throw it as that header is added.
   */
  private static final class AnswerThatThrows extends com.sun.net.httpserver.HttpExchange {
    private final com.sun.net.httpserver.HttpExchange ex;
    private final java.util.concurrent.atomic.AtomicBoolean armed;
    private final String header;

    AnswerThatThrows(com.sun.net.httpserver.HttpExchange ex,
        java.util.concurrent.atomic.AtomicBoolean armed, String header) {
      this.ex = ex;
      this.armed = armed;
      this.header = header;
    }

    @Override
    public void sendResponseHeaders(int rCode, long responseLength) throws java.io.IOException {
      if (armed.get() && header == null) {
        throw new OutOfMemoryError("Java heap space");
      }
      ex.sendResponseHeaders(rCode, responseLength);
    }

    @Override
    public com.sun.net.httpserver.Headers getRequestHeaders() {
      return ex.getRequestHeaders();
    }

    @Override
    public com.sun.net.httpserver.Headers getResponseHeaders() {
      if (header == null) {
        return ex.getResponseHeaders();
      }
      com.sun.net.httpserver.Headers real = ex.getResponseHeaders();
      return new com.sun.net.httpserver.Headers() { // the transport only adds to them
        @Override
        public void add(String key, String value) {
          if (armed.get() && header.equalsIgnoreCase(key)) {
            throw new OutOfMemoryError("Java heap space");
          }
          real.add(key, value);
        }
      };
    }

    @Override
    public java.net.URI getRequestURI() {
      return ex.getRequestURI();
    }

    @Override
    public String getRequestMethod() {
      return ex.getRequestMethod();
    }

    @Override
    public com.sun.net.httpserver.HttpContext getHttpContext() {
      return ex.getHttpContext();
    }

    @Override
    public void close() {
      ex.close();
    }

    @Override
    public InputStream getRequestBody() {
      return ex.getRequestBody();
    }

    @Override
    public OutputStream getResponseBody() {
      return ex.getResponseBody();
    }

    @Override
    public InetSocketAddress getRemoteAddress() {
      return ex.getRemoteAddress();
    }

    @Override
    public int getResponseCode() {
      return ex.getResponseCode();
    }

    @Override
    public InetSocketAddress getLocalAddress() {
      return ex.getLocalAddress();
    }

    @Override
    public String getProtocol() {
      return ex.getProtocol();
    }

    @Override
    public Object getAttribute(String name) {
      return ex.getAttribute(name);
    }

    @Override
    public void setAttribute(String name, Object value) {
      ex.setAttribute(name, value);
    }

    @Override
    public void setStreams(InputStream i, OutputStream o) {
      ex.setStreams(i, o);
    }

    @Override
    public com.sun.net.httpserver.HttpPrincipal getPrincipal() {
      return ex.getPrincipal();
    }
  }

  /** An HTTP client whose every {@code sendAsync} throws {@code thrown}. */
  private static java.net.http.HttpClient clientThatThrows(Throwable thrown) {
    java.net.http.HttpClient client = org.mockito.Mockito.mock(java.net.http.HttpClient.class);
    org.mockito.Mockito.when(client.sendAsync(org.mockito.ArgumentMatchers.any(),
            org.mockito.ArgumentMatchers.any()))
        .thenThrow(thrown);
    return client;
  }

  /** Puts {@code client} in place of {@code t}'s HTTP client; returns the one it replaced. */
  private static Object swapClient(HttpTransport t, Object client)
      throws ReflectiveOperationException {
    return swapField(t, "client", client);
  }

  /** Puts {@code value} in {@code t}'s field {@code name}; returns the value it replaced. */
  private static Object swapField(HttpTransport t, String name, Object value)
      throws ReflectiveOperationException {
    java.lang.reflect.Field field = HttpTransport.class.getDeclaredField(name);
    field.setAccessible(true);
    Object replaced = field.get(t);
    field.set(t, value);
    return replaced;
  }

  /**
   * A port another process holds fails the start with a message that says why, not only where:
   * a host that logs the exception's message (as the node's own warning does) read "cannot
   * listen on 127.0.0.1:7001" and had to find the cause's "Address already in use" elsewhere.
   */
  @Test
  void aPortInUseFailsTheStartSayingWhy() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      HttpTransport t = HttpTransport.builder().nodeId("a")
          .listen("127.0.0.1", taken.getLocalPort()).clusterKey(HttpTransportTest.KEY).build();
      java.io.UncheckedIOException e = assertThrows(java.io.UncheckedIOException.class,
          () -> t.start(new HttpTransportTest.Recorder()));
      assertTrue(e.getMessage().startsWith("cannot listen on 127.0.0.1:" + taken.getLocalPort()),
          e.getMessage());
      String why = e.getCause().getMessage();
      assertTrue(why != null && !why.isBlank(), "the cause says why: " + e.getCause());
      assertTrue(e.getMessage().endsWith(": " + why), e.getMessage());
    }
  }
}
