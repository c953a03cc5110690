package io.github.prefixrouter.transport.http;

import io.github.prefixrouter.internal.tls.CertificateNodeIds;
import java.security.cert.Certificate;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/**
 * Which node ids a TLS peer's certificate names, for
 * {@link HttpTransport.Builder#bindNodeIdsToCertificates}: the leaf certificate of a session,
 * and what it names as {@link CertificateNodeIds} reads it (a DNS or URI subject alternative
 * name equal to the id; never the subject's common name).
 */
final class NodeIdCertificates {

  private NodeIdCertificates() {}

  /**
   * The leaf certificate the peer of a TLS session presented; null for a session without one
   * (plain HTTP, a client that presented none, or a certificate that is not X.509).
   */
  static X509Certificate leaf(SSLSession session) {
    if (session == null) {
      return null;
    }
    Certificate[] chain;
    try {
      chain = session.getPeerCertificates();
    } catch (SSLPeerUnverifiedException e) {
      return null;
    }
    return chain != null && chain.length > 0 && chain[0] instanceof X509Certificate x ? x : null;
  }

  /** Whether {@code leaf} names {@code nodeId}; false for no certificate. */
  static boolean names(X509Certificate leaf, String nodeId) {
    return CertificateNodeIds.names(leaf, nodeId);
  }

  /**
   * The certificate's subject and its DNS and URI names, for a warning: {@code CN=c [c,
   * spiffe://example.org/node/c]}, or {@code no certificate}.
   */
  static String describe(X509Certificate leaf) {
    return CertificateNodeIds.describe(leaf);
  }

  /** The certificate's subject distinguished name (RFC 2253), or {@code no certificate}. */
  static String subject(X509Certificate leaf) {
    return CertificateNodeIds.subject(leaf);
  }
}
