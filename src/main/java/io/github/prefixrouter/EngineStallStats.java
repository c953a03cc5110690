package io.github.prefixrouter;

/**
 * What a node's watch of its own engine has seen: whether the engine is stalled (requests
 * outstanding, and no streamed output, answer or stored block for
 * {@link RouterConfig#engineStallTimeout()}), and what the node turned away from it meanwhile.
 * While the engine is stalled with a request outstanding, the node routes its own requests to
 * peers ({@link RouteDecision.Reason#LOCAL_ENGINE_STALLED}), refuses its peers' forwards as busy
 * and advertises overload (docs/routing.md, "A stalled engine"). Read it with
 * {@link PrefixRouterNode#engineStallStats()}.
 *
 * <p>Immutable and thread-safe.
 *
 * @param avoided 1 while the engine is avoided (stalled, with a request outstanding), else 0
 * @param stalled 1 while a stall is in progress (it ends at the engine's next progress), else 0
 * @param outstanding requests handed to the engine and not ended
 * @param silentSeconds with requests outstanding, how long since the engine's last progress (or
 *     since the start of the request that found it idle), in whole seconds; 0 without requests
 * @param stalls stalls detected since the node started
 * @param recoveries stalls ended by the engine's progress
 * @param reroutes routing decisions that sent a request to a peer because the engine was avoided
 * @param refusedForPeers requests forwarded by peers and refused as busy because the engine was
 *     avoided, once per request as {@link NodeStats#refusedForPeers()} counts them (where they
 *     are also counted)
 */
public record EngineStallStats(int avoided, int stalled, int outstanding, long silentSeconds,
    long stalls, long recoveries, long reroutes, long refusedForPeers) {}
