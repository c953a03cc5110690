package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * TCP_NODELAY on the connections the transport's and the client endpoint's JDK servers accept.
 * Without it the JDK server's answer body (written after its headers) waits for the peer's
 * delayed acknowledgement: about 40 ms per round trip on Linux, on loopback too.
 *
 * <p>The JDK server reads {@code sun.net.httpserver.nodelay} once per JVM, so each case runs
 * {@link TcpNoDelayProbe} in a fresh JVM, which reads the option off an accepted socket. The
 * latency check ({@code long} group, not in the default run: it times round trips) bounds the best
 * of three batch medians of 20 round trips at 20 ms, half the stall and some 30 times a normal
 * loopback round trip (0.3 to 0.7 ms on a 2-core VM): without the setting every batch takes over
 * 40 ms (measured: 44 to 52 ms).
 */
class TcpNoDelayTest {

  static final double BOUND_MS = 20;

  @Test
  void acceptedConnectionsHaveTcpNoDelay() throws Exception {
    Map<String, String> out = probe(0, List.of());
    assertEquals("true", out.get("property"), "the library sets the property when absent: " + out);
    assertEquals("true", out.get("accepted"), "sockets accepted after the library's servers: " + out);
  }

  @Test
  @org.junit.jupiter.api.Tag("long")
  void roundTripsDoNotWaitForDelayedAcknowledgements() throws Exception {
    Map<String, String> out = probe(3, List.of());
    assertEquals("true", out.get("property"), "the library sets the property when absent: " + out);
    for (String what : List.of("transport", "endpoint")) {
      double best = Arrays.stream(out.get(what).split(" ")).mapToDouble(Double::parseDouble).min().orElseThrow();
      assertTrue(best < BOUND_MS, what + ": batch medians " + out.get(what)
          + " ms; every one at least " + BOUND_MS + " ms means TCP_NODELAY is off (Nagle meets delayed ACK)");
    }
  }

  /** The host's own setting wins, and the probe tells the settings apart. */
  @Test
  void aSettingOfTheHostIsLeftAsItIs() throws Exception {
    Map<String, String> out = probe(0, List.of("-Dsun.net.httpserver.nodelay=false"));
    assertEquals("false", out.get("property"), out.toString());
    assertEquals("false", out.get("accepted"), out.toString());
  }

  /** The latency probe sees the stall when TCP_NODELAY is off. */
  @Test
  @org.junit.jupiter.api.Tag("long")
  void theLatencyProbeSeesTheStallWithTcpNoDelayOff() throws Exception {
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
    List<String> options = new ArrayList<>(List.of("-Xmx256m", "-XX:+UseSerialGC"));
    if (batches == 0) { // nothing timed: the quick compiler starts the probe in half the CPU time
      options.add("-XX:TieredStopAtLevel=1");
    }
    options.add("--add-opens=jdk.httpserver/sun.net.httpserver=ALL-UNNAMED");
    options.addAll(jvmFlags);
    String text =
        ProbeJvm.run(options, TcpNoDelayProbe.class, List.of(Integer.toString(batches)), 60);
    Map<String, String> out = new HashMap<>();
    for (String line : text.split("\n")) {
      int sp = line.indexOf(' ');
      String k = sp < 0 ? line : line.substring(0, sp);
      if (List.of("accepted", "property", "transport", "endpoint").contains(k)) {
        out.put(k, line.substring(sp + 1).trim());
      }
    }
    assertEquals(4, out.size(), text);
    return out;
  }
}
