package io.github.prefixrouter.testing;

import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import java.security.InvalidAlgorithmParameterException;
import java.security.InvalidKeyException;
import java.security.Key;
import java.security.NoSuchAlgorithmException;
import java.security.Provider;
import java.security.spec.AlgorithmParameterSpec;
import javax.crypto.Mac;
import javax.crypto.MacSpi;

/**
 * A host's JCA provider (a hardware token's, say) whose HmacSHA256 and SHA-256 are the JDK's,
 * but throw {@link #toThrow}, while it is set, at {@link #at}: as a service of a type is looked
 * up ({@link #lookup}; {@link #LOOKUP} for a {@code Mac}, the HmacSHA256 among them), as the
 * HmacSHA256 is given a key ({@link #INIT}), or as a SHA-256 is taken ({@link #DIGEST}). Put
 * first with {@code Security.insertProviderAt(provider(), 1)}, it is asked before the JDK's own
 * for every lookup, and so can fail the lookup of a {@code KeyStore}, a
 * {@code KeyManagerFactory} or anything else; it serves no other type, which the JDK's
 * providers then serve. Remove it ({@code Security.removeProvider}) once done.
 */
public final class FailingJcaProvider {
  /** Where {@link #toThrow} is thrown: as a {@code Mac} is looked up. */
  public static final String LOOKUP = lookup("Mac");
  /** Where {@link #toThrow} is thrown: as the HmacSHA256 is given a key. */
  public static final String INIT = "init";
  /** Where {@link #toThrow} is thrown: as the SHA-256 gives a digest. */
  public static final String DIGEST = "digest";
  public static volatile String at;
  public static volatile Throwable toThrow;

  private FailingJcaProvider() {}

  /**
   * Where {@link #toThrow} is thrown: as a service of {@code type} ({@code "KeyStore"},
   * {@code "TrustManagerFactory"}...) is looked up, whatever its algorithm.
   */
  public static String lookup(String type) {
    return "lookup " + type;
  }

  public static Provider provider() {
    return new Provider("SetupTestHsm", "1.0", "an HmacSHA256 and a SHA-256 that fail") {
      {
        putService(new Service(this, "Mac", "HmacSHA256", Hmac.class.getName(), null, null) {
          @Override
          public Object newInstance(Object parameter) {
            return new Hmac();
          }
        });
        putService(new Service(this, "MessageDigest", "SHA-256", Sha256.class.getName(), null,
            null) {
          @Override
          public Object newInstance(Object parameter) {
            return new Sha256();
          }
        });
      }

      @Override
      public Service getService(String type, String algorithm) {
        failAt(lookup(type));
        return super.getService(type, algorithm);
      }
    };
  }

  static void failAt(String place) {
    Throwable t = toThrow;
    if (t != null && place.equals(at)) {
      throw ThrowingCacheEventListener.<RuntimeException>undeclared(t);
    }
  }

  /**
   * The JDK's HmacSHA256 as a provider's {@link MacSpi}: what a failing one extends, changing
   * the calls where it fails.
   */
  public static class JdkHmac extends MacSpi implements Cloneable {
    private Mac jdk;

    protected JdkHmac() {
      try {
        jdk = Mac.getInstance("HmacSHA256", "SunJCE");
      } catch (NoSuchAlgorithmException | java.security.NoSuchProviderException e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    protected int engineGetMacLength() {
      return jdk.getMacLength();
    }

    @Override
    protected void engineInit(Key key, AlgorithmParameterSpec params)
        throws InvalidKeyException, InvalidAlgorithmParameterException {
      jdk.init(key, params);
    }

    @Override
    protected void engineUpdate(byte input) {
      engineUpdate(new byte[] {input}, 0, 1);
    }

    @Override
    protected void engineUpdate(byte[] input, int offset, int len) {
      jdk.update(input, offset, len);
    }

    @Override
    protected byte[] engineDoFinal() {
      return jdk.doFinal();
    }

    @Override
    protected void engineReset() {
      jdk.reset();
    }

    @Override
    public Object clone() throws CloneNotSupportedException {
      JdkHmac c = (JdkHmac) super.clone();
      c.jdk = (Mac) jdk.clone();
      return c;
    }
  }

  /** The JDK's HmacSHA256, throwing as it is given a key. */
  public static final class Hmac extends JdkHmac {
    @Override
    protected void engineInit(Key key, AlgorithmParameterSpec params)
        throws InvalidKeyException, InvalidAlgorithmParameterException {
      failAt(INIT);
      super.engineInit(key, params);
    }
  }

  /** The JDK's SHA-256, throwing as it gives a digest. */
  public static final class Sha256 extends java.security.MessageDigestSpi {
    private final java.security.MessageDigest jdk;

    Sha256() {
      try {
        jdk = java.security.MessageDigest.getInstance("SHA-256", "SUN");
      } catch (NoSuchAlgorithmException | java.security.NoSuchProviderException e) {
        throw new IllegalStateException(e);
      }
    }

    @Override
    protected int engineGetDigestLength() {
      // without it, MessageDigest.getDigestLength() is 0 (this digest cannot be cloned to
      // measure one): a PKCS12 store's key derivation divides by it
      return jdk.getDigestLength();
    }

    @Override
    protected void engineUpdate(byte input) {
      jdk.update(input);
    }

    @Override
    protected void engineUpdate(byte[] input, int offset, int len) {
      jdk.update(input, offset, len);
    }

    @Override
    protected byte[] engineDigest() {
      failAt(DIGEST);
      return jdk.digest();
    }

    @Override
    protected void engineReset() {
      jdk.reset();
    }
  }
}
