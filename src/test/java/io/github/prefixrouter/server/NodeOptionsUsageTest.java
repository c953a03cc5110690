package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The usage line shows as required exactly the flags that are. */
class NodeOptionsUsageTest {

  private static final Map<String, String> ENV = Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX);
  /** A valid value for every flag the usage line may name. */
  private static final Map<String, String> VALUES = Map.of(
      "--id", "n1", "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0");

  @Test
  void theUsageLineShowsExactlyTheRequiredFlagsOutsideBrackets() {
    String line = NodeOptions.USAGE.lines().findFirst().orElseThrow();
    // flags outside [...] are shown as required
    String outside = line.replaceAll("\\[[^\\]]*\\]", "");
    List<String> shownRequired = new ArrayList<>();
    Matcher m = Pattern.compile("--[a-z-]+").matcher(outside);
    while (m.find()) {
      shownRequired.add(m.group());
    }
    assertEquals(List.of("--id", "--listen"), shownRequired, line);
    Map<String, String> all = new LinkedHashMap<>();
    for (String f : List.of("--id", "--listen", "--client")) {
      all.put(f, VALUES.get(f));
    }
    assertDoesNotThrow(() -> NodeOptions.parse(args(all, null), ENV));
    for (String f : all.keySet()) {
      if (shownRequired.contains(f)) {
        assertThrows(IllegalArgumentException.class, () -> NodeOptions.parse(args(all, f), ENV), f);
      } else {
        assertDoesNotThrow(() -> NodeOptions.parse(args(all, f), ENV), f + " is optional");
      }
    }
  }

  private static String[] args(Map<String, String> flags, String without) {
    List<String> a = new ArrayList<>();
    flags.forEach((k, v) -> {
      if (!k.equals(without)) {
        a.add(k);
        a.add(v);
      }
    });
    return a.toArray(new String[0]);
  }
}
