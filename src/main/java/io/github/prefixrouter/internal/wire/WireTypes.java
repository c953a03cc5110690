package io.github.prefixrouter.internal.wire;

/**
 * The leading message-type byte that multiplexes gossip and forwarding traffic over one
 * {@link io.github.prefixrouter.spi.Transport}. Every message starts with its type byte, then a
 * version byte, then the body (see {@code docs/wire-format.md}).
 *
 * <p>Ranges: {@code 0x00} is never valid (a zeroed buffer is rejected);
 * {@code 0x10..0x1F} gossip (anti-entropy and membership); {@code 0x20..0x3F} request
 * forwarding; everything else is reserved and rejected.
 */
public final class WireTypes {

  private WireTypes() {}

  /** First type code of the gossip range. */
  public static final int GOSSIP_FIRST = 0x10;

  /** Last type code of the gossip range. */
  public static final int GOSSIP_LAST = 0x1F;

  /** First type code of the forwarding range. */
  public static final int FORWARDING_FIRST = 0x20;

  /** Last type code of the forwarding range. */
  public static final int FORWARDING_LAST = 0x3F;

  /** True if {@code type} belongs to the gossip range. */
  public static boolean isGossip(int type) {
    return type >= GOSSIP_FIRST && type <= GOSSIP_LAST;
  }

  /** True if {@code type} belongs to the forwarding range. */
  public static boolean isForwarding(int type) {
    return type >= FORWARDING_FIRST && type <= FORWARDING_LAST;
  }

  /**
   * Reads the type byte of {@code payload} without decoding anything else.
   *
   * @throws MalformedMessageException if the payload is empty
   */
  public static int peekType(byte[] payload) throws MalformedMessageException {
    if (payload.length == 0) {
      throw MalformedMessageException.truncated("type", 1, 0, 0);
    }
    return payload[0] & 0xFF;
  }
}
