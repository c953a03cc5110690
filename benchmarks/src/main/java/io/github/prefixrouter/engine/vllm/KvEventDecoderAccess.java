package io.github.prefixrouter.engine.vllm;

import java.util.List;

/**
 * Reaches the library's package-private {@link KvEventDecoder} from the benchmarks (this class
 * lives in the benchmarks module, in the decoder's package), so that the decode can be timed on
 * its own.
 */
public final class KvEventDecoderAccess {

  private KvEventDecoderAccess() {}

  /**
   * Decodes one batch as the receiver does, applying nothing.
   *
   * @return the decoded events (opaque to callers outside this package)
   * @throws IllegalArgumentException if the payload is malformed
   */
  public static List<?> decode(byte[] payload) {
    try {
      return KvEventDecoder.decode(payload);
    } catch (MalformedKvEventException e) {
      throw new IllegalArgumentException(e.getMessage(), e);
    }
  }

  /** Blocks stored by the decoded events of {@link #decode}. */
  public static long storedBlocks(List<?> events) {
    long n = 0;
    for (Object e : events) {
      if (e instanceof KvEvent.Stored s) {
        n += s.hashes().length;
      }
    }
    return n;
  }

  /** Blocks removed by the decoded events of {@link #decode}. */
  public static long removedBlocks(List<?> events) {
    long n = 0;
    for (Object e : events) {
      if (e instanceof KvEvent.Removed r) {
        n += r.hashes().length;
      }
    }
    return n;
  }
}
