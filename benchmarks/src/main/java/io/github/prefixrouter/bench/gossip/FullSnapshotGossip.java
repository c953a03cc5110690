package io.github.prefixrouter.bench.gossip;

import io.github.prefixrouter.internal.tree.BlockEventListener;
import io.github.prefixrouter.internal.wire.ByteReader;
import io.github.prefixrouter.internal.wire.ByteWriter;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.PeerAddress;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;

/**
 * The baseline: naive full-state anti-entropy. Every round a node pushes its whole block set
 * to {@code fanout} random peers, in chunks of at most {@code messageByteCap} bytes using the
 * same primitive encoding as the delta protocol (a small header, then 8 bytes per block hash,
 * or 4 bytes per block for the variant that sends the same 32-bit fingerprints as the delta
 * protocol's wire format); the
 * receiver replaces its replica once all chunks of a round arrived. Runs beside the delta
 * protocol on the same caches, so both see the same event stream.
 */
final class FullSnapshotGossip implements BlockEventListener {

  private final PeerAddress self;
  private final int messageByteCap;
  private final int bytesPerBlock;
  private final int type;
  private final Set<Long> blocks = new HashSet<>();
  private final Map<String, long[]> replicas = new HashMap<>();
  private final Map<String, List<long[]>> assembling = new HashMap<>();
  /** When the replica of each origin was last replaced (simulated nanoseconds). */
  private final Map<String, Long> installedAt = new HashMap<>();
  private java.util.function.LongSupplier clock = () -> 0;
  long bytesSent;
  long messagesSent;
  long round;

  /** @param bytesPerBlock 8 (the 64-bit hash) or 4 (its 32-bit fingerprint) */
  FullSnapshotGossip(PeerAddress self, int messageByteCap, int bytesPerBlock) {
    this(self, messageByteCap, bytesPerBlock, typeFor(bytesPerBlock));
  }

  /**
   * @param bytesPerBlock 8 (the 64-bit hash) or 4 (its 32-bit fingerprint)
   * @param type the (benchmark-only) message type byte that tells this variant's messages apart
   */
  FullSnapshotGossip(PeerAddress self, int messageByteCap, int bytesPerBlock, int type) {
    if (bytesPerBlock != 8 && bytesPerBlock != 4) {
      throw new IllegalArgumentException("bytesPerBlock must be 8 or 4");
    }
    this.self = self;
    this.messageByteCap = messageByteCap;
    this.bytesPerBlock = bytesPerBlock;
    this.type = type;
  }

  /** Type byte of the variant that pushes 4-byte fingerprints to every peer every round. */
  static final int TYPE_ALL_PEERS = 0x1D;

  /** Reads receive times from {@code clock} (for {@link #installedAt}). */
  void clock(java.util.function.LongSupplier clock) {
    this.clock = clock;
  }

  /** When the replica of {@code origin} was last replaced, or -1 if never. */
  long installedAt(String origin) {
    Long t = installedAt.get(origin);
    return t == null ? -1 : t;
  }

  /** The (benchmark-only) message type byte of the variant with {@code bytesPerBlock}. */
  static int typeFor(int bytesPerBlock) {
    return bytesPerBlock == 8 ? 0x1F : 0x1E;
  }

  @Override
  public synchronized void onStored(long[] blockHashes) {
    for (long h : blockHashes) {
      blocks.add(h);
    }
  }

  @Override
  public synchronized void onEvicted(long[] blockHashes) {
    for (long h : blockHashes) {
      blocks.remove(h);
    }
  }

  @Override
  public synchronized void onCleared() {
    blocks.clear();
  }

  /** One round: push the full set to {@code fanout} random peers of {@code peers}. */
  void runRound(List<PeerAddress> peers, int fanout, SplittableRandom rnd, SimNet net) {
    round++;
    long[] all;
    synchronized (this) {
      all = blocks.stream().mapToLong(Long::longValue).toArray();
    }
    int perChunk = (messageByteCap - 96) / bytesPerBlock;
    int chunks = Math.max(1, (all.length + perChunk - 1) / perChunk);
    List<byte[]> encoded = new ArrayList<>(chunks);
    for (int c = 0; c < chunks; c++) {
      ByteWriter w = new ByteWriter(messageByteCap, messageByteCap);
      w.writeByte(type).writeByte(1).writeAscii(self.nodeId(), PeerAddress.MAX_NODE_ID_LENGTH);
      w.writeVarLong(round).writeVarInt(c).writeVarInt(chunks);
      int from = c * perChunk;
      int to = Math.min(all.length, from + perChunk);
      w.writeVarInt(to - from);
      for (int i = from; i < to; i++) {
        if (bytesPerBlock == 8) {
          w.writeFixedLong(all[i]);
        } else {
          w.writeFixedInt((int) (all[i] ^ (all[i] >>> 32)));
        }
      }
      encoded.add(w.toByteArray());
    }
    List<PeerAddress> copy = new ArrayList<>(peers);
    for (int k = 0; k < Math.min(fanout, copy.size()); k++) {
      int j = k + rnd.nextInt(copy.size() - k);
      PeerAddress t = copy.get(j);
      copy.set(j, copy.get(k));
      copy.set(k, t);
      for (byte[] b : encoded) {
        bytesSent += b.length;
        messagesSent++;
        net.send(self, t, b);
      }
    }
  }

  void onMessage(PeerAddress from, byte[] payload) {
    try {
      ByteReader r = new ByteReader(payload);
      r.readUnsignedByte("type");
      r.readUnsignedByte("version");
      String origin = r.readAscii("origin", PeerAddress.MAX_NODE_ID_LENGTH);
      r.readVarLong("round");
      int index = r.readVarInt("index", 0, 1 << 20);
      int count = r.readVarInt("count", 1, 1 << 20);
      long[] hashes = bytesPerBlock == 8 ? r.readFixedLongArray("hashes", messageByteCap / 8)
          : r.readFixedUnsignedIntArray("hashes", messageByteCap / 4);
      r.expectEnd("message");
      List<long[]> parts = assembling.computeIfAbsent(origin, k -> new ArrayList<>());
      if (index == 0) {
        parts.clear();
      }
      parts.add(hashes);
      if (parts.size() == count) {
        int n = parts.stream().mapToInt(p -> p.length).sum();
        long[] all = new long[n];
        int at = 0;
        for (long[] p : parts) {
          System.arraycopy(p, 0, all, at, p.length);
          at += p.length;
        }
        replicas.put(origin, all);
        installedAt.put(origin, clock.getAsLong());
        parts.clear();
      }
    } catch (MalformedMessageException e) {
      throw new IllegalStateException(e);
    }
  }

  int replicaSize(String origin) {
    long[] r = replicas.get(origin);
    return r == null ? 0 : r.length;
  }

  synchronized int size() {
    return blocks.size();
  }
}
