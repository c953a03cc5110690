package io.github.prefixrouter.internal.tls;

import java.security.cert.Certificate;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/**
 * Which node ids an X.509 certificate names, for binding node ids to TLS certificates: the
 * transport's check of a peer's certificate, and the runnable node's check of its own; and the
 * certificate a TLS peer presented ({@link #leaf}), which the client port also asks for.
 *
 * <p>A certificate names a node id if one of its subject alternative names of type DNS
 * ({@code dNSName}, 2) or URI ({@code uniformResourceIdentifier}, 6) equals the id exactly, case
 * included. Only the leaf certificate counts (the one its holder's key belongs to; a chain's
 * trust is the handshake's business), and the subject's common name is never consulted: it is a
 * legacy field that many certificates fill with something else (a person's or a service's name),
 * and one certificate whose CN happened to equal another node's id would speak for that node.
 */
public final class CertificateNodeIds {

  /** Subject alternative name types (RFC 5280, as {@code X509Certificate} numbers them). */
  private static final int DNS = 2;
  private static final int URI = 6;
  /** Names listed in a description at most. */
  private static final int NAMES_SHOWN = 8;

  private CertificateNodeIds() {}

  /**
   * The leaf certificate the peer of a TLS session presented.
   *
   * @param session a TLS session, or null
   * @return the peer's leaf certificate; null for no session, a peer that presented none, or a
   *     certificate that is not X.509
   */
  public static X509Certificate leaf(SSLSession session) {
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

  /**
   * Whether {@code leaf} names {@code nodeId} (see the class notes).
   *
   * @param leaf a leaf certificate, or null
   * @param nodeId a node id, or null
   * @return true if one of the certificate's DNS or URI alternative names is {@code nodeId};
   *     false for a null certificate or id, and for a certificate whose names cannot be read
   */
  public static boolean names(X509Certificate leaf, String nodeId) {
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
   * The certificate's subject and its DNS and URI names, for a message: {@code CN=c [c,
   * spiffe://example.org/node/c]}.
   *
   * @param leaf a certificate, or null
   * @return its {@link #subject} and {@link #shownNames}, or {@code no certificate}
   */
  public static String describe(X509Certificate leaf) {
    return leaf == null ? "no certificate" : subject(leaf) + " " + shownNames(leaf);
  }

  /**
   * The certificate's DNS and URI names, the first {@value #NAMES_SHOWN} of them, for a message:
   * {@code [c, spiffe://example.org/node/c]}, {@code [n1, n2, ...] and 3 more}, {@code []}.
   *
   * @param leaf a certificate
   * @return the names in brackets, followed by how many more there are if any
   */
  public static String shownNames(X509Certificate leaf) {
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
    return names + (more > 0 ? " and " + more + " more" : "");
  }

  /**
   * The certificate's subject distinguished name.
   *
   * @param leaf a certificate, or null
   * @return the subject (RFC 2253), or {@code no certificate}
   */
  public static String subject(X509Certificate leaf) {
    return leaf == null ? "no certificate" : leaf.getSubjectX500Principal().getName();
  }

  private static Collection<List<?>> alternativeNames(X509Certificate leaf) {
    try {
      Collection<List<?>> sans = leaf.getSubjectAlternativeNames();
      return sans == null ? List.of() : sans;
    } catch (CertificateParsingException e) {
      // a malformed extension names nothing: its names cannot be read, so the certificate
      // speaks for no node
      return List.of();
    }
  }
}
