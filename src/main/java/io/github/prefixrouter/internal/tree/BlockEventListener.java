package io.github.prefixrouter.internal.tree;

/**
 * Receives the block-level changes of a {@link ConcurrentPrefixTree}, in the order they happen.
 * Hashes are the tree's own chained block hashes ({@link BlockHasher}), never token ids.
 *
 * <p>Replaying the events into the snapshot returned by
 * {@link ConcurrentPrefixTree#addListenerWithSnapshot} (add on stored, remove on evicted, empty
 * on cleared) yields exactly the hashes of the full blocks the tree holds; for a listener added
 * to a new tree the snapshot is empty.
 * A block is held once however many cached prompts share it, so a hash is reported stored once
 * when it first becomes cached and evicted once when its last copy goes.
 *
 * <p>Calls are made one at a time, in order, after the tree's write lock has been released, so
 * a listener may read the tree. A listener that throws (an exception or an {@link Error}) is
 * logged, counted ({@link ConcurrentPrefixTree#listenerFailures()}) and otherwise ignored: the
 * event still reaches the other listeners, and the write that caused it is not failed. Only a
 * {@link VirtualMachineError} other than a {@link StackOverflowError} (out of memory) is thrown
 * on to the write's caller (an engine's event call included), once the queued events have
 * reached every listener; the write itself is made. The arrays passed are owned by the
 * listener.
 *
 * <p>A listener must be quick and must not block. Events are given on the threads of the
 * writes (an {@code insert}, a lease's release, {@code evictTo}, {@code clear}, an engine
 * event), one thread at a time, and a write that queued events (or finds some queued) returns
 * only once they have been given: a listener that blocks holds up the write whose event it is
 * being given and, on every thread, each later write that stores or evicts blocks (its change is
 * made in the tree; {@code match} and {@code acquire} go on). A listener that waits for such a
 * write on another thread to return waits for ever. Hand slow work to a thread of its own.
 */
public interface BlockEventListener {

  /** Full blocks that became cached, in prefix order (a parent before its continuation). */
  default void onStored(long[] blockHashes) {}

  /** Full blocks that are no longer cached. */
  default void onEvicted(long[] blockHashes) {}

  /** The tree dropped everything. */
  default void onCleared() {}
}
