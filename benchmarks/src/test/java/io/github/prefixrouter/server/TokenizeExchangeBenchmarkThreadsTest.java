package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.ThreadsProbe;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.openjdk.jmh.annotations.Fork;

/**
 * The threads {@link TokenizeExchangeBenchmark}'s forks start as they time their exchanges, on
 * a host of 2 processors: {@link EngineTokenizer} sends with the JDK's HTTP client, which
 * completes each {@code sendAsync} on {@code CompletableFuture}'s default executor: up to JDK 24,
 * a new thread for every task unless the common fork-join pool has 2 threads or more (1 by
 * default on 1 or 2 processors, and on the one core the benchmark is pinned to); from JDK 25,
 * the common pool whatever its size. JMH runs each fork in a fresh JVM
 * with the flags of the class's {@code @Fork}; each case runs {@link Exchanges}, the benchmark's
 * trial without JMH, through {@link ThreadsProbe} in a fresh JVM told it has 2 processors, with
 * those flags.
 */
class TokenizeExchangeBenchmarkThreadsTest {

  private static final int EXCHANGES = 300;

  @Test
  void theForksStartNoThreadPerExchange() throws Exception {
    Map<String, Long> out = probe(List.of());
    assertTrue(out.get("threads") * 4 < EXCHANGES, out.get("threads") + " threads started for "
        + EXCHANGES + " tokenize exchanges in a fork's JVM (" + out + "): the HTTP client's "
        + "completions each got a thread of their own");
    assertEquals(2, out.get("parallelism"), "the forks give the common pool 2 threads: " + out);
  }

  /**
   * With the pool's size set back to 1 after the fork's flags, the probe sees a thread each up to
   * JDK 24 (from JDK 25, whose default executor is the common pool of any size, none).
   */
  @Test
  void aPoolOfOneThreadStartsAThreadPerExchangeBeforeJdk25() throws Exception {
    Map<String, Long> out =
        probe(List.of("-Djava.util.concurrent.ForkJoinPool.common.parallelism=1"));
    assertEquals(1, out.get("parallelism"), out.toString());
    if (Runtime.version().feature() < 25) {
      assertTrue(out.get("threads") >= EXCHANGES, "with a common pool of 1 thread the probe "
          + "should see at least a thread per exchange: " + out);
    } else {
      assertTrue(out.get("threads") * 4 < EXCHANGES, "from JDK 25 the common pool of 1 thread "
          + "takes the completions, and the probe should see no thread per exchange: " + out);
    }
  }

  /** Runs {@link Exchanges} through the probe with the fork's flags, then {@code more}. */
  private static Map<String, Long> probe(List<String> more) throws Exception {
    List<String> flags = new ArrayList<>(
        List.of(TokenizeExchangeBenchmark.class.getAnnotation(Fork.class).jvmArgsAppend()));
    flags.addAll(more);
    return ThreadsProbe.onTwoProcessors(flags, Exchanges.class,
        List.of(Integer.toString(EXCHANGES)), 120);
  }

  /**
   * What a fork of {@code serverTokenize} runs, without JMH: the trial's setup, as many
   * exchanges as its argument says, one at a time, and the trial's teardown.
   */
  public static final class Exchanges {

    private Exchanges() {}

    public static void main(String[] args) throws Exception {
      int n = Integer.parseInt(args[0]);
      TokenizeExchangeBenchmark b = new TokenizeExchangeBenchmark();
      b.systemChars = 1600;
      b.start();
      try {
        int expected = b.serverTokenize().length;
        for (int i = 1; i < n; i++) {
          if (b.serverTokenize().length != expected) {
            throw new IllegalStateException("exchange " + i + " answered other ids");
          }
        }
      } finally {
        b.stop();
      }
    }
  }
}
