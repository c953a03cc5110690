package io.github.prefixrouter.internal.route;

/** The byte mutations of {@link ForwardCodecFuzzTest}, shared with other decoders' tests. */
public final class FrameMutations {

  private FrameMutations() {}

  /** One of nine mutations ({@code how} 0..8) of {@code valid} at {@code where}. */
  public static byte[] mutate(byte[] valid, int where, int how, byte b) {
    return ForwardCodecFuzzTest.mutate(valid, where, how, b);
  }
}
