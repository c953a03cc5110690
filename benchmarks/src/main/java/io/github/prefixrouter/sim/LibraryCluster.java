package io.github.prefixrouter.sim;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.testing.InMemoryNetwork;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;

/**
 * A cluster of the library's real {@link PrefixRouterNode}s, one per engine, on the run's
 * simulated clock and the library's {@link InMemoryNetwork} (one-way delay Δ plus uniform jitter
 * in [0, jitterFraction × Δ), seeded loss). Each node knows every other as a seed; the only settings that
 * differ from {@link RouterConfig#defaults()} are the policy and the engine facts a host would
 * configure (block size, KV capacity).
 */
final class LibraryCluster implements SimCluster {

  private final List<PrefixRouterNode> nodes = new ArrayList<>();
  private final InMemoryNetwork network;

  LibraryCluster(Simulation.Context ctx, RoutingPolicy policy) {
    this(ctx, policy, b -> b);
  }

  /** A cluster whose configuration {@code tweak} changes further (for ablations). */
  LibraryCluster(
      Simulation.Context ctx,
      RoutingPolicy policy,
      java.util.function.UnaryOperator<RouterConfig.Builder> tweak) {
    SimConfig cfg = ctx.config();
    network = new InMemoryNetwork(
        ctx.scheduler(), ctx.scheduler(), new SplittableRandom(ctx.seed() ^ 0x10557L));
    long delay = ctx.delayNanos();
    network.setDefaultLink(
        InMemoryNetwork.Link.delay(Duration.ofNanos(delay))
            .withJitter(Duration.ofNanos(Math.round(delay * cfg.jitterFraction())))
            .withLoss(cfg.lossProbability()));
    RouterConfig rc =
        tweak
            .apply(
                RouterConfig.builder()
                    .policy(policy)
                    .blockSize(cfg.engine().blockSize())
                    .treeCapacityTokens(cfg.engine().capacityTokens()))
            .build();
    List<PeerAddress> all = new ArrayList<>();
    for (int i = 0; i < cfg.nodes(); i++) {
      all.add(InMemoryNetwork.addressOf(nodeId(i)));
    }
    for (int i = 0; i < cfg.nodes(); i++) {
      List<PeerAddress> seeds = new ArrayList<>(all);
      seeds.remove(i);
      nodes.add(
          PrefixRouterNode.builder()
              .nodeId(nodeId(i))
              .config(rc)
              .transport(network.transport(nodeId(i)))
              .engine(ctx.engines().get(i))
              .clock(ctx.scheduler())
              .scheduler(ctx.scheduler())
              .random(new SplittableRandom(ctx.seed() * 31 + i))
              .seeds(seeds)
              .build());
    }
    for (PrefixRouterNode n : nodes) {
      n.start();
    }
  }

  static String nodeId(int i) {
    return "node-" + i;
  }

  @Override
  public CompletableFuture<?> submit(int entry, InferenceRequest request) {
    return nodes.get(entry).submit(request);
  }

  @Override
  public long gossipBytesSent() {
    long sum = 0;
    for (PrefixRouterNode n : nodes) {
      sum += n.stats().gossipBytesOut();
    }
    return sum;
  }

  /** The nodes' stats, for diagnostics. */
  List<NodeStats> stats() {
    List<NodeStats> out = new ArrayList<>();
    for (PrefixRouterNode n : nodes) {
      out.add(n.stats());
    }
    return out;
  }

  @Override
  public void close() {
    for (PrefixRouterNode n : nodes) {
      n.stop();
    }
  }
}
