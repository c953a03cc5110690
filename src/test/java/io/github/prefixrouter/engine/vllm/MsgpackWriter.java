package io.github.prefixrouter.engine.vllm;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * A small msgpack encoder for tests, written from the msgpack specification. Without a
 * {@link Random} it uses the shortest encoding of every value (as msgpack libraries do); with
 * one, it picks any valid width at random (fixarray, array16 or array32 for a short array, and
 * so on), which a decoder must accept just the same.
 */
final class MsgpackWriter {

  private final ByteArrayOutputStream out = new ByteArrayOutputStream();
  private final Random widths;

  /** Shortest encodings. */
  MsgpackWriter() {
    this(null);
  }

  /** Random valid widths drawn from {@code widths}, or shortest encodings if null. */
  MsgpackWriter(Random widths) {
    this.widths = widths;
  }

  byte[] bytes() {
    return out.toByteArray();
  }

  /** Raw bytes, for hand-made headers. */
  MsgpackWriter raw(int... bytes) {
    for (int b : bytes) {
      out.write(b);
    }
    return this;
  }

  private void be(long v, int n) {
    for (int i = n - 1; i >= 0; i--) {
      out.write((int) (v >>> (8 * i)));
    }
  }

  /** Picks among the candidate header forms (as {first byte, length bytes}) that fit. */
  private void header(long n, int fixBase, int fixMax, int b8, int b16, int b32) {
    List<int[]> forms = new ArrayList<>();
    if (fixBase >= 0 && n <= fixMax) {
      forms.add(new int[] {fixBase | (int) n, 0});
    }
    if (b8 >= 0 && n <= 0xFF) {
      forms.add(new int[] {b8, 1});
    }
    if (n <= 0xFFFF) {
      forms.add(new int[] {b16, 2});
    }
    forms.add(new int[] {b32, 4});
    int[] f = widths == null ? forms.get(0) : forms.get(widths.nextInt(forms.size()));
    out.write(f[0]);
    be(n, f[1]);
  }

  MsgpackWriter array(int n) {
    header(n, 0x90, 15, -1, 0xDC, 0xDD);
    return this;
  }

  MsgpackWriter map(int n) {
    header(n, 0x80, 15, -1, 0xDE, 0xDF);
    return this;
  }

  MsgpackWriter str(String s) {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    header(b.length, 0xA0, 31, 0xD9, 0xDA, 0xDB);
    out.writeBytes(b);
    return this;
  }

  MsgpackWriter bin(byte[] b) {
    header(b.length, -1, -1, 0xC4, 0xC5, 0xC6);
    out.writeBytes(b);
    return this;
  }

  MsgpackWriter nil() {
    out.write(0xC0);
    return this;
  }

  MsgpackWriter bool(boolean b) {
    out.write(b ? 0xC3 : 0xC2);
    return this;
  }

  MsgpackWriter float64(double d) {
    out.write(0xCB);
    be(Double.doubleToRawLongBits(d), 8);
    return this;
  }

  MsgpackWriter float32(float f) {
    out.write(0xCA);
    be(Float.floatToRawIntBits(f), 4);
    return this;
  }

  /** An ext value of the given type and data (fixext when the size allows one). */
  MsgpackWriter ext(int type, byte[] data) {
    int n = data.length;
    int fix = n == 1 ? 0xD4 : n == 2 ? 0xD5 : n == 4 ? 0xD6 : n == 8 ? 0xD7 : n == 16 ? 0xD8 : -1;
    if (fix >= 0 && (widths == null || widths.nextBoolean())) {
      out.write(fix);
    } else {
      header(n, -1, -1, 0xC7, 0xC8, 0xC9);
    }
    out.write(type);
    out.writeBytes(data);
    return this;
  }

  /** A signed integer. */
  MsgpackWriter integer(long v) {
    List<int[]> forms = new ArrayList<>(); // {first byte or -1 for fixint, length bytes}
    if (v >= 0 && v <= 127) {
      forms.add(new int[] {-1, 0});
    }
    if (v >= -32 && v < 0) {
      forms.add(new int[] {-1, 0});
    }
    if (v >= 0) {
      if (v <= 0xFF) {
        forms.add(new int[] {0xCC, 1});
      }
      if (v <= 0xFFFF) {
        forms.add(new int[] {0xCD, 2});
      }
      if (v <= 0xFFFF_FFFFL) {
        forms.add(new int[] {0xCE, 4});
      }
      forms.add(new int[] {0xCF, 8});
    }
    if (v >= Byte.MIN_VALUE && v <= Byte.MAX_VALUE) {
      forms.add(new int[] {0xD0, 1});
    }
    if (v >= Short.MIN_VALUE && v <= Short.MAX_VALUE) {
      forms.add(new int[] {0xD1, 2});
    }
    if (v >= Integer.MIN_VALUE && v <= Integer.MAX_VALUE) {
      forms.add(new int[] {0xD2, 4});
    }
    forms.add(new int[] {0xD3, 8});
    int[] f = widths == null ? forms.get(0) : forms.get(widths.nextInt(forms.size()));
    if (f[0] < 0) {
      out.write((int) v);
    } else {
      out.write(f[0]);
      be(v, f[1]);
    }
    return this;
  }

  /** An unsigned 64-bit integer given by its bits ({@code -1} is 2^64 - 1). */
  MsgpackWriter uint64(long bits) {
    if (bits >= 0) {
      return integer(bits);
    }
    out.write(0xCF);
    be(bits, 8);
    return this;
  }

  /** Some value of any kind, nested at most {@code depth} levels, drawn from {@code r}. */
  MsgpackWriter any(Random r, int depth) {
    int k = r.nextInt(depth > 0 ? 10 : 8);
    switch (k) {
      case 0:
        return nil();
      case 1:
        return bool(r.nextBoolean());
      case 2:
        return integer(r.nextLong() >> r.nextInt(64));
      case 3:
        return r.nextBoolean() ? float64(r.nextDouble()) : float32(r.nextFloat());
      case 4:
        return str("s" + r.nextInt(1000));
      case 5:
        return bin(new byte[r.nextInt(40)]);
      case 6:
        return ext(r.nextInt(128), new byte[1 << r.nextInt(5)]);
      case 7:
        return uint64(r.nextLong());
      case 8: {
        int n = r.nextInt(4);
        array(n);
        for (int i = 0; i < n; i++) {
          any(r, depth - 1);
        }
        return this;
      }
      default: {
        int n = r.nextInt(3);
        map(n);
        for (int i = 0; i < n; i++) {
          str("k" + i);
          any(r, depth - 1);
        }
        return this;
      }
    }
  }
}
