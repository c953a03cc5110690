package io.github.prefixrouter.sim;

import io.github.prefixrouter.RoutingPolicy;
import java.util.SplittableRandom;

/** Builds the cluster of each policy. */
final class Clusters {

  /** SGLang's published defaults for its cache-aware policy. */
  static final int SGLANG_BALANCE_ABS_THRESHOLD = 64;

  static final double SGLANG_BALANCE_REL_THRESHOLD = 1.5;
  static final double SGLANG_CACHE_THRESHOLD = 0.3;

  /** KubeAI's CHWBL load factor. */
  static final double CHWBL_LOAD_FACTOR = 1.25;

  static final int CHWBL_VIRTUAL_NODES = 100;
  /** CHWBL keys on the prompt's first 4 blocks (64 tokens): the subject's header. */
  static final int CHWBL_KEY_BLOCKS = 4;

  private Clusters() {}

  static SimCluster create(Simulation.Context ctx) {
    Policy p = ctx.scenario().policy();
    switch (p) {
      case NO_ROUTING:
        return new LibraryCluster(ctx, RoutingPolicy.LOCAL_ONLY);
      case PAPER:
        return new LibraryCluster(ctx, RoutingPolicy.LONGEST_PREFIX);
      case COST_AWARE:
        return new LibraryCluster(ctx, RoutingPolicy.COST_AWARE);
      case COST_AWARE_GREEDY:
        return new LibraryCluster(ctx, RoutingPolicy.COST_AWARE, b -> b.localCaching(false));
      default:
        break;
    }
    SplittableRandom rnd = new SplittableRandom(ctx.seed() ^ Baselines.mix(p.ordinal() + 101));
    DispatchCluster.Dispatcher d =
        switch (p) {
          case RANDOM -> Baselines.random(rnd);
          case LEAST_LOADED -> Baselines.leastLoaded(rnd);
          case CHWBL ->
              Baselines.chwbl(
                  ctx.config().nodes(),
                  CHWBL_VIRTUAL_NODES,
                  CHWBL_LOAD_FACTOR,
                  CHWBL_KEY_BLOCKS * ctx.config().engine().blockSize());
          case ORACLE ->
              Baselines.sglangOracle(
                  rnd,
                  SGLANG_BALANCE_ABS_THRESHOLD,
                  SGLANG_BALANCE_REL_THRESHOLD,
                  SGLANG_CACHE_THRESHOLD);
          case EARLIEST_COMPLETION ->
              Baselines.earliestCompletion(rnd, ctx.delayNanos(), ctx.config().engine());
          case NO_ROUTING, PAPER, COST_AWARE, COST_AWARE_GREEDY -> throw new AssertionError(p);
        };
    return new DispatchCluster(ctx.scheduler(), ctx.engines(), ctx.newLink(7), d);
  }
}
