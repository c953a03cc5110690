package io.github.prefixrouter.internal.wire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.net.http.HttpClient;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * {@link JdkHttpClients}: a client's {@code end()} ends its selector thread, and only its own;
 * what building the client throws reaches the caller.
 */
class JdkHttpClientsTest {

  @Test
  void endEndsTheClientsSelectorAndNoOtherOne() throws Exception {
    Set<Thread> before = SelectorThreads.now();
    JdkHttpClients.Client a = JdkHttpClients.build(HttpClient.newBuilder(), "test-build-a");
    List<Thread> aSelector = SelectorThreads.since(before);
    assertEquals(1, aSelector.size(), aSelector.toString());
    Set<Thread> beforeB = SelectorThreads.now();
    JdkHttpClients.Client b = JdkHttpClients.build(HttpClient.newBuilder(), "test-build-b");
    List<Thread> bSelector = SelectorThreads.since(beforeB);
    assertEquals(1, bSelector.size(), bSelector.toString());
    a.end();
    a.end(); // idempotent
    assertEquals(List.of(), SelectorThreads.aliveAfterWaiting(aSelector), "a's selector");
    Thread.sleep(100);
    assertTrue(bSelector.get(0).isAlive(), "ending a ended b's selector");
    b.end();
    assertEquals(List.of(), SelectorThreads.aliveAfterWaiting(bSelector), "b's selector");
  }

  @Test
  void whatBuildingTheClientThrowsReachesTheCaller() {
    IllegalArgumentException refused = new IllegalArgumentException("bad setting");
    assertSame(refused, assertThrows(IllegalArgumentException.class,
        () -> JdkHttpClients.build(throwingBuilder(refused), "test-build-refused")));
    OutOfMemoryError error = new OutOfMemoryError("no threads");
    assertSame(error, assertThrows(OutOfMemoryError.class,
        () -> JdkHttpClients.build(throwingBuilder(error), "test-build-error")));
  }

  /** A builder whose build() throws {@code t}. */
  private static HttpClient.Builder throwingBuilder(Throwable t) {
    return (HttpClient.Builder) Proxy.newProxyInstance(JdkHttpClientsTest.class.getClassLoader(),
        new Class<?>[] {HttpClient.Builder.class}, (proxy, method, args) -> {
          if (method.getName().equals("build")) {
            throw t;
          }
          throw new UnsupportedOperationException(method.getName());
        });
  }
}
