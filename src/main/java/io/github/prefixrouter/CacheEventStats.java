package io.github.prefixrouter;

/**
 * Counters of the cache events a node's local prefix tree received from its engine
 * ({@link io.github.prefixrouter.spi.CacheEventListener}), for an engine that publishes them
 * (the tree is then an exact mirror of the engine's cache: docs/tree.md, "Engine-driven mode").
 * Events that cannot be applied are counted here rather than thrown back at the engine, so these
 * are the counters that show whether an integration reports its cache correctly: when it
 * reports every change since the engine's cache was empty, {@code unknownParents},
 * {@code malformedEvents}, {@code conflictingEvents} and {@code overflows} stay at zero, and
 * {@code unknownBlocks} counts only removals of blocks dropped by a clear. (A node started next
 * to an engine whose cache is already warm counts stores continuing blocks it never saw as
 * unknown parents until those blocks are evicted.)
 * Read them with {@link PrefixRouterNode#cacheEventStats()}.
 *
 * <p>Immutable and thread-safe.
 *
 * @param storedEvents well-formed {@code onBlocksStored} calls received, applied or not (those
 *     dropped for an unknown parent or a conflicting hash also count there; their blocks may be
 *     partly duplicates)
 * @param removedEvents {@code onBlocksRemoved} calls received
 * @param clearedEvents {@code onAllCleared} calls received
 * @param unknownParents stored events dropped because their parent block is not in the tree
 *     (for example its store event was lost, or it was evicted already)
 * @param unknownBlocks removed block hashes that are not in the tree (already gone or never seen)
 * @param malformedEvents events dropped because their arrays or scope were null, a hash was
 *     {@code NO_PARENT}, or the token count was not {@code blocks × blockSize}
 * @param duplicateBlocks stored blocks that the tree already held under the same hash (or
 *     alias): each is another copy of the block, which stays cached until every copy has been
 *     removed (an engine can hold the same block twice when it computed it for two requests
 *     at once)
 * @param aliasedBlocks stored blocks whose tokens the tree already held under a different hash
 *     (the new hash is remembered as an alias of the first)
 * @param conflictingEvents stored events dropped because a hash in them already names another
 *     block in the tree, or appears twice in the event: the engine reused a hash for different
 *     tokens (its hashes are not chained through the parent, or its hasher is broken), and
 *     applying it would tie two blocks to one hash
 * @param overflows applied stores after which the mirror exceeded its limit
 *     ({@link RouterConfig#mirrorLimitTokens()}) and dropped blocks: the engine's
 *     removals are not all arriving (an engine whose cache is larger than the limit, or an
 *     integration that loses or never sends them)
 * @param overflowBlocks blocks dropped by those overflows, least recently stored first; each
 *     was reported evicted, and a later removal of it counts as an unknown block
 */
public record CacheEventStats(
    long storedEvents,
    long removedEvents,
    long clearedEvents,
    long unknownParents,
    long unknownBlocks,
    long malformedEvents,
    long duplicateBlocks,
    long aliasedBlocks,
    long conflictingEvents,
    long overflows,
    long overflowBlocks) {}
