package io.github.prefixrouter.load;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.bench.ThreadsProbe;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The threads the load generator starts as it sends its requests, on a host of 2 processors.
 * {@code LoadDriver} sends them with the JDK's HTTP client, which completes each
 * {@code sendAsync} on {@code CompletableFuture}'s default executor: up to JDK 24, the common
 * fork-join pool if it has 2 threads or more, else a new thread for every task, which the pool's
 * default size (processors - 1) gives on 1 or 2 processors; from JDK 25, the common pool whatever
 * its size. Each case runs the generator through
 * {@link ThreadsProbe} in a fresh JVM told it has 2 processors, against a stub node in this one
 * that answers every request.
 */
class LoadGeneratorThreadsTest {

  private static final int REQUESTS = 200;

  @Test
  void theGeneratorStartsNoThreadPerRequestOnTwoProcessors() throws Exception {
    Map<String, Long> out = probe(List.of());
    assertTrue(out.get("threads") * 4 < REQUESTS, out.get("threads") + " threads started in a "
        + "run of " + REQUESTS + " requests (" + out + "): the HTTP client's completions each got "
        + "a thread of their own");
    assertEquals(2, out.get("parallelism"), "the load generator gives the common pool 2 threads "
        + "when the command line does not size it: " + out);
  }

  /**
   * The command line's setting wins, and the probe sees a thread per request under it up to JDK
   * 24 (from JDK 25, whose default executor is the common pool of any size, none).
   */
  @Test
  void aSizeSetOnTheCommandLineIsLeftAsItIs() throws Exception {
    Map<String, Long> out =
        probe(List.of("-Djava.util.concurrent.ForkJoinPool.common.parallelism=1"));
    assertEquals(1, out.get("parallelism"), out.toString());
    if (Runtime.version().feature() < 25) {
      assertTrue(out.get("threads") >= REQUESTS, "with a common pool of 1 thread the probe "
          + "should see at least a thread per request: " + out);
    } else {
      assertTrue(out.get("threads") * 4 < REQUESTS, "from JDK 25 the common pool of 1 thread "
          + "takes the completions, and the probe should see no thread per request: " + out);
    }
  }

  /**
   * Runs the generator with {@code jvmFlags} and {@link #REQUESTS} requests against a stub node,
   * through the probe: the common pool's size and the threads started.
   */
  private static Map<String, Long> probe(List<String> jvmFlags) throws Exception {
    AtomicInteger answered = new AtomicInteger();
    HttpServer node = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    node.createContext("/", ex -> {
      ex.getRequestBody().readAllBytes();
      if (!ex.getRequestURI().getPath().equals("/v1/route/completions")) {
        ex.sendResponseHeaders(404, -1);
        ex.close();
        return;
      }
      byte[] body = ("{\"id\":\"r\",\"served_by\":\"stub\",\"forwarded\":false,"
          + "\"prompt_tokens\":3,\"cached_tokens\":0,\"token_ids\":[1],\"text\":\"a\"}")
          .getBytes(StandardCharsets.UTF_8);
      ex.getResponseHeaders().set("Content-Type", "application/json");
      ex.sendResponseHeaders(200, body.length);
      ex.getResponseBody().write(body);
      ex.close();
      answered.incrementAndGet();
    });
    node.start();
    try {
      Map<String, Long> out = ThreadsProbe.onTwoProcessors(jvmFlags, LoadGeneratorMain.class,
          List.of("--nodes", "127.0.0.1:" + node.getAddress().getPort(),
              "--requests", Integer.toString(REQUESTS), "--concurrency", "4"), 90);
      assertEquals(REQUESTS, answered.get(), "the stub node answered too few: " + out);
      return out;
    } finally {
      node.stop(0);
    }
  }
}
