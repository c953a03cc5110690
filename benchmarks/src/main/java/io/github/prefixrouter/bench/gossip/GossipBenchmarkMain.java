package io.github.prefixrouter.bench.gossip;

import io.github.prefixrouter.internal.gossip.GossipConfig;
import io.github.prefixrouter.internal.gossip.GossipCounter;
import io.github.prefixrouter.internal.gossip.GossipEngine;
import io.github.prefixrouter.internal.tree.BlockEventListener;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.PeerAddress;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * Gossip bandwidth and dissemination, in simulated time, driving the real library code.
 *
 * <ol>
 *   <li><b>Bandwidth.</b> N nodes, each with a self-managed prefix tree (LRU at its token
 *       capacity) executing MMLU 5-shot prompts (or the MMLU-shaped generator) at a given rate.
 *       The tree's block events feed both the delta protocol ({@link GossipEngine}) and, side by
 *       side on the same caches, a full-snapshot-every-round baseline. After a warm-up that fills
 *       the caches, gossip bytes per node per second are measured for both, and compared with
 *       the bytes a KV-cache transfer of the same newly cached prefixes would move.
 *   <li><b>Dissemination.</b> For each cluster size, a formed cluster gets single-block changes
 *       at random nodes; the time until 99% (and 100%) of the other nodes' replicas hold the
 *       block, in gossip rounds, against the target 2·log2(N)+3.
 * </ol>
 *
 * <p>Writes {@code benchmarks/target/results/gossip.json}. Flags: {@code --mmlu DIR},
 * {@code --nodes N}, {@code --rate R} (requests/s/node), {@code --capacity-tokens T},
 * {@code --warmup-s S}, {@code --measure-s S}, {@code --sizes 4,16,...}, {@code --fanout F},
 * {@code --seed S}, {@code --quick}, {@code --out FILE}.
 */
public final class GossipBenchmarkMain {

  /** KV bytes per token assumed for a 0.5B-class model (Qwen2.5-0.5B): 24 x 2 x 2 x 64 x 2. */
  static final long KV_BYTES_PER_TOKEN = 24L * 2 * 2 * 64 * 2;

  static final int BLOCK = 16;

  private GossipBenchmarkMain() {}

