package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.RouteDecision;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * docs/routing.md's "Explanation" lists every reason a decision can give and every reason a
 * peer can be skipped for, in the enums' order: a constant added, renamed or removed in
 * {@link RouteDecision} fails here until the page says so.
 */
class DocumentedReasonsTest {

  /** The constants named in backticks in the paragraph of docs/routing.md that starts so. */
  static List<String> listed(String start) throws IOException {
    String doc = Files.readString(Path.of("docs", "routing.md"));
    int from = doc.indexOf("\n" + start);
    assertTrue(from >= 0, "docs/routing.md has no line starting with " + start);
    int end = doc.indexOf(".\n", from);
    List<String> out = new ArrayList<>();
    Matcher m = Pattern.compile("`([A-Z][A-Z_]*)`").matcher(doc.substring(from, end));
    while (m.find()) {
      out.add(m.group(1));
    }
    return out;
  }

  @Test
  void everyReasonIsListed() throws IOException {
    List<String> all = Arrays.stream(RouteDecision.Reason.values()).map(Enum::name).toList();
    assertEquals(all, listed("Reasons: "));
  }

  @Test
  void everySkipReasonIsListed() throws IOException {
    List<String> all = Arrays.stream(RouteDecision.SkipReason.values())
        .filter(r -> r != RouteDecision.SkipReason.NONE).map(Enum::name).toList();
    assertEquals(all, listed("Skip reasons: "));
  }
}
