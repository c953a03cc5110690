package io.github.prefixrouter.transport.http;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * HMAC-SHA256 over a message's envelope and payload with the cluster keys: one key signs, every
 * key of the ring verifies.
 *
 * <p>The authenticated input is a sequence of length-prefixed fields (so no field can be shifted
 * into its neighbour) followed by the payload. For a request or a message: a domain tag
 * ("request" or "message"), the sender's node id and address, the recipient's node id, the
 * timestamp and the nonce. For the answer to a request (a 200): the tag "response", the
 * responder's node id, the requester's node id, the request's nonce and the status; no address
 * or timestamp, the nonce ties it to its request. A MAC therefore proves who sent the message,
 * to whom, when (an answer: to which request), and that nothing in it changed; replay is stopped
 * separately by {@link ReplayGuard}. The caller gives the fields ({@link #sign},
 * {@link #verify}); this class only frames and MACs them.
 *
 * <p>A ring holds the signing key first and at most {@link #MAX_KEYS} keys in all, distinct. A
 * MAC is checked against the signing key first, then against the others in order, so a forged
 * MAC costs at most {@code MAX_KEYS} HMACs. Instances are immutable; a key rotation builds a new
 * one.
 */
final class MessageAuthenticator {

  static final String ALGORITHM = "HmacSHA256";
  /** Keys in one ring at most: the signing key and three others. */
  static final int MAX_KEYS = 4;
  /** The shortest key accepted, in bytes. */
  static final int MIN_KEY_BYTES = 16;
  /** {@link #verify}'s answer for a MAC that no key of the ring produced. */
  static final int NO_KEY = -1;

  private final Mac[] prototypes;
  private final String[] keyIds;

  /**
   * A ring whose first key signs.
   *
   * @throws IllegalArgumentException if there is no key, more than {@link #MAX_KEYS}, or one is
   *     null or shorter than {@link #MIN_KEY_BYTES}
   * @throws IllegalStateException if the host's JCA providers cannot give an HmacSHA256 under a
   *     key, or a key's SHA-256 ({@link #keyId}), whatever they throw (a checked
   *     {@link GeneralSecurityException}, a {@link java.security.ProviderException}, another
   *     RuntimeException, an {@link Error}): what they threw is its cause
   */
  MessageAuthenticator(List<byte[]> keys) {
    List<byte[]> distinct = distinct(keys);
    this.prototypes = new Mac[distinct.size()];
    this.keyIds = new String[distinct.size()];
    for (int i = 0; i < distinct.size(); i++) {
      byte[] key = distinct.get(i);
      keyIds[i] = keyId(key);
      try {
        Mac mac = Mac.getInstance(ALGORITHM);
        mac.init(new SecretKeySpec(key, ALGORITHM));
        prototypes[i] = mac;
      } catch (Throwable e) { // not available; or the provider (a hardware token's) failed
        throw new IllegalStateException(ALGORITHM + " cannot be set up with cluster key "
            + keyIds[i] + " by the host's JCA providers: " + e, e);
      }
    }
  }

  /**
   * The keys in order without repeats (a key listed twice is kept once, at its first place),
   * each checked.
   */
  static List<byte[]> distinct(List<byte[]> keys) {
    if (keys == null || keys.isEmpty()) {
      throw new IllegalArgumentException("a cluster key is required");
    }
    List<byte[]> out = new ArrayList<>();
    for (int i = 0; i < keys.size(); i++) {
      byte[] key = keys.get(i);
      String name = i == 0 ? "the signing cluster key" : "accepted cluster key " + i;
      if (key == null) {
        throw new IllegalArgumentException(name + " is null");
      }
      if (key.length < MIN_KEY_BYTES) {
        throw new IllegalArgumentException(
            name + " must have at least " + MIN_KEY_BYTES + " bytes, had " + key.length);
      }
      if (out.stream().noneMatch(k -> Arrays.equals(k, key))) {
        out.add(key.clone());
      }
    }
    if (out.size() > MAX_KEYS) {
      throw new IllegalArgumentException(
          "at most " + MAX_KEYS + " distinct cluster keys (the signing key and "
              + (MAX_KEYS - 1) + " others), had " + out.size());
    }
    return out;
  }

  /**
   * A key's id: the first 4 bytes of its SHA-256, in lower-case hex. It names a key in logs and
   * statistics without revealing it ({@code xxd -r -p cluster.key | sha256sum | cut -c1-8}).
   *
   * @throws IllegalStateException if the host's JCA providers cannot give the SHA-256, whatever
   *     they throw: what they threw is its cause
   */
  static String keyId(byte[] key) {
    byte[] digest;
    try {
      digest = MessageDigest.getInstance("SHA-256").digest(key);
    } catch (Throwable e) { // not available; or the provider failed
      throw new IllegalStateException("the SHA-256 of a cluster key, its id, cannot be taken by "
          + "the host's JCA providers: " + e, e);
    }
    return HexFormat.of().formatHex(digest, 0, 4);
  }

  /** The ids of the ring's keys, signing key first, each mapped to 1 if it signs, else 0. */
  Map<String, Integer> keyIds() {
    Map<String, Integer> ids = new LinkedHashMap<>();
    for (int i = 0; i < keyIds.length; i++) {
      ids.put(keyIds[i], i == 0 ? 1 : 0);
    }
    return ids;
  }

  /** The id of the signing key ({@link #keyId}). */
  String signingKeyId() {
    return keyIds[0];
  }

  /** The base64 MAC of the given fields and payload under the signing key. */
  String sign(byte[] payload, String... fields) {
    return Base64.getEncoder().encodeToString(compute(0, payload, fields));
  }

  /**
   * Which key of the ring produced {@code macBase64} over the fields and payload: 0 for the
   * signing key, the key's place in the ring for another, {@link #NO_KEY} for none (or a MAC
   * that is missing or not base64). Each comparison is constant-time.
   */
  int verify(String macBase64, byte[] payload, String... fields) {
    if (macBase64 == null || macBase64.length() > 64) {
      return NO_KEY;
    }
    byte[] given;
    try {
      given = Base64.getDecoder().decode(macBase64);
    } catch (IllegalArgumentException e) {
      return NO_KEY;
    }
    for (int i = 0; i < prototypes.length; i++) {
      if (MessageDigest.isEqual(given, compute(i, payload, fields))) {
        return i;
      }
    }
    return NO_KEY;
  }

  private byte[] compute(int key, byte[] payload, String... fields) {
    Mac mac;
    try {
      mac = (Mac) prototypes[key].clone();
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
