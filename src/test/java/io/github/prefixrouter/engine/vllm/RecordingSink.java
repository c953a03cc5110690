package io.github.prefixrouter.engine.vllm;

import io.github.prefixrouter.contract.ThrowingCacheEventListener;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongPredicate;

/**
 * A {@link KvEventSink} that records every call, tracks {@code nextSeq} as the receiver does
 * (one past the last message applied; replayed messages already applied are ignored), and
 * checks that it is never called from two threads at once.
 */
final class RecordingSink implements KvEventSink {

  record Call(boolean replayed, long seq, byte[] payload) {
    @Override
    public String toString() {
      return seq == RESET ? "reset" : (replayed ? "replayed " : "live ") + seq;
    }
  }

  /** The sequence number of a recorded {@link #reset()}. */
  static final long RESET = Long.MIN_VALUE;

  private final List<Call> calls = new ArrayList<>();
  private final AtomicInteger inside = new AtomicInteger();
  private final Set<Thread> threads = ConcurrentHashMap.newKeySet();
  private volatile boolean overlapped;
  private volatile LongPredicate failOn = s -> false;
  private long next = -1;

  private volatile boolean failWithError;

  void failOn(LongPredicate p) {
    failOn = p;
  }

  /**
   * As {@link #failOn}, with an {@link OutOfMemoryError} (as a batch too large to decode in the
   * heap left would throw), live or replayed.
   */
  void failWithErrorOn(LongPredicate p) {
    failWithError = true;
    failOn = p;
  }

  private volatile boolean failWithChecked;

  /**
   * As {@link #failOn}, with a checked {@link java.io.IOException} thrown undeclared (as code in
   * a language without checked exceptions may throw it), live messages only.
   */
  void failWithCheckedOn(LongPredicate p) {
    failWithChecked = true;
    failOn = p;
  }

  private void fail(long seq) {
    if (failWithChecked) {
      throw ThrowingCacheEventListener.<RuntimeException>undeclared(
          new java.io.IOException("sink failure on " + seq));
    }
    if (failWithError) {
      throw new OutOfMemoryError("sink failure on " + seq);
    }
    throw new IllegalStateException("sink failure on " + seq);
  }

  private void enter() {
    threads.add(Thread.currentThread());
    if (inside.incrementAndGet() != 1) {
      overlapped = true;
    }
  }

  private void exit() {
    inside.decrementAndGet();
  }

  @Override
  public long nextSeq() {
    enter();
    try {
      synchronized (this) {
        return next;
      }
    } finally {
      exit();
    }
  }

  @Override
  public void onMessage(long seq, byte[] payload) {
    enter();
    try {
      synchronized (this) {
        calls.add(new Call(false, seq, payload));
        if (failOn.test(seq)) {
          fail(seq);
        }
        // a number no message can follow is dropped as malformed: the stream starts over
        next = seq >= 0 && seq <= VllmKvEventReceiver.MAX_SEQ ? seq + 1 : -1;
      }
    } finally {
      exit();
    }
  }

  @Override
  public void onReplayed(long seq, byte[] payload) {
    enter();
    try {
      synchronized (this) {
        calls.add(new Call(true, seq, payload));
        if (failWithError && failOn.test(seq)) {
          fail(seq);
        }
        if (seq >= next) {
          next = seq + 1;
        }
      }
    } finally {
      exit();
    }
  }

  @Override
  public void reset() {
    enter();
    try {
      synchronized (this) {
        calls.add(new Call(false, RESET, new byte[0]));
        next = -1;
      }
    } finally {
      exit();
    }
  }

  synchronized int resets() {
    return (int) calls.stream().filter(c -> c.seq() == RESET).count();
  }

  /** Messages received (live or replayed), in order, without resets. */
  synchronized List<Call> calls() {
    return calls.stream().filter(c -> c.seq() != RESET).toList();
  }

  /** Every call in order, resets included. */
  synchronized List<Call> allCalls() {
    return List.copyOf(calls);
  }

  /** Messages received (live or replayed), not counting resets. */
  synchronized int size() {
    return calls.size() - resets();
  }

  synchronized boolean sawLive(long seq) {
    return calls.stream().anyMatch(c -> !c.replayed() && c.seq() == seq);
  }

  boolean overlapped() {
    return overlapped;
  }

  Set<Thread> threads() {
    return threads;
  }
}
