package io.github.prefixrouter.server;

import com.sun.net.httpserver.HttpServer;
import io.github.prefixrouter.internal.CommonPoolSize;
import io.github.prefixrouter.workload.ChatWorkload;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What tokenizing a chat at the model server costs the node itself: {@code serverTokenize} is
 * one {@link EngineTokenizer} exchange on loopback with a stand-in {@code POST /tokenize} that
 * answers a fixed, precomputed vLLM-shaped answer at once (so the figure is the node's side:
 * writing the request, the HTTP round trip, reading the ids, with none of the server's own
 * tokenizer or chat template), against {@code inProcessTokenize}, the reference engine's
 * tokenizer on the same conversation in the process (what the measured chat route ran), side
 * by side. The answer has as many ids as the conversation has characters divided by
 * {@link #CHARS_PER_TOKEN} (4: about what BPE tokenizers give English text). The stand-in is a
 * JDK HTTP server with TCP_NODELAY on, as model servers' (uvicorn's) are: without it each answer
 * would wait about 40 ms for a delayed acknowledgement (docs/deployment.md, "TCP_NODELAY").
 * The forks give the common fork-join pool 2 threads, on any host (one exchange is timed at a
 * time): the tokenizer's HTTP client completes every exchange on that pool, or on a new thread
 * of its own when the pool has 1 thread, as on 1 or 2 processors and on the one core the
 * benchmark is pinned to (docs/deployment.md, "JVM settings on 1 or 2 processors: the common
 * pool"). They do it on their command line, not in this class: the pool takes its size once,
 * when first used, and JMH's own code runs in a fork before the benchmark's. A
 * {@code -jvmArgsAppend} given to JMH replaces these flags.
 *
 * <pre>
 *   taskset -c 1 java -jar benchmarks/target/benchmarks.jar TokenizeExchangeBenchmark
 * </pre>
 *
 * In this package because the tokenizers are the node's own, not public API.
 */
@State(Scope.Thread)
@Fork(value = 2, jvmArgsAppend = {"-Xms512m", "-Xmx512m", "-Dsun.net.httpserver.nodelay=true",
    "-D" + CommonPoolSize.PARALLELISM + "=2"})
@Warmup(iterations = 4, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class TokenizeExchangeBenchmark {

  /** Characters of the system prompt (the user message has a tenth of them). */
  @Param({"1600", "16000"})
  public int systemChars;

  public static final int CHARS_PER_TOKEN = 4;

  private HttpServer server;
  private EngineTokenizer engineTokenizer;
  private final ReferenceTokenizer referenceTokenizer = new ReferenceTokenizer(
      NodeMain.REFERENCE_VOCABULARY, NodeMain.REFERENCE_MAX_OUTPUT_TOKENS);
  private List<Map<String, Object>> messages;

  @Setup(Level.Trial)
  public void start() throws IOException {
    SplittableRandom rnd = new SplittableRandom(7);
    String system = ChatWorkload.words(rnd, systemChars);
    String user = ChatWorkload.words(rnd, Math.max(1, systemChars / 10));
    messages = List.of(Map.of("role", "system", "content", system),
        Map.of("role", "user", "content", user));
    int n = (system.length() + user.length()) / CHARS_PER_TOKEN;
    StringBuilder b = new StringBuilder("{\"count\":").append(n)
        .append(",\"max_model_len\":32768,\"tokens\":[");
    for (int i = 0; i < n; i++) {
      b.append(i == 0 ? "" : ",").append(rnd.nextInt(150_000));
    }
    byte[] answer = b.append("],\"token_strs\":null}").toString().getBytes(StandardCharsets.UTF_8);
    server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
    server.setExecutor(Executors.newFixedThreadPool(2));
    server.createContext("/tokenize", ex -> {
      try (ex) {
        ex.getRequestBody().readAllBytes();
        ex.getResponseHeaders().add("Content-Type", "application/json");
        ex.sendResponseHeaders(200, answer.length);
        ex.getResponseBody().write(answer);
      }
    });
    server.start();
    engineTokenizer = new EngineTokenizer(
        EngineTokenizer.tokenizeUri("http://127.0.0.1:" + server.getAddress().getPort()),
        null, Duration.ofSeconds(2), Duration.ofSeconds(10),
        EngineTokenizer.DEFAULT_MAX_ANSWER_BYTES);
    // the ids must come back
    int got = serverTokenize().length;
    if (got != n) {
      throw new IllegalStateException("the stand-in answered " + got + " ids, not " + n);
    }
  }

  @TearDown(Level.Trial)
  public void stop() {
    server.stop(0);
    ((java.util.concurrent.ExecutorService) server.getExecutor()).shutdownNow();
  }

  @Benchmark
  public int[] serverTokenize() {
    return engineTokenizer.tokenizeChat("m", messages, Map.of()).join().tokens();
  }

  @Benchmark
  public int[] inProcessTokenize() {
    return referenceTokenizer.tokenizeChat("m", messages, Map.of()).join().tokens();
  }
}
