package io.github.prefixrouter.transport.http;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Base64;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * HMAC-SHA256 over a message's envelope and payload with the shared cluster key.
 *
 * <p>The authenticated input is a sequence of length-prefixed fields (so no field can be shifted
 * into its neighbour) followed by the payload: a domain tag ("request", "message" or
 * "response"), the sender's node id and address, the recipient's node id, the timestamp, the
 * nonce, and for responses the HTTP status. A MAC therefore proves who sent the message, to whom,
 * when, and that nothing in it changed; replay is stopped separately by {@link ReplayGuard}.
 */
final class MessageAuthenticator {

  static final String ALGORITHM = "HmacSHA256";

  private final Mac prototype;

  MessageAuthenticator(byte[] key) {
    try {
      Mac mac = Mac.getInstance(ALGORITHM);
      mac.init(new SecretKeySpec(key, ALGORITHM));
      this.prototype = mac;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is not available in this JDK", e);
    }
  }

  /** The base64 MAC of the given fields and payload. */
  String sign(byte[] payload, String... fields) {
    return Base64.getEncoder().encodeToString(compute(payload, fields));
  }

  /** True if {@code macBase64} is the MAC of the fields and payload (constant-time compare). */
  boolean verify(String macBase64, byte[] payload, String... fields) {
    if (macBase64 == null || macBase64.length() > 64) {
      return false;
    }
    byte[] given;
    try {
      given = Base64.getDecoder().decode(macBase64);
    } catch (IllegalArgumentException e) {
      return false;
    }
    return MessageDigest.isEqual(given, compute(payload, fields));
  }

  private byte[] compute(byte[] payload, String... fields) {
    Mac mac;
    try {
      mac = (Mac) prototype.clone();
    } catch (CloneNotSupportedException e) {
      throw new IllegalStateException("HmacSHA256 implementation cannot be cloned", e);
    }
    byte[] len = new byte[4];
    for (String f : fields) {
      byte[] b = f.getBytes(StandardCharsets.UTF_8);
      putInt(len, b.length);
      mac.update(len);
      mac.update(b);
    }
    putInt(len, payload.length);
    mac.update(len);
    mac.update(payload);
    return mac.doFinal();
  }

  private static void putInt(byte[] out, int v) {
    out[0] = (byte) (v >>> 24);
    out[1] = (byte) (v >>> 16);
    out[2] = (byte) (v >>> 8);
    out[3] = (byte) v;
  }
}
