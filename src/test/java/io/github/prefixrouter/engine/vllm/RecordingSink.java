package io.github.prefixrouter.engine.vllm;

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
      return (replayed ? "replayed " : "live ") + seq;
    }
  }

  private final List<Call> calls = new ArrayList<>();
  private final AtomicInteger inside = new AtomicInteger();
  private final Set<Thread> threads = ConcurrentHashMap.newKeySet();
  private volatile boolean overlapped;
  private volatile LongPredicate failOn = s -> false;
  private long next = -1;

  void failOn(LongPredicate p) {
    failOn = p;
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
          throw new IllegalStateException("sink failure on " + seq);
        }
        next = seq + 1;
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
        if (seq >= next) {
          next = seq + 1;
        }
      }
    } finally {
      exit();
    }
  }

  synchronized List<Call> calls() {
    return List.copyOf(calls);
  }

  synchronized int size() {
    return calls.size();
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
