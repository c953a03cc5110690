package io.github.prefixrouter.internal.wire;

/**
 * An encoder tried to write more than its {@link ByteWriter}'s hard cap. Encoders that split
 * their output into chunks check {@link ByteWriter#remaining()} first and never see this; for
 * the others it signals a sizing bug, not bad input.
 */
public final class MessageTooLargeException extends IllegalStateException {

  private final int cap;
  private final long attempted;

  public MessageTooLargeException(int cap, long attempted) {
    super("message would grow to " + attempted + " bytes, over its cap of " + cap + " bytes");
    this.cap = cap;
    this.attempted = attempted;
  }

  /** The writer's cap in bytes. */
  public int cap() {
    return cap;
  }

  /** The size the write would have reached. */
  public long attempted() {
    return attempted;
  }
}
