package io.github.prefixrouter.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * Every relative link of README.md and docs/*.md leads somewhere: its file or directory exists,
 * and its {@code #anchor}, if any, is one a heading of the target page gets on GitHub
 * (lowercased, punctuation dropped, spaces turned to {@code -}, {@code -1}, {@code -2}, ... for
 * repeated headings). Links in fenced code blocks and inline code are not links.
 */
class DocumentedLinksTest {

  private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s]+)\\)");
  private static final Pattern HEADING = Pattern.compile("(?m)^#{1,6}\\s+(.+?)\\s*$");

  @Test
  void everyRelativeLinkOfTheReadmeAndDocsResolves() throws IOException {
    List<Path> pages = new ArrayList<>(List.of(Path.of("README.md")));
    try (Stream<Path> docs = Files.list(Path.of("docs"))) {
      docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(pages::add);
    }
    List<String> broken = new ArrayList<>();
    int links = 0;
    for (Path page : pages) {
      Matcher m = LINK.matcher(prose(Files.readString(page)));
      while (m.find()) {
        String link = m.group(1);
        if (link.matches("[a-z]+:.*")) {
          continue; // https:, mailto:
        }
        links++;
        int hash = link.indexOf('#');
        String file = hash < 0 ? link : link.substring(0, hash);
        Path target = file.isEmpty() ? page : page.resolveSibling(file).normalize();
        if (!Files.exists(target)) {
          broken.add(page + ": " + link + " (no such file)");
        } else if (hash >= 0 && !anchors(target).contains(link.substring(hash + 1))) {
          broken.add(page + ": " + link + " (no such heading in " + target + ")");
        }
      }
    }
    assertTrue(links > 100, "links found: " + links);
    assertEquals(List.of(), broken);
  }

  /** GitHub's anchor rules, on a few headings of the docs. */
  @Test
  void anchorsFollowGitHubsRules() {
    assertEquals(Set.of("cache-scopes-lora-adapters-cache-salts", "next-to-vllm-sglang-or-llamacpp",
        "testing-an-integration-the-contract-test-kit", "results", "results-1"),
        anchorsOf("## Cache scopes (LoRA adapters, cache salts)\n"
            + "## Next to vLLM, SGLang or llama.cpp\n"
            + "## Testing an integration: the contract test kit\n"
            + "## Results\n```\n# not a heading\n```\n### Results\n"));
  }

  private static Set<String> anchors(Path page) throws IOException {
    return Files.isRegularFile(page) ? anchorsOf(Files.readString(page)) : Set.of();
  }

  private static Set<String> anchorsOf(String markdown) {
    Set<String> anchors = new HashSet<>();
    Map<String, Integer> seen = new HashMap<>();
    Matcher h = HEADING.matcher(markdown.replaceAll("(?ms)^[ \\t]*```.*?^[ \\t]*```", ""));
    while (h.find()) {
      String text = h.group(1).replaceAll("\\[([^\\]]*)\\]\\([^)]*\\)", "$1");
      String anchor = text.toLowerCase(Locale.ROOT).replaceAll("[^\\p{L}\\p{N}_\\- ]", "")
          .replace(' ', '-');
      Integer n = seen.merge(anchor, 0, (a, b) -> a + 1);
      anchors.add(n == 0 ? anchor : anchor + "-" + n);
    }
    return anchors;
  }

  /** {@code markdown} without its fenced code blocks and inline code spans. */
  private static String prose(String markdown) {
    return markdown.replaceAll("(?ms)^[ \\t]*```.*?^[ \\t]*```", "").replaceAll("`[^`]*`", "");
  }
}
