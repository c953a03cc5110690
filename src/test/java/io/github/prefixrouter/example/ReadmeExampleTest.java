package io.github.prefixrouter.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.testing.InMemoryNetwork;
import io.github.prefixrouter.testing.SimulatedEngine;
import io.github.prefixrouter.testing.SimulatedScheduler;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

/**
 * The README's example, compiled and run so it cannot rot: the README must show this code and
 * the line it prints.
 */
class ReadmeExampleTest {

  @Test
  void aRequestGoesToThePeerThatCachedItsPrefix() throws Exception {
    // --- README example start
    SimulatedScheduler time = new SimulatedScheduler();          // simulated clock + timers
    InMemoryNetwork network = new InMemoryNetwork(time, 42);     // seeded in-memory network
    network.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(2)));

    List<PrefixRouterNode> nodes = new ArrayList<>();
    for (String id : List.of("a", "b", "c")) {
      SimulatedEngine engine = SimulatedEngine.builder()         // stands in for vLLM/SGLang
          .scheduler(time).clock(time).capacityTokens(64_000).build();
      nodes.add(PrefixRouterNode.builder()
          .nodeId(id)
          .config(RouterConfig.defaults())                       // cost-aware routing
          .transport(network.transport(id))
          .engine(engine)
          .clock(time).scheduler(time).random(new SplittableRandom(id.hashCode()))
          .seeds(List.of(InMemoryNetwork.addressOf("a")))
          .build());
    }
    nodes.forEach(PrefixRouterNode::start);

    int[] systemPrompt = new int[2_000];                         // a long shared prefix
    for (int i = 0; i < systemPrompt.length; i++) systemPrompt[i] = 1_000 + i;

    // b serves the first request with this prefix and caches it ...
    CompletableFuture<InferenceResponse> first =
        nodes.get(1).submit(InferenceRequest.of("r1", withQuestion(systemPrompt, 1)));
    time.advanceBy(Duration.ofSeconds(3).toNanos());             // let gossip spread b's summary

    // ... so a request with the same prefix entering at a is forwarded to b.
    CompletableFuture<InferenceResponse> second =
        nodes.get(0).submit(InferenceRequest.of("r2", withQuestion(systemPrompt, 2)));
    time.advanceBy(Duration.ofSeconds(3).toNanos());
    InferenceResponse answer = second.join();
    System.out.println(answer.servedBy() + " " + answer.decision());
    // --- README example end

    assertEquals(readmeBlock("prints"), answer.servedBy() + " " + answer.decision(),
        "the README shows what the example prints");
    assertFalse(first.join().forwarded());
    assertEquals("b", answer.servedBy());
    assertTrue(answer.forwarded());
    assertTrue(answer.cachedPromptTokens() >= 1_984, "cached " + answer.cachedPromptTokens());
    nodes.forEach(n -> n.stop());
    time.advanceBy(Duration.ofSeconds(30).toNanos());
    nodes.forEach(n -> assertEquals(PrefixRouterNode.State.STOPPED, n.state()));
  }

  @Test
  void theReadmeShowsThisExampleVerbatim() throws IOException {
    String source = Files.readString(
        Path.of("src/test/java/io/github/prefixrouter/example/ReadmeExampleTest.java"));
    int from = source.indexOf('\n', source.indexOf("// --- README example start")) + 1;
    int to = source.lastIndexOf('\n', source.indexOf("// --- README example end"));
    String example = source.substring(from, to).lines()
        .map(l -> l.startsWith("    ") ? l.substring(4) : l)
        .collect(Collectors.joining("\n"));
    String readme = readmeBlock("```java");
    assertEquals(example, readme.substring(0, Math.min(readme.length(), example.length())),
        "README.md's example must start with the code this test runs");
    // the helper the example calls: README.md shows this test's, without "private"
    int helper = source.lastIndexOf("  private static int[] withQuestion(");
    String withQuestion = source.substring(helper, source.indexOf("\n  }\n", helper) + 4)
        .lines()
        .map(l -> l.startsWith("  ") ? l.substring(2) : l)
        .map(l -> l.replaceFirst("^private static", "static"))
        .collect(Collectors.joining("\n"));
    assertTrue(readme.contains(withQuestion),
        "README.md's example must define withQuestion as this test does:\n" + withQuestion);
  }

  /**
   * The first fenced block of README.md's "## Example" section after a line ending with
   * {@code after} (the block itself when {@code after} is its opening fence).
   */
  private static String readmeBlock(String after) throws IOException {
    List<String> lines = Files.readAllLines(Path.of("README.md"));
    int i = lines.indexOf("## Example");
    assertTrue(i >= 0, "README.md has an Example section");
    while (!lines.get(i).endsWith(after)) {
      i++;
    }
    while (!lines.get(i).startsWith("```")) {
      i++;
    }
    int end = i + 1;
    while (!lines.get(end).equals("```")) {
      end++;
    }
    return String.join("\n", lines.subList(i + 1, end));
  }

  private static int[] withQuestion(int[] prefix, int question) {
    int[] tokens = new int[prefix.length + 40];
    System.arraycopy(prefix, 0, tokens, 0, prefix.length);
    for (int i = prefix.length; i < tokens.length; i++) tokens[i] = 90_000 + question * 100 + i % 100;
    return tokens;
  }
}
