package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The library's HTTP clients let go of a pooled connection before a peer's JDK server closes it
 * as idle (after its {@code sun.net.httpserver.idleInterval}, 30 s by default, at its next 10 s
 * tick), so that a request is never sent into a connection whose idle close crosses it on the
 * way: the JDK client does not send a POST again, and the request failed as
 * {@code UNREACHABLE}, cooling a healthy peer down. The client reads
 * {@code jdk.httpclient.keepalive.timeout} once per JVM, so each case runs
 * {@link ClientKeepAliveProbe} in a fresh JVM, against a peer that closes a connection idle for
 * 30 s as a request arrives on it (the worst of the race, made certain).
 */
class ClientKeepAliveTest {

  @Test
  void aConnectionIsNotReusedOnceThePeerMayHaveClosedItAsIdle() throws Exception {
    Map<String, String> out = probe(List.of(), 30);
    assertEquals("20", out.get("property"), "the library sets the property when absent: " + out);
    assertEquals("ok", out.get("first"), out.toString());
    assertEquals("ok", out.get("second"), out.toString());
  }

  /**
   * The host's own setting wins (here JDK 17's default, 1200 s, which loses the second request;
   * against a peer that closes connections idle for 1 s, to keep the test short).
   */
  @Test
  void aSettingOfTheHostIsLeftAsItIs() throws Exception {
    Map<String, String> out = probe(List.of("-Djdk.httpclient.keepalive.timeout=1200"), 1);
    assertEquals("1200", out.get("property"), out.toString());
    assertEquals("ok", out.get("first"), out.toString());
    assertEquals("io.github.prefixrouter.spi.TransportException: UNREACHABLE",
        out.get("second").replaceAll(":[^:]*$", "").replaceAll("(UNREACHABLE).*", "$1"),
        out.toString());
  }

  /**
   * The load generator's driver, which builds a client of its own against the nodes' client
   * ports (JDK servers too), lets go of idle connections as early: it set nothing, so its client
   * kept them as long as the JDK's default (1200 s on JDK 17).
   */
  @Test
  void theLoadDriversClientLetsGoOfIdleConnectionsAsEarly() throws Exception {
    String text = ProbeJvm.run(List.of("-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"),
        LoadDriverKeepAliveProbe.class, List.of(), 60);
    assertTrue(text.contains("property 20\n"), text);
  }

  private static Map<String, String> probe(List<String> jvmFlags, int peerIdleSeconds)
      throws Exception {
    List<String> options = new java.util.ArrayList<>(
        List.of("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"));
    options.addAll(jvmFlags);
    String text = ProbeJvm.run(options, ClientKeepAliveProbe.class,
        List.of(String.valueOf(peerIdleSeconds)), 90);
    Map<String, String> out = new HashMap<>();
    for (String line : text.split("\n")) {
      int sp = line.indexOf(' ');
      String k = sp < 0 ? line : line.substring(0, sp);
      if (List.of("property", "first", "second").contains(k)) {
        out.put(k, line.substring(sp + 1).trim());
      }
    }
    assertEquals(3, out.size(), text);
    return out;
  }
}
