package io.github.prefixrouter.engine.vllm;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import io.github.prefixrouter.spi.CacheEventListener;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Records every listener call as a line of text; can be told to throw on chosen calls. */
final class RecordingListener implements CacheEventListener {

  final List<String> calls = new ArrayList<>();
  /** Calls (by their text's prefix) that throw after being recorded. */
  String failOn;
  /** Whether a failure is an {@link Error} (a {@link StackOverflowError}) or an exception. */
  boolean failWithError;
  /**
   * Whether a failure is a checked exception (an {@link java.io.IOException}) thrown undeclared,
   * as code in a language without checked exceptions may throw it.
   */
  boolean failWithChecked;
  /** Whether a failure is an {@link OutOfMemoryError}, as the tree's engine events throw on. */
  boolean failWithOutOfMemory;

  static String stored(long parent, long[] hashes, int[] tokens) {
    return "stored " + parent + " " + Arrays.toString(hashes) + " " + Arrays.toString(tokens);
  }

  static String removed(long... hashes) {
    return "removed " + Arrays.toString(hashes);
  }

  static final String CLEARED = "cleared";

  private void record(String call) {
    calls.add(call);
    if (failOn != null && call.startsWith(failOn)) {
      if (failWithOutOfMemory) {
        throw new OutOfMemoryError("listener failure on " + call);
      }
      if (failWithError) {
        throw new StackOverflowError("listener failure on " + call);
      }
      if (failWithChecked) {
        throw ThrowingCacheEventListener.<RuntimeException>undeclared(
            new java.io.IOException("listener failure on " + call));
      }
      throw new IllegalStateException("listener failure on " + call);
    }
  }

  /** A store whose chain starts in an adapter's scope. */
  static String stored(String adapter, long parent, long[] hashes, int[] tokens) {
    return stored(parent, hashes, tokens) + " @" + adapter;
  }

  @Override
  public void onBlocksStored(long parentBlockHash, long[] blockHashes, int[] tokenIds) {
    record(stored(parentBlockHash, blockHashes, tokenIds));
  }

  @Override
  public void onBlocksStored(
      CacheScope scope, long parentBlockHash, long[] blockHashes, int[] tokenIds) {
    if (scope.isDefault() || parentBlockHash != NO_PARENT) {
      record(stored(parentBlockHash, blockHashes, tokenIds)); // a continuation: its parent's
    } else {
      record(stored(scope.adapter(), parentBlockHash, blockHashes, tokenIds));
    }
  }

  @Override
  public void onBlocksRemoved(long[] blockHashes) {
    record(removed(blockHashes));
  }

  @Override
  public void onAllCleared() {
    record(CLEARED);
  }

  /** The calls so far, forgetting them. */
  List<String> take() {
    List<String> out = new ArrayList<>(calls);
    calls.clear();
    return out;
  }
}