  public static void main(String[] args) throws IOException {
    Path mmlu = null;
    int nodes = 16;
    double rate = 10;
    long[] capacities = {131_072, 1_048_576};
    int warmup = -1; // automatic: long enough to fill the caches
    int measure = 120;
    int fanout = 3;
    long seed = 1;
    int[] sizes = {4, 16, 64, 256, 1_024};
    Path out = Path.of("benchmarks/target/results/gossip.json");
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--mmlu" -> mmlu = Path.of(args[++i]);
        case "--nodes" -> nodes = Integer.parseInt(args[++i]);
        case "--rate" -> rate = Double.parseDouble(args[++i]);
        case "--capacity-tokens" -> capacities = java.util.Arrays.stream(args[++i].split(","))
            .mapToLong(Long::parseLong).toArray();
        case "--warmup-s" -> warmup = Integer.parseInt(args[++i]);
        case "--measure-s" -> measure = Integer.parseInt(args[++i]);
        case "--fanout" -> fanout = Integer.parseInt(args[++i]);
        case "--seed" -> seed = Long.parseLong(args[++i]);
        case "--out" -> out = Path.of(args[++i]);
        case "--sizes" -> sizes = java.util.Arrays.stream(args[++i].split(","))
            .mapToInt(Integer::parseInt).toArray();
        case "--quick" -> {
          sizes = new int[] {4, 16, 64, 256};
          capacities = new long[] {131_072};
          measure = 60;
        }
        default -> {
          System.err.println("unknown flag " + args[i]);
          System.exit(2);
        }
      }
    }
    PromptSource prompts;
    if (mmlu != null && Files.isDirectory(mmlu)) {
      prompts = PromptSource.mmlu(mmlu);
    } else {
      if (mmlu != null) {
        System.err.println("no MMLU data at " + mmlu + "; using the MMLU-shaped generator");
      }
      prompts = PromptSource.synthetic(seed, 250);
    }
    System.out.println("workload: " + prompts.description);
    StringBuilder json = new StringBuilder("{\n");
    json.append("  \"workload\": \"").append(esc(prompts.description)).append("\",\n");
    json.append("  \"kvBytesPerToken\": ").append(KV_BYTES_PER_TOKEN).append(",\n");
    json.append("  \"kvModel\": \"Qwen2.5-0.5B: 24 layers x 2 (K,V) x 2 KV heads x 64 dims x 2 B\",\n");
    json.append("  \"bandwidth\": [\n");
    for (int k = 0; k < capacities.length; k++) {
      // about twice the time the cache needs to fill with ~75 new tokens per request
      int w = warmup > 0 ? warmup
          : (int) Math.max(120, Math.min(3_600, 2 * capacities[k] / (rate * 75)));
      bandwidth(json, prompts, nodes, rate, capacities[k], w, measure, fanout, seed);
      json.append(k + 1 < capacities.length ? ",\n" : "\n");
    }
    json.append("  ],\n  \"dissemination\": [\n");
    for (int k = 0; k < sizes.length; k++) {
      dissemination(json, sizes[k], fanout, seed + k);
      json.append(k + 1 < sizes.length ? ",\n" : "\n");
    }
    json.append("  ]\n}\n");
    Files.createDirectories(out.toAbsolutePath().getParent());
    Files.writeString(out, json);
    System.out.println("wrote " + out);
  }

  // ------------------------------------------------------------------ bandwidth

  /** Counts blocks newly cached, to price a KV-cache transfer of the same prefixes. */
  static final class StoredCounter implements BlockEventListener {
    long stored;
    long evicted;

    @Override
    public synchronized void onStored(long[] blockHashes) {
      stored += blockHashes.length;
    }

    @Override
    public synchronized void onEvicted(long[] blockHashes) {
      evicted += blockHashes.length;
    }
  }

  /** Where the delta protocol's bytes go, per node per second over the measurement window. */
  static final GossipCounter[] BREAKDOWN = {
      GossipCounter.DIGEST_BYTES_SENT, GossipCounter.UPDATE_HEADER_BYTES_SENT,
      GossipCounter.OWN_DELTA_BYTES_SENT, GossipCounter.RELAYED_DELTA_BYTES_SENT,
      GossipCounter.SNAPSHOT_BYTES_SENT, GossipCounter.REDUNDANT_DELTA_BYTES_RECEIVED};

  static void bandwidth(StringBuilder json, PromptSource prompts, int n, double rate,
      long capacity, int warmupS, int measureS, int fanout, long seed) {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofSeconds(1)).fanout(fanout)
        .build();
    SimNet net = new SimNet(seed, 2_000_000, 1_000_000, 0);
    List<PeerAddress> addrs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      addrs.add(new PeerAddress("node-" + i, "sim:" + i));
    }
    List<GossipEngine> engines = new ArrayList<>();
    List<FullSnapshotGossip> fulls = new ArrayList<>();
    List<FullSnapshotGossip> fulls4 = new ArrayList<>();
    List<ConcurrentPrefixTree> trees = new ArrayList<>();
    List<StoredCounter> stored = new ArrayList<>();
    SplittableRandom rnd = new SplittableRandom(seed);
    for (int i = 0; i < n; i++) {
      PeerAddress a = addrs.get(i);
      GossipEngine e = new GossipEngine(a, 1, config, List.of(addrs.get(0)), net.time, net.time,
          new SplittableRandom(seed * 1_000 + i), () -> EngineLoad.IDLE,
          (to, p) -> net.send(a, to, p));
      FullSnapshotGossip f = new FullSnapshotGossip(a, config.messageByteCap(), 8);
      FullSnapshotGossip f4 = new FullSnapshotGossip(a, config.messageByteCap(), 4);
      ConcurrentPrefixTree t = ConcurrentPrefixTree.builder().blockSize(BLOCK)
          .capacityTokens(capacity).build();
      StoredCounter sc = new StoredCounter();
      t.addListener(e.localSummary());
      t.addListener(f);
      t.addListener(f4);
      t.addListener(sc);
      net.register(a, (from, p) -> {
        if (p.length > 0 && (p[0] & 0xFF) == FullSnapshotGossip.typeFor(8)) {
          f.onMessage(from, p);
        } else if (p.length > 0 && (p[0] & 0xFF) == FullSnapshotGossip.typeFor(4)) {
          f4.onMessage(from, p);
        } else {
          e.onMessage(from, p);
        }
      });
      engines.add(e);
      fulls.add(f);
      fulls4.add(f4);
      trees.add(t);
      stored.add(sc);
      e.start();
      List<PeerAddress> others = new ArrayList<>(addrs);
      others.remove(a);
      SplittableRandom fr = new SplittableRandom(seed * 7 + i);
      // the baseline's traffic depends only on the current set size, so it runs (and is
      // measured) from the start of the measurement window, on the same caches
      net.time.schedule(warmupS * 1_000_000_000L,
          () -> scheduleFull(net, f, others, fanout, fr, config.interval().toNanos()));
      SplittableRandom fr4 = new SplittableRandom(seed * 7 + i);
      net.time.schedule(warmupS * 1_000_000_000L,
          () -> scheduleFull(net, f4, others, fanout, fr4, config.interval().toNanos()));
      scheduleRequests(net, t, prompts, rate, new SplittableRandom(seed * 13 + i));
    }
    long s = 1_000_000_000L;
    net.time.advanceBy(warmupS * s);
    long deltaBefore = sum(engines, GossipCounter.BYTES_SENT);
    long fullBefore = fulls.stream().mapToLong(f -> f.bytesSent).sum();
    long full4Before = fulls4.stream().mapToLong(f -> f.bytesSent).sum();
    long storedBefore = stored.stream().mapToLong(c -> c.stored).sum();
    long snapBefore = sum(engines, GossipCounter.SNAPSHOT_CHUNKS_SENT);
    long evictedBefore = stored.stream().mapToLong(c -> c.evicted).sum();
    long[] partsBefore = new long[BREAKDOWN.length];
    for (int k = 0; k < BREAKDOWN.length; k++) {
      partsBefore[k] = sum(engines, BREAKDOWN[k]);
    }
    net.time.advanceBy(measureS * s);
    double[] parts = new double[BREAKDOWN.length];
    for (int k = 0; k < BREAKDOWN.length; k++) {
      parts[k] = (sum(engines, BREAKDOWN[k]) - partsBefore[k]) / (double) n / measureS;
    }
    double deltaRate = (sum(engines, GossipCounter.BYTES_SENT) - deltaBefore) / (double) n / measureS;
    double fullRate = (fulls.stream().mapToLong(f -> f.bytesSent).sum() - fullBefore)
        / (double) n / measureS;
    double full4Rate = (fulls4.stream().mapToLong(f -> f.bytesSent).sum() - full4Before)
        / (double) n / measureS;
    long storedBlocks = stored.stream().mapToLong(c -> c.stored).sum() - storedBefore;
    long evictedBlocks = stored.stream().mapToLong(c -> c.evicted).sum() - evictedBefore;
    double changesPerNode = (storedBlocks + evictedBlocks) / (double) n / measureS;
    // every change delivered exactly once to each of the n - 1 other nodes, block bytes only
    double floor = (n - 1) * changesPerNode * GossipEngine.WIRE_BYTES_PER_BLOCK;
    double other = deltaRate - parts[0] - parts[1] - parts[2] - parts[3] - parts[4];
    double kvRate = storedBlocks * (double) BLOCK * KV_BYTES_PER_TOKEN / n / measureS;
    long snapshotsInWindow = sum(engines, GossipCounter.SNAPSHOT_CHUNKS_SENT) - snapBefore;
    double blocksPerNode = trees.stream().mapToLong(t -> t.sizeTokens()).average().orElse(0)
        / BLOCK;
    long pairs = engines.stream().mapToLong(GossipEngine::replicatedPairs).sum();
    long indexBytes = engines.stream().mapToLong(GossipEngine::indexBytes).sum();
    // replica accuracy at the end: replicated blocks vs the owner's exact count
    double err = 0;
    int samples = 0;
    for (GossipEngine e : engines) {
      for (var p : e.view().peers()) {
        int owner = Integer.parseInt(p.address().nodeId().substring(5));
        long truth = engines.get(owner).localSummary().fingerprintCount();
        err += Math.abs(p.replicaBlocks() - truth) / (double) Math.max(1, truth);
        samples++;
      }
    }
    double ratio = deltaRate / fullRate;
    String line = String.format(Locale.ROOT,
        "bandwidth: %d nodes, %.1f req/s/node, capacity %d tokens (%.0f blocks cached/node): "
            + "delta gossip %.0f B/node/s, full snapshots %.0f B/node/s (delta/full = %.4f = "
            + "%.2f%%), KV transfer of the same new prefixes %.0f B/node/s (gossip = %.5f%% of "
            + "it), replica index %.1f B/block, mean replica error %.4f%%, snapshot chunks in "
            + "window %d",
        n, rate, capacity, blocksPerNode, deltaRate, fullRate, ratio, 100 * ratio, kvRate,
        100 * deltaRate / kvRate, indexBytes / (double) Math.max(1, pairs),
        100 * err / Math.max(1, samples), snapshotsInWindow);
    System.out.println(line);
    String breakdown = String.format(Locale.ROOT,
        "  breakdown (B/node/s): digests (SYN) %.0f, update headers %.0f, own deltas %.0f, "
            + "relayed deltas %.0f, snapshots %.0f, other (ACK/ACK2 framing, requests) %.0f; "
            + "redundant delta bytes received %.0f; block changes %.1f/node/s (stored %.1f, "
            + "evicted %.1f); floor (each change once to each of %d peers at %d B) %.0f B/node/s "
            + "= %.2f%% of full; protocol / floor = %.2f; full snapshots of 4-byte fingerprints "
            + "%.0f B/node/s (delta/full4 = %.2f%%, floor/full4 = %.2f%%)",
        parts[0], parts[1], parts[2], parts[3], parts[4], other, parts[5], changesPerNode,
        storedBlocks / (double) n / measureS, evictedBlocks / (double) n / measureS, n - 1,
        GossipEngine.WIRE_BYTES_PER_BLOCK, floor, 100 * floor / fullRate, deltaRate / floor,
        full4Rate, 100 * deltaRate / full4Rate, 100 * floor / full4Rate);
    System.out.println(breakdown);
    json.append(String.format(Locale.ROOT, "  {\n    \"nodes\": %d, \"requestsPerSecondPerNode\": %.2f,"
            + " \"capacityTokens\": %d, \"warmupSeconds\": %d, \"measureSeconds\": %d,"
            + " \"intervalMs\": 1000, \"fanout\": %d,\n"
            + "    \"blocksCachedPerNode\": %.1f,\n"
            + "    \"deltaGossipBytesPerNodePerSecond\": %.1f,\n"
            + "    \"fullSnapshotBytesPerNodePerSecond\": %.1f,\n"
            + "    \"deltaOverFull\": %.6f, \"targetDeltaOverFull\": 0.02,\n"
            + "    \"kvTransferBytesPerNodePerSecond\": %.1f,\n"
            + "    \"deltaOverKvTransfer\": %.8f,\n"
            + "    \"replicaIndexBytesPerBlock\": %.2f, \"targetReplicaIndexBytesPerBlock\": 32,\n"
            + "    \"meanReplicaSizeError\": %.6f,\n"
            + "    \"snapshotChunksInWindow\": %d,\n"
            + "    \"breakdownBytesPerNodePerSecond\": {\"digests\": %.1f, \"updateHeaders\": %.1f,"
            + " \"ownDeltas\": %.1f, \"relayedDeltas\": %.1f, \"snapshots\": %.1f, \"other\": %.1f,"
            + " \"redundantDeltasReceived\": %.1f},\n"
            + "    \"blockChangesPerNodePerSecond\": %.2f, \"wireBytesPerBlock\": %d,\n"
            + "    \"floorBytesPerNodePerSecond\": %.1f, \"floorOverFull\": %.6f,\n"
            + "    \"fullSnapshot4ByteFingerprintsBytesPerNodePerSecond\": %.1f,"
            + " \"deltaOverFull4\": %.6f, \"floorOverFull4\": %.6f\n  }",
        n, rate, capacity, warmupS, measureS, fanout, blocksPerNode, deltaRate, fullRate, ratio,
        kvRate, deltaRate / kvRate, indexBytes / (double) Math.max(1, pairs),
        err / Math.max(1, samples), snapshotsInWindow, parts[0], parts[1], parts[2], parts[3],
        parts[4], other, parts[5], changesPerNode, GossipEngine.WIRE_BYTES_PER_BLOCK, floor,
        floor / fullRate, full4Rate, deltaRate / full4Rate, floor / full4Rate));
  }

  private static void scheduleFull(SimNet net, FullSnapshotGossip f, List<PeerAddress> peers,
      int fanout, SplittableRandom rnd, long interval) {
    long delay = (long) (interval * (0.9 + 0.2 * rnd.nextDouble()));
    net.time.schedule(delay, () -> {
      f.runRound(peers, fanout, rnd, net);
      scheduleFull(net, f, peers, fanout, rnd, interval);
    });
  }

  private static void scheduleRequests(SimNet net, ConcurrentPrefixTree tree,
      PromptSource prompts, double rate, SplittableRandom rnd) {
    long gap = (long) (-Math.log(1 - rnd.nextDouble()) / rate * 1e9);
    net.time.schedule(gap, () -> {
      int[][] subject = prompts.prompts[rnd.nextInt(prompts.prompts.length)];
      tree.insert(subject[rnd.nextInt(subject.length)]);
      scheduleRequests(net, tree, prompts, rate, rnd);
    });
  }

  private static long sum(List<GossipEngine> engines, GossipCounter c) {
    return engines.stream().mapToLong(e -> e.counter(c)).sum();
  }

  // ------------------------------------------------------------------ dissemination

  static void dissemination(StringBuilder json, int n, int fanout, long seed) {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofSeconds(1)).fanout(fanout)
        .suspectAfter(Duration.ofSeconds(20)).deadAfter(Duration.ofSeconds(60))
        .forgetAfter(Duration.ofSeconds(120)).build();
    SimNet net = new SimNet(seed, 2_000_000, 1_000_000, 0);
    List<PeerAddress> addrs = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      addrs.add(new PeerAddress("node-" + i, "sim:" + i));
    }
    List<PeerAddress> seeds = addrs.subList(0, Math.min(3, n));
    List<GossipEngine> engines = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      PeerAddress a = addrs.get(i);
      GossipEngine e = new GossipEngine(a, 1, config, seeds, net.time, net.time,
          new SplittableRandom(seed * 1_000 + i), () -> EngineLoad.IDLE,
          (to, p) -> net.send(a, to, p));
      net.register(a, e::onMessage);
      engines.add(e);
      e.start();
    }
    long interval = config.interval().toNanos();
    int formRounds = 0;
    while (!formed(engines, n) && formRounds < 200) {
      net.time.advanceBy(interval);
      formRounds++;
    }
    net.time.advanceBy(3 * interval);
    long before = sum(engines, GossipCounter.BYTES_SENT);
    net.time.advanceBy(5 * interval);
    double idleBytes = (sum(engines, GossipCounter.BYTES_SENT) - before) / (double) n / 5;
    SplittableRandom rnd = new SplittableRandom(seed);
    int changes = n >= 1_024 ? 3 : 5;
    double worst99 = 0;
    double worstAll = 0;
    double sum99 = 0;
    int[] out = new int[engines.get(0).slotCapacity()];
    int need99 = (int) Math.ceil(0.99 * (n - 1));
    for (int k = 0; k < changes; k++) {
      int origin = rnd.nextInt(n);
      long block = rnd.nextLong() | 1;
      long start = net.time.nanoTime();
      engines.get(origin).localSummary().onStored(new long[] {block});
      boolean[] seen = new boolean[n];
      seen[origin] = true;
      int count = 0;
      double t99 = -1;
      long step = interval / 10;
      while (count < n - 1 && net.time.nanoTime() - start < 100 * interval) {
        net.time.advanceBy(step);
        for (int i = 0; i < n; i++) {
          if (!seen[i] && engines.get(i).leadingBlocks(new long[] {block}, 1, out) > 0) {
            seen[i] = true;
            count++;
          }
        }
        if (t99 < 0 && count >= need99) {
          t99 = (net.time.nanoTime() - start) / (double) interval;
        }
      }
      double tAll = (net.time.nanoTime() - start) / (double) interval;
      worst99 = Math.max(worst99, t99);
      worstAll = Math.max(worstAll, tAll);
      sum99 += t99;
    }
    double target = 2 * (Math.log(n) / Math.log(2)) + 3;
    String line = String.format(Locale.ROOT,
        "dissemination: N=%d fanout %d: cluster formed in %d rounds; rounds to 99%% of nodes: "
            + "mean %.1f, worst %.1f; to 100%%: worst %.1f; target 2*log2(N)+3 = %.1f (%s); "
            + "idle gossip %.0f B/node/s",
        n, fanout, formRounds, sum99 / changes, worst99, worstAll, target,
        worst99 <= target ? "met" : "MISSED", idleBytes);
    System.out.println(line);
    json.append(String.format(Locale.ROOT,
        "    {\"nodes\": %d, \"fanout\": %d, \"changes\": %d, \"formRounds\": %d,"
            + " \"meanRoundsTo99\": %.2f, \"worstRoundsTo99\": %.2f, \"worstRoundsTo100\": %.2f,"
            + " \"targetRounds\": %.2f, \"met\": %b, \"idleGossipBytesPerNodePerSecond\": %.1f}",
        n, fanout, changes, formRounds, sum99 / changes, worst99, worstAll, target,
        worst99 <= target, idleBytes));
  }

  private static boolean formed(List<GossipEngine> engines, int n) {
    for (GossipEngine e : engines) {
      if (e.view().peers().size() != n - 1) {
        return false;
      }
    }
    return true;
  }

  private static String esc(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"");
  }
}
