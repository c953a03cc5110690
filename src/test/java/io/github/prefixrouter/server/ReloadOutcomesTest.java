package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

/** What {@link ReloadOutcomes} logs: each distinct problem once, and its end once. */
class ReloadOutcomesTest {

  /**
   * A file left broken is logged once; when a good file is back (the one in use restored, or a
   * new one put in use), the problem's end is logged once: no line said so, and an operator
   * watching the log saw the error as the last word on the file.
   */
  @Test
  void theEndOfAProblemIsLoggedOnce() {
    ReloadOutcomes o = new ReloadOutcomes("cluster keys");
    List<String> lines = logged("cluster keys", () -> {
      o.failed("no key in f");
      o.failed("no key in f");
      o.unchanged(); // the file in use restored
      o.unchanged();
      o.failed("f is not hex");
      o.reloaded(); // a new good file
      o.reloaded();
    });
    assertEquals(4, lines.size(), String.join("\n", lines));
    String[] expected = {"ERROR", "no key in f", "INFO", "read again without error",
        "ERROR", "f is not hex", "INFO", "read again without error"};
    for (int i = 0; i < 4; i++) {
      String line = lines.get(i);
      assertTrue(line.contains(expected[2 * i]) && line.contains(expected[2 * i + 1]), line);
    }
    assertEquals(2, o.reloads());
    assertEquals(3, o.failures());
  }

  /** A re-read that finds nothing changed, with no problem before it, logs nothing. */
  @Test
  void quietWhileNothingFails() {
    ReloadOutcomes o = new ReloadOutcomes("tls files");
    assertEquals(List.of(), logged("tls files", () -> {
      o.unchanged();
      o.unchanged();
    }));
  }
}
