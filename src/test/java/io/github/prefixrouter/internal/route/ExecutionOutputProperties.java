package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.EngineResult;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

/**
 * {@link ExecutionOutput} against a naive reference model: random attempts (most giving the
 * request's output, some a diverging one) report random pieces of their output, duplicated,
 * reordered, overlapping and straddling what was emitted. After every offer, what the sink
 * received equals what the model says must have been emitted, the verdict is the model's, and
 * the invariants hold (the sink's text is the text of its tokens; emitted counts match).
 */
class ExecutionOutputProperties {

  /** The text of a token: one char, so char offsets equal token offsets. */
  static char charOf(int token) {
    return (char) ('a' + token % 26);
  }

  static String textOf(int[] tokens, int from, int to) {
    StringBuilder b = new StringBuilder();
    for (int i = from; i < to; i++) {
      b.append(charOf(tokens[i]));
    }
    return b.toString();
  }

  /** The reference: a list of emitted tokens, and per attempt what arrived without a gap. */
  static final class Model {
    final List<Integer> emitted = new ArrayList<>();
    int received;
    final List<int[]> ahead = new ArrayList<>(); // {offset, end}
    boolean broken;

    /** Applies piece [t0, t1) of output {@code x}; false if it contradicts the emitted. */
    boolean apply(int[] x, int t0, int t1) {
      for (int i = received; i < t1; i++) {
        if (i < emitted.size()) {
          if (emitted.get(i) != x[i]) {
            return false;
          }
        } else {
          emitted.add(x[i]);
        }
      }
      received = Math.max(received, t1);
      return true;
    }
  }

