package io.github.prefixrouter;

/**
 * What a node's watch of its own engine has seen: whether the engine is stalled (requests
 * outstanding, and no streamed output, answer or stored block for
 * {@link RouterConfig#engineStallTimeout()}), and what the node turned away from it meanwhile.
 * While the engine is stalled with a request outstanding, the node routes its own requests to
 * peers ({@link RouteDecision.Reason#LOCAL_ENGINE_STALLED}), refuses its peers' forwards as busy
 * and advertises overload (docs/routing.md, "A stalled engine"). It avoids a <i>failing</i>
 * engine alike ({@link RouteDecision.Reason#LOCAL_ENGINE_FAILING}): one that failed
 * {@link RouterConfig#engineFailureLimit()} requests in a row retryably (unreachable, an error
 * status, at capacity by its server's word; not a request its adapter refused at its own limit
 * of requests in flight) with no success between them, until one of the probes it is tried with once per {@link RouterConfig#failureCooldown()} succeeds
 * (docs/routing.md, "A failing engine"). It also counts the losses of the engine's whole cache
 * the engine reported ({@link io.github.prefixrouter.spi.InferenceEngine#setCacheLossListener}:
 * its server's process went away), for each of which a node with a self-managed tree cleared it.
 * Read it with {@link PrefixRouterNode#engineStallStats()}.
 *
 * <p>Immutable and thread-safe.
 *
 * @param avoided 1 while the engine is avoided (stalled, with a request outstanding; or
 *     failing, and no probe due), else 0
 * @param stalled 1 while a stall is in progress (it ends at the engine's next progress), else 0
 * @param outstanding requests handed to the engine and not ended
 * @param silentSeconds with requests outstanding, how long since the engine's last progress (or
 *     since the start of the request that found it idle), in whole seconds; 0 without requests
 * @param stalls stalls detected since the node started
 * @param recoveries stalls ended by the engine's progress
 * @param reroutes routing decisions that sent a request to a peer because the engine was avoided
 *     (stalled or failing)
 * @param refusedForPeers requests forwarded by peers and refused as busy because the engine was
 *     avoided (stalled or failing), once per request as {@link NodeStats#refusedForPeers()}
 *     counts them (where they are also counted)
 * @param failing 1 from the engine's {@link RouterConfig#engineFailureLimit()}-th retryable
 *     failure in a row to its next success, else 0
 * @param failedInARow retryable failures of the engine since its last success (counted with
 *     {@link RouterConfig#engineFailureLimit()} 0 too, which never makes the engine failing)
 * @param failingSpells times the engine was found failing since the node started
 * @param cacheLosses times the engine reported its whole cache lost since the node started (the
 *     OpenAI-compatible adapter: its server's connection refused after the server had answered),
 *     each time clearing the node's self-managed tree (docs/engines.md, "A server restart")
 * @param loadFailures readings of the engine's {@link
 *     io.github.prefixrouter.spi.InferenceEngine#load()} that threw or returned null since the
 *     node was built; the node read each as the last good reading followed by its own runs on
 *     the engine since (docs/routing.md, "An engine whose load fails")
 */
public record EngineStallStats(int avoided, int stalled, int outstanding, long silentSeconds,
    long stalls, long recoveries, long reroutes, long refusedForPeers, int failing,
    long failedInARow, long failingSpells, long cacheLosses, long loadFailures) {

  /**
   * The figures of a node whose engine's {@code load()} never failed ({@code loadFailures} 0):
   * the components this record had before {@code loadFailures}, kept so that a host
   * constructing the record itself (its own tests, a fake node) compiles unchanged.
   *
   * @param avoided see the class documentation
   * @param stalled see the class documentation
   * @param outstanding see the class documentation
   * @param silentSeconds see the class documentation
   * @param stalls see the class documentation
   * @param recoveries see the class documentation
   * @param reroutes see the class documentation
   * @param refusedForPeers see the class documentation
   * @param failing see the class documentation
   * @param failedInARow see the class documentation
   * @param failingSpells see the class documentation
   * @param cacheLosses see the class documentation
   */
  public EngineStallStats(int avoided, int stalled, int outstanding, long silentSeconds,
      long stalls, long recoveries, long reroutes, long refusedForPeers, int failing,
      long failedInARow, long failingSpells, long cacheLosses) {
    this(avoided, stalled, outstanding, silentSeconds, stalls, recoveries, reroutes,
        refusedForPeers, failing, failedInARow, failingSpells, cacheLosses, 0);
  }

  /**
   * The figures of a node whose engine reported no loss of its cache and whose {@code load()}
   * never failed ({@code cacheLosses} and {@code loadFailures} 0): the components this record
   * had before {@code cacheLosses}, kept so that a host constructing the record itself compiles
   * unchanged.
   *
   * @param avoided see the class documentation
   * @param stalled see the class documentation
   * @param outstanding see the class documentation
   * @param silentSeconds see the class documentation
   * @param stalls see the class documentation
   * @param recoveries see the class documentation
   * @param reroutes see the class documentation
   * @param refusedForPeers see the class documentation
   * @param failing see the class documentation
   * @param failedInARow see the class documentation
   * @param failingSpells see the class documentation
   */
  public EngineStallStats(int avoided, int stalled, int outstanding, long silentSeconds,
      long stalls, long recoveries, long reroutes, long refusedForPeers, int failing,
      long failedInARow, long failingSpells) {
    this(avoided, stalled, outstanding, silentSeconds, stalls, recoveries, reroutes,
        refusedForPeers, failing, failedInARow, failingSpells, 0, 0);
  }

  /**
   * The figures of a node whose engine never failed ({@code failing}, {@code failedInARow},
   * {@code failingSpells}, {@code cacheLosses} and {@code loadFailures} 0): the components this
   * record had before the failing engine's figures, kept so that a host constructing the record
   * itself compiles unchanged.
   *
   * @param avoided see the class documentation
   * @param stalled see the class documentation
   * @param outstanding see the class documentation
   * @param silentSeconds see the class documentation
   * @param stalls see the class documentation
   * @param recoveries see the class documentation
   * @param reroutes see the class documentation
   * @param refusedForPeers see the class documentation
   */
  public EngineStallStats(int avoided, int stalled, int outstanding, long silentSeconds,
      long stalls, long recoveries, long reroutes, long refusedForPeers) {
    this(avoided, stalled, outstanding, silentSeconds, stalls, recoveries, reroutes,
        refusedForPeers, 0, 0, 0, 0, 0);
  }
}
