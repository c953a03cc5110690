package io.github.prefixrouter.internal.wire;

import com.google.common.base.Throwables;
import com.google.common.util.concurrent.Uninterruptibles;
import java.net.http.HttpClient;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Builds the JDK HTTP clients of the transport, the engine adapter, the tokenizer and the node's
 * start, so that their selector threads can be ended.
 *
 * <p>JDK 17's {@link HttpClient} cannot be closed: its {@code HttpClient-<n>-SelectorManager}
 * thread, started as the client is built, runs until the client is garbage collected, for as
 * long as its owner is referenced (a closed engine or tokenizer the host keeps, a node whose
 * start failed). {@link #build} builds the client on a short-lived thread of a thread group of
 * its own, where the selector thread, started from it, then is; {@link Client#end()}
 * interrupts the selector threads of that group, which ends them. The selector ending does not
 * fail every exchange still in progress: the selector also keeps the client's own timeouts, so
 * one still waiting for its answer's headers never completes. Each owner therefore ends its
 * exchanges itself (the engine adapter and the tokenizer fail those in flight before they end
 * their clients, the transport fails its pending requests as it closes). An exchange sent
 * afterwards never completes (on the owner's executor) or is refused at once (on the client's
 * default one): the owner refuses its work once it is closed, before it reaches the client.
 *
 * <p>The JDK client keeps an idle connection in its pool for {@value #KEEP_ALIVE} seconds
 * (1200 by default on JDK 17, 30 on JDK 25), while the JDK HTTP server, the transport's peers'
 * and the client endpoint's, closes a connection idle for its
 * {@code sun.net.httpserver.idleInterval} (30 s by default, checked every 10 s). A request the client sends into a connection as the server's
 * idle close crosses it fails ("header parser received no bytes"), and the client does not send
 * a POST again. Before the first client it builds, this class sets the property to
 * {@value #KEEP_ALIVE_SECONDS} (seconds) if the host has not set it, so that the client lets go
 * of an idle connection before a server of the default interval closes it; a value the host set
 * is left as it is. The property is JVM-wide and read when the JVM builds its first JDK HTTP
 * client: clients the host builds later keep their idle connections as long, and a host that
 * built one before the library's first sets {@code -Djdk.httpclient.keepalive.timeout=20} on its
 * command line.
 */
public final class JdkHttpClients {

  /** The JDK client's idle time of a pooled connection, in seconds. */
  public static final String KEEP_ALIVE = "jdk.httpclient.keepalive.timeout";

  /**
   * The idle time set when the host has not set one: below the JDK server's default idle
   * interval, 30 s.
   */
  static final String KEEP_ALIVE_SECONDS = "20";

  private static final Logger log = LoggerFactory.getLogger(JdkHttpClients.class);
  private static boolean checked;

  private JdkHttpClients() {}

  /**
   * Sets {@value #KEEP_ALIVE} to {@value #KEEP_ALIVE_SECONDS} unless it is set; does its work
   * once per JVM (class loader). Logs at debug what it found.
   */
  public static synchronized void ensureKeepAlive() {
    if (checked) {
      return;
    }
    checked = true;
    try {
      String v = System.getProperty(KEEP_ALIVE);
      if (v == null) {
        System.setProperty(KEEP_ALIVE, KEEP_ALIVE_SECONDS);
        log.debug("set {}={}: idle pooled connections closed before a peer's JDK server closes "
            + "them (no effect if a JDK HTTP client was built in this JVM before)", KEEP_ALIVE,
            KEEP_ALIVE_SECONDS);
      } else {
        log.debug("{}={} set by the host and left as is", KEEP_ALIVE, v);
      }
    } catch (SecurityException e) {
      log.debug("cannot read or set {}: {}", KEEP_ALIVE, e.toString());
    }
  }

  /**
   * What the JDK 17 client's parser of a chunked body begins the message of the plain
   * {@link java.io.IOException} it fails an exchange with when the chunk framing is out of form:
   * a chunk size that is no hex number, a chunk-size line longer than it takes, one not ended by
   * CRLF. It says nothing else of such an answer (no {@link java.net.ProtocolException}, as for a
   * status line that is none).
   */
  private static final List<String> MALFORMED_CHUNK = List.of(
      "Illegal character in chunk size", "Chunk header size too long", "invalid chunk header");

  /**
   * Whether {@code t}, or one of its causes, is the JDK client's failure of an answer whose
   * chunked body is out of form: an answer the peer sent malformed, not a connection that failed.
   *
   * @param t what an exchange failed with
   * @return true if it says the answer's chunk framing is malformed
   */
  public static boolean malformedChunk(Throwable t) {
    int depth = 0;
    for (Throwable c = t; c != null && depth < 8; c = c.getCause(), depth++) {
      if (c instanceof java.io.IOException && c.getMessage() != null) {
        for (String m : MALFORMED_CHUNK) {
          if (c.getMessage().startsWith(m)) {
            return true;
          }
        }
      }
    }
    return false;
  }

  /** A JDK HTTP client whose selector thread {@link #end()} ends. */
  public static final class Client {
    private final HttpClient http;
    private final ThreadGroup threads;

    private Client(HttpClient http, ThreadGroup threads) {
      this.http = http;
      this.threads = threads;
    }

    /**
     * The client.
     *
     * @return the JDK client
     */
    public HttpClient http() {
      return http;
    }

    /**
     * Ends the client's selector thread (it is interrupted, and ends at once); does not wait
     * for it, and does not fail the exchanges still waiting for an answer's headers (see the
     * class comment). Idempotent, callable from any thread.
     */
    public void end() {
      Thread[] found = new Thread[threads.activeCount() + 8];
      int n = threads.enumerate(found);
      for (int i = 0; i < n; i++) {
        if (found[i].getName().matches("HttpClient-\\d+-SelectorManager")) {
          found[i].interrupt();
        }
      }
    }
  }

  /**
   * Builds {@code builder}'s client on a new daemon thread named {@code threadName}, in a new
   * thread group, and waits for it (uninterruptibly: the build takes moments), after
   * {@link #ensureKeepAlive()}.
   *
   * @param builder the client's settings
   * @param threadName the name of the thread building it, which ends once it is built
   * @return the client
   * @throws RuntimeException what building the client threw (an {@link Error} as it was, a
   *     checked exception, which {@link HttpClient.Builder#build()} does not declare, in an
   *     {@link IllegalStateException})
   */
  @SuppressWarnings("removal") // ThreadGroup.setDaemon: no-op from JDK 19, whose groups are weak
  public static Client build(HttpClient.Builder builder, String threadName) {
    ensureKeepAlive();
    ThreadGroup group = new ThreadGroup(threadName);
    // a daemon group is destroyed when its last thread ends (the selector, ended or collected):
    // else JDK 17 keeps every group for good in its parent's list
    group.setDaemon(true);
    AtomicReference<HttpClient> built = new AtomicReference<>();
    AtomicReference<Throwable> failed = new AtomicReference<>();
    Thread t = new Thread(group, () -> {
      try {
        built.set(builder.build());
      } catch (Throwable e) {
        failed.set(e);
      }
    }, threadName);
    t.setDaemon(true);
    t.start();
    Uninterruptibles.joinUninterruptibly(t);
    Throwable e = failed.get();
    if (e != null) {
      Throwables.throwIfUnchecked(e);
      throw new IllegalStateException("cannot build the HTTP client", e);
    }
    return new Client(built.get(), group);
  }
}
