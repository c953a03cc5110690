package io.github.prefixrouter.bench.gossip;

import io.github.prefixrouter.internal.gossip.GossipConfig;
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
}
