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
 * <p>Decoding is strict: the message must not exceed {@code messageByteCap}; every count is
 * checked against its limit and the bytes left before allocating; every counter lies in
 * {@code 0..2^62}; unknown types, versions and flag bits are rejected; trailing bytes are
 * rejected. Any violation raises {@link MalformedMessageException}; nothing else escapes.
 */
final class GossipCodec {

  /** Smallest encoding of a digest entry: id (2) + 5 varints (5) + flags (1). */
  static final int MIN_DIGEST_ENTRY_BYTES = 8;
  /** Smallest update: digest entry + update flags (1) + back (1) + delta count (1). */
  static final int MIN_UPDATE_BYTES = MIN_DIGEST_ENTRY_BYTES + 3;
  /** Smallest request: id (2) + 2 varints. */
  static final int MIN_REQUEST_BYTES = 4;
  /** Smallest delta: the head varint (op and count) alone. */
  static final int MIN_DELTA_BYTES = 1;

  private static final int FLAG_OVERLOADED = 1;
  /** Update flag: the origin's address follows. */
  private static final int UPDATE_HAS_ADDRESS = 1;

  private final int messageByteCap;
  private final int maxOrigins;

  GossipCodec(int messageByteCap, int maxOrigins) {
    this.messageByteCap = messageByteCap;
    this.maxOrigins = maxOrigins;
  }

  int messageByteCap() {
    return messageByteCap;
  }

  // ---------------------------------------------------------------- sizes

  static int sizeOf(DigestEntry e) {
    return asciiSize(e.nodeId())
        + ByteWriter.varLongSize(e.generation())
        + ByteWriter.varLongSize(e.version())
        + ByteWriter.varLongSize(e.heartbeat())
        + ByteWriter.varLongSize(e.queueDepth())
        + ByteWriter.varLongSize(e.inFlight())
        + 1;
  }

  static int sizeOf(Update u) {
    int n = headerOnlySize(u.header(), u.address(), u.fromVersion()) - 1
        + ByteWriter.varLongSize(u.deltas().size());
    for (Delta d : u.deltas()) {
      n += d.encodedSize();
    }
    return n;
  }

  /** Size of an update for {@code header} and {@code address} (or none) without deltas. */
  static int headerOnlySize(DigestEntry header, String address, long fromVersion) {
    return sizeOf(header) + 1 + (address == null ? 0 : asciiSize(address))
        + ByteWriter.varLongSize(header.version() - fromVersion) + 1;
  }

  static int sizeOf(Request r) {
    return asciiSize(r.nodeId())
        + ByteWriter.varLongSize(r.generation())
        + ByteWriter.varLongSize(r.version());
  }

  static int asciiSize(String s) {
    return ByteWriter.varLongSize(s.length()) + s.length();
  }

