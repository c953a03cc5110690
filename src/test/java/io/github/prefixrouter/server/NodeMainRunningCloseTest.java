package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * Closing a node process stops every part and prints its stats line even when the node's stop
 * fails: a stop whose future failed threw out of close(), past the stats line that
 * docs/deployment.md says a stop prints, and out of the shutdown hook.
 */
class NodeMainRunningCloseTest {

  @Test
  void aFailedNodeStopStillStopsEveryPartAndPrintsTheStatsLine() throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.stop(any())).thenReturn(
        CompletableFuture.failedFuture(new IllegalStateException("the transport would not close")));
    NodeStats stats = statsOfN1(node);
    when(stats.requests()).thenReturn(7L);
    HttpTransport transport = transportOfN1();
    AtomicBoolean schedulerClosed = new AtomicBoolean();
    Schedulers.ClosableScheduler scheduler = noting(schedulerClosed);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    NodeMain.Running r = running(node, transport, null, scheduler, null, null, out);
    r.close(); // the failure is logged: thrown, it went past the stats line
    String printed = out.toString(StandardCharsets.UTF_8);
    assertTrue(printed.startsWith("node n1 stopped: requests=7 "), "no stats line: '" + printed + "'");
    assertEquals(1, printed.lines().count(), printed);
    assertTrue(schedulerClosed.get(), "the scheduler was left running");
  }

  /** Has {@code node}'s stats be those of node n1, with no gossip to tell; returns them. */
  private static NodeStats statsOfN1(PrefixRouterNode node) {
    NodeStats stats = mock(NodeStats.class);
    when(stats.nodeId()).thenReturn("n1");
    when(stats.gossip()).thenReturn(mock(GossipStats.class));
    when(node.stats()).thenReturn(stats);
    return stats;
  }

  /** The transport of node n1, on a free local port, without authentication. */
  private static HttpTransport transportOfN1() {
    return HttpTransport.builder().nodeId("n1").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().build();
  }

  /** An engine that is also {@link AutoCloseable}, as the node process closes its engine. */
  private static io.github.prefixrouter.spi.InferenceEngine closeableEngine() {
    return mock(io.github.prefixrouter.spi.InferenceEngine.class,
        org.mockito.Mockito.withSettings().extraInterfaces(AutoCloseable.class));
  }

  /**
   * A running node process of {@code node} and its parts (null: absent), with a client endpoint
   * in front of the node, printing its stats line to {@code out}.
   */
  private static NodeMain.Running running(PrefixRouterNode node, HttpTransport transport,
      io.github.prefixrouter.spi.InferenceEngine engine, Schedulers.ClosableScheduler scheduler,
      Schedulers.ClosableScheduler files, PromptTokenizer tokenizer, ByteArrayOutputStream out) {
    ClientEndpoint endpoint = new ClientEndpoint(node, List::of, 1, Duration.ofSeconds(1));
    return new NodeMain.Running(node, transport, engine, scheduler, files, endpoint, tokenizer,
        "127.0.0.1:1", Duration.ofSeconds(1), null,
        new PrintStream(out, true, StandardCharsets.UTF_8), null);
  }

  /** A scheduler that notes its close. */
  private static Schedulers.ClosableScheduler noting(AtomicBoolean closed) {
    Schedulers.ClosableScheduler owned = Schedulers.newSingleThread("close-test");
    return new Schedulers.ClosableScheduler() {
      @Override
      public Cancellable schedule(long delayNanos, Runnable task) {
        return owned.schedule(delayNanos, task);
      }

      @Override
      public void close() {
        closed.set(true);
        owned.close();
      }
    };
  }

  /**
   * A part that fails to stop does not keep the parts after it running: a tokenizer whose close
   * threw left the scheduler, the file re-reads and the engine running, and threw out of close()
   * (out of the shutdown hook).
   */
  @Test
  void aPartThatFailsToStopLeavesNoOtherRunning() throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    when(node.stop(any())).thenReturn(CompletableFuture.completedFuture(null));
    statsOfN1(node);
    HttpTransport transport = transportOfN1();
    AtomicBoolean schedulerClosed = new AtomicBoolean();
    AtomicBoolean filesClosed = new AtomicBoolean();
    AtomicBoolean engineClosed = new AtomicBoolean();
    io.github.prefixrouter.spi.InferenceEngine engine = closeableEngine();
    org.mockito.Mockito.doAnswer(i -> {
      engineClosed.set(true);
      return null;
    }).when((AutoCloseable) engine).close();
    PromptTokenizer tokenizer = mock(PromptTokenizer.class);
    org.mockito.Mockito.doThrow(new IllegalStateException("the tokenizer would not close"))
        .when(tokenizer).close();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    NodeMain.Running r = running(node, transport, engine, noting(schedulerClosed),
        noting(filesClosed), tokenizer, out);
    try {
      r.close();
    } catch (RuntimeException e) {
      throw new AssertionError("close() threw", e);
    }
    assertEquals(List.of(true, true, true),
        List.of(schedulerClosed.get(), filesClosed.get(), engineClosed.get()),
        "scheduler, file re-reads, engine closed");
    assertTrue(out.toString(StandardCharsets.UTF_8).startsWith("node n1 stopped: "), out.toString());
    transport.close();
  }

  /**
   * An {@link Error} thrown as a part stops (the tokenizer's or the engine's {@code close()}, a
   * host's code) is reported as an exception there is, logged (an {@code Error} at ERROR) and
   * not thrown on, and the parts after it are stopped all the same: only an exception was caught
   * there, so the {@code Error} left the stop at once, the scheduler, the file re-reads and the
   * engine left running and no stats line printed, and was thrown out of close() (out of the
   * shutdown hook).
   */
  @Test
  void anErrorAsAPartStopsLeavesNoOtherRunning() throws Exception {
    closesThroughErrors(CompletableFuture.completedFuture(null), List.of("the tokenizer",
        "the engine"));
  }

  /**
   * An {@link Error} thrown by the node's stop is logged (at ERROR) and not thrown on, as a
   * failed stop's exception is: every part is stopped all the same and the stats line printed.
   * Only a RuntimeException was caught there, so the {@code Error} left close() at once.
   */
  @Test
  void anErrorAsTheNodeStopsLeavesNoPartRunning() throws Exception {
    closesThroughErrors(null, List.of("the node", "the tokenizer", "the engine"));
  }

  /**
   * Closes a node process whose tokenizer's and engine's {@code close()} throw an {@link Error},
   * and whose node's stop gives {@code stopped} (null: throws a {@link StackOverflowError});
   * checks that close() throws nothing, that every part is closed and the stats line printed, and
   * that the Error of each of {@code parts} is logged at ERROR.
   */
  private static void closesThroughErrors(CompletableFuture<Void> stopped, List<String> parts)
      throws Exception {
    PrefixRouterNode node = mock(PrefixRouterNode.class);
    if (stopped != null) {
      when(node.stop(any())).thenReturn(stopped);
    } else {
      when(node.stop(any())).thenThrow(new StackOverflowError());
    }
    statsOfN1(node);
    HttpTransport transport = transportOfN1();
    AtomicBoolean schedulerClosed = new AtomicBoolean();
    AtomicBoolean filesClosed = new AtomicBoolean();
    io.github.prefixrouter.spi.InferenceEngine engine = closeableEngine();
    org.mockito.Mockito.doThrow(new OutOfMemoryError("Java heap space"))
        .when((AutoCloseable) engine).close();
    PromptTokenizer tokenizer = mock(PromptTokenizer.class);
    org.mockito.Mockito.doThrow(new AssertionError("a tokenizer whose close breaks"))
        .when(tokenizer).close();
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    NodeMain.Running r = running(node, transport, engine, noting(schedulerClosed),
        noting(filesClosed), tokenizer, out);
    Throwable[] thrown = new Throwable[1];
    List<String> lines = io.github.prefixrouter.testing.LoggedLines.logged("failed", () -> {
      try {
        r.close();
      } catch (Throwable e) {
        thrown[0] = e;
      }
    });
    transport.close();
    assertEquals(List.of(true, true), List.of(schedulerClosed.get(), filesClosed.get()),
        "scheduler, file re-reads closed (close() threw " + thrown[0] + ")");
    org.mockito.Mockito.verify((AutoCloseable) engine).close();
    assertEquals(null, thrown[0], "close() threw what a part threw as it stopped");
    assertTrue(out.toString(StandardCharsets.UTF_8).startsWith("node n1 stopped: "),
        "no stats line: '" + out + "'");
    for (String part : parts) {
      assertTrue(lines.stream().anyMatch(l -> l.contains(" ERROR ")
          && l.contains("stopping " + part + " failed")),
          "the Error of " + part + " not logged at ERROR: " + lines);
    }
  }
}
