package io.github.prefixrouter.internal.route;

/** The byte mutations of {@link ForwardCodecFuzzProperties}, shared with other decoders' tests. */
public final class ForwardCodecFuzzPropertiesAccess {

  private ForwardCodecFuzzPropertiesAccess() {}

  /** One of nine mutations ({@code how} 0..8) of {@code valid} at {@code where}. */
  public static byte[] mutate(byte[] valid, int where, int how, byte b) {
    return ForwardCodecFuzzProperties.mutate(valid, where, how, b);
  }
}