  /** Bytes taken by the fixed part of a snapshot chunk (everything but the fingerprints). */
  static int chunkOverhead(String nodeId, long generation, long version) {
    return 2 + asciiSize(nodeId) + ByteWriter.varLongSize(generation)
        + ByteWriter.varLongSize(version) + 3 + 3 + 4;
  }

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
      for (DigestEntry e : s.digest()) {
        write(w, e);
      }
    } else if (m instanceof Ack a) {
      w.writeByte(GossipMessage.TYPE_ACK).writeByte(GossipMessage.VERSION);
      w.writeVarLong(a.round()).writeVarLong(a.senderGeneration());
      writeUpdates(w, a.updates());
      w.writeVarInt(a.requests().size());
      for (Request r : a.requests()) {
        w.writeAscii(r.nodeId(), PeerAddress.MAX_NODE_ID_LENGTH);
        w.writeVarLong(r.generation()).writeVarLong(r.version());
      }
    } else if (m instanceof Ack2 a) {
      w.writeByte(GossipMessage.TYPE_ACK2).writeByte(GossipMessage.VERSION);
      w.writeVarLong(a.senderGeneration());
      writeUpdates(w, a.updates());
    } else {
      SnapshotChunk c = (SnapshotChunk) m;
      w.writeByte(GossipMessage.TYPE_SNAPSHOT_CHUNK).writeByte(GossipMessage.VERSION);
      w.writeAscii(c.nodeId(), PeerAddress.MAX_NODE_ID_LENGTH);
      w.writeVarLong(c.generation()).writeVarLong(c.version());
      w.writeVarInt(c.chunkIndex()).writeVarInt(c.chunkCount());
      writeFingerprints(w, c.hashes());
    }
    return w.toByteArray();
  }

  private static void write(ByteWriter w, DigestEntry e) {
    w.writeAscii(e.nodeId(), PeerAddress.MAX_NODE_ID_LENGTH);
    w.writeVarLong(e.generation()).writeVarLong(e.version()).writeVarLong(e.heartbeat());
    w.writeVarInt(e.queueDepth()).writeVarInt(e.inFlight());
    w.writeByte(e.overloaded() ? FLAG_OVERLOADED : 0);
  }

  private static void writeUpdates(ByteWriter w, List<Update> updates) {
    w.writeVarInt(updates.size());
    for (Update u : updates) {
      write(w, u.header());
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
      for (Delta d : u.deltas()) {
        w.writeVarLong(((long) d.hashes().length << 2) | d.op());
        for (long h : d.hashes()) {
          writeFingerprint(w, h);
        }
      }
    }
  }

  private static void writeFingerprints(ByteWriter w, long[] fingerprints) {
    w.writeVarInt(fingerprints.length);
    for (long h : fingerprints) {
      writeFingerprint(w, h);
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
    if (payload.length > messageByteCap) {
      throw MalformedMessageException.tooLarge("message", payload.length, messageByteCap, 0);
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
        for (int i = 0; i < n; i++) {
          digest.add(readEntry(r));
        }
        m = new Syn(round, gen, digest);
      }
      case GossipMessage.TYPE_ACK -> {
        long round = counter(r, "round");
        long gen = counter(r, "senderGeneration");
        List<Update> updates = readUpdates(r);
        int n = r.readCount("requests.count", maxOrigins, MIN_REQUEST_BYTES);
        List<Request> requests = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
          String id = r.readAscii("request.nodeId", PeerAddress.MAX_NODE_ID_LENGTH);
          requests.add(new Request(id, counter(r, "request.generation"),
              counter(r, "request.version")));
        }
        m = new Ack(round, gen, updates, requests);
      }
      case GossipMessage.TYPE_ACK2 -> {
        long gen = counter(r, "senderGeneration");
        m = new Ack2(gen, readUpdates(r));
      }
      default -> {
        String id = r.readAscii("chunk.nodeId", PeerAddress.MAX_NODE_ID_LENGTH);
        long gen = counter(r, "chunk.generation");
        long ver = counter(r, "chunk.version");
        int pos = r.position();
        int index = r.readVarInt("chunk.index", 0, Integer.MAX_VALUE);
        int count = r.readVarInt("chunk.count", 1, 1 << 20);
        if (index >= count) {
          throw MalformedMessageException.outOfRange("chunk.index", index, 0, count - 1, pos);
        }
        long[] hashes = r.readFixedUnsignedIntArray("chunk.hashes",
            messageByteCap / BlockFingerprint.BYTES);
        m = new SnapshotChunk(id, gen, ver, index, count, hashes);
      }
    }
    r.expectEnd("message");
    return m;
  }

  private List<Update> readUpdates(ByteReader r) throws MalformedMessageException {
    int n = r.readCount("updates.count", maxOrigins, MIN_UPDATE_BYTES);
    List<Update> updates = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      DigestEntry e = readEntry(r);
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
      int nd = r.readCount("update.deltas.count", messageByteCap, MIN_DELTA_BYTES);
      if (nd > back) {
        throw MalformedMessageException.of(Reason.INCONSISTENT, "update.deltas", nd, pos,
            "deltas run past the header's version " + e.version());
      }
      List<Delta> deltas = new ArrayList<>(nd);
      for (int j = 0; j < nd; j++) {
        pos = r.position();
        long head = r.readVarLong("delta.head", 0,
            ((long) (messageByteCap / BlockFingerprint.BYTES) << 2) | Delta.CLEAR);
        int op = (int) (head & 3);
        int count = (int) (head >>> 2);
        if (op < Delta.STORE) {
          throw MalformedMessageException.outOfRange("delta.op", op, Delta.STORE, Delta.CLEAR, pos);
        }
        if (op == Delta.CLEAR && count != 0) {
          throw MalformedMessageException.of(
              Reason.INCONSISTENT, "delta.hashes", count, pos, "CLEAR carries no hashes");
        }
        if ((long) count * BlockFingerprint.BYTES > r.remaining()) {
          throw MalformedMessageException.truncated("delta.hashes",
              (long) count * BlockFingerprint.BYTES, r.remaining(), pos);
        }
        long[] hashes = count == 0 ? Delta.NO_HASHES : new long[count];
        for (int k = 0; k < count; k++) {
          hashes[k] = r.readFixedInt("delta.hashes") & 0xFFFF_FFFFL;
        }
        deltas.add(new Delta(from + j + 1, op, hashes));
      }
      updates.add(new Update(e, address, from, deltas));
    }
    return updates;
  }

  private static DigestEntry readEntry(ByteReader r) throws MalformedMessageException {
    String id = r.readAscii("entry.nodeId", PeerAddress.MAX_NODE_ID_LENGTH);
    long gen = counter(r, "entry.generation");
    long ver = counter(r, "entry.version");
    long hb = counter(r, "entry.heartbeat");
    int queue = r.readVarInt("entry.queueDepth", 0, Integer.MAX_VALUE);
    int inFlight = r.readVarInt("entry.inFlight", 0, Integer.MAX_VALUE);
    int pos = r.position();
    int flags = r.readUnsignedByte("entry.flags");
    if ((flags & ~FLAG_OVERLOADED) != 0) {
      throw MalformedMessageException.outOfRange("entry.flags", flags, 0, FLAG_OVERLOADED, pos);
    }
    return new DigestEntry(id, gen, ver, hb, queue, inFlight, flags == FLAG_OVERLOADED);
  }

  private static long counter(ByteReader r, String field) throws MalformedMessageException {
    return r.readVarLong(field, 0, GossipMessage.MAX_COUNTER);
  }
}
