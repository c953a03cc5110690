package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The requests a test submitted to an {@link OracleCluster}, in order, and how many times each
 * one's future completed: for the check that every request completes exactly once, with the
 * answer its prompt deserves or with a failure the test accepts.
 */
final class ExactlyOnceLedger {

  /** What a test checks of an answered request, beyond its output being the expected one. */
  @FunctionalInterface
  interface Answered {
    void check(int i, InferenceResponse response);
  }

  /** What a test checks of a failed request: the cause of its {@link CompletionException}. */
  @FunctionalInterface
  interface Failed {
    void check(int i, Throwable cause);
  }

  /** What a test checks of a request its client cancelled. */
  @FunctionalInterface
  interface Cancelled {
    void check(int i);
  }

  /** Counters summed over a cluster's nodes. */
  record Totals(long requests, long resolved, long inFlight, long divergences) {}

  private final List<InferenceRequest> requests = new ArrayList<>();
  private final List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
  private final List<AtomicInteger> completions = new ArrayList<>();

  /** Records request {@code q} and its future {@code f}, counting f's completions; returns f. */
  CompletableFuture<InferenceResponse> track(InferenceRequest q,
      CompletableFuture<InferenceResponse> f) {
    AtomicInteger counter = new AtomicInteger();
    f.whenComplete((v, e) -> counter.incrementAndGet());
    requests.add(q);
    futures.add(f);
    completions.add(counter);
    return f;
  }

  /** How many requests were tracked. */
  int size() {
    return requests.size();
  }

  /** The future of the {@code i}-th tracked request. */
  CompletableFuture<InferenceResponse> future(int i) {
    return futures.get(i);
  }

  /** As {@link #assertEachCompletedOnce(Answered, Failed, Cancelled)}; no cancel is expected. */
  int assertEachCompletedOnce(Answered answered, Failed failed) {
    return assertEachCompletedOnce(answered, failed,
        i -> fail("request " + i + " was cancelled"));
  }

  /**
   * Asserts that every tracked request completed, and exactly once; that an answered one got
   * the expected output (then {@code answered} checks the rest); that a failed one failed as
   * {@code failed} accepts, a cancelled one as {@code cancelled} does. Returns how many were
   * answered.
   */
  int assertEachCompletedOnce(Answered answered, Failed failed, Cancelled cancelled) {
    int succeeded = 0;
    for (int i = 0; i < futures.size(); i++) {
      CompletableFuture<InferenceResponse> f = futures.get(i);
      assertTrue(f.isDone(), "request " + i + " never completed");
      assertEquals(1, completions.get(i).get(), "request " + i + " completed more than once");
      InferenceResponse resp;
      try {
        resp = f.join();
      } catch (CancellationException e) {
        cancelled.check(i);
        continue;
      } catch (CompletionException e) {
        failed.check(i, e.getCause());
        continue;
      }
      succeeded++;
      assertArrayEquals(OracleCluster.expected(requests.get(i)), resp.result().outputTokens(),
          "request " + i + " got the wrong answer");
      answered.check(i, resp);
    }
    return succeeded;
  }

  /** The requests, resolutions, in-flight requests and output divergences of {@code nodes}. */
  static Totals totals(Collection<RouterNode> nodes) {
    long requests = 0;
    long resolved = 0;
    long inFlight = 0;
    long divergences = 0;
    for (RouterNode node : nodes) {
      NodeStats s = node.stats();
      requests += s.requests();
      resolved += s.servedLocally() + s.forwarded() + s.failed();
      inFlight += s.inFlight();
      divergences += node.outputDivergences();
    }
    return new Totals(requests, resolved, inFlight, divergences);
  }
}
