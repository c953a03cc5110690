package io.github.prefixrouter.workload;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.server.LoadDriver;
import io.github.prefixrouter.server.ReferenceChatTokens;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

class ChatWorkloadTest {

  private static double topSystemShare(List<LoadDriver.Prompt> prompts) {
    Map<String, Integer> counts = new HashMap<>();
    for (LoadDriver.Prompt p : prompts) {
      counts.merge(p.messages().get(0).content(), 1, Integer::sum);
    }
    return counts.values().stream().mapToInt(Integer::intValue).max().getAsInt()
        / (double) prompts.size();
  }

  @Test
  void requestsShareTheirSubjectsSystemPromptsZipfConcentratesAndSeedsAreDistinct() {
    ChatWorkload w = ChatWorkload.synthetic(3, 16, 50);
    assertEquals(16, w.subjectCount());
    for (int s = 0; s < 16; s++) {
      int n = w.system(s).length();
      assertTrue(n >= 800 && n <= 1650, "system prompt of " + n + " characters");
    }
    List<LoadDriver.Prompt> uniform = w.requests(2000, 0, 5);
    List<LoadDriver.Prompt> zipf = w.requests(2000, 1.1, 5);
    Set<String> systems = new HashSet<>();
    for (int s = 0; s < 16; s++) {
      systems.add(w.system(s));
    }
    Set<Long> seeds = new HashSet<>();
    for (LoadDriver.Prompt p : zipf) {
      assertEquals(2, p.messages().size());
      assertEquals("system", p.messages().get(0).role());
      assertEquals("user", p.messages().get(1).role());
      assertTrue(systems.contains(p.messages().get(0).content()));
      assertTrue(seeds.add(p.seed()), "seed " + p.seed() + " twice");
    }
    assertTrue(topSystemShare(uniform) < 0.1, "uniform " + topSystemShare(uniform));
    assertTrue(topSystemShare(zipf) > 0.2, "zipf " + topSystemShare(zipf));
    // reproducible
    assertEquals(zipf, w.requests(2000, 1.1, 5).stream().toList());
    assertEquals(zipf.get(7).messages(), ChatWorkload.synthetic(3, 16, 50).requests(2000, 1.1, 5)
        .get(7).messages());
  }

  @Test
  void theReferenceTokenizersIdsAreOnePerCharacterOfTheRenderedChat() {
    List<LoadDriver.Message> m = List.of(new LoadDriver.Message("system", "Be brief."),
        new LoadDriver.Message("user", "Hi?"));
    int[] ids = ReferenceChatTokens.tokens(m);
    String rendered = "<|system|>\nBe brief.\n<|user|>\nHi?\n<|assistant|>\n";
    assertEquals(rendered.length(), ids.length);
    // two conversations with the same system prompt share the ids of its rendering
    int[] other = ReferenceChatTokens.tokens(List.of(m.get(0), new LoadDriver.Message("user", "Yo")));
    int shared = "<|system|>\nBe brief.\n<|user|>\n".length();
    assertTrue(java.util.Arrays.equals(ids, 0, shared, other, 0, shared));
    assertTrue(ids[shared] != other[shared]);
  }

  @Test
  void mmluSystemPromptsAreTrimmedToTheirLimit() {
    Path dir = Path.of("..", "..", "shared", "data", "mmlu");
    if (!Files.isDirectory(dir)) {
      dir = Path.of("/work/shared/data/mmlu");
    }
    Assumptions.assumeTrue(Files.isDirectory(dir), "no MMLU data");
    ChatWorkload w = ChatWorkload.mmlu(dir, 1600, 600, 20);
    assertEquals(57, w.subjectCount());
    for (int s = 0; s < w.subjectCount(); s++) {
      assertTrue(w.system(s).length() <= 1600, w.system(s).length() + " characters");
      assertTrue(w.system(s).startsWith("The following are multiple choice questions"));
    }
    for (LoadDriver.Prompt p : w.requests(200, 1.1, 1)) {
      String q = p.messages().get(1).content();
      assertTrue(q.length() <= 600 && q.endsWith("Answer:"), q);
    }
  }
}
