package io.github.prefixrouter.bench.kvevents;

import java.io.IOException;
import java.io.UncheckedIOException;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.Value;
import org.msgpack.value.ValueType;

/**
 * The baselines: the same payloads read with a general-purpose msgpack library (msgpack-core),
 * every value unpacked, nothing applied.
 */
final class MsgpackCoreDecoder {

  private MsgpackCoreDecoder() {}

  /** A stored event as the typed baseline reads it. */
  record Stored(long parent, long[] hashes, int[] tokens, long blockSize) {}

  /** A removed event as the typed baseline reads it. */
  record Removed(long[] hashes) {}

  /** The whole batch as the library's generic value tree ({@code unpackValue}). */
  static Value values(byte[] payload) {
    try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload)) {
      Value v = u.unpackValue();
      if (u.hasNext()) {
        throw new IllegalArgumentException("bytes after the batch");
      }
      return v;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /**
   * The batch read into the same typed values as the library's decoder produces (hashes into
   * {@code long[]}, bins by their last 8 bytes; tokens into {@code int[]}), the fields it does
   * not need unpacked as generic values: what a decoder written on msgpack-core would do.
   */
  static Object[] typed(byte[] payload) {
    try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload)) {
      int n = u.unpackArrayHeader();
      u.unpackDouble();
      int ne = u.unpackArrayHeader();
      Object[] events = new Object[ne];
      for (int i = 0; i < ne; i++) {
        int fields = u.unpackArrayHeader();
        String tag = u.unpackString();
        int read = 1;
        switch (tag) {
          case "BlockStored" -> {
            long[] hashes = hashes(u);
            long parent = u.tryUnpackNil() ? 0 : hash(u);
            int nt = u.unpackArrayHeader();
            int[] tokens = new int[nt];
            for (int t = 0; t < nt; t++) {
              tokens[t] = u.unpackInt();
            }
            long bs = u.unpackLong();
            events[i] = new Stored(parent, hashes, tokens, bs);
            read = 5;
          }
          case "BlockRemoved" -> {
            events[i] = new Removed(hashes(u));
            read = 2;
          }
          default -> events[i] = tag;
        }
        for (int f = read; f < fields; f++) {
          u.unpackValue();
        }
      }
      for (int f = 2; f < n; f++) {
        u.unpackValue();
      }
      if (u.hasNext()) {
        throw new IllegalArgumentException("bytes after the batch");
      }
      return events;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static long[] hashes(MessageUnpacker u) throws IOException {
    int n = u.unpackArrayHeader();
    long[] hs = new long[n];
    for (int i = 0; i < n; i++) {
      hs[i] = hash(u);
    }
    return hs;
  }

  private static long hash(MessageUnpacker u) throws IOException {
    if (u.getNextFormat().getValueType() == ValueType.BINARY) {
      byte[] b = u.readPayload(u.unpackBinaryHeader());
      long h = 0;
      for (int i = Math.max(0, b.length - 8); i < b.length; i++) {
        h = h << 8 | (b[i] & 0xFF);
      }
      return h;
    }
    return u.unpackLong();
  }
}
