package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpRequest;
import org.junit.jupiter.api.Test;

/**
 * Whether a request is taken for one the JDK client has sent again itself: as the client reads
 * {@code jdk.httpclient.enableAllMethodRetry} (JDK 17 to 25's {@code MultiExchange}), so that a
 * POST ended before any byte of its answer is sent again once, not twice and not never.
 */
class RetriedExchangeTest {

  private static final URI URL = URI.create("http://127.0.0.1:1/v1/completions");

  @Test
  void enableAllMethodRetryIsReadAsTheJdkReadsIt() {
    assertFalse(RetriedExchange.clientResendsAllMethods(null), "unset");
    // a bare -Djdk.httpclient.enableAllMethodRetry: the JDK's client sends a POST again
    assertTrue(RetriedExchange.clientResendsAllMethods(""),
        "an empty value is true to the JDK, which then sends a POST again itself");
    assertTrue(RetriedExchange.clientResendsAllMethods("true"));
    assertTrue(RetriedExchange.clientResendsAllMethods("TRUE"));
    assertTrue(RetriedExchange.clientResendsAllMethods("True"));
    assertFalse(RetriedExchange.clientResendsAllMethods("false"));
    assertFalse(RetriedExchange.clientResendsAllMethods("yes"));
    assertFalse(RetriedExchange.clientResendsAllMethods("1"));
    assertFalse(RetriedExchange.clientResendsAllMethods(" true"), "not trimmed, as the JDK");
  }

  @Test
  void theSettingIsTakenFromTheSystemPropertyOrElseTheJdksNetProperties() {
    String name = RetriedExchange.ALL_METHOD_RETRY;
    assertEquals(RetriedExchange.clientResendsAllMethods(
        System.getProperty(name, RetriedExchange.netProperty(name))),
        RetriedExchange.CLIENT_RESENDS_ALL_METHODS);
    // the JDK's conf/net.properties is read: OpenJDK's sets http.nonProxyHosts
    assertNotNull(RetriedExchange.netProperty("http.nonProxyHosts"));
    assertNull(RetriedExchange.netProperty("no.such.setting"));
  }

  @Test
  void aPostIsTakenForSentAgainByTheClientOnlyWhenItResendsAllMethods() {
    HttpRequest post = HttpRequest.newBuilder(URL).POST(HttpRequest.BodyPublishers.noBody())
        .build();
    HttpRequest get = HttpRequest.newBuilder(URL).GET().build();
    IOException noAnswer = new IOException(RetriedExchange.NO_ANSWER);
    assertEquals(RetriedExchange.CLIENT_RESENDS_ALL_METHODS,
        RetriedExchange.sentAgainByClient(post, noAnswer));
    assertTrue(RetriedExchange.sentAgainByClient(get, noAnswer));
    assertFalse(RetriedExchange.sentAgainByClient(get, new IOException("Connection reset")));
  }
}
