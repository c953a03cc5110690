package io.github.prefixrouter.engine.vllm;

import io.github.prefixrouter.spi.CacheEventListener;
import java.util.Objects;

/**
 * Applies vLLM's KV-cache event stream to a {@link CacheEventListener}: the messages of vLLM's
 * ZMQ event publisher ({@code --kv-events-config}), each a sequence number and a msgpack-encoded
 * event batch.
 *
 * <p>Thread-safe: every method is synchronized, so batches are applied one at a time and in
 * the order they are passed.
 */
public final class VllmKvEventReceiver implements KvEventSink {

  private final CacheEventListener listener;
  private final int blockSize;

  /**
   * A receiver applying events to {@code listener}.
   *
   * @param listener where decoded events go (the node's cache-event listener)
   * @param blockSize the node's block size in tokens; vLLM must use the same
   * @throws IllegalArgumentException if {@code blockSize} is not positive
   */
  public VllmKvEventReceiver(CacheEventListener listener, int blockSize) {
    this.listener = Objects.requireNonNull(listener, "listener");
    if (blockSize <= 0) {
      throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
    }
    this.blockSize = blockSize;
  }

  @Override
  public synchronized long nextSeq() {
    throw new UnsupportedOperationException("not yet implemented");
  }

  @Override
  public synchronized void onMessage(long seq, byte[] payload) {
    throw new UnsupportedOperationException("not yet implemented");
  }

  @Override
  public synchronized void onReplayed(long seq, byte[] payload) {
    throw new UnsupportedOperationException("not yet implemented");
  }
}
