package io.github.prefixrouter.engine.openai;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.internal.wire.BodyBudget;
import io.github.prefixrouter.spi.EngineResult;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
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
import org.openjdk.jmh.annotations.Warmup;

/**
 * The CPU an {@link OpenAiCompatibleEngine} spends reading one answer of {@code tokens} tokens
 * (no network): {@code plainAnswer} parses the non-streamed JSON answer (the baseline: what a
 * request cost before streaming); {@code streamOneRead} parses the same output as vLLM's event
 * stream (a chunk per token, the usage chunk, {@code [DONE]}) given in one buffer, and
 * {@code streamReadPerChunk} the same stream given one chunk per buffer, as a server streaming
 * as it generates delivers it, and {@code streamReadPerChunkBudgeted} that with the stream's heap
 * taken from an answer budget, as the engine reads every stream. The streamed pieces go to a
 * listener that consumes them. In this package because the parsers are the adapter's own, not
 * public API.
 *
 * <pre>
 *   taskset -c 1 java -jar benchmarks/target/benchmarks.jar StreamParseBenchmark
 * </pre>
 */
@State(Scope.Thread)
@Fork(value = 2, jvmArgsAppend = {"-Xms1g", "-Xmx1g"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class StreamParseBenchmark {

  @Param({"256"})
  public int tokens;

  private OpenAiCompatibleEngine engine;
  private InferenceRequest request;
  private byte[] json;
  private byte[] stream;
  private List<byte[]> chunks;
  private long consumed;
  private final BodyBudget budget = new BodyBudget(OpenAiCompatibleEngine.DEFAULT_ANSWER_BUDGET,
      Duration.ofSeconds(1), () -> { });
  private final OutputListener consume = (t, s) -> consumed += t.length + s.length();

  @Setup(Level.Trial)
  public void prepare() {
    StringBuilder ids = new StringBuilder();
    StringBuilder text = new StringBuilder();
    chunks = new ArrayList<>();
    for (int i = 0; i < tokens; i++) {
      int id = 1000 + 37 * i;
      String piece = " w" + id;
      ids.append(i == 0 ? "" : ",").append(id);
      text.append(piece);
      chunks.add(("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,"
          + "\"model\":\"m\",\"choices\":[{\"index\":0,\"text\":\"" + piece + "\",\"logprobs\":null,"
          + "\"finish_reason\":" + (i == tokens - 1 ? "\"length\"" : "null")
          + ",\"stop_reason\":null,\"token_ids\":[" + id + "]}]}\n\n")
          .getBytes(StandardCharsets.UTF_8));
    }
    String usage = "\"usage\":{\"prompt_tokens\":512,\"completion_tokens\":" + tokens
        + ",\"total_tokens\":" + (512 + tokens) + ",\"prompt_tokens_details\":{\"cached_tokens\":496}}";
    chunks.add(("data: {\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,"
        + "\"model\":\"m\",\"choices\":[]," + usage + "}\n\n").getBytes(StandardCharsets.UTF_8));
    chunks.add("data: [DONE]\n\n".getBytes(StandardCharsets.UTF_8));
    json = ("{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"created\":1,\"model\":\"m\","
        + "\"choices\":[{\"index\":0,\"text\":\"" + text + "\",\"logprobs\":null,"
        + "\"finish_reason\":\"length\",\"stop_reason\":null,\"token_ids\":[" + ids + "]}]," + usage
        + "}").getBytes(StandardCharsets.UTF_8);
    java.io.ByteArrayOutputStream all = new java.io.ByteArrayOutputStream();
    chunks.forEach(all::writeBytes);
    stream = all.toByteArray();
    engine = OpenAiCompatibleEngine.builder().baseUrl("http://127.0.0.1:1").build();
    int[] prompt = new int[512];
    for (int i = 0; i < prompt.length; i++) {
      prompt[i] = 100 + i;
    }
    request = new InferenceRequest("b", prompt, GenerationParams.greedy(tokens));
    check(plainAnswer(), streamOneRead(), streamReadPerChunk(), streamReadPerChunkBudgeted());
  }

  private static void check(EngineResult... results) {
    for (EngineResult r : results) {
      if (!r.equals(results[0]) || r.cachedPromptTokens() != 496) {
        throw new IllegalStateException("the parses differ: " + java.util.Arrays.toString(results));
      }
    }
  }

  @Benchmark
  public EngineResult plainAnswer() {
    return engine.parseAnswer(request, 200, json);
  }

  @Benchmark
  public EngineResult streamOneRead() {
    CompletionStream s = new CompletionStream(request, 8 << 20, null, consume);
    s.feed(ByteBuffer.wrap(stream));
    return s.result();
  }

  @Benchmark
  public EngineResult streamReadPerChunk() {
    CompletionStream s = new CompletionStream(request, 8 << 20, null, consume);
    for (byte[] c : chunks) {
      s.feed(ByteBuffer.wrap(c));
    }
    return s.result();
  }

  /**
   * {@link #streamReadPerChunk} with the stream's heap taken from a share of an answer budget,
   * as the engine reads every stream: what the budget's steps cost.
   */
  @Benchmark
  public EngineResult streamReadPerChunkBudgeted() {
    try (BodyBudget.Share share = budget.share()) {
      CompletionStream s = new CompletionStream(request, 8 << 20, null, consume, share);
      for (byte[] c : chunks) {
        s.feed(ByteBuffer.wrap(c));
      }
      return s.result();
    }
  }
}
