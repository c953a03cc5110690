package io.github.prefixrouter.internal.wire;

import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsParameters;
import com.sun.net.httpserver.HttpsServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Creates the JDK HTTP servers of the transport and the client endpoint, with TCP_NODELAY on the
 * connections they accept.
 *
 * <p>The JDK server ({@code sun.net.httpserver}) writes an answer's headers and its body in two
 * writes and leaves Nagle's algorithm on for accepted connections unless the system property
 * {@value #NODELAY} is {@code true} when its configuration class initializes (at the first server
 * the JVM creates). The body then waits for the peer to acknowledge the headers, and the peer,
 * which has nothing to send until it has the body, delays that acknowledgement: on Linux every
 * answer with a body took about 40 ms more, on loopback as on a fast link (measured:
 * {@code benchmarks/run loopback}). Before the first server it creates, this class sets the
 * property to {@code true} if the host has not set it; a value the host set is left as it is.
 * The property is JVM-wide: JDK HTTP servers the host creates later get TCP_NODELAY too. If
 * the host created a JDK HTTP server before the library's first one, the property was already
 * read and setting it has no effect; such a host sets {@code -Dsun.net.httpserver.nodelay=true}
 * on its command line.
 */
public final class JdkHttpServers {

  /** The JDK server's switch for TCP_NODELAY on accepted connections. */
  public static final String NODELAY = "sun.net.httpserver.nodelay";

  private static final Logger log = LoggerFactory.getLogger(JdkHttpServers.class);
  private static boolean checked;

  private JdkHttpServers() {}

  /**
   * {@link HttpServer#create(InetSocketAddress, int)} after {@link #ensureNoDelay()}.
   *
   * @param address the address to bind
   * @param backlog the listen backlog (0 or less: the system's default)
   * @return the bound server, not started
   * @throws IOException if the address cannot be bound
   */
  public static HttpServer create(InetSocketAddress address, int backlog) throws IOException {
    ensureNoDelay();
    return HttpServer.create(address, backlog);
  }

  /** What an HTTPS server asks of its clients at the handshake. */
  public enum ClientCertificates {
    /** No client certificate is asked for. */
    NONE,
    /**
     * A certificate is asked for: one the context's trust manager does not accept fails the
     * handshake, and a client may present none (the server's handlers then decide).
     */
    WANTED,
    /** A certificate the context's trust manager accepts is required to finish the handshake. */
    REQUIRED
  }

  /**
   * {@link HttpsServer#create(InetSocketAddress, int)} after {@link #ensureNoDelay()}, serving
   * TLS with {@code context} and asking clients for certificates as {@code clients} says.
   *
   * @param address the address to bind
   * @param backlog the listen backlog (0 or less: the system's default)
   * @param context the TLS context (its key manager presents the server's certificate, its
   *     trust manager checks clients' certificates)
   * @param clients what the handshake asks of clients' certificates
   * @return the bound server, not started
   * @throws IOException if the address cannot be bound
   */
  public static HttpsServer createHttps(InetSocketAddress address, int backlog,
      SSLContext context, ClientCertificates clients) throws IOException {
    ensureNoDelay();
    HttpsServer server = HttpsServer.create(address, backlog);
    server.setHttpsConfigurator(clients == ClientCertificates.NONE
        ? new HttpsConfigurator(context)
        : new HttpsConfigurator(context) {
          @Override
          public void configure(HttpsParameters params) {
            SSLParameters p = getSSLContext().getDefaultSSLParameters();
            if (clients == ClientCertificates.REQUIRED) {
              p.setNeedClientAuth(true);
            } else {
              p.setWantClientAuth(true);
            }
            params.setSSLParameters(p);
          }
        });
    return server;
  }

  /**
   * Sets {@value #NODELAY} to {@code true} unless it is set; does its work once per JVM (class
   * loader). Logs at debug what it found.
   */
  public static synchronized void ensureNoDelay() {
    if (checked) {
      return;
    }
    checked = true;
    try {
      String v = System.getProperty(NODELAY);
      if (v == null) {
        System.setProperty(NODELAY, "true");
        log.debug("set {}=true: TCP_NODELAY on accepted connections (no effect if a JDK HTTP server "
            + "was created in this JVM before)", NODELAY);
      } else if (!Boolean.parseBoolean(v)) {
        log.debug("{}={} set by the host and left as is: answers with a body may wait ~40 ms for "
            + "the peer's delayed acknowledgement", NODELAY, v);
      }
    } catch (SecurityException e) {
      log.debug("cannot read or set {}: {}", NODELAY, e.toString());
    }
  }
}
