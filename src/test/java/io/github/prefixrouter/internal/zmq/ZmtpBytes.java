package io.github.prefixrouter.internal.zmq;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;

/** Builds the bytes a (possibly hostile) ZMTP peer sends, written out by hand from RFC 23. */
public final class ZmtpBytes {

  private final ByteArrayOutputStream out = new ByteArrayOutputStream();

  public static ZmtpBytes of() {
    return new ZmtpBytes();
  }

  /** A 64-byte greeting. */
  ZmtpBytes greeting(int major, int minor, String mechanism) {
    byte[] g = new byte[64];
    g[0] = (byte) 0xff;
    g[9] = 0x7f;
    g[10] = (byte) major;
    g[11] = (byte) minor;
    byte[] m = mechanism.getBytes(StandardCharsets.US_ASCII);
    System.arraycopy(m, 0, g, 12, m.length);
    out.writeBytes(g);
    return this;
  }

  /** The greeting of a ZMTP 3.1 peer using NULL, as libzmq 4.3 sends it. */
  public ZmtpBytes greeting() {
    return greeting(3, 1, "NULL");
  }

  /** A READY command with one Socket-Type property. */
  public ZmtpBytes ready(String socketType) {
    return command("READY", property("Socket-Type", socketType));
  }

  static byte[] property(String name, String value) {
    ByteArrayOutputStream p = new ByteArrayOutputStream();
    p.write(name.length());
    p.writeBytes(name.getBytes(StandardCharsets.US_ASCII));
    byte[] v = value.getBytes(StandardCharsets.US_ASCII);
    p.write(v.length >>> 24);
    p.write(v.length >>> 16);
    p.write(v.length >>> 8);
    p.write(v.length);
    p.writeBytes(v);
    return p.toByteArray();
  }

  /** A command frame: name size, name, data. */
  ZmtpBytes command(String name, byte[] data) {
    ByteArrayOutputStream b = new ByteArrayOutputStream();
    b.write(name.length());
    b.writeBytes(name.getBytes(StandardCharsets.US_ASCII));
    b.writeBytes(data);
    return frame(ZmtpSocket.FLAG_COMMAND, b.toByteArray());
  }

  /** A frame with the given flags (MORE, COMMAND; LONG is chosen from the size). */
  ZmtpBytes frame(int flags, byte[] body) {
    if (body.length > 255) {
      longHeader(flags, body.length);
    } else {
      out.write(flags);
      out.write(body.length);
    }
    out.writeBytes(body);
    return this;
  }

  /** A multipart message. */
  public ZmtpBytes message(byte[]... frames) {
    for (int i = 0; i < frames.length; i++) {
      frame(i < frames.length - 1 ? ZmtpSocket.FLAG_MORE : 0, frames[i]);
    }
    return this;
  }

  /** A frame header with a long (8-byte) size, and no body. */
  ZmtpBytes longHeader(int flags, long size) {
    out.write(flags | ZmtpSocket.FLAG_LONG);
    for (int shift = 56; shift >= 0; shift -= 8) {
      out.write((int) (size >>> shift) & 0xff);
    }
    return this;
  }

  public ZmtpBytes raw(byte... bytes) {
    out.writeBytes(bytes);
    return this;
  }

  public byte[] bytes() {
    return out.toByteArray();
  }

  public static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }
}
