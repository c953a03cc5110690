package io.github.prefixrouter.bench.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.ThreadsProbe;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The threads the transport benchmarks start as they time their exchanges, on a host of 2
 * processors: {@code HttpTransport} sends with the JDK's HTTP client, which completes each
 * {@code sendAsync} on {@code CompletableFuture}'s default executor, a new thread for every task
 * unless the common fork-join pool has 2 threads or more (1 by default on 1 or 2 processors,
 * and on the one core these benchmarks are pinned to). Each case runs a main through
 * {@link ThreadsProbe} in a fresh JVM told it has 2 processors.
 */
class TransportMainsThreadsTest {

  /**
   * The loopback benchmark's transport series, 20 timed after 100 untimed each: 240 requests,
   * and 240 messages each sent back as another.
   */
  @Test
  void theLoopbackSeriesStartNoThreadPerExchange() throws Exception {
    int exchanges = 2 * 120 + 2 * 2 * 120;
    Map<String, Long> out = ThreadsProbe.onTwoProcessors(List.of(), LoopbackLatencyMain.class,
        List.of("--child", "transport", "--n", "20"), 120);
    assertTrue(out.get("threads") * 10 < exchanges, out.get("threads") + " threads started for "
        + exchanges + " requests and messages sent (" + out + "): the HTTP client's completions "
        + "each got a thread of their own");
    assertEquals(2, out.get("parallelism"), out.toString());
  }

  /** The forward overhead benchmark: 300 forwards, one at a time, and gossip meanwhile. */
  @Test
  void theForwardsStartNoThreadPerForward() throws Exception {
    Map<String, Long> out = ThreadsProbe.onTwoProcessors(List.of(), ForwardOverheadMain.class,
        List.of("--n", "300"), 120);
    assertTrue(out.get("threads") * 4 < 300, out.get("threads") + " threads started for 300 "
        + "forwards (" + out + "): the HTTP client's completions each got a thread of their own");
    assertEquals(2, out.get("parallelism"), out.toString());
  }
}
