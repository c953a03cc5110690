package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * TCP_NODELAY on the connections the transport's and the client endpoint's JDK servers accept.
 * Without it the JDK server's answer body (written after its headers) waits for the peer's
 * delayed acknowledgement: about 40 ms per round trip on Linux, on loopback too.
 *
 * <p>The JDK server reads {@code sun.net.httpserver.nodelay} once per JVM, so each case runs
 * {@link TcpNoDelayProbe} in a fresh JVM. The bound, 20 ms for the best of three batch medians of
 * 20 round trips, is half the stall and some 30 times a normal loopback round trip (0.3 to 0.7 ms
 * on a 2-core VM): without the setting every batch takes over 40 ms (measured: 44 to 52 ms).
 */
class TcpNoDelayTest {

  static final double BOUND_MS = 20;

  @Test
  void roundTripsDoNotWaitForDelayedAcknowledgements() throws Exception {
    Map<String, String> out = probe(3, List.of());
    assertEquals("true", out.get("property"), "the library sets the property when absent: " + out);
    for (String what : List.of("transport", "endpoint")) {
      double best = Arrays.stream(out.get(what).split(" ")).mapToDouble(Double::parseDouble).min().orElseThrow();
      assertTrue(best < BOUND_MS, what + ": batch medians " + out.get(what)
          + " ms; every one at least " + BOUND_MS + " ms means TCP_NODELAY is off (Nagle meets delayed ACK)");
    }
  }

  /** The host's own setting wins, and the probe does see the stall when TCP_NODELAY is off. */
  @Test
  void aSettingOfTheHostIsLeftAsItIs() throws Exception {
    Map<String, String> out = probe(1, List.of("-Dsun.net.httpserver.nodelay=false"));
    assertEquals("false", out.get("property"), out.toString());
    // the stall's length is the OS's delayed-ACK timer: 40 ms at least on Linux
    assumeTrue(System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux"));
    for (String what : List.of("transport", "endpoint")) {
      double median = Double.parseDouble(out.get(what));
      assertTrue(median >= 30, what + ": median " + median + " ms with TCP_NODELAY off, expected the "
          + "delayed-ACK stall (the probe would not tell the settings apart)");
    }
  }

  private static Map<String, String> probe(int batches, List<String> jvmFlags) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx256m", "-XX:+UseSerialGC"));
    cmd.addAll(jvmFlags);
    cmd.addAll(List.of("-cp", classPath(), TcpNoDelayProbe.class.getName(), Integer.toString(batches)));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String text;
    try {
      text = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      assertTrue(p.waitFor(60, TimeUnit.SECONDS), "probe did not end");
    } finally {
      p.destroyForcibly();
    }
    assertEquals(0, p.exitValue(), text);
    Map<String, String> out = new HashMap<>();
    for (String line : text.split("\n")) {
      int sp = line.indexOf(' ');
      String k = sp < 0 ? line : line.substring(0, sp);
      if (List.of("property", "transport", "endpoint").contains(k)) {
        out.put(k, line.substring(sp + 1).trim());
      }
    }
    assertEquals(3, out.size(), text);
    return out;
  }

  private static String classPath() {
    String cp = System.getProperty("surefire.test.class.path");
    return cp != null && !cp.isEmpty() ? cp : System.getProperty("java.class.path");
  }
}
