package io.github.prefixrouter.transport.http;

import java.security.cert.Certificate;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/**
 * Which node ids a TLS peer's certificate names, for
 * {@link HttpTransport.Builder#bindNodeIdsToCertificates}.
 *
 * <p>A certificate names a node id if one of its subject alternative names of type DNS
 * ({@code dNSName}, 2) or URI ({@code uniformResourceIdentifier}, 6) equals the id exactly, case
 * included. Only the leaf certificate counts (the one the peer's key belongs to; the chain's
 * trust was checked by the handshake), and the subject's common name is never consulted: it is a
 * legacy field that many certificates fill with something else (a person's or a service's name),
 * and one certificate whose CN happened to equal another node's id would speak for that node.
 */
final class NodeIdCertificates {

  /** Subject alternative name types (RFC 5280, as {@code X509Certificate} numbers them). */
  private static final int DNS = 2;
  private static final int URI = 6;
  /** Names listed in a warning at most. */
  private static final int NAMES_SHOWN = 8;

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

  /** Whether {@code leaf} names {@code nodeId} (see the class notes); false for no certificate. */
  static boolean names(X509Certificate leaf, String nodeId) {
    if (leaf == null || nodeId == null) {
      return false;
    }
    for (List<?> san : alternativeNames(leaf)) {
      if (san.size() >= 2 && san.get(0) instanceof Integer type && (type == DNS || type == URI)
          && nodeId.equals(san.get(1))) {
        return true;
      }
    }
    return false;
  }

  /**
   * The certificate's subject and its DNS and URI names, for a warning: {@code CN=c [c,
   * spiffe://example.org/node/c]} (the first {@value #NAMES_SHOWN} names), or {@code no
   * certificate}.
   */
  static String describe(X509Certificate leaf) {
    if (leaf == null) {
      return "no certificate";
    }
    List<String> names = new ArrayList<>();
    int more = 0;
    for (List<?> san : alternativeNames(leaf)) {
      if (san.size() >= 2 && san.get(0) instanceof Integer type && (type == DNS || type == URI)) {
        if (names.size() < NAMES_SHOWN) {
          names.add(String.valueOf(san.get(1)));
        } else {
          more++;
        }
      }
    }
    return subject(leaf) + " " + names + (more > 0 ? " and " + more + " more" : "");
  }

  /** The certificate's subject distinguished name (RFC 2253), or {@code no certificate}. */
  static String subject(X509Certificate leaf) {
    return leaf == null ? "no certificate" : leaf.getSubjectX500Principal().getName();
  }

  private static Collection<List<?>> alternativeNames(X509Certificate leaf) {
    try {
      Collection<List<?>> sans = leaf.getSubjectAlternativeNames();
      return sans == null ? List.of() : sans;
    } catch (CertificateParsingException e) {
      // a malformed extension names nothing: the handshake accepted the certificate, but its
      // names cannot be read, so it speaks for no node
      return List.of();
    }
  }
}
