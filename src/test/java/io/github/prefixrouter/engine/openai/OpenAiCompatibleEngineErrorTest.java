package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.io.IOException;
import java.net.Proxy;
import java.net.ProxySelector;
import java.net.SocketAddress;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The adapter when the JDK's HTTP client throws an {@link Error} as a health probe is made:
 * here the host's {@link ProxySelector}, which the client asks for every request's route as it
 * is sent. What is thrown, a {@link VirtualMachineError} included, is no answer of the server:
 * a probe's status is -1.
 */
class OpenAiCompatibleEngineErrorTest {

  /** What the proxy selectors throw: an Error, and VirtualMachineErrors. */
  private static List<Error> errors() {
    return List.of(new InternalError("proxy configuration broken"),
        new OutOfMemoryError("Java heap space"), new StackOverflowError());
  }

  /**
   * An engine whose HTTP client asks a proxy selector that throws {@code thrown}: the client
   * takes the host's default selector as it is built, which is put back right after.
   */
  private static OpenAiCompatibleEngine engineWhoseProxySelectorThrows(Error thrown) {
    ProxySelector host = ProxySelector.getDefault();
    ProxySelector.setDefault(new ProxySelector() {
      @Override
      public List<Proxy> select(URI uri) {
        throw thrown;
      }

      @Override
      public void connectFailed(URI uri, SocketAddress sa, IOException e) {}
    });
    try {
      return OpenAiCompatibleEngine.builder().baseUrl("http://127.0.0.1:1").model("m")
          .requestTimeout(Duration.ofSeconds(5)).build();
    } finally {
      ProxySelector.setDefault(host);
    }
  }

  /**
   * {@code healthStatus()} and {@code health()} complete, with -1 and false, whatever the HTTP
   * client throws as a probe is sent: the probe caught only a RuntimeException there, so an
   * {@link Error} was thrown out of the call whose future "never completes exceptionally" (and
   * out of {@code NodeMain}'s start, which waits for it).
   */
  @Test
  void anErrorAsAHealthProbeIsSentIsNoAnswer() throws Exception {
    for (Error thrown : errors()) {
      try (OpenAiCompatibleEngine e = engineWhoseProxySelectorThrows(thrown)) {
        CompletableFuture<Integer> status;
        CompletableFuture<Boolean> healthy;
        try {
          status = e.healthStatus();
          healthy = e.health();
        } catch (Throwable t) {
          throw new AssertionError("the health probe threw " + t + " instead of completing "
              + "with -1, no answer", t);
        }
        assertEquals(-1, status.get(10, TimeUnit.SECONDS), "status with " + thrown);
        assertFalse(healthy.get(10, TimeUnit.SECONDS), "healthy with " + thrown);
      }
    }
  }
}