  @Property(tries = 300)
  void theSinkGetsWhatTheModelEmits(@ForAll @LongRange(min = 1, max = 1L << 40) long seed,
      @ForAll @IntRange(min = 1, max = 60) int length) {
    SplittableRandom r = new SplittableRandom(seed);
    int maxTokens = length + r.nextInt(5);
    int[] out = new int[length];
    for (int i = 0; i < length; i++) {
      out[i] = r.nextInt(1000);
    }
    List<int[]> sinkTokens = new ArrayList<>();
    StringBuilder sinkText = new StringBuilder();
    CompletableFuture<Void> future = new CompletableFuture<>();
    ExecutionOutput eo = new ExecutionOutput((t, s) -> {
      sinkTokens.add(t.clone());
      sinkText.append(s);
    }, maxTokens, future, e -> {
      throw new AssertionError(e);
    });
    Model m = new Model();
    ExecutionOutput.Attempt a = new ExecutionOutput.Attempt();
    int[] x = out; // the current attempt's output
    int steps = 20 + r.nextInt(80);
    boolean diverged = false;
    boolean skewed = false; // an attempt with another output ran
    for (int s = 0; s < steps && !diverged; s++) {
      int what = r.nextInt(20);
      if (what == 0) { // a new attempt: usually the same output, sometimes another one
        a = new ExecutionOutput.Attempt();
        m.received = 0;
        m.ahead.clear();
        m.broken = false;
        if (r.nextInt(4) == 0) {
          x = out.clone();
          x[r.nextInt(length)] ^= 1 + r.nextInt(7);
          skewed = true;
        } else {
          x = out;
        }
        continue;
      }
      // a piece: near what arrived, sometimes ahead of a gap, sometimes a repeat
      int t0 = Math.max(0, Math.min(length, m.received + r.nextInt(9) - 5));
      int t1 = Math.min(length, t0 + r.nextInt(6));
      boolean overflow = r.nextInt(40) == 0; // past maxTokens: an impossible piece
      int[] piece = overflow ? new int[maxTokens + 1] : Arrays.copyOfRange(x, t0, t1);
      String text = overflow ? "" : textOf(x, t0, t1);
      int before = totalTokens(sinkTokens);
      ExecutionOutput.Verdict v = eo.offer(a, t0, piece, t0, text);
      ExecutionOutput.Verdict expected;
      if (m.broken) {
        expected = ExecutionOutput.Verdict.DROPPED;
      } else if (overflow) {
        m.broken = true;
        expected = ExecutionOutput.Verdict.DROPPED;
      } else if (t0 > m.received) {
        if (m.ahead.size() >= ExecutionOutput.MAX_BUFFERED_PIECES) {
          expected = ExecutionOutput.Verdict.DROPPED;
        } else {
          m.ahead.add(new int[] {t0, t1});
          expected = ExecutionOutput.Verdict.ACCEPTED;
        }
      } else {
        expected = m.apply(x, t0, t1) ? ExecutionOutput.Verdict.ACCEPTED
            : ExecutionOutput.Verdict.DIVERGED;
        boolean progress = expected == ExecutionOutput.Verdict.ACCEPTED;
        while (progress) {
          progress = false;
          for (int i = 0; i < m.ahead.size(); i++) {
            int[] q = m.ahead.get(i);
            if (q[0] <= m.received) {
              m.ahead.remove(i);
              if (!m.apply(x, q[0], q[1])) {
                expected = ExecutionOutput.Verdict.DIVERGED;
              } else {
                progress = true;
              }
              break;
            }
          }
        }
      }
      assertEquals(expected, v, "step " + s);
      if (v == ExecutionOutput.Verdict.DIVERGED) {
        diverged = true;
        assertTrue(eo.divergence() != null);
        assertTrue(skewed, "deterministic attempts diverged");
        break;
      }
      eo.drain();
      int[] got = concat(sinkTokens);
      int[] want = m.emitted.stream().mapToInt(Integer::intValue).toArray();
      assertArrayEquals(want, got, "step " + s);
      assertTrue(got.length >= before, "went backwards");
      assertEquals(textOf(got, 0, got.length), sinkText.toString(), "the text is not the tokens'");
      assertEquals(got.length, eo.emittedTokens());
      assertEquals(got.length, eo.emittedChars());
    }
    if (!diverged) {
      // the final answer of the request's own output: emitted is a prefix unless a diverging
      // attempt emitted past the request's output
      int[] got = concat(sinkTokens);
      boolean prefix = Arrays.equals(got, Arrays.copyOf(out, got.length));
      EngineResult res = new EngineResult(out, textOf(out, 0, length), 1, -1, -1, -1);
      assertEquals(prefix, eo.finish(res));
      eo.complete(() -> future.complete(null));
      eo.drain();
      assertTrue(future.isDone());
      if (prefix) {
        assertArrayEquals(out, concat(sinkTokens));
        assertEquals(textOf(out, 0, length), sinkText.toString());
      }
      // closed: nothing more reaches the sink
      int n = sinkTokens.size();
      assertEquals(ExecutionOutput.Verdict.DROPPED,
          eo.offer(new ExecutionOutput.Attempt(), 0, new int[] {out[0]}, 0, "x"));
      eo.drain();
      assertEquals(n, sinkTokens.size());
    }
  }

  @Test
  void theSinkIsNotCalledAfterTheFutureCompletedNorAfterItThrew() {
    List<String> calls = new ArrayList<>();
    CompletableFuture<Void> future = new CompletableFuture<>();
    List<Throwable> failures = new ArrayList<>();
    ExecutionOutput eo = new ExecutionOutput((t, s) -> {
      calls.add(s);
      if (s.equals("boom")) {
        throw new IllegalStateException(s);
      }
    }, 10, future, failures::add);
    ExecutionOutput.Attempt a = new ExecutionOutput.Attempt();
    eo.offerNext(a, new int[] {1}, "a");
    eo.offerNext(a, new int[] {2}, "boom");
    eo.offerNext(a, new int[] {3}, "c");
    eo.drain();
    assertEquals(List.of("a", "boom"), calls);
    assertEquals(1, failures.size());
    // and once the future is done, queued pieces are not delivered
    List<String> later = new ArrayList<>();
    CompletableFuture<Void> f2 = new CompletableFuture<>();
    ExecutionOutput eo2 = new ExecutionOutput((t, s) -> later.add(s), 10, f2, e -> { });
    eo2.offerNext(new ExecutionOutput.Attempt(), new int[] {1}, "a");
    f2.cancel(true);
    eo2.drain();
    assertTrue(later.isEmpty());
    assertFalse(eo2.finish(new EngineResult(new int[] {2}, "", 1, -1, -1, -1)),
        "an answer that contradicts the stream");
  }

