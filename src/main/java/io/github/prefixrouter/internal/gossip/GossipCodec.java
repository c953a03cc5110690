package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Request;
import io.github.prefixrouter.internal.gossip.GossipMessage.SnapshotChunk;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.ByteReader;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.internal.wire.MalformedMessageException.Reason;
import io.github.prefixrouter.spi.PeerAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * Binary encoding of {@link GossipMessage}s (layout in {@code docs/wire-format.md}).
 *
 * <p>Encoding never exceeds {@code messageByteCap}. Decoding is strict: the message must not
 * exceed {@code decodeByteCap} (a node's own cap, or the largest cap any node may have, so that
 * nodes configured differently read each other's messages); every count is
 * checked against its limit and the bytes left before allocating; every counter lies in
 * {@code 0..2^62}; unknown types, versions and flag bits are rejected; trailing bytes are
 * rejected. Any violation raises {@link MalformedMessageException}; nothing else escapes.
 *
 * <p>An update's deltas decode into a {@link PackedDeltas}, at most 8 bytes of heap per byte of
 * the message however small the deltas (one object per delta took 36 bytes per one-byte CLEAR).
 */
final class GossipCodec {

  /** Smallest encoding of a digest entry: id (shared + rest length: 2) + 3 varints + flags. */
  static final int MIN_DIGEST_ENTRY_BYTES = 6;
  /**
   * Largest encoding of a digest entry: id (shared: 1, rest: 1 + 64) + generation difference
   * (zigzag of up to 2^62: 10) + version (9) + heartbeat (9) + flags (1) + load (5 + 5).
   */
  static final int MAX_DIGEST_ENTRY_BYTES = 66 + 10 + 9 + 9 + 1 + 10;
  /** Smallest update: digest entry + update flags (1) + back (1) + delta count (1). */
  static final int MIN_UPDATE_BYTES = MIN_DIGEST_ENTRY_BYTES + 3;
  /** Smallest request: id (shared + rest length: 2) + generation + version. */
  static final int MIN_REQUEST_BYTES = 4;
  /** Smallest delta: the head varint (op and count) alone. */
  static final int MIN_DELTA_BYTES = 1;

  private static final int FLAG_OVERLOADED = 1;
  /** Entry flag: queue depth and in-flight count follow (both are 0 when absent). */
  private static final int FLAG_LOAD = 2;
  /** Entry flag (SYN only): an answer about this origin is awaited from another peer. */
  private static final int FLAG_PENDING = 4;
  private static final int ENTRY_FLAGS = FLAG_OVERLOADED | FLAG_LOAD | FLAG_PENDING;
  /** Update flag: the origin's address follows. */
  private static final int UPDATE_HAS_ADDRESS = 1;

  private final int messageByteCap;
  private final int decodeByteCap;
  private final int maxOrigins;

  /** A codec that encodes and decodes messages of up to {@code messageByteCap} bytes. */
  GossipCodec(int messageByteCap, int maxOrigins) {
    this(messageByteCap, messageByteCap, maxOrigins);
  }

  /**
   * A codec that encodes messages of up to {@code messageByteCap} bytes and decodes messages of
   * up to {@code decodeByteCap}.
   */
  GossipCodec(int messageByteCap, int decodeByteCap, int maxOrigins) {
    this.messageByteCap = messageByteCap;
    this.decodeByteCap = decodeByteCap;
    this.maxOrigins = maxOrigins;
  }

  int messageByteCap() {
    return messageByteCap;
  }

  // ---------------------------------------------------------------- sizes

  /**
   * Ids and generations in a list (digest entries, update headers, requests) are coded against
   * the previous element of the same list: the id as the length of the prefix it shares with
   * the previous id plus the rest, the generation as the zigzag difference.
   */
  static final class Prev {
    String id = "";
    long generation;

    void set(String id, long generation) {
      this.id = id;
      this.generation = generation;
    }
  }

  /** Exact size of {@code e} coded after {@code prev}. */
  static int sizeOf(DigestEntry e, Prev prev) {
    return idSize(e.nodeId(), prev.id)
        + ByteWriter.varLongSize(zigzag(e.generation() - prev.generation))
        + ByteWriter.varLongSize(e.version())
        + ByteWriter.varLongSize(e.heartbeat())
        + loadSize(e)
        + 1;
  }

  /** An upper bound of the size of {@code e} wherever it is in its list. */
  static int sizeOf(DigestEntry e) {
    return 1 + asciiSize(e.nodeId())
        + ByteWriter.MAX_VARLONG_BYTES
        + ByteWriter.varLongSize(e.version())
        + ByteWriter.varLongSize(e.heartbeat())
        + loadSize(e)
        + 1;
  }

  private static int loadSize(DigestEntry e) {
    return e.queueDepth() == 0 && e.inFlight() == 0 ? 0
        : ByteWriter.varLongSize(e.queueDepth()) + ByteWriter.varLongSize(e.inFlight());
  }

  static int idSize(String id, String prevId) {
    int rest = id.length() - sharedPrefix(id, prevId);
    return 1 + ByteWriter.varLongSize(rest) + rest;
  }

  private static int sharedPrefix(String a, String b) {
    int n = Math.min(a.length(), b.length());
    int i = 0;
    while (i < n && a.charAt(i) == b.charAt(i)) {
      i++;
    }
    return i;
  }

  static long zigzag(long v) {
    return (v << 1) ^ (v >> 63);
  }

  static int sizeOf(Update u) {
    return headerOnlySize(u.header(), u.address(), u.fromVersion()) - 1
        + ByteWriter.varLongSize(u.deltas().size()) + (int) Delta.encodedSize(u.deltas());
  }

  /** Size of an update for {@code header} and {@code address} (or none) without deltas. */
  static int headerOnlySize(DigestEntry header, String address, long fromVersion) {
    return sizeOf(header) + 1 + (address == null ? 0 : asciiSize(address))
        + ByteWriter.varLongSize(header.version() - fromVersion) + 1;
  }

  /** An upper bound of the size of {@code r} wherever it is in its list. */
  static int sizeOf(Request r) {
    return 1 + asciiSize(r.nodeId())
        + ByteWriter.MAX_VARLONG_BYTES
        + ByteWriter.varLongSize(r.version());
  }

  static int asciiSize(String s) {
    return ByteWriter.varLongSize(s.length()) + s.length();
  }

  /** Bytes taken by the fixed part of a snapshot chunk (everything but the fingerprints). */
  static int chunkOverhead(String nodeId, long generation, long version, long storeCount) {
    return 2 + asciiSize(nodeId) + ByteWriter.varLongSize(generation)
        + ByteWriter.varLongSize(version) + ByteWriter.varLongSize(storeCount) + 3 + 3 + 4;
  }

  /** Smallest encoding of one block of a snapshot chunk: store gap (1) + fingerprint (4). */
  static final int MIN_CHUNK_BLOCK_BYTES = 1 + BlockFingerprint.BYTES;

  /** Bytes of SYN framing before the entries (type, version, round, generation, count). */
  static int synOverhead(long round, long generation, int entries) {
    return 2 + ByteWriter.varLongSize(round) + ByteWriter.varLongSize(generation)
        + ByteWriter.varLongSize(entries);
  }

  // ---------------------------------------------------------------- encode

  byte[] encode(GossipMessage m) {
    ByteWriter w = new ByteWriter(256, messageByteCap);
    if (m instanceof Syn s) {
      w.writeByte(GossipMessage.TYPE_SYN).writeByte(GossipMessage.VERSION);
      w.writeVarLong(s.round()).writeVarLong(s.senderGeneration());
      w.writeVarInt(s.digest().size());
      Prev prev = new Prev();
      for (DigestEntry e : s.digest()) {
        write(w, e, prev);
      }
    } else if (m instanceof Ack a) {
      w.writeByte(GossipMessage.TYPE_ACK).writeByte(GossipMessage.VERSION);
      w.writeVarLong(a.round()).writeVarLong(a.senderGeneration());
      writeUpdates(w, a.updates());
      w.writeVarInt(a.requests().size());
      Prev prev = new Prev();
      for (Request r : a.requests()) {
        writeId(w, r.nodeId(), r.generation(), prev);
        w.writeVarLong(r.version());
      }
    } else if (m instanceof Ack2 a) {
      w.writeByte(GossipMessage.TYPE_ACK2).writeByte(GossipMessage.VERSION);
      w.writeVarLong(a.senderGeneration());
      writeUpdates(w, a.updates());
    } else {
      SnapshotChunk c = (SnapshotChunk) m;
      w.writeByte(GossipMessage.TYPE_SNAPSHOT_CHUNK).writeByte(GossipMessage.VERSION);
      w.writeAscii(c.nodeId(), PeerAddress.MAX_NODE_ID_LENGTH);
      w.writeVarLong(c.generation()).writeVarLong(c.version()).writeVarLong(c.storeCount());
      w.writeVarInt(c.chunkIndex()).writeVarInt(c.chunkCount());
      w.writeVarInt(c.hashes().length);
      long prev = 0;
      for (int i = 0; i < c.hashes().length; i++) {
        long store = c.stores()[i];
        if (store <= prev || store > c.storeCount()) {
          throw new IllegalArgumentException("snapshot store numbers must ascend within 1.."
              + c.storeCount() + ": " + store + " after " + prev);
        }
        w.writeVarLong(store - prev);
        writeFingerprint(w, c.hashes()[i]);
        prev = store;
      }
    }
    return w.toByteArray();
  }

  private static void write(ByteWriter w, DigestEntry e, Prev prev) {
    writeId(w, e.nodeId(), e.generation(), prev);
    w.writeVarLong(e.version()).writeVarLong(e.heartbeat());
    boolean load = e.queueDepth() != 0 || e.inFlight() != 0;
    w.writeByte((e.overloaded() ? FLAG_OVERLOADED : 0) | (load ? FLAG_LOAD : 0)
        | (e.pending() ? FLAG_PENDING : 0));
    if (load) {
      w.writeVarInt(e.queueDepth()).writeVarInt(e.inFlight());
    }
  }

  /** Id (front-coded against the previous id) and generation (zigzag difference). */
  private static void writeId(ByteWriter w, String id, long generation, Prev prev) {
    if (id.isEmpty() || id.length() > PeerAddress.MAX_NODE_ID_LENGTH) {
      throw new IllegalArgumentException("node id length must be 1.."
          + PeerAddress.MAX_NODE_ID_LENGTH + ": " + id);
    }
    int shared = sharedPrefix(id, prev.id);
    w.writeVarInt(shared);
    if (isAscii(id, shared)) {
      w.writeAsciiFrom(id, shared); // no substring and byte array per id
    } else { // the bytes this always wrote: each character that is not ASCII as '?'
      w.writeBytes(id.substring(shared).getBytes(java.nio.charset.StandardCharsets.US_ASCII));
    }
    w.writeVarLong(zigzag(generation - prev.generation));
    prev.set(id, generation);
  }

  private static boolean isAscii(String s, int from) {
    for (int i = from; i < s.length(); i++) {
      if (s.charAt(i) >= 0x80) {
        return false;
      }
    }
    return true;
  }

  /** Exact bytes of an update list as {@link #encode} writes it (for accounting). */
  static int updatesSize(List<Update> updates) {
    ByteWriter w = new ByteWriter(256, Integer.MAX_VALUE);
    writeUpdates(w, updates);
    return w.size();
  }

  private static void writeUpdates(ByteWriter w, List<Update> updates) {
    w.writeVarInt(updates.size());
    Prev prev = new Prev();
    for (Update u : updates) {
      write(w, u.header(), prev);
      if (u.address() == null) {
        w.writeByte(0);
      } else {
        w.writeByte(UPDATE_HAS_ADDRESS);
        w.writeAscii(u.address(), PeerAddress.MAX_ADDRESS_LENGTH);
      }
      if (u.fromVersion() > u.header().version()) {
        throw new IllegalArgumentException("update starts past its header's version");
      }
      w.writeVarLong(u.header().version() - u.fromVersion());
      w.writeVarInt(u.deltas().size());
      long prevRef = 0;
      for (Delta d : u.deltas()) {
        w.writeVarLong(((long) d.hashes().length << 2) | d.op());
        if (d.op() == Delta.EVICT) {
          long[] refs = d.hashes();
          for (int i = 0; i < refs.length; i++) {
            long r = refs[i];
            if (r < 1 || r > Delta.MAX_STORE || (i > 0 && r <= refs[i - 1])) {
              throw new IllegalArgumentException(
                  "EVICT store numbers must ascend within 1..2^62: " + r);
            }
            w.writeVarLong(i == 0 ? zigzag(r - prevRef) : r - refs[i - 1] - 1);
          }
          prevRef = d.lastRef(prevRef);
        } else {
          for (long h : d.hashes()) {
            writeFingerprint(w, h);
          }
        }
      }
    }
  }

  private static void writeFingerprint(ByteWriter w, long h) {
    if (!BlockFingerprint.valid(h)) {
      throw new IllegalArgumentException("not a 32-bit block fingerprint: " + h);
    }
    w.writeFixedInt((int) h);
  }

  // ---------------------------------------------------------------- decode

  GossipMessage decode(byte[] payload) throws MalformedMessageException {
    return decode(payload, IdTable.EMPTY);
  }

  /**
   * Decodes {@code payload} as {@link #decode(byte[])} does, giving each node id of a digest
   * entry, update or request that {@code known} holds as {@code known}'s string.
   */
  GossipMessage decode(byte[] payload, IdTable known) throws MalformedMessageException {
    if (payload.length > decodeByteCap) {
      throw MalformedMessageException.tooLarge("message", payload.length, decodeByteCap, 0);
    }
    ByteReader r = new ByteReader(payload);
    int type = r.readUnsignedByte("type");
    if (type < GossipMessage.TYPE_SYN || type > GossipMessage.TYPE_SNAPSHOT_CHUNK) {
      throw MalformedMessageException.of(
          Reason.UNKNOWN_TYPE, "type", type, 0, "not a gossip message type");
    }
    int version = r.readUnsignedByte("version");
    if (version != GossipMessage.VERSION) {
      throw MalformedMessageException.of(
          Reason.UNKNOWN_VERSION, "version", version, 1,
          "this node speaks version " + GossipMessage.VERSION);
    }
    GossipMessage m;
    switch (type) {
      case GossipMessage.TYPE_SYN -> {
        long round = counter(r, "round");
        long gen = counter(r, "senderGeneration");
        int n = r.readCount("digest.count", maxOrigins, MIN_DIGEST_ENTRY_BYTES);
        List<DigestEntry> digest = new ArrayList<>(n);
        IdReader prev = new IdReader(known);
        for (int i = 0; i < n; i++) {
          digest.add(readEntry(r, prev));
        }
        m = new Syn(round, gen, digest);
      }
      case GossipMessage.TYPE_ACK -> {
        long round = counter(r, "round");
        long gen = counter(r, "senderGeneration");
        List<Update> updates = readUpdates(r, payload, known);
        int n = r.readCount("requests.count", maxOrigins, MIN_REQUEST_BYTES);
        List<Request> requests = new ArrayList<>(n);
        IdReader prev = new IdReader(known);
        for (int i = 0; i < n; i++) {
          readId(r, REQUEST_ID, prev);
          requests.add(new Request(prev.id, prev.generation, counter(r, "request.version")));
        }
        m = new Ack(round, gen, updates, requests);
      }
      case GossipMessage.TYPE_ACK2 -> {
        long gen = counter(r, "senderGeneration");
        m = new Ack2(gen, readUpdates(r, payload, known));
      }
      default -> {
        String id = r.readAscii("chunk.nodeId", PeerAddress.MAX_NODE_ID_LENGTH);
        long gen = counter(r, "chunk.generation");
        long ver = counter(r, "chunk.version");
        long storeCount = counter(r, "chunk.storeCount");
        int pos = r.position();
        int index = r.readVarInt("chunk.index", 0, Integer.MAX_VALUE);
        int count = r.readVarInt("chunk.count", 1, 1 << 20);
        if (index >= count) {
          throw MalformedMessageException.outOfRange("chunk.index", index, 0, count - 1, pos);
        }
        int n = r.readCount("chunk.blocks", decodeByteCap / MIN_CHUNK_BLOCK_BYTES,
            MIN_CHUNK_BLOCK_BYTES);
        long[] stores = new long[n];
        long[] hashes = new long[n];
        long prev = 0;
        for (int i = 0; i < n; i++) {
          pos = r.position();
          long gap = r.readVarLong("chunk.storeGap", 1, GossipMessage.MAX_COUNTER);
          // compared as a gap: prev + gap can pass 2^63 and wrap negative
          if (gap > storeCount - prev) {
            throw MalformedMessageException.outOfRange("chunk.store",
                gap > Long.MAX_VALUE - prev ? Long.MAX_VALUE : prev + gap, 1, storeCount, pos);
          }
          long store = prev + gap;
          stores[i] = store;
          hashes[i] = r.readFixedInt("chunk.fingerprint") & 0xFFFF_FFFFL;
          prev = store;
        }
        m = new SnapshotChunk(id, gen, ver, storeCount, index, count, stores, hashes);
      }
    }
    r.expectEnd("message");
    return m;
  }

  private List<Update> readUpdates(ByteReader r, byte[] payload, IdTable known)
      throws MalformedMessageException {
    int n = r.readCount("updates.count", maxOrigins, MIN_UPDATE_BYTES);
    List<Update> updates = new ArrayList<>(n);
    IdReader prev = new IdReader(known);
    for (int i = 0; i < n; i++) {
      DigestEntry e = readEntry(r, prev);
      int pos = r.position();
      int flags = r.readUnsignedByte("update.flags");
      if ((flags & ~UPDATE_HAS_ADDRESS) != 0) {
        throw MalformedMessageException.outOfRange("update.flags", flags, 0, UPDATE_HAS_ADDRESS,
            pos);
      }
      String address = flags == UPDATE_HAS_ADDRESS
          ? r.readAscii("update.address", PeerAddress.MAX_ADDRESS_LENGTH) : null;
      long back = r.readVarLong("update.back", 0, e.version());
      long from = e.version() - back;
      pos = r.position();
      int nd = r.readCount("update.deltas.count", decodeByteCap, MIN_DELTA_BYTES);
      if (nd > back) {
        throw MalformedMessageException.of(Reason.INCONSISTENT, "update.deltas", nd, pos,
            "deltas run past the header's version " + e.version());
      }
      List<Delta> deltas;
      if (nd == 0) {
        deltas = List.of();
      } else {
        // a first pass checks the deltas and counts their items, so the arrays are exact
        int items = readDeltas(new ByteReader(payload, r.position(), r.remaining()), nd, null,
            null, null);
        byte[] ops = new byte[nd];
        int[] ends = new int[nd];
        long[] values = items == 0 ? Delta.NO_HASHES : new long[items];
        readDeltas(r, nd, ops, ends, values);
        deltas = new PackedDeltas(from, ops, ends, values);
      }
      updates.add(new Update(e, address, from, deltas));
    }
    return updates;
  }

  /**
   * Reads the {@code nd} deltas of one update. With {@code ops} null it only checks them;
   * otherwise it fills {@code ops}, {@code ends} and {@code items} as {@link PackedDeltas} holds
   * them, the arrays sized by a checking pass over the same bytes.
   *
   * @return the fingerprints and store numbers the deltas carry
   */
  private int readDeltas(ByteReader r, int nd, byte[] ops, int[] ends, long[] items)
      throws MalformedMessageException {
    int n = 0;
    long prevRef = 0;
    for (int j = 0; j < nd; j++) {
      int pos = r.position();
      long head = r.readVarLong("delta.head", 0, ((long) decodeByteCap << 2) | Delta.CLEAR);
      int op = (int) (head & 3);
      int count = (int) (head >>> 2);
      if (op < Delta.STORE) {
        throw MalformedMessageException.outOfRange("delta.op", op, Delta.STORE, Delta.CLEAR, pos);
      }
      if (op == Delta.CLEAR && count != 0) {
        throw MalformedMessageException.of(
            Reason.INCONSISTENT, "delta.hashes", count, pos, "CLEAR carries no hashes");
      }
      // a fingerprint takes 4 bytes, a store number at least 1
      long need = (long) count * (op == Delta.EVICT ? 1 : BlockFingerprint.BYTES);
      if (need > r.remaining()) {
        throw MalformedMessageException.truncated(op == Delta.EVICT ? "delta.stores"
            : "delta.hashes", need, r.remaining(), pos);
      }
      for (int k = 0; k < count; k++) {
        long value;
        if (op == Delta.EVICT) {
          pos = r.position();
          // the store number the peer claims, out of range (and reported as such) if its sum
          // passes 2^63
          if (k == 0) {
            value = saturatedAdd(prevRef, r.readZigZagLong("delta.stores"));
          } else {
            value = saturatedAdd(prevRef, r.readVarLong("delta.stores", 0, Delta.MAX_STORE) + 1);
          }
          if (value < 1 || value > Delta.MAX_STORE) {
            throw MalformedMessageException.outOfRange("delta.stores", value, 1,
                Delta.MAX_STORE, pos);
          }
          prevRef = value;
        } else {
          value = r.readFixedInt("delta.hashes") & 0xFFFF_FFFFL;
        }
        if (items != null) {
          items[n] = value;
        }
        n++;
      }
      if (ops != null) {
        ops[j] = (byte) op;
        ends[j] = n;
      }
    }
    return n;
  }

  private static DigestEntry readEntry(ByteReader r, IdReader prev)
      throws MalformedMessageException {
    readId(r, ENTRY_ID, prev);
    long ver = counter(r, "entry.version");
    long hb = counter(r, "entry.heartbeat");
    int pos = r.position();
    int flags = r.readUnsignedByte("entry.flags");
    if ((flags & ~ENTRY_FLAGS) != 0) {
      throw MalformedMessageException.outOfRange("entry.flags", flags, 0, ENTRY_FLAGS, pos);
    }
    int queue = 0;
    int inFlight = 0;
    if ((flags & FLAG_LOAD) != 0) {
      queue = r.readVarInt("entry.queueDepth", 0, Integer.MAX_VALUE);
      inFlight = r.readVarInt("entry.inFlight", 0, Integer.MAX_VALUE);
    }
    return new DigestEntry(prev.id, prev.generation, ver, hb, queue, inFlight,
        (flags & FLAG_OVERLOADED) != 0, (flags & FLAG_PENDING) != 0);
  }

  /** The names of an id's fields in error messages, built once rather than for every id. */
  private record IdFields(String shared, String rest, String nodeId, String generation) {
    static IdFields of(String what) {
      return new IdFields(what + ".nodeId.shared", what + ".nodeId.rest", what + ".nodeId",
          what + ".generation");
    }
  }

  private static final IdFields ENTRY_ID = IdFields.of("entry");
  private static final IdFields REQUEST_ID = IdFields.of("request");

  /**
   * The previous id and generation of a list being decoded (what {@link Prev} is to sizes), with
   * the id's characters and the hash states of their prefixes kept in arrays: the next id shares
   * a prefix with it, so its characters and hash are completed from there, and an id {@code
   * known} holds is taken from it without building a string.
   */
  private static final class IdReader {
    final IdTable known;
    final byte[] chars = new byte[PeerAddress.MAX_NODE_ID_LENGTH];
    /**
     * {@code states[k]}: {@code known}'s keyed hash state after the first {@code k} characters
     * ({@link IdTable#next}).
     */
    final long[] states = new long[PeerAddress.MAX_NODE_ID_LENGTH + 1];
    String id = "";
    /** {@code id.length()}, without reading the string (a member's, perhaps long untouched). */
    int length;
    long generation;

    IdReader(IdTable known) {
      this.known = known;
      states[0] = known.start();
    }
  }

  /** Reads a front-coded id and a zigzag generation difference into {@code prev}. */
  private static void readId(ByteReader r, IdFields what, IdReader prev)
      throws MalformedMessageException {
    int shared = r.readVarInt(what.shared(), 0, prev.length);
    int pos = r.position();
    int rest = r.readBytes(what.rest(), PeerAddress.MAX_NODE_ID_LENGTH - shared, prev.chars,
        shared);
    if (shared + rest == 0) {
      throw MalformedMessageException.outOfRange(what.nodeId(), 0, 1,
          PeerAddress.MAX_NODE_ID_LENGTH, pos);
    }
    for (int i = 0; i < rest; i++) {
      int c = prev.chars[shared + i] & 0xFF;
      if (c < 0x21 || c > 0x7E) {
        throw MalformedMessageException.of(Reason.BAD_CHARACTER, what.nodeId(), c,
            pos + 1 + i, "not printable ASCII");
      }
      prev.states[shared + i + 1] = IdTable.next(prev.states[shared + i], c);
    }
    pos = r.position();
    long gen = saturatedAdd(prev.generation, r.readZigZagLong(what.generation()));
    if (gen < 0 || gen > GossipMessage.MAX_COUNTER) {
      throw MalformedMessageException.outOfRange(what.generation(), gen, 0,
          GossipMessage.MAX_COUNTER, pos);
    }
    int length = shared + rest;
    String id = prev.known.find(prev.chars, length, prev.states[length]);
    prev.id = id != null ? id
        : new String(prev.chars, 0, length, java.nio.charset.StandardCharsets.US_ASCII);
    prev.length = length;
    prev.generation = gen;
  }

  /**
   * {@code a + b}, or {@link Long#MAX_VALUE} ({@link Long#MIN_VALUE}) where the sum passes the
   * range of a {@code long}: a value decoded as a difference is checked, and reported, as the
   * peer claims it rather than wrapped.
   */
  private static long saturatedAdd(long a, long b) {
    long sum = a + b;
    return ((a ^ sum) & (b ^ sum)) < 0 ? (a < 0 ? Long.MIN_VALUE : Long.MAX_VALUE) : sum;
  }

  private static long counter(ByteReader r, String field) throws MalformedMessageException {
    return r.readVarLong(field, 0, GossipMessage.MAX_COUNTER);
  }
}
