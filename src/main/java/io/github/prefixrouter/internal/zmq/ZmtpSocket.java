package io.github.prefixrouter.internal.zmq;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * A minimal ZMTP 3.0 client connection over a blocking {@link Socket}: one connection of a SUB
 * or DEALER socket to a peer that binds (a PUB, or a ROUTER), enough to read a ZeroMQ
 * publisher without a ZeroMQ library.
 *
 * <h2>Design notes</h2>
 *
 * <ul>
 *   <li><b>What is spoken.</b> ZMTP 3.0 (RFC 23) with the NULL security mechanism (RFC 23
 *       section "The NULL Security Mechanism") and the ZMTP 3.0 subscription form of RFC 29 (a
 *       message whose body is {@code 0x01} followed by the topic prefix). The greeting announces
 *       version 3.0, so a ZMTP 3.1 peer (libzmq 4.2+, JeroMQ 0.5+) falls back to 3.0 behaviour:
 *       it accepts message-form subscriptions and sends no SUBSCRIBE/CANCEL commands. Peers
 *       announcing a higher version are accepted (RFC 23: a peer must accept higher versions).
 *       Not supported: CURVE and PLAIN, ZMTP 1.0/2.0 peers, heartbeats of our own (a PING from
 *       the peer is answered with a PONG; other commands after the handshake are skipped).
 *   <li><b>Handshake.</b> The whole greeting (64 bytes) and our READY are sent at once; the
 *       peer's greeting is read in three steps (first byte, rest of the signature, major
 *       version) so that a ZMTP 1.0 or 2.0 peer, which sends less than a 3.0 greeting and then
 *       waits, is refused at once instead of after the handshake timeout. The peer's READY must
 *       come first and name a Socket-Type compatible with ours (RFC 23's table: SUB talks to PUB
 *       or XPUB, DEALER to ROUTER, DEALER or REP). An ERROR instead of READY ends the handshake
 *       with {@link ZmtpPeerErrorException}.
 *   <li><b>Limits before allocation.</b> A frame's size is checked against what is left of
 *       {@code maxMessageBytes} for its message, and the frame count against {@code maxFrames},
 *       before its body is allocated: a peer announcing a frame of 2^62 bytes costs nothing.
 *       A body above 64 KiB is read into an array that doubles as its bytes arrive, so a
 *       frame announced at the limit costs memory only as it is actually sent. Command bodies
 *       are bounded by {@code maxMessageBytes} too.
 *   <li><b>Timeouts.</b> Each read from the socket is given the time left until a deadline: the
 *       handshake's while handshaking; while waiting for the first byte of a message, the idle
 *       timeout (by default none, since a publisher may be silent for long); from that first
 *       byte on, the read timeout, for the whole message. A peer that stops inside a frame, or
 *       trickles it, is cut after the read timeout with a {@link SocketTimeoutException}. A
 *       command the peer sends between messages starts the idle wait again, so a peer sending
 *       commands can keep {@link #receive()} waiting for ever; {@link #receiveBefore} ends
 *       every wait at a deadline of the caller's as well. The
 *       socket read timeout is set only when the buffered stream has to read from the socket,
 *       so it costs one call per socket read, not per byte.
 *   <li><b>Errors.</b> Every violation by the peer is a {@link ZmtpProtocolException} naming the
 *       problem; the connection ends at EOF ({@link EOFException}) or in a timeout. No bytes a
 *       peer sends lead to an unchecked exception. After any exception the connection is
 *       unusable and must be closed.
 *   <li><b>Threads.</b> One thread uses a connection (reads, and the writes it makes: the
 *       subscription, requests, PONG answers); {@link #close()} may be called from any other
 *       thread, and unblocks a read or connect in progress. Writes are small and not timed: they
 *       fit in the socket's send buffer, except PONGs to a peer that sends PINGs and never reads
 *       (then the buffer fills): a PONG is written without blocking, and one the connection
 *       cannot take at once ends it ({@link ZmtpProtocolException.Reason#PEER_NOT_READING}).
 * </ul>
 */
public final class ZmtpSocket implements Closeable {

  /** The socket types this client implements, with the peer types each may talk to. */
  public enum Type {
    SUB(Set.of("PUB", "XPUB")),
    DEALER(Set.of("ROUTER", "DEALER", "REP"));

    private final Set<String> peers;

    Type(Set<String> peers) {
      this.peers = peers;
    }

    /** Whether a peer of type {@code peerType} may talk to this type. */
    public boolean compatibleWith(String peerType) {
      return peers.contains(peerType);
    }

    /** The length of the shortest name of a peer type this type may talk to. */
    int shortestPeerType() {
      int shortest = Integer.MAX_VALUE;
      for (String p : peers) {
        shortest = Math.min(shortest, p.length());
      }
      return shortest;
    }
  }

  static final int GREETING_SIZE = 64;
  /** The socket's send buffer: far more than this side's writes between two reads of the peer. */
  static final int SEND_BUFFER_BYTES = 64 * 1024;
  static final int FLAG_MORE = 0x01;
  static final int FLAG_LONG = 0x02;
  static final int FLAG_COMMAND = 0x04;
  private static final int MAX_PING_CONTEXT = 16;
  /**
   * The most properties a peer's READY may have (libzmq sends Socket-Type, Identity and the
   * few metadata properties an application sets); a READY of more is refused. They are kept
   * for the connection's life: a READY of tiny properties at the message limit made the socket
   * hold an entry per nine bytes, about 190 MB for 16 MiB.
   */
  static final int MAX_READY_PROPERTIES = 256;
  /** Bodies above this size are read into an array that grows as their bytes arrive. */
  static final int BODY_CHUNK = 64 * 1024;

  private final Type type;
  private final ZmtpOptions options;
  /** The connection, created by {@link #connect}; null until then, and over plain streams. */
  private volatile SocketChannel channel;
  private Socket socket; // the channel's socket adaptor
  private InputStream in;
  private OutputStream out;
  private DeadlineInput deadlineInput;
  private Map<String, byte[]> peerProperties = Map.of();
  private String peerSocketType;
  private volatile boolean closed;

  /** An unconnected socket; {@link #connect} connects it. */
  public ZmtpSocket(Type type, ZmtpOptions options) {
    this.type = Objects.requireNonNull(type, "type");
    this.options = Objects.requireNonNull(options, "options");
  }

  private ZmtpSocket(Type type, ZmtpOptions options, InputStream in, OutputStream out) {
    this.type = type;
    this.options = options;
    this.in = in;
    this.out = out;
  }

  /**
   * A connection over already-open streams, without timeouts (for decoding tests): call {@link
   * #handshake()} next.
   */
  static ZmtpSocket overStreams(Type type, ZmtpOptions options, InputStream in, OutputStream out) {
    return new ZmtpSocket(type, options, in, out);
  }

  /**
   * Connects to {@code endpoint} and performs the handshake.
   *
   * @throws SocketTimeoutException if the connect or handshake timeout passes
   * @throws ZmtpProtocolException if the peer breaks the protocol or is of an incompatible type
   * @throws IOException if the connection fails, or the socket was closed
   */
  public void connect(ZmtpEndpoint endpoint) throws IOException {
    if (socket != null || in != null) {
      throw new IllegalStateException("already connected");
    }
    InetSocketAddress address = new InetSocketAddress(endpoint.host(), endpoint.port());
    if (address.isUnresolved()) {
      throw new java.net.UnknownHostException(endpoint.host());
    }
    // a channel's socket: reads through its stream honour the read timeout like a plain
    // socket's, and a PONG can be written without blocking (see writePong)
    SocketChannel ch = SocketChannel.open();
    channel = ch;
    if (closed) { // closed by another thread before the channel existed
      ch.close();
      throw new SocketException("socket closed");
    }
    socket = ch.socket();
    socket.setTcpNoDelay(true);
    socket.setKeepAlive(true);
    // this side writes little (the greeting, READY, subscriptions or requests, PONGs): a fixed
    // send buffer, instead of one the kernel grows to megabytes, lets a peer that sends PINGs
    // and never reads fill it, and be cut (PEER_NOT_READING), after kilobytes of PONGs
    socket.setSendBufferSize(SEND_BUFFER_BYTES);
    socket.connect(address, millis(options.connectTimeout()));
    deadlineInput = new DeadlineInput(socket);
    in = new BufferedInputStream(deadlineInput, 64 * 1024);
    out = new BufferedOutputStream(socket.getOutputStream(), 8 * 1024);
    handshake();
  }

  /** Sends our greeting and READY, reads and checks the peer's. */
  void handshake() throws IOException {
    long deadline = System.nanoTime() + options.handshakeTimeout().toNanos();
    setDeadline(deadline, "the handshake");
    out.write(greeting());
    writeCommand("READY", readyProperties());
    out.flush();
    readGreeting();
    Frame ready = readFrame(0, 0);
    if (!ready.command) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.UNEXPECTED_COMMAND,
          "expected the peer's READY command, got a message frame of " + ready.body.length
              + " byte(s)");
    }
    Command c = Command.parse(ready.body);
    if (c.name.equals("ERROR")) {
      throw peerError(c);
    }
    if (!c.name.equals("READY")) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.UNEXPECTED_COMMAND,
          "expected the peer's READY command, got " + printable(c.name));
    }
    peerProperties = parseProperties(c.data);
    byte[] st = peerProperties.get("socket-type");
    if (st == null) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.INCOMPATIBLE_SOCKET_TYPE,
          "the peer's READY has no Socket-Type property");
    }
    peerSocketType = new String(st, StandardCharsets.ISO_8859_1);
    if (!type.compatibleWith(peerSocketType)) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.INCOMPATIBLE_SOCKET_TYPE,
          "a " + type + " socket cannot talk to a peer of type " + printable(peerSocketType));
    }
  }

  /** The Socket-Type the peer announced in its READY. */
  public String peerSocketType() {
    return peerSocketType;
  }

  /**
   * The peer's READY properties, names in lower case (ZMTP names are case-insensitive); at most
   * {@link #MAX_READY_PROPERTIES} (a READY of more is refused).
   */
  public Map<String, byte[]> peerProperties() {
    return peerProperties;
  }

  /** Subscribes to messages whose first frame starts with {@code prefix} (SUB only). */
  public void subscribe(byte[] prefix) throws IOException {
    if (type != Type.SUB) {
      throw new IllegalStateException("only a SUB socket subscribes");
    }
    byte[] body = new byte[prefix.length + 1];
    body[0] = 1;
    System.arraycopy(prefix, 0, body, 1, prefix.length);
    send(List.of(body));
  }

  /** Sends one multipart message. */
  public void send(List<byte[]> frames) throws IOException {
    if (frames.isEmpty()) {
      throw new IllegalArgumentException("a message has at least one frame");
    }
    for (int i = 0; i < frames.size(); i++) {
      writeFrame(i < frames.size() - 1 ? FLAG_MORE : 0, frames.get(i));
    }
    out.flush();
  }

  /**
   * Reads the next message, answering PING commands and skipping other commands on the way.
   *
   * @return the message's frames, at least one
   * @throws EOFException if the peer closed the connection between messages
   * @throws SocketTimeoutException if the idle timeout passes before a message starts, or the
   *     read timeout before it is complete
   * @throws ZmtpPeerErrorException if the peer sends ERROR
   * @throws ZmtpProtocolException if the peer breaks the protocol or a limit
   */
  public List<byte[]> receive() throws IOException {
    return receive(false, 0);
  }

  /**
   * As {@link #receive()}, but gives up at {@code deadlineNanos} (a {@link System#nanoTime()}
   * value) whatever the peer sends meanwhile: the commands it skips or answers, which restart
   * the idle timeout, included.
   *
   * @param deadlineNanos when to give up, on the {@link System#nanoTime()} clock
   * @return the message's frames, at least one
   * @throws SocketTimeoutException if no whole message has arrived by then (or a timeout of
   *     {@link #receive()} passes first)
   * @throws IOException as {@link #receive()}
   */
  public List<byte[]> receiveBefore(long deadlineNanos) throws IOException {
    return receive(true, deadlineNanos);
  }

  private List<byte[]> receive(boolean bounded, long limit) throws IOException {
    List<byte[]> frames = new ArrayList<>(4);
    long total = 0;
    long deadline = 0;
    while (true) {
      int flags;
      if (frames.isEmpty()) {
        if (bounded) {
          long idle = options.idleTimeout().toNanos();
          long now = System.nanoTime();
          if (now - limit >= 0) {
            throw new SocketTimeoutException("timed out waiting for the next message");
          }
          setDeadlineOrLimit(idle == 0 ? limit : now + idle, limit, "the next message");
        } else {
          setIdle("the next message");
        }
        flags = in.read();
        if (flags < 0) {
          throw new EOFException("the peer closed the connection");
        }
        deadline = System.nanoTime() + options.readTimeout().toNanos();
        if (bounded) {
          setDeadlineOrLimit(deadline, limit, "the rest of a message");
        } else {
          setDeadline(deadline, "the rest of a message");
        }
      } else {
        flags = readByte("the flags of frame " + (frames.size() + 1) + " of a multipart message");
      }
      Frame f = readFrameAfterFlags(flags, total, frames.size());
      if (f.command) {
        if (!frames.isEmpty()) {
          throw new ZmtpProtocolException(
              ZmtpProtocolException.Reason.BAD_FLAGS,
              "a command frame inside a multipart message (after frame " + frames.size() + ")");
        }
        handleCommand(f.body);
        continue;
      }
      frames.add(f.body);
      total += f.body.length;
      if (!f.more) {
        return frames;
      }
    }
  }

  /** Closes the connection; unblocks a read or connect in progress. Idempotent. */
  @Override
  public void close() {
    closed = true;
    try {
      SocketChannel ch = channel;
      if (ch != null) {
        ch.close();
      } else if (in != null) {
        in.close();
        out.close();
      }
    } catch (IOException ignored) {
      // nothing left to do with a connection being dropped
    }
  }

  public boolean isClosed() {
    return closed;
  }

  // ---- frames ----

  private record Frame(boolean command, boolean more, byte[] body) {}

  /** Reads one frame with the handshake's deadline (already set). */
  private Frame readFrame(long total, int framesSoFar) throws IOException {
    int flags = readByte("the flags of the peer's READY command");
    return readFrameAfterFlags(flags, total, framesSoFar);
  }

  private Frame readFrameAfterFlags(int flags, long total, int framesSoFar) throws IOException {
    if ((flags & ~(FLAG_MORE | FLAG_LONG | FLAG_COMMAND)) != 0) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.BAD_FLAGS,
          String.format(Locale.ROOT, "frame flags 0x%02x have reserved bits set", flags));
    }
    boolean command = (flags & FLAG_COMMAND) != 0;
    boolean more = (flags & FLAG_MORE) != 0;
    if (command && more) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.BAD_FLAGS,
          String.format(Locale.ROOT, "frame flags 0x%02x mark a command as MORE", flags));
    }
    String what = command ? "a command" : "frame " + (framesSoFar + 1);
    long size;
    if ((flags & FLAG_LONG) != 0) {
      byte[] b = new byte[8];
      readFully(b, "the 8-byte size of " + what);
      size = 0;
      for (byte x : b) {
        size = (size << 8) | (x & 0xff);
      }
    } else {
      size = readByte("the size of " + what);
    }
    long limit = command ? options.maxMessageBytes() : options.maxMessageBytes() - total;
    if (size < 0 || size > limit) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.MESSAGE_TOO_LARGE,
          (command
                  ? "a command of " + Long.toUnsignedString(size) + " bytes"
                  : "frame " + (framesSoFar + 1) + " of " + Long.toUnsignedString(size)
                      + " bytes after " + total + " bytes of its message")
              + " exceeds the limit of " + options.maxMessageBytes() + " bytes per message");
    }
    if (!command && framesSoFar >= options.maxFrames()) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.TOO_MANY_FRAMES,
          "a message of more than " + options.maxFrames() + " frames");
    }
    byte[] body = readBody((int) size, "the body of " + what + " (" + size + " bytes)");
    return new Frame(command, more, body);
  }

  private void writeFrame(int flags, byte[] body) throws IOException {
    if (body.length > 255) {
      out.write(flags | FLAG_LONG);
      long n = body.length;
      for (int shift = 56; shift >= 0; shift -= 8) {
        out.write((int) (n >>> shift) & 0xff);
      }
    } else {
      out.write(flags);
      out.write(body.length);
    }
    out.write(body);
  }

  // ---- greeting and commands ----

  static byte[] greeting() {
    byte[] g = new byte[GREETING_SIZE];
    g[0] = (byte) 0xff;
    g[9] = 0x7f;
    g[10] = 3; // major
    g[11] = 0; // minor
    byte[] mech = "NULL".getBytes(StandardCharsets.US_ASCII);
    System.arraycopy(mech, 0, g, 12, mech.length);
    g[32] = 0; // as-server
    return g;
  }

  private void readGreeting() throws IOException {
    int first = readByte("the peer's greeting");
    if (first != 0xff) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.BAD_SIGNATURE,
          String.format(
              Locale.ROOT,
              "the greeting starts with 0x%02x, not 0xff (a ZMTP 1.0 peer, or not ZMTP)",
              first));
    }
    byte[] sig = new byte[9];
    readFully(sig, "the peer's greeting signature");
    if (sig[8] != 0x7f) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.BAD_SIGNATURE,
          String.format(
              Locale.ROOT, "byte 9 of the greeting is 0x%02x, not 0x7f (not ZMTP 2.0+)", sig[8]));
    }
    int major = readByte("the peer's greeting version");
    if (major < 3) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.UNSUPPORTED_VERSION,
          "the peer speaks ZMTP major version " + major + "; version 3 or later is required");
    }
    byte[] rest = new byte[GREETING_SIZE - 11];
    readFully(rest, "the rest of the peer's greeting");
    // rest[0] minor version, rest[1..20] mechanism, rest[21] as-server, rest[22..] filler
    byte[] mech = new byte[20];
    System.arraycopy(rest, 1, mech, 0, 20);
    byte[] expected = new byte[20];
    System.arraycopy("NULL".getBytes(StandardCharsets.US_ASCII), 0, expected, 0, 4);
    if (!java.util.Arrays.equals(mech, expected)) {
      int end = 0;
      while (end < mech.length && mech[end] != 0) {
        end++;
      }
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.UNSUPPORTED_MECHANISM,
          "the peer asks for security mechanism "
              + printable(new String(mech, 0, end, StandardCharsets.ISO_8859_1))
              + "; only NULL is supported");
    }
  }

  private Map<String, byte[]> readyProperties() {
    Map<String, byte[]> p = new TreeMap<>();
    p.put("Socket-Type", type.name().getBytes(StandardCharsets.US_ASCII));
    return p;
  }

  private void writeCommand(String name, Map<String, byte[]> properties) throws IOException {
    int size = 1 + name.length();
    for (Map.Entry<String, byte[]> e : properties.entrySet()) {
      size += 1 + e.getKey().length() + 4 + e.getValue().length;
    }
    byte[] body = new byte[size];
    int pos = 0;
    body[pos++] = (byte) name.length();
    pos = put(body, pos, name.getBytes(StandardCharsets.US_ASCII));
    for (Map.Entry<String, byte[]> e : properties.entrySet()) {
      body[pos++] = (byte) e.getKey().length();
      pos = put(body, pos, e.getKey().getBytes(StandardCharsets.US_ASCII));
      int n = e.getValue().length;
      body[pos++] = (byte) (n >>> 24);
      body[pos++] = (byte) (n >>> 16);
      body[pos++] = (byte) (n >>> 8);
      body[pos++] = (byte) n;
      pos = put(body, pos, e.getValue());
    }
    writeFrame(FLAG_COMMAND, body);
  }

  private static int put(byte[] dst, int pos, byte[] src) {
    System.arraycopy(src, 0, dst, pos, src.length);
    return pos + src.length;
  }

  /** A command frame's body split into its name and data. */
  private record Command(String name, byte[] data) {
    static Command parse(byte[] body) throws ZmtpProtocolException {
      if (body.length == 0) {
        throw new ZmtpProtocolException(
            ZmtpProtocolException.Reason.MALFORMED_COMMAND, "an empty command frame");
      }
      int n = body[0] & 0xff;
      if (n == 0 || 1 + n > body.length) {
        throw new ZmtpProtocolException(
            ZmtpProtocolException.Reason.MALFORMED_COMMAND,
            "a command name of " + n + " byte(s) in a command of " + body.length + " byte(s)");
      }
      String name = new String(body, 1, n, StandardCharsets.ISO_8859_1);
      byte[] data = java.util.Arrays.copyOfRange(body, 1 + n, body.length);
      return new Command(name, data);
    }
  }

  static Map<String, byte[]> parseProperties(byte[] data) throws ZmtpProtocolException {
    Map<String, byte[]> props = new TreeMap<>();
    int pos = 0;
    int count = 0;
    while (pos < data.length) {
      if (++count > MAX_READY_PROPERTIES) {
        throw new ZmtpProtocolException(
            ZmtpProtocolException.Reason.MALFORMED_COMMAND,
            "a READY of more than " + MAX_READY_PROPERTIES + " properties");
      }
      int n = data[pos++] & 0xff;
      if (n == 0 || n > data.length - pos) {
        throw new ZmtpProtocolException(
            ZmtpProtocolException.Reason.MALFORMED_COMMAND,
            "a property name of " + n + " byte(s) with " + (data.length - pos)
                + " byte(s) left in READY");
      }
      String name = new String(data, pos, n, StandardCharsets.ISO_8859_1).toLowerCase(Locale.ROOT);
      pos += n;
      if (data.length - pos < 4) {
        throw new ZmtpProtocolException(
            ZmtpProtocolException.Reason.MALFORMED_COMMAND,
            "READY ends inside the value size of property " + printable(name));
      }
      long v =
          ((data[pos] & 0xffL) << 24)
              | ((data[pos + 1] & 0xffL) << 16)
              | ((data[pos + 2] & 0xffL) << 8)
              | (data[pos + 3] & 0xffL);
      pos += 4;
      if (v > data.length - pos) {
        throw new ZmtpProtocolException(
            ZmtpProtocolException.Reason.MALFORMED_COMMAND,
            "property " + printable(name) + " has a value of " + v + " byte(s) with "
                + (data.length - pos) + " byte(s) left in READY");
      }
      props.put(name, java.util.Arrays.copyOfRange(data, pos, pos + (int) v));
      pos += (int) v;
    }
    return Collections.unmodifiableMap(props);
  }

  private void handleCommand(byte[] body) throws IOException {
    Command c = Command.parse(body);
    switch (c.name) {
      case "PING" -> {
        if (c.data.length < 2 || c.data.length - 2 > MAX_PING_CONTEXT) {
          throw new ZmtpProtocolException(
              ZmtpProtocolException.Reason.MALFORMED_COMMAND,
              "a PING with " + c.data.length + " data byte(s) (2-byte TTL and up to "
                  + MAX_PING_CONTEXT + " bytes of context expected)");
        }
        byte[] context = java.util.Arrays.copyOfRange(c.data, 2, c.data.length);
        byte[] pong = new byte[1 + 4 + context.length];
        pong[0] = 4;
        put(pong, 1, "PONG".getBytes(StandardCharsets.US_ASCII));
        put(pong, 5, context);
        writePong(pong);
      }
      case "ERROR" -> throw peerError(c);
      case "READY" ->
          throw new ZmtpProtocolException(
              ZmtpProtocolException.Reason.UNEXPECTED_COMMAND, "a second READY command");
      default -> {
        // PONG, SUBSCRIBE, CANCEL and commands of later versions: nothing to do
      }
    }
  }

  /**
   * Writes a PONG command frame without ever blocking. Only a peer that does not read what this
   * side writes can fill the socket's send buffer with PONGs (nothing else is written after the
   * handshake and the subscription), and a blocking write would then wait for ever: no read or
   * idle timeout can fire while the thread is stuck in a write. A PONG the connection cannot
   * take whole at once ends it with {@link ZmtpProtocolException.Reason#PEER_NOT_READING}.
   */
  private void writePong(byte[] pong) throws IOException {
    SocketChannel ch = channel;
    if (ch == null) { // over plain streams (tests)
      writeFrame(FLAG_COMMAND, pong);
      out.flush();
      return;
    }
    out.flush(); // empty: every send flushes
    ByteBuffer frame = ByteBuffer.allocate(2 + pong.length);
    frame.put((byte) FLAG_COMMAND).put((byte) pong.length).put(pong).flip();
    ch.configureBlocking(false);
    try {
      ch.write(frame);
    } finally {
      ch.configureBlocking(true);
    }
    if (frame.hasRemaining()) {
      throw new ZmtpProtocolException(
          ZmtpProtocolException.Reason.PEER_NOT_READING,
          "the peer sends PINGs but does not read the PONGs: the connection's send buffer is"
              + " full");
    }
  }

  private static ZmtpPeerErrorException peerError(Command c) {
    String reason;
    if (c.data.length == 0) {
      reason = "";
    } else {
      int n = Math.min(c.data[0] & 0xff, c.data.length - 1);
      reason = new String(c.data, 1, n, StandardCharsets.ISO_8859_1);
    }
    return new ZmtpPeerErrorException(printable(reason));
  }

  /** {@code s} limited to 64 printable ASCII characters, others replaced by '?'. */
  static String printable(String s) {
    StringBuilder b = new StringBuilder(Math.min(s.length(), 64) + 2);
    for (int i = 0; i < s.length() && i < 64; i++) {
      char ch = s.charAt(i);
      b.append(ch >= 0x20 && ch < 0x7f ? ch : '?');
    }
    if (s.length() > 64) {
      b.append("...");
    }
    return b.toString();
  }

  // ---- reading under deadlines ----

  private int readByte(String what) throws IOException {
    int b = in.read();
    if (b < 0) {
      throw truncated(what);
    }
    return b;
  }

  /**
   * Reads a body of {@code size} bytes into an array that grows (doubling from
   * {@value #BODY_CHUNK} bytes) as the bytes arrive: a peer announcing a large frame has to
   * send it to make this side hold it.
   */
  private byte[] readBody(int size, String what) throws IOException {
    if (size <= BODY_CHUNK) {
      byte[] b = new byte[size];
      readFully(b, what);
      return b;
    }
    byte[] b = new byte[BODY_CHUNK];
    int off = 0;
    while (off < size) {
      if (off == b.length) {
        b = java.util.Arrays.copyOf(b, (int) Math.min(size, 2L * b.length));
      }
      int n = in.read(b, off, b.length - off);
      if (n < 0) {
        throw truncated(what + ", " + off + " of " + size + " byte(s) read");
      }
      off += n;
    }
    return b;
  }

  private void readFully(byte[] b, String what) throws IOException {
    int off = 0;
    while (off < b.length) {
      int n = in.read(b, off, b.length - off);
      if (n < 0) {
        throw truncated(what + ", " + off + " of " + b.length + " byte(s) read");
      }
      off += n;
    }
  }

  private static ZmtpProtocolException truncated(String what) {
    return new ZmtpProtocolException(
        ZmtpProtocolException.Reason.TRUNCATED, "the connection ended inside " + what);
  }

  private void setDeadline(long deadlineNanos, String what) {
    if (deadlineInput != null) {
      deadlineInput.deadline(deadlineNanos, what);
    }
  }

  /** The earlier of {@code deadlineNanos} and {@code limitNanos}. */
  private void setDeadlineOrLimit(long deadlineNanos, long limitNanos, String what) {
    setDeadline(deadlineNanos - limitNanos < 0 ? deadlineNanos : limitNanos, what);
  }

  private void setIdle(String what) {
    if (deadlineInput != null) {
      long idle = options.idleTimeout().toNanos();
      deadlineInput.deadline(idle == 0 ? 0 : System.nanoTime() + idle, what);
    }
  }

  private static int millis(java.time.Duration d) {
    long ms = Math.max(1, d.toMillis());
    return (int) Math.min(Integer.MAX_VALUE, ms);
  }

  /**
   * The socket's input stream, each read given the time left until the current deadline (0:
   * none). Sits below the buffer, so the timeout is set once per socket read.
   */
  private static final class DeadlineInput extends InputStream {
    private final Socket socket;
    private final InputStream raw;
    private long deadline;
    private String what = "";
    private int current = -1;

    DeadlineInput(Socket socket) throws IOException {
      this.socket = socket;
      this.raw = socket.getInputStream();
    }

    void deadline(long deadlineNanos, String what) {
      this.deadline = deadlineNanos;
      this.what = what;
    }

    private void arm() throws IOException {
      int ms;
      if (deadline == 0) {
        ms = 0;
      } else {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new SocketTimeoutException("timed out waiting for " + what);
        }
        ms = (int) Math.min(Integer.MAX_VALUE, Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
      }
      if (ms != current) {
        socket.setSoTimeout(ms);
        current = ms;
      }
    }

    @Override
    public int read() throws IOException {
      arm();
      try {
        return raw.read();
      } catch (SocketTimeoutException e) {
        throw new SocketTimeoutException("timed out waiting for " + what);
      }
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
      arm();
      try {
        return raw.read(b, off, len);
      } catch (SocketTimeoutException e) {
        throw new SocketTimeoutException("timed out waiting for " + what);
      }
    }

    @Override
    public int available() throws IOException {
      return raw.available();
    }

    @Override
    public void close() throws IOException {
      raw.close();
    }
  }
}