  /**
   * Threads racing as on a real node: an engine thread and a transport thread offer pieces of
   * two attempts, a third completes the execution. The sink is never called concurrently nor
   * after the future completed, the future always completes, and what the sink got is a prefix
   * of the output (the whole output when the answer came after every piece).
   */
  @Test
  void racingThreadsNeverCallTheSinkConcurrentlyOrLate() throws Exception {
    int[] out = new int[64];
    for (int i = 0; i < out.length; i++) {
      out[i] = i * 7 + 1;
    }
    for (int round = 0; round < 300; round++) {
      Object lock = new Object(); // the execution's lock
      CompletableFuture<Void> future = new CompletableFuture<>();
      java.util.concurrent.atomic.AtomicInteger inCall = new java.util.concurrent.atomic.AtomicInteger();
      java.util.concurrent.atomic.AtomicInteger breaches = new java.util.concurrent.atomic.AtomicInteger();
      List<Integer> got = java.util.Collections.synchronizedList(new ArrayList<>());
      ExecutionOutput eo = new ExecutionOutput((t, s) -> {
        if (inCall.incrementAndGet() != 1 || future.isDone()) {
          breaches.incrementAndGet();
        }
        for (int x : t) {
          got.add(x);
        }
        Thread.onSpinWait();
        inCall.decrementAndGet();
      }, out.length, future, e -> breaches.incrementAndGet());
      ExecutionOutput.Attempt engine = new ExecutionOutput.Attempt();
      ExecutionOutput.Attempt forward = new ExecutionOutput.Attempt();
      java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
      int stopAfter = round % 17;
      Thread a = new Thread(() -> {
        await(go);
        for (int i = 0; i < out.length; i += 4) {
          synchronized (lock) {
            eo.offerNext(engine, Arrays.copyOfRange(out, i, i + 4), "");
          }
          eo.drain();
        }
      });
      Thread b = new Thread(() -> {
        await(go);
        for (int i = 0; i < out.length; i += 3) {
          int end = Math.min(out.length, i + 3);
          synchronized (lock) {
            eo.offer(forward, i, Arrays.copyOfRange(out, i, end), 0, "");
          }
          eo.drain();
        }
      });
      Thread c = new Thread(() -> {
        await(go);
        for (int k = 0; k < stopAfter; k++) {
          Thread.yield();
        }
        synchronized (lock) {
          eo.finish(new EngineResult(out, "", 1, -1, -1, -1));
        }
        eo.complete(() -> future.complete(null));
        eo.drain();
      });
      a.start();
      b.start();
      c.start();
      go.countDown();
      a.join();
      b.join();
      c.join();
      assertTrue(future.isDone(), "round " + round + ": the future never completed");
      assertEquals(0, breaches.get(), "round " + round);
      int[] g = got.stream().mapToInt(Integer::intValue).toArray();
      assertArrayEquals(out, g, "round " + round + ": the answer completes the stream");
    }
  }

  private static void await(java.util.concurrent.CountDownLatch l) {
    try {
      l.await();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static int totalTokens(List<int[]> pieces) {
    return pieces.stream().mapToInt(p -> p.length).sum();
  }

  static int[] concat(List<int[]> pieces) {
    int[] all = new int[totalTokens(pieces)];
    int k = 0;
    for (int[] p : pieces) {
      System.arraycopy(p, 0, all, k, p.length);
      k += p.length;
    }
    return all;
  }
}
