package io.github.prefixrouter.transport.http;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.contract.TransportContractTest;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import net.jqwik.api.constraints.IntRange;

/**
 * Forged envelopes: a valid signed message with one field or payload byte changed is refused
 * (400 or 401), never delivered and never crashes the server; the intact message is delivered
 * once, and its replay is refused.
 */
class EnvelopeFuzzProperties {

  static HttpTransport target;
  static final AtomicInteger delivered = new AtomicInteger();
  static final AtomicInteger nonces = new AtomicInteger();

  @BeforeContainer
  static void start() {
    target = HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0).clusterKey(HttpTransportTest.KEY).build();
    target.start(TransportContractTest.counting(delivered));
  }

  @AfterContainer
  static void stop() {
    target.close();
  }

  @Property(tries = 60)
  void tamperedEnvelopesAreRefusedAndNeverDelivered(
      @ForAll byte[] payload, @ForAll @IntRange(min = 0, max = 6) int field, @ForAll @IntRange(min = 0, max = 1000) int at,
      @ForAll boolean request) throws Exception {
    MessageAuthenticator auth = new MessageAuthenticator(List.of(HttpTransportTest.KEY));
    String path = request ? "/prefix-router/v1/request" : "/prefix-router/v1/message";
    String tag = request ? "request" : "message";
    String[] f = {"b", "127.0.0.1:9", "a", Long.toString(System.currentTimeMillis()), "n" + nonces.incrementAndGet()};
    String mac = auth.sign(payload, tag, f[0], f[1], f[2], f[3], f[4]);
    byte[] body = payload.clone();
    switch (field) {
      case 0 -> f[0] = f[0] + "x";
      case 1 -> f[1] = "127.0.0.1:10";
      case 2 -> f[2] = "c";
      case 3 -> f[3] = Long.toString(Long.parseLong(f[3]) + 1);
      case 4 -> f[4] = f[4] + "0";
      case 5 -> {
        if (body.length == 0) {
          body = new byte[] {1};
        } else {
          body[at % body.length] ^= 1;
        }
      }
      default -> mac = mac.substring(0, 10) + (mac.charAt(10) == 'A' ? 'B' : 'A') + mac.substring(11);
    }
    int before = delivered.get();
    int status = HttpTransportTest.post(target, path, body, f[0], f[1], f[2], f[3], f[4], mac);
    assertTrue(status == 401 || status == 400, "status " + status);
    assertEquals(before, delivered.get(), "a forged envelope was delivered");
    // the untouched message goes through once, and its replay does not
    String[] g = {"b", "127.0.0.1:9", "a", Long.toString(System.currentTimeMillis()), "m" + nonces.incrementAndGet()};
    String good = auth.sign(payload, tag, g[0], g[1], g[2], g[3], g[4]);
    assertEquals(request ? 200 : 204, HttpTransportTest.post(target, path, payload, g[0], g[1], g[2], g[3], g[4], good));
    assertEquals(401, HttpTransportTest.post(target, path, payload, g[0], g[1], g[2], g[3], g[4], good));
    // a message is answered 204 before it is delivered: its delivery may still be under way
    long deadline = System.nanoTime() + 10_000_000_000L;
    while (delivered.get() < before + 1 && System.nanoTime() < deadline) {
      Thread.sleep(1);
    }
    assertEquals(before + 1, delivered.get());
  }
}
