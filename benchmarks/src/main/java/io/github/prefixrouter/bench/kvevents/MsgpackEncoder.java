package io.github.prefixrouter.bench.kvevents;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A minimal msgpack encoder, written from the msgpack specification, for the payloads of the
 * KV-event benchmark. Every value gets its shortest encoding, as msgspec (vLLM's encoder) writes
 * it.
 */
final class MsgpackEncoder {

  private byte[] buf = new byte[256];
  private int len;

  /** The bytes written so far, as a new array. */
  byte[] toBytes() {
    return Arrays.copyOf(buf, len);
  }

  /** Forgets what was written, keeping the buffer. */
  void clear() {
    len = 0;
  }

  private void ensure(int more) {
    if (len + more > buf.length) {
      buf = Arrays.copyOf(buf, Math.max(buf.length * 2, len + more));
    }
  }

  private void put(int b) {
    ensure(1);
    buf[len++] = (byte) b;
  }

  private void putBe(long v, int n) {
    ensure(n);
    for (int i = n - 1; i >= 0; i--) {
      buf[len++] = (byte) (v >>> (8 * i));
    }
  }

  MsgpackEncoder array(int n) {
    if (n <= 15) {
      put(0x90 | n);
    } else if (n <= 0xFFFF) {
      put(0xDC);
      putBe(n, 2);
    } else {
      put(0xDD);
      putBe(n, 4);
    }
    return this;
  }

  MsgpackEncoder str(String s) {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    int n = b.length;
    if (n <= 31) {
      put(0xA0 | n);
    } else if (n <= 0xFF) {
      put(0xD9);
      putBe(n, 1);
    } else if (n <= 0xFFFF) {
      put(0xDA);
      putBe(n, 2);
    } else {
      put(0xDB);
      putBe(n, 4);
    }
    raw(b);
    return this;
  }

  MsgpackEncoder bin(byte[] b) {
    int n = b.length;
    if (n <= 0xFF) {
      put(0xC4);
      putBe(n, 1);
    } else if (n <= 0xFFFF) {
      put(0xC5);
      putBe(n, 2);
    } else {
      put(0xC6);
      putBe(n, 4);
    }
    raw(b);
    return this;
  }

  MsgpackEncoder nil() {
    put(0xC0);
    return this;
  }

  MsgpackEncoder float64(double d) {
    put(0xCB);
    putBe(Double.doubleToRawLongBits(d), 8);
    return this;
  }

  /** A signed integer, shortest form (non-negative values as positive fixint or uint). */
  MsgpackEncoder integer(long v) {
    if (v >= 0) {
      if (v <= 0x7F) {
        put((int) v);
      } else if (v <= 0xFF) {
        put(0xCC);
        putBe(v, 1);
      } else if (v <= 0xFFFF) {
        put(0xCD);
        putBe(v, 2);
      } else if (v <= 0xFFFF_FFFFL) {
        put(0xCE);
        putBe(v, 4);
      } else {
        put(0xCF);
        putBe(v, 8);
      }
    } else if (v >= -32) {
      put((int) v);
    } else if (v >= Byte.MIN_VALUE) {
      put(0xD0);
      putBe(v, 1);
    } else if (v >= Short.MIN_VALUE) {
      put(0xD1);
      putBe(v, 2);
    } else if (v >= Integer.MIN_VALUE) {
      put(0xD2);
      putBe(v, 4);
    } else {
      put(0xD3);
      putBe(v, 8);
    }
    return this;
  }

  private void raw(byte[] b) {
    ensure(b.length);
    System.arraycopy(b, 0, buf, len, b.length);
    len += b.length;
  }
}
