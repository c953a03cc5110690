package io.github.prefixrouter.transport.http;

import static io.github.prefixrouter.transport.http.HttpTransportFixture.node;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.Await;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A transport that failed to start, or was closed, leaves no thread of its own or of its HTTP
 * client alive. JDK 17's {@code HttpClient} cannot be closed, and its selector thread stayed
 * until the client was garbage collected: for as long as the host kept the transport (a node
 * whose start failed at its client port, say, still referenced by its caller).
 */
class HttpTransportThreadsTest {

  /** Live threads of {@code before}'s complement whose names a transport's threads have. */
  private static List<String> newThreads(Set<Thread> before, String nodeId) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.isAlive() && !before.contains(t))
        .map(Thread::getName)
        .filter(n -> n.startsWith("prefix-router-http-" + nodeId + "-")
            || n.matches("HttpClient-\\d+-SelectorManager"))
        .sorted()
        .toList();
  }

  @Test
  void aStartThatFailsOnceTheClientIsBuiltLeavesNoThreadAlive() throws Exception {
    Set<Thread> before = Set.copyOf(Thread.getAllStackTraces().keySet());
    HttpTransport t = node("failed-start").build();
    t.whileStarting = () -> {
      throw new IllegalStateException("no more threads");
    };
    assertThrows(IllegalStateException.class, () -> t.start(new HttpTransportTest.Recorder()));
    try {
      Await.until(() -> newThreads(before, "failed-start").isEmpty(),
          "the threads of a failed start end");
    } catch (AssertionError e) {
      throw new AssertionError("alive after the failed start: " + newThreads(before, "failed-start"), e);
    }
  }

  @Test
  void closeEndsTheHttpClientsSelectorThreadToo() throws Exception {
    Set<Thread> before = Set.copyOf(Thread.getAllStackTraces().keySet());
    HttpTransport a = node("selector-a").build();
    HttpTransport b = node("selector-b").build();
    a.start(new HttpTransportTest.Recorder());
    b.start(new HttpTransportTest.Recorder());
    b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS);
    assertEquals(2, newThreads(before, "selector-").stream()
        .filter(n -> n.startsWith("HttpClient-")).count(), newThreads(before, "selector-").toString());
    a.close();
    b.close();
    try {
      Await.until(() -> newThreads(before, "selector-").isEmpty(), "close() ends the threads");
    } catch (AssertionError e) {
      throw new AssertionError("alive after close(): " + newThreads(before, "selector-"), e);
    }
    // a request after close() fails as closed, not hanging on a client without a selector
    ExecutionException x = assertThrows(ExecutionException.class,
        () -> b.request(a.localAddress(), new byte[] {1}, Duration.ofSeconds(5))
            .get(20, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.CLOSED, ((TransportException) x.getCause()).kind());
  }
}
