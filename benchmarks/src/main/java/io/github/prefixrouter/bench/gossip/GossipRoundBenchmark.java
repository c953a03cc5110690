package io.github.prefixrouter.bench.gossip;

import io.github.prefixrouter.internal.gossip.GossipConfig;
import io.github.prefixrouter.internal.gossip.GossipCounter;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The CPU cost of gossip's anti-entropy rounds in a formed, idle cluster of {@code members}
 * nodes (every node knows every other one), where the digests dominate: each SYN lists every
 * live origin, so a round of the whole cluster handles about {@code 3 N^2} digest entries.
 * Everything runs on the real {@link GossipEngine} in simulated time (1 s rounds, fanout 3,
 * 2 ms ± 1 ms one-way delay, no loss), as the dissemination part of {@code benchmarks/run
 * gossip} does.
 *
 * <ul>
 *   <li>{@code clusterRound}: one interval of simulated time for the whole cluster: every
 *       node's round (its digests built and encoded, about {@code fanout} of them) and the
 *       exchanges they start (SYNs decoded and compared with the receiver's members, ACKs and
 *       ACK2s encoded, decoded and applied). Divide by {@code members} for one node's round.
 *   <li>{@code receiveDigest}: one node handling one SYN of a full digest ({@code members}
 *       entries), as received in that cluster: decoded, each entry compared with the member it
 *       names, and answered with an ACK (encoded, then dropped).
 *   <li>{@code receiveLargeDigest}: one node of 4,096 members ({@code maxPeers}, the default)
 *       handling one SYN that lists them all, as {@code receiveDigest} does, with {@code ids}
 *       {@code ordinary} ({@code node-} and a 19-digit number) or {@code colliding} (12 pairs
 *       {@code Aa} or {@code BB}: all 4,096 share one {@code String.hashCode}, which a hostile
 *       peer can have admitted as origins and every node then relays). Both are 24 characters,
 *       and the SYN and the updates that admitted them are written byte by byte here
 *       (docs/wire-format.md), so this runs against any core of wire version 3.
 * </ul>
 *
 * <p>Besides JMH's wall-clock time per call, each benchmark counts the CPU time of its own
 * thread over its calls ({@code cpuNanos} and {@code calls}, summed over the measured
 * iterations; their quotient is CPU time per call): on a machine shared with other work the
 * thread waits for a core now and then, which lengthens the wall-clock time but not the CPU
 * time. Neither counts the garbage collector's threads.
 *
 * <p>It uses the engine's public methods only, so the same benchmark runs against a build of an
 * earlier commit of the core: build the benchmarks jar at each commit and run one after the
 * other, as {@code docs/gossip.md} shows ("CPU per round"). Run with {@code benchmarks/run jmh
 * GossipRoundBenchmark}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 4, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class GossipRoundBenchmark {

  /** SYN's type byte on the wire (docs/wire-format.md). */
  static final int TYPE_SYN = 0x10;

  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  /** CPU time of the benchmark thread in the measured calls, and how many calls. */
  @State(Scope.Thread)
  @AuxCounters(AuxCounters.Type.EVENTS)
  public static class CpuTime {
    public long cpuNanos;
    public long calls;

    @Setup(Level.Iteration)
    public void clear() {
      cpuNanos = 0;
      calls = 0;
    }

    void add(long since) {
      cpuNanos += THREADS.getCurrentThreadCpuTime() - since;
      calls++;
    }
  }

  /** A formed, idle cluster of {@code members} gossip engines on a simulated network. */
  @State(Scope.Thread)
  public static class Cluster {

    @Param({"64", "256"})
    public int members;

    SimNet net;
    final List<GossipEngine> engines = new ArrayList<>();
    final List<PeerAddress> addresses = new ArrayList<>();
    long interval;
    /** When set, nothing any engine sends reaches the network. */
    boolean muted;
    /** The last SYN node 0 received with a full digest, and its sender. */
    byte[] lastSyn;
    PeerAddress lastSynFrom;

    @Setup(Level.Trial)
    public void form() {
      GossipConfig config = GossipConfig.builder().interval(Duration.ofSeconds(1)).fanout(3)
          .suspectAfter(Duration.ofSeconds(20)).deadAfter(Duration.ofSeconds(60))
          .forgetAfter(Duration.ofSeconds(120)).build();
      long seed = 42;
      net = new SimNet(seed, 2_000_000, 1_000_000, 0);
      for (int i = 0; i < members; i++) {
        addresses.add(new PeerAddress("node-" + i, "sim:" + i));
      }
      List<PeerAddress> seeds = addresses.subList(0, 3);
      for (int i = 0; i < members; i++) {
        PeerAddress a = addresses.get(i);
        GossipEngine e = new GossipEngine(a, 1, config, seeds, net.time, net.time,
            new SplittableRandom(seed * 1_000 + i), () -> EngineLoad.IDLE, (to, p) -> {
              if (!muted) {
                net.send(a, to, p);
              }
            });
        boolean watch = i == 0;
        net.register(a, (from, p) -> {
          if (watch && (p[0] & 0xFF) == TYPE_SYN) {
            lastSyn = p;
            lastSynFrom = from;
          }
          e.onMessage(from, p);
        });
        engines.add(e);
        e.start();
      }
      interval = config.interval().toNanos();
      for (int r = 0; r < 200 && !formed(); r++) {
        net.time.advanceBy(interval);
      }
      if (!formed()) {
        throw new IllegalStateException("the cluster of " + members + " did not form");
      }
      net.time.advanceBy(10 * interval); // settled: every digest lists every origin
    }

    boolean formed() {
      for (GossipEngine e : engines) {
        if (e.view().peers().size() != members - 1) {
          return false;
        }
      }
      return true;
    }
  }

  /** The cluster above, silenced, with node 0 and the last full SYN it received. */
  @State(Scope.Thread)
  public static class Receiver extends Cluster {

    GossipEngine node;

    @Setup(Level.Trial)
    public void silence() {
      if (lastSyn == null) {
        throw new IllegalStateException("node 0 received no SYN");
      }
      muted = true; // node 0's ACKs are encoded, then dropped
      node = engines.get(0);
    }
  }

  /**
   * One node ({@code receiver}) whose 4,096 members, all of generation 1 at version 0, were
   * announced by the first of them in one ACK2, and a SYN from that member listing them all.
   */
  @State(Scope.Thread)
  public static class LargeDigest {

    @Param({"ordinary", "colliding"})
    public String ids;

    static final int MEMBERS = 4_096;

    GossipEngine node;
    PeerAddress from;
    byte[] syn;

    @Setup(Level.Trial)
    public void admit() {
      List<String> names = new ArrayList<>(MEMBERS);
      for (int i = 0; i < MEMBERS; i++) {
        if (ids.equals("colliding")) {
          StringBuilder b = new StringBuilder(24);
          for (int bit = 11; bit >= 0; bit--) {
            b.append((i >> bit & 1) == 0 ? "Aa" : "BB");
          }
          names.add(b.toString());
        } else if (ids.equals("ordinary")) {
          names.add(String.format("node-%019d", i));
        } else {
          throw new IllegalArgumentException("ids: " + ids);
        }
      }
      SimNet net = new SimNet(42, 0, 0, 0);
      GossipConfig config = GossipConfig.builder().interval(Duration.ofSeconds(1)).build();
      if (config.maxPeers() < MEMBERS) {
        throw new IllegalStateException("maxPeers " + config.maxPeers());
      }
      node = new GossipEngine(new PeerAddress("receiver", "sim:receiver"), 1, config,
          List.of(), net.time, net.time, new SplittableRandom(42), () -> EngineLoad.IDLE,
          (to, p) -> { });
      from = new PeerAddress(names.get(0), "sim:0");
      // ACK2: senderGeneration 1, one update per member with its address, no deltas
      Wire ack2 = new Wire().u8(0x12).u8(3).varint(1).varint(MEMBERS);
      String prev = "";
      for (int i = 0; i < MEMBERS; i++) {
        String id = names.get(i);
        ack2.entry(prev, id, i == 0).u8(1).ascii("sim:" + i).varint(0).varint(0);
        prev = id;
      }
      node.onMessage(from, ack2.bytes());
      if (node.view().peers().size() != MEMBERS) {
        throw new IllegalStateException(node.view().peers().size() + " members admitted");
      }
      node.runRound(); // its digest sorts the members (and builds what the decoder uses)
      Wire w = new Wire().u8(TYPE_SYN).u8(3).varint(1).varint(1).varint(MEMBERS);
      prev = "";
      for (int i = 0; i < MEMBERS; i++) {
        w.entry(prev, names.get(i), i == 0);
        prev = names.get(i);
      }
      syn = w.bytes();
      node.onMessage(from, syn);
      if (node.counter(GossipCounter.MALFORMED_DROPPED) != 0) {
        throw new IllegalStateException("the SYN written here does not decode");
      }
    }
  }

  /** Writes gossip messages byte by byte (docs/wire-format.md, version 3). */
  static final class Wire {
    private final java.io.ByteArrayOutputStream out = new java.io.ByteArrayOutputStream();

    Wire u8(int b) {
      out.write(b);
      return this;
    }

    Wire varint(long v) {
      while ((v & ~0x7FL) != 0) {
        out.write((int) (v & 0x7F) | 0x80);
        v >>>= 7;
      }
      out.write((int) v);
      return this;
    }

    Wire ascii(String s) {
      varint(s.length());
      out.writeBytes(s.getBytes(java.nio.charset.StandardCharsets.US_ASCII));
      return this;
    }

    /**
     * A digest entry (or update header) of {@code id} front-coded against {@code prev}:
     * generation 1 (+1 against the empty first, +0 after), version 0, heartbeat 1, no load.
     */
    Wire entry(String prev, String id, boolean first) {
      int shared = 0;
      while (shared < prev.length() && shared < id.length()
          && prev.charAt(shared) == id.charAt(shared)) {
        shared++;
      }
      return varint(shared).ascii(id.substring(shared)).varint(first ? 2 : 0).varint(0)
          .varint(1).u8(0);
    }

    byte[] bytes() {
      return out.toByteArray();
    }
  }

  @Benchmark
  public long clusterRound(Cluster c, CpuTime cpu) {
    long t0 = THREADS.getCurrentThreadCpuTime();
    c.net.time.advanceBy(c.interval);
    cpu.add(t0);
    return c.net.time.nanoTime();
  }

  @Benchmark
  public long receiveDigest(Receiver r, CpuTime cpu) {
    long t0 = THREADS.getCurrentThreadCpuTime();
    r.node.onMessage(r.lastSynFrom, r.lastSyn);
    cpu.add(t0);
    return r.lastSyn.length;
  }

  @Benchmark
  public long receiveLargeDigest(LargeDigest d, CpuTime cpu) {
    long t0 = THREADS.getCurrentThreadCpuTime();
    d.node.onMessage(d.from, d.syn);
    cpu.add(t0);
    return d.syn.length;
  }
}
