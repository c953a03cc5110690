package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.contract.ThrowingClock;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.transport.http.HttpTransportTest.Recorder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.Test;

/**
 * A host's wall clock ({@link HttpTransport.Builder#wallClockMillis}) that throws on some
 * readings loses no message, no request and no answer, and costs no in-flight slot: a reading
 * that throws gives the latest good one, as the node's clock does.
 */
class HttpTransportClockTest extends HttpTransportFixture {

  private static final int REQUESTS = 12;

  /** A wall clock in milliseconds whose every other reading throws once armed. */
  private static ThrowingClock everyOtherThrows() {
    return new ThrowingClock(System::currentTimeMillis, 2, 0);
  }

  /**
   * The sender's wall clock throws as it stamps a request or a message: each is still sent and
   * answered or delivered, and none holds its in-flight slot after it ends (4 slots to the
   * peer, more requests than that sent one after the other).
   */
  @Test
  void aSendersWallClockThatThrowsLosesNothingAndKeepsNoSlot() throws Exception {
    Recorder ra = new Recorder();
    HttpTransport a = start(node("a"), ra);
    ThrowingClock wall = everyOtherThrows();
    HttpTransport b = start(node("b").maxInFlightPerPeer(4).wallClockMillis(wall::nanoTime),
        new Recorder());
    List<String> problems = exchangeWhileItThrows(wall, b, a, ra);
    assertEquals(List.of(), problems, "what the sender's clock throwing did");
    assertEquals(0, b.stats().pendingRequests(), "requests still pending");
  }

  /**
   * The receiver's wall clock throws as it checks a message's timestamp: every request is
   * answered by its handler and every message delivered, and the receiver goes on serving.
   */
  @Test
  void aReceiversWallClockThatThrowsLeavesNoExchangeUnanswered() throws Exception {
    Recorder ra = new Recorder();
    ThrowingClock wall = everyOtherThrows();
    HttpTransport a = start(node("a").wallClockMillis(wall::nanoTime), ra);
    HttpTransport b = start(node("b"), new Recorder());
    List<String> problems = exchangeWhileItThrows(wall, b, a, ra);
    assertEquals(List.of(), problems, "what the receiver's clock throwing did");
  }

  /** A clock that throws when first read, as the transport is built, fails the build. */
  @Test
  void aWallClockThatThrowsAtBuildFailsTheBuildWithATypedError() {
    ThrowingClock wall = new ThrowingClock(System::currentTimeMillis, 1, 0).arm();
    IllegalStateException x = assertThrows(IllegalStateException.class,
        () -> toClose.add(node("a").wallClockMillis(wall::nanoTime).build()),
        "a wall clock that throws at once gave a transport whose every message reads it");
    assertTrue(x.getMessage().contains("clock"), x.getMessage());
    assertTrue(x.getCause() != null, "what the clock threw");
  }

  /**
   * {@link #REQUESTS} messages from {@code from} to {@code to}, one after the other, each
   * awaited at {@code received} (the handler of {@code to}) before the next is sent.
   */
  private static void deliver(HttpTransport from, HttpTransport to, Recorder received,
      List<String> problems) throws InterruptedException {
    for (int i = 0; i < REQUESTS; i++) {
      byte[] m = ("m" + i).getBytes(StandardCharsets.UTF_8);
      try {
        long busy = from.stats().outboundBusy();
        from.send(to.localAddress(), m);
        // a message is dropped (best effort) while every slot holds an earlier one whose answer
        // is still on its way back, as on a loaded machine: sent again for at most 5 s, so a
        // slot that is never given back still fails
        for (int t = 0; t < 50 && from.stats().outboundBusy() > busy; t++) {
          Thread.sleep(100);
          busy = from.stats().outboundBusy();
          from.send(to.localAddress(), m);
        }
      } catch (Throwable e) {
        problems.add("send of m" + i + " threw " + e);
        continue;
      }
      String got = received.messages.poll(5, TimeUnit.SECONDS);
      if (!(from.localAddress().nodeId() + "@" + from.localAddress().address() + ":m" + i)
          .equals(got)) {
        problems.add("message m" + i + " not delivered (" + got + ")");
      }
    }
  }

  /**
   * With {@code wall} throwing, {@link #REQUESTS} requests and messages from {@code from} to
   * {@code to}; then, with it healthy again, {@link #REQUESTS} more requests.
   *
   * @return what went wrong, empty if nothing did
   */
  private static List<String> exchangeWhileItThrows(ThrowingClock wall, HttpTransport from,
      HttpTransport to, Recorder received) throws InterruptedException {
    wall.arm();
    List<String> problems = new ArrayList<>();
    exchange(from, to, "r", problems);
    deliver(from, to, received, problems);
    wall.disarm();
    exchange(from, to, "after", problems);
    assertTrue(wall.thrown() > 0, "the clock threw");
    return problems;
  }

  /** {@link #REQUESTS} requests from {@code from} to {@code to}, one after the other. */
  private static void exchange(HttpTransport from, HttpTransport to, String name,
      List<String> problems) throws InterruptedException {
    PeerAddress at = to.localAddress();
    for (int i = 0; i < REQUESTS; i++) {
      String id = name + i;
      CompletableFuture<byte[]> f;
      try {
        f = from.request(at, id.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(3));
        // refused at the in-flight limit while earlier messages' answers are still on their
        // way back (a message's handler runs before its answer is written): asked again for
        // at most 5 s, so a slot that is never given back still fails
        for (int t = 0; t < 50 && refusedAtTheLimit(f); t++) {
          Thread.sleep(100);
          f = from.request(at, id.getBytes(StandardCharsets.UTF_8), Duration.ofSeconds(3));
        }
      } catch (Throwable e) {
        problems.add("request " + id + " threw " + e);
        continue;
      }
      try {
        String answer = new String(f.get(6, TimeUnit.SECONDS), StandardCharsets.UTF_8);
        if (!answer.equals("echo " + from.localAddress().nodeId() + " " + id)) {
          problems.add("request " + id + " answered " + answer);
        }
      } catch (ExecutionException e) {
        problems.add("request " + id + " failed: " + e.getCause());
      } catch (TimeoutException e) {
        problems.add("request " + id + " never answered");
      }
    }
  }

  /** Whether {@code f} failed at once because every slot to the peer was taken. */
  private static boolean refusedAtTheLimit(CompletableFuture<byte[]> f) {
    if (!f.isCompletedExceptionally()) {
      return false;
    }
    try {
      f.join();
      return false;
    } catch (java.util.concurrent.CompletionException e) {
      return e.getCause() instanceof io.github.prefixrouter.internal.InFlightLimitException;
    } catch (java.util.concurrent.CancellationException e) {
      return false;
    }
  }
}
