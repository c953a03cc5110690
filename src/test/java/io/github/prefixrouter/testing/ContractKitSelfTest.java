package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.contract.InferenceEngineContractTest;
import io.github.prefixrouter.contract.TransportContractTest;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.opentest4j.TestAbortedException;

/**
 * The contract test kit catches misbehaving implementations: each broken engine or transport
 * below passes every check of the kit but the one written for its defect, which fails it (the
 * engine that calls its listener from two threads breaks two rules and fails both checks; the
 * engine that ignores stop token ids fails the plain and the streamed stop checks; the one whose
 * cancel forgets the request leaves its future open in the load check too, which cancels
 * requests; the transport that matches answers to requests by order gives the answer to the
 * request after the cancelled ones of the cancel check to a cancelled one; the transport that
 * reports a handler's failure without its message fails both checks of that message; the one
 * that refuses calls from a request's completion fails both checks that make such calls; the one
 * whose close forgets the requests it has sent fails every check that closes while the peer
 * holds a request; the one that writes a late answer over a request's failure fails both checks
 * of a late answer, after a timeout and after a close).
 */
class ContractKitSelfTest {

  /** Runs every test of a fresh kit instance each; returns the names of the tests that failed. */
  private static Set<String> failingTests(Class<?> kit, Supplier<Object> fresh) {
    Set<String> failed = new TreeSet<>();
    for (Method m : checks(kit)) {
      if (fails(kit, m, fresh)) {
        failed.add(m.getName());
      }
    }
    return failed;
  }

  /**
   * Like {@link #failingTests}, but runs the tests at once, each on a thread of its own, for an
   * implementation that waits seconds of real time in several of them (each test has its own
   * kit instance, and so its own simulated scheduler and network).
   */
  private static Set<String> failingTestsAtOnce(Class<?> kit, Supplier<Object> fresh) {
    java.util.List<Method> checks = checks(kit);
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(
        checks.size(), r -> {
          Thread t = new Thread(r, "contract-kit-check");
          t.setDaemon(true);
          return t;
        });
    try {
      java.util.List<java.util.concurrent.Future<Boolean>> results = new java.util.ArrayList<>();
      for (Method m : checks) {
        results.add(pool.submit(() -> fails(kit, m, fresh)));
      }
      Set<String> failed = new TreeSet<>();
      for (int i = 0; i < checks.size(); i++) {
        try {
          if (results.get(i).get()) {
            failed.add(checks.get(i).getName());
          }
        } catch (java.util.concurrent.ExecutionException e) {
          throw e.getCause() instanceof RuntimeException r ? r
              : new IllegalStateException(e.getCause());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException(e);
        }
      }
      return failed;
    } finally {
      pool.shutdownNow();
    }
  }

  /** The kit's tests. */
  private static java.util.List<Method> checks(Class<?> kit) {
    java.util.List<Method> checks = new java.util.ArrayList<>();
    for (Method m : kit.getDeclaredMethods()) {
      if (m.isAnnotationPresent(Test.class)) {
        checks.add(m);
      }
    }
    return checks;
  }

  /** Runs test {@code m} of a fresh kit instance; whether it failed (false if it was skipped). */
  private static boolean fails(Class<?> kit, Method m, Supplier<Object> fresh) {
    Object instance = fresh.get();
    m.setAccessible(true);
    try {
      m.invoke(instance);
      return false;
    } catch (InvocationTargetException e) {
      Throwable t = e.getCause();
      if (t instanceof TestAbortedException) {
        return false; // skipped by an assumption
      }
      if (!(t instanceof AssertionError)) {
        throw new IllegalStateException(m.getName() + " broke instead of failing", t);
      }
      return true;
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    } finally {
      closeAll(kit, instance);
    }
  }

  private static void closeAll(Class<?> kit, Object instance) {
    for (Method m : kit.getDeclaredMethods()) {
      if (m.isAnnotationPresent(AfterEach.class)) {
        m.setAccessible(true);
        try {
          m.invoke(instance);
        } catch (ReflectiveOperationException e) {
          throw new IllegalStateException(e);
        }
      }
    }
  }

  // ---------------------------------------------------------------- engines

  /** The kit over simulated engines, each wrapped by {@code wrap}. */
  static class EngineKit extends InferenceEngineContractTest {
    final SimulatedScheduler sim = new SimulatedScheduler();
    final java.util.function.BiFunction<SimulatedEngine, Integer, InferenceEngine> wrap;
    int created;

    EngineKit(java.util.function.BiFunction<SimulatedEngine, Integer, InferenceEngine> wrap) {
      this.wrap = wrap;
    }

    @Override
    protected InferenceEngine createEngine() {
      return wrap.apply(SimulatedEngine.builder().scheduler(sim).slots(2).capacityTokens(4096)
          .build(), ++created);
    }

    @Override
    protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
      return SimulatedTime.await(sim, condition, max);
    }

    @Override
    protected long cacheCapacityTokens() {
      return 4096;
    }
  }

  /** The kit over engines that declare they stream their whole output. */
  static class StreamingEngineKit extends EngineKit {
    StreamingEngineKit(java.util.function.BiFunction<SimulatedEngine, Integer, InferenceEngine> wrap) {
      super(wrap);
    }

    @Override
    protected boolean streamsWholeOutput() {
      return true;
    }
  }

  /** Forwards everything to a simulated engine; subclasses break one thing. */
  static class EngineWrapper extends ForwardingEngine {
    final SimulatedEngine e;

    EngineWrapper(SimulatedEngine e) {
      super(e);
      this.e = e;
    }
  }

  /** Reports every request outstanding as running, none as waiting for a slot. */
  static class QueuelessLoadWrapper extends EngineWrapper {
    QueuelessLoadWrapper(SimulatedEngine e) {
      super(e);
    }

    @Override
    public io.github.prefixrouter.spi.EngineLoad load() {
      return new io.github.prefixrouter.spi.EngineLoad(0, e.load().total());
    }
  }

  /**
   * Streams a simulated engine's output: when the engine answers, it gives the listener the
   * output one token a piece (the text with the last), then completes its own future; a
   * listener that throws is not called again. Subclasses break one thing.
   */
  static class StreamingWrapper extends EngineWrapper {
    StreamingWrapper(SimulatedEngine e) {
      super(e);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return execute(r, OutputListener.IGNORE);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
      CompletableFuture<EngineResult> mine = new CompletableFuture<>();
      e.execute(r).whenComplete((v, err) -> {
        if (err != null) {
          mine.completeExceptionally(cause(err));
          return;
        }
        deliver(v, l);
        mine.complete(v);
      });
      return mine;
    }

    /** Gives {@code l} the pieces to stream, until it throws. */
    void deliver(EngineResult v, OutputListener l) {
      for (Piece p : streamedPieces(v)) {
        try {
          l.onOutput(p.tokens, p.text);
        } catch (Throwable listenerFailed) { // a checked exception thrown undeclared too
          return;
        }
      }
    }

    /** The pieces to stream of an output: by default all of it, one token a piece. */
    java.util.List<Piece> streamedPieces(EngineResult v) {
      return pieces(v);
    }
  }

  /** One piece of streamed output. */
  record Piece(int[] tokens, String text) {}

  /** The output as pieces of one token each, the text given with the last (or alone). */
  static java.util.List<Piece> pieces(EngineResult v) {
    int[] t = v.outputTokens();
    java.util.List<Piece> out = new java.util.ArrayList<>();
    for (int i = 0; i < t.length; i++) {
      out.add(new Piece(new int[] {t[i]}, i == t.length - 1 ? v.text() : ""));
    }
    if (t.length == 0 && !v.text().isEmpty()) {
      out.add(new Piece(new int[0], v.text()));
    }
    return out;
  }

  @Test
  void theWellBehavedStreamingEnginePassesEverything() {
    assertEquals(Set.of(), failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e))));
  }

  /** A simulated engine whose cache events pass through {@code relay} on their way out. */
  static class EventRelayWrapper extends EngineWrapper {
    EventRelayWrapper(SimulatedEngine e) {
      super(e);
    }

    /** What the listener is told of a store; by default the store as it is. */
    void relayStore(CacheEventListener l, CacheScope scope, long parent, long[] hashes,
        int[] tokens) {
      l.onBlocksStored(scope, parent, hashes, tokens);
    }

    @Override
    public void setCacheEventListener(CacheEventListener l) {
      e.setCacheEventListener(new CacheEventListener() {
        @Override
        public void onBlocksStored(long parent, long[] hashes, int[] tokens) {
          relayStore(l, CacheScope.DEFAULT, parent, hashes, tokens);
        }

        @Override
        public void onBlocksStored(CacheScope scope, long parent, long[] hashes, int[] tokens) {
          relayStore(l, scope, parent, hashes, tokens);
        }

        @Override
        public void onBlocksRemoved(long[] hashes) {
          l.onBlocksRemoved(hashes);
        }

        @Override
        public void onAllCleared() {
          l.onAllCleared();
        }
      });
    }
  }

  @Test
  void anEngineWhoseEventsPassThroughARelayUnchangedPassesEverything() {
    assertEquals(Set.of(), failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EventRelayWrapper(e))));
  }

  @Test
  void anEngineWhoseEventsArriveLaterPassesEverything() {
    // its events reach the listener 500 ms after the engine stored or removed the blocks, in a
    // task of its scheduler (as vLLM's come over ZeroMQ): the kit must wait for them in the
    // engine's time, not spin in real time while the simulated clock stands still
    assertEquals(Set.of(), failingTests(InferenceEngineContractTest.class, () -> {
      EngineKit[] kit = new EngineKit[1];
      kit[0] = new EngineKit((e, n) -> new EngineWrapper(e) {
        @Override
        public void setCacheEventListener(CacheEventListener l) {
          e.setCacheEventListener(new CacheEventListener() {
            void later(Runnable event) {
              synchronized (e) { // the engine schedules from its callers' threads under it
                kit[0].sim.schedule(500_000_000L, () -> {
                  try {
                    event.run();
                  } catch (Throwable listenerFailed) { // a checked exception undeclared too
                    // the listener's business: the next event goes to it all the same
                  }
                });
              }
            }

            @Override
            public void onBlocksStored(long parent, long[] hashes, int[] tokens) {
              onBlocksStored(CacheScope.DEFAULT, parent, hashes, tokens);
            }

            @Override
            public void onBlocksStored(CacheScope scope, long parent, long[] hashes,
                int[] tokens) {
              long[] h = hashes.clone();
              int[] t = tokens.clone();
              later(() -> l.onBlocksStored(scope, parent, h, t));
            }

            @Override
            public void onBlocksRemoved(long[] hashes) {
              long[] h = hashes.clone();
              later(() -> l.onBlocksRemoved(h));
            }

            @Override
            public void onAllCleared() {
              later(l::onAllCleared);
            }
          });
        }
      });
      return kit[0];
    }));
  }

  @Test
  void anEngineThatStoresBlocksTwiceAndRemovesEachCopyPassesEverything() {
    // every block is stored twice (as by two requests that computed it at once) and one copy
    // is removed at once (one of them ended): the block stays cached, in one copy, until the
    // engine evicts it, and a later store may continue it
    assertEquals(Set.of(), failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EventRelayWrapper(e) {
          @Override
          void relayStore(CacheEventListener l, CacheScope scope, long parent, long[] hashes,
              int[] tokens) {
            l.onBlocksStored(scope, parent, hashes, tokens);
            l.onBlocksStored(scope, parent, hashes, tokens);
            l.onBlocksRemoved(hashes);
          }
        })));
  }

  @Test
  void anEngineWhoseStoresForgetTheBlockTheyContinueIsCaught() {
    // every store is reported as the start of a prompt: each event is well formed, but the
    // blocks after the first event of a prompt hang from nothing
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EventRelayWrapper(e) {
          @Override
          void relayStore(CacheEventListener l, CacheScope scope, long parent, long[] hashes,
              int[] tokens) {
            l.onBlocksStored(scope, CacheEventListener.NO_PARENT, hashes, tokens);
          }
        }));
    assertEquals(Set.of("publishedCacheEventsChainEachBlockToTheOneBefore"), failed);
  }

  @Test
  void anEngineWhoseStoresCarryOtherTokensThanItCachedIsCaught() {
    // the tokens of every stored block are off by one: as many as the prompt's, not its own
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EventRelayWrapper(e) {
          @Override
          void relayStore(CacheEventListener l, CacheScope scope, long parent, long[] hashes,
              int[] tokens) {
            l.onBlocksStored(scope, parent, hashes, Arrays.stream(tokens).map(t -> t + 1).toArray());
          }
        }));
    assertEquals(Set.of("publishedCacheEventsChainEachBlockToTheOneBefore"), failed);
  }

  @Test
  void anEngineThatStreamsAfterCompletingIsCaught() {
    // the future completes first, then the pieces come: the node may have answered already
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
            CompletableFuture<EngineResult> mine = new CompletableFuture<>();
            e.execute(r).whenComplete((v, err) -> {
              if (err != null) {
                mine.completeExceptionally(err);
                return;
              }
              mine.complete(v);
              deliver(v, l);
            });
            return mine;
          }
        }));
    assertEquals(Set.of("streamedPiecesComeOneAtATimeAndBeforeTheFutureCompletes"), failed);
  }

  @Test
  void anEngineThatStreamsOtherTokensThanItAnswersIsCaught() {
    // each streamed token is off by one: the client sees another output than the result
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          java.util.List<Piece> streamedPieces(EngineResult v) {
            return pieces(v).stream().map(p -> new Piece(
                Arrays.stream(p.tokens()).map(t -> t + 1).toArray(), p.text())).toList();
          }
        }));
    assertEquals(Set.of("streamedOutputIsAPrefixOfTheResult"), failed);
  }

  @Test
  void anEngineThatDeclaresItStreamsEverythingButStreamsHalfIsCaught() {
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          java.util.List<Piece> streamedPieces(EngineResult v) {
            java.util.List<Piece> all = pieces(v);
            return all.subList(0, all.size() / 2);
          }
        }));
    assertEquals(Set.of("streamedOutputIsAPrefixOfTheResult"), failed);
  }

  @Test
  void anEngineWhoseStreamedRequestsRunOtherwiseIsCaught() {
    // a streamed request is decoded greedily whatever its sampling parameters
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
            if (l == OutputListener.IGNORE) {
              return super.execute(r, l);
            }
            return super.execute(new InferenceRequest(r.id(), r.tokens(),
                io.github.prefixrouter.GenerationParams.greedy(r.params().maxTokens())
                    .withStops(r.params().stop(), r.params().stopTokenIds()), r.scope()), l);
          }
        }));
    assertEquals(Set.of("streamingAndPlainExecutionGiveTheSameResult"), failed);
  }

  @Test
  void anEngineThatAThrowingListenerBreaksIsCaught() {
    // the listener's exception escapes the delivery: the future is never completed
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          void deliver(EngineResult v, OutputListener l) {
            for (Piece p : pieces(v)) {
              l.onOutput(p.tokens(), p.text());
            }
          }
        }));
    assertEquals(Set.of("aListenerThatThrowsNeitherBreaksTheRequestNorIsCalledAgain"), failed);
  }

  @Test
  void anEngineThatAListenerThrowingAnErrorBreaksIsCaught() {
    // a listener's exception is caught, its Error is not: that request never completes
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          void deliver(EngineResult v, OutputListener l) {
            for (Piece p : pieces(v)) {
              try {
                l.onOutput(p.tokens(), p.text());
              } catch (RuntimeException listenerFailed) {
                return;
              }
            }
          }
        }));
    assertEquals(Set.of("aListenerThatThrowsNeitherBreaksTheRequestNorIsCalledAgain"), failed);
  }

  @Test
  void anEngineThatAListenerThrowingACheckedExceptionBreaksIsCaught() {
    // exceptions and Errors are caught, a checked exception thrown undeclared is not: it escapes
    // the delivery and that request never completes (as ReferenceEngine's did)
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          void deliver(EngineResult v, OutputListener l) {
            for (Piece p : pieces(v)) {
              try {
                l.onOutput(p.tokens(), p.text());
              } catch (RuntimeException | Error listenerFailed) {
                return;
              }
            }
          }
        }));
    assertEquals(Set.of("aListenerThatThrowsNeitherBreaksTheRequestNorIsCalledAgain"), failed);
  }

  @Test
  void anEngineThatKeepsCallingAThrowingListenerIsCaught() {
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          void deliver(EngineResult v, OutputListener l) {
            for (Piece p : pieces(v)) {
              try {
                l.onOutput(p.tokens(), p.text());
              } catch (RuntimeException ignored) {
                // and on to the next piece
              }
            }
          }
        }));
    assertEquals(Set.of("aListenerThatThrowsNeitherBreaksTheRequestNorIsCalledAgain"), failed);
  }

  @Test
  void anEngineThatCallsTheListenerFromTwoThreadsAtOnceIsCaught() {
    // a second thread gives an empty piece while the output is streamed; it also calls a
    // listener that already threw, so the throwing-listener check fails it as well
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          void deliver(EngineResult v, OutputListener l) {
            java.util.concurrent.CountDownLatch calling = new java.util.concurrent.CountDownLatch(1);
            Thread other = new Thread(() -> {
              try {
                calling.countDown();
                l.onOutput(new int[0], "");
              } catch (RuntimeException ignored) {
                // the throwing listener
              }
            }, "second-caller");
            other.start();
            try {
              calling.await(); // the other thread is calling the listener: call it too
            } catch (InterruptedException ex) {
              Thread.currentThread().interrupt();
            }
            super.deliver(v, l);
            try {
              other.join();
            } catch (InterruptedException ex) {
              Thread.currentThread().interrupt();
            }
          }
        }));
    assertEquals(Set.of("streamedPiecesComeOneAtATimeAndBeforeTheFutureCompletes",
        "aListenerThatThrowsNeitherBreaksTheRequestNorIsCalledAgain"), failed);
  }

  @Test
  void anEngineThatStreamsToACancelledRequestIsCaught() {
    // cancel fails the future at once but lets the generation run on, streaming to the
    // listener of a request the node has already given up on
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          final java.util.Map<String, CompletableFuture<EngineResult>> running =
              new ConcurrentHashMap<>();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
            CompletableFuture<EngineResult> f = super.execute(r, l);
            running.put(r.id(), f);
            return f;
          }

          @Override
          public void cancel(String id) {
            CompletableFuture<EngineResult> f = running.get(id);
            if (f != null) {
              f.completeExceptionally(new io.github.prefixrouter.spi.EngineException("cancelled", false));
            }
          }
        }));
    assertEquals(Set.of("cancelledRequestsStillCompleteAndOthersAreUntouched"), failed);
  }

  @Test
  void anEngineWhoseCancelAlsoFailsTheOtherRequestsIsCaught() {
    // cancel takes the batch the request runs in down with it: every request in flight fails,
    // not only the one cancelled (a cancel of an id not in flight changes nothing)
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          final Set<String> inFlight = ConcurrentHashMap.newKeySet();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            inFlight.add(r.id());
            return e.execute(r).whenComplete((v, err) -> inFlight.remove(r.id()));
          }

          @Override
          public void cancel(String id) {
            if (inFlight.contains(id)) {
              for (String other : inFlight.toArray(new String[0])) {
                e.cancel(other);
              }
            }
          }
        }));
    assertEquals(Set.of("cancelledRequestsStillCompleteAndOthersAreUntouched"), failed);
  }

  @Test
  void theWellBehavedEnginePassesEverything() {
    assertEquals(Set.of(), failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e))));
  }

  @Test
  void anEngineWhoseCancelForgetsTheRequestIsCaught() {
    // cancel drops the job: its future never completes, so the node waits for engineTimeout
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          final Set<String> forgotten = ConcurrentHashMap.newKeySet();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            CompletableFuture<EngineResult> mine = new CompletableFuture<>();
            e.execute(r).whenComplete((v, err) -> {
              if (forgotten.contains(r.id())) {
                return;
              }
              if (err != null) {
                mine.completeExceptionally(err);
              } else {
                mine.complete(v);
              }
            });
            return mine;
          }

          @Override
          public void cancel(String id) {
            forgotten.add(id);
          }
        }));
    // the load check cancels requests too, and waits for them to end before it looks; and the
    // forgotten ids stay forgotten, so a later request of an id cancelled once never answers
    assertEquals(Set.of("cancelledRequestsStillCompleteAndOthersAreUntouched",
        "loadReturnsToIdleOnceEveryRequestHasEnded",
        "cancellingAnEndedRequestIsHarmlessAndItsIdCanBeUsedAgain"), failed);
  }

  @Test
  void anEngineThatRefusesTheIdsItWasToldToCancelIsCaught() {
    // a cancel that comes before its request is remembered, so that the request is refused when
    // it comes; and never forgotten: a later request of an id cancelled once fails
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          final Set<String> cancelled = ConcurrentHashMap.newKeySet();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            if (cancelled.contains(r.id())) {
              return CompletableFuture.failedFuture(
                  new EngineException("request " + r.id() + " cancelled", false));
            }
            return e.execute(r);
          }

          @Override
          public void cancel(String id) {
            cancelled.add(id);
            e.cancel(id);
          }
        }));
    assertEquals(Set.of("cancellingAnEndedRequestIsHarmlessAndItsIdCanBeUsedAgain"), failed);
  }

  @Test
  void anEngineWhoseCancelFailsARequestThatEndedIsCaught() {
    // it keeps the future of every request it was given, by id, and its cancel fails each of
    // them, with obtrudeException: ended ones too, whose result is written over
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          final java.util.Map<String, java.util.List<CompletableFuture<EngineResult>>> byId =
              new ConcurrentHashMap<>();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            return execute(r, OutputListener.IGNORE);
          }

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
            CompletableFuture<EngineResult> f = e.execute(r, l);
            byId.computeIfAbsent(r.id(), k -> new java.util.concurrent.CopyOnWriteArrayList<>())
                .add(f);
            return f;
          }

          @Override
          public void cancel(String id) {
            e.cancel(id);
            for (CompletableFuture<EngineResult> f : byId.getOrDefault(id, java.util.List.of())) {
              f.obtrudeException(new EngineException("request " + id + " cancelled", false));
            }
          }
        }));
    assertEquals(Set.of("cancellingAnEndedRequestIsHarmlessAndItsIdCanBeUsedAgain"), failed);
  }

  @Test
  void anEngineThatKeepsItsRequestsInAMapByIdIsCaught() {
    // the map finds a request to cancel; a second request of one id replaces the first in it,
    // and the first one's answer completes the second's future
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((s, n) -> new EngineWrapper(s) {
          final java.util.Map<String, CompletableFuture<EngineResult>> running =
              new ConcurrentHashMap<>();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            CompletableFuture<EngineResult> mine = new CompletableFuture<>();
            running.put(r.id(), mine);
            e.execute(r).whenComplete((v, err) -> pass(running.remove(r.id()), v, err));
            return mine;
          }
        }));
    assertEquals(Set.of("requestsOfOneIdInFlightAtOnceEachGetTheirOwnOutput"), failed);
  }

  @Test
  void anEngineThatAnswersOnlyTheFirstOfIdenticalRequestsIsCaught() {
    // a request identical to one running (same prompt, parameters and scope) joins its run
    // instead of running again; the run's answer completes the first request's future, and
    // the joiners' futures, kept in a list nobody reads, never complete
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((s, n) -> new EngineWrapper(s) {
          final java.util.Map<String, CompletableFuture<EngineResult>> running =
              new ConcurrentHashMap<>();
          final java.util.List<CompletableFuture<EngineResult>> joiners =
              new java.util.concurrent.CopyOnWriteArrayList<>();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            String key = Arrays.toString(r.tokens()) + r.params() + r.scope();
            CompletableFuture<EngineResult> mine = new CompletableFuture<>();
            if (running.putIfAbsent(key, mine) != null) {
              joiners.add(mine);
              return mine;
            }
            e.execute(r).whenComplete((v, err) -> {
              running.remove(key, mine);
              pass(mine, v, err);
            });
            return mine;
          }
        }));
    assertEquals(Set.of("everyFutureCompletesExactlyOnce"), failed);
  }

  @Test
  void anEngineWhoseExecuteIsNotThreadSafeIsCaught() {
    // it numbers requests with a plain counter, read, then written back once the request is
    // prepared: two callers at once take one number, and one of them never gets an answer
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((s, n) -> new EngineWrapper(s) {
          int next;
          final java.util.Map<Integer, CompletableFuture<EngineResult>> running =
              new java.util.HashMap<>();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            int id = next;
            try {
              Thread.sleep(2); // preparing the request
            } catch (InterruptedException ex) {
              Thread.currentThread().interrupt();
            }
            next = id + 1;
            CompletableFuture<EngineResult> mine = new CompletableFuture<>();
            synchronized (running) {
              running.put(id, mine);
            }
            e.execute(r).whenComplete((v, err) -> {
              CompletableFuture<EngineResult> f;
              synchronized (running) {
                f = running.remove(id);
              }
              pass(f, v, err);
            });
            return mine;
          }
        }));
    assertEquals(Set.of("callsFromManyThreadsAtOnceEachGetTheirOwnOutput"), failed);
  }

  @Test
  void anEngineThatSamplesWithItsOwnRandomSourceIsCaught() {
    // greedy answers are right; sampled ones depend on the engine instance, not the seed
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            CompletableFuture<EngineResult> f = e.execute(r);
            if (r.params().temperature() == 0) {
              return f;
            }
            return f.thenApply(x -> new EngineResult(
                Arrays.stream(x.outputTokens()).map(t -> (t + n) % 1000).toArray(), x.text(),
                x.promptTokens(), x.cachedPromptTokens(), x.prefillNanos(), x.decodeNanos()));
          }
        }));
    assertEquals(Set.of("sampledRequestsGiveTheSameOutputOnEveryEngine"), failed);
  }

  @Test
  void anEngineThatIgnoresStopTokenIdsIsCaught() {
    // every request runs without its stops: it generates past its first stop token id
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            return e.execute(new InferenceRequest(r.id(), r.tokens(),
                r.params().withStops(null, null), r.scope()));
          }
        }));
    // streamed or not, its outputs run past their stops
    assertEquals(Set.of("aStopTokenIdEndsTheOutputWithIt",
        "aStopTokenIdEndsTheStreamedOutputWithIt"), failed);
  }

  /**
   * The output with a text, each token's id after a space, ended at the first token whose text
   * completes one of {@code stop} (the first listed, when several), the text then ending just
   * before that stop string.
   */
  static EngineResult withText(EngineResult v, java.util.List<String> stop) {
    int[] t = v.outputTokens();
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < t.length; i++) {
      text.append(' ').append(t[i]);
      for (String s : stop) { // the text before this token had none: this one completes it
        int at = text.indexOf(s);
        if (at >= 0) {
          text.setLength(at);
          return new EngineResult(Arrays.copyOf(t, i + 1), text.toString(), v.promptTokens(),
              v.cachedPromptTokens(), v.prefillNanos(), v.decodeNanos());
        }
      }
    }
    return new EngineResult(t, text.toString(), v.promptTokens(), v.cachedPromptTokens(),
        v.prefillNanos(), v.decodeNanos());
  }

  /**
   * Gives a simulated engine's output a text ({@link #withText}), honouring stop strings;
   * subclasses break one thing.
   */
  static class TextWrapper extends EngineWrapper {
    TextWrapper(SimulatedEngine e) {
      super(e);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r) {
      return e.execute(r).thenApply(v -> text(v, r.params().stop()));
    }

    /** The output with its text, cut at the first of {@code stop}. */
    EngineResult text(EngineResult v, java.util.List<String> stop) {
      return withText(v, stop);
    }
  }

  /**
   * Streams a simulated engine's output with a text ({@link #withText}), honouring stop
   * strings, one token a piece (the text with the last); subclasses break one thing.
   */
  static class StreamingTextWrapper extends StreamingWrapper {
    StreamingTextWrapper(SimulatedEngine e) {
      super(e);
    }

    @Override
    public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
      CompletableFuture<EngineResult> mine = new CompletableFuture<>();
      e.execute(r).whenComplete((v, err) -> {
        if (err != null) {
          mine.completeExceptionally(cause(err));
          return;
        }
        EngineResult cut = withText(v, r.params().stop());
        deliver(streamed(v, cut), l);
        mine.complete(cut);
      });
      return mine;
    }

    /** What to stream of an output and of the output cut at its stop string: the latter. */
    EngineResult streamed(EngineResult whole, EngineResult cut) {
      return cut;
    }
  }

  @Test
  void anEngineWithTextThatStreamsItAndHonoursStopStringsPassesEverything() {
    assertEquals(Set.of(), failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingTextWrapper(e))));
  }

  @Test
  void anEngineWithTextThatStreamsPastItsStopStringIsCaught() {
    // the result ends at the stop string, but the pieces are those of the whole output
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new StreamingTextWrapper(e) {
          @Override
          EngineResult streamed(EngineResult whole, EngineResult cut) {
            return withText(whole, java.util.List.of());
          }
        }));
    assertEquals(Set.of("aStopStringEndsTheTextOfAnEngineThatGivesText"), failed);
  }

  @Test
  void anEngineWithTextThatHonoursStopStringsPassesEverything() {
    assertEquals(Set.of(), failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new TextWrapper(e))));
  }

  @Test
  void anEngineWithTextThatIgnoresStopStringsIsCaught() {
    // its text is whole whatever the stop strings: it generates past them
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new TextWrapper(e) {
          @Override
          EngineResult text(EngineResult v, java.util.List<String> stop) {
            return withText(v, java.util.List.of());
          }
        }));
    assertEquals(Set.of("aStopStringEndsTheTextOfAnEngineThatGivesText"), failed);
  }

  @Test
  void anEngineThatGivesOneTokenMoreThanALongOddMaxTokensIsCaught() {
    // it decodes a long output (over 16 tokens) two tokens a step and checks maxTokens only
    // between steps: an odd maxTokens over 16 gives maxTokens + 1 token ids (the other checks
    // ask for 16 tokens at most, and the scoped-request check bounds an output of 3)
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            GenerationParams g = r.params();
            if (g.maxTokens() <= 16 || g.maxTokens() % 2 == 0) {
              return e.execute(r);
            }
            return e.execute(new InferenceRequest(r.id(), r.tokens(),
                new GenerationParams(g.maxTokens() + 1, g.temperature(), g.topP(), g.seed(),
                    g.stop(), g.stopTokenIds()), r.scope()));
          }
        }));
    assertEquals(Set.of("maxTokensBoundsTheOutputAndOnlyAStopEndsItSooner"), failed);
  }

  @Test
  void anEngineThatIgnoresCacheScopesIsCaught() {
    // every request runs in the default scope: a salted tenant hits another tenant's prefix
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            return e.execute(r.withScope(io.github.prefixrouter.CacheScope.DEFAULT));
          }
        }));
    assertEquals(Set.of("aScopedRequestIsServedAndHitsOnlyItsOwnScopesCache"), failed);
  }

  @Test
  void anEngineWhoseEventsLoseTheScopeIsCaught() {
    // the cache is scoped, but the events report every chain under the default scope
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          @Override
          public void setCacheEventListener(CacheEventListener l) {
            e.setCacheEventListener(new CacheEventListener() {
              @Override
              public void onBlocksStored(long parent, long[] hashes, int[] tokenIds) {
                l.onBlocksStored(parent, hashes, tokenIds);
              }

              @Override
              public void onBlocksRemoved(long[] hashes) {
                l.onBlocksRemoved(hashes);
              }

              @Override
              public void onAllCleared() {
                l.onAllCleared();
              }
            });
          }
        }));
    assertEquals(Set.of("aScopedRequestIsServedAndHitsOnlyItsOwnScopesCache"), failed);
  }

  @Test
  void anEngineWhoseExecuteWaitsForRoomIsCaught() {
    // it takes 46 unfinished requests at most; execute waits up to 1.1 s (a tenth over the
    // kit's EXECUTE_BOUND) for one of them to end, then refuses the request. Of the 48 calls of
    // the check, made back to back while none ends, the last two wait. Only the load check also
    // has 46 requests unfinished at once, and the 5-second bound on its execute calls lets its
    // two waits pass (the checks run at once, so that the two checks' waits overlap)
    Set<String> failed = failingTestsAtOnce(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          final java.util.concurrent.atomic.AtomicInteger unfinished =
              new java.util.concurrent.atomic.AtomicInteger();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            long end = System.nanoTime() + 1_100_000_000L;
            while (unfinished.get() >= 46) {
              if (System.nanoTime() > end) {
                return CompletableFuture.failedFuture(
                    new io.github.prefixrouter.spi.EngineBusyException("no room"));
              }
              try {
                Thread.sleep(1);
              } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                return CompletableFuture.failedFuture(
                    new io.github.prefixrouter.spi.EngineBusyException("interrupted"));
              }
            }
            unfinished.incrementAndGet();
            CompletableFuture<EngineResult> f = e.execute(r);
            f.whenComplete((v, err) -> unfinished.decrementAndGet());
            return f;
          }
        }));
    assertEquals(Set.of("executeReturnsAtOnceWhileTheEngineIsBusy"), failed);
  }

  @Test
  void anEngineWhoseLoadNeverReportsAQueueIsCaught() {
    // every request outstanding reported as running, none as waiting: a node on such an engine
    // never pushes back, since its refusal of forwarded work and its gossip's overload flag
    // look at the queue alone. It passed every check of the kit
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new QueuelessLoadWrapper(e)));
    assertEquals(Set.of("loadReportsTheRequestsWaitingForASlotAsQueued"), failed);
  }

  @Test
  void anEngineWhoseLoadIsTheDefaultIsCaught() {
    // load() not implemented: IDLE whatever runs, which the other load checks forgive no more
    // than this one
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          @Override
          public io.github.prefixrouter.spi.EngineLoad load() {
            return io.github.prefixrouter.spi.EngineLoad.IDLE;
          }
        }));
    assertEquals(Set.of("loadIsSaneAndCheap", "loadReportsTheRequestsWaitingForASlotAsQueued"),
        failed);
  }

  @Test
  void anEngineDeclaredToKeepNoQueueSkipsTheQueueCheckOnly() {
    // an engine that hands every request on at once (an HTTP adapter with no limit of its own)
    // has no queue to report: its test declares so, and the queue check is skipped
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new QueuelessLoadWrapper(e)) {
          @Override
          protected boolean reportsQueuedRequests() {
            return false;
          }
        });
    assertEquals(Set.of(), failed);
  }

  @Test
  void anEngineWhoseLoadKeepsCountingCancelledRequestsIsCaught() {
    // the load counts a request from execute until its result: one that fails or is cancelled
    // stays counted for ever; and it counts every request as running, none as waiting, which the
    // queue check catches too
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          final java.util.concurrent.atomic.AtomicInteger counted =
              new java.util.concurrent.atomic.AtomicInteger();

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            counted.incrementAndGet();
            CompletableFuture<EngineResult> f = e.execute(r);
            f.whenComplete((v, err) -> {
              if (err == null) {
                counted.decrementAndGet();
              }
            });
            return f;
          }

          @Override
          public io.github.prefixrouter.spi.EngineLoad load() {
            return new io.github.prefixrouter.spi.EngineLoad(0, counted.get());
          }
        }));
    assertEquals(Set.of("loadReportsTheRequestsWaitingForASlotAsQueued",
        "loadReturnsToIdleOnceEveryRequestHasEnded"), failed);
  }

  @Test
  void anEngineThatStreamsPastItsStopIsCaught() {
    // the result ends at the stop token id, but the pieces are those of the output without it
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new StreamingEngineKit((e, n) -> new StreamingWrapper(e) {
          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r, OutputListener l) {
            CompletableFuture<EngineResult> mine = new CompletableFuture<>();
            e.execute(r).whenComplete((v, err) -> {
              if (err != null) {
                mine.completeExceptionally(cause(err));
                return;
              }
              int[] unstopped = SimulatedEngine.expectedOutput(r.tokens(),
                  r.params().withStops(null, null), SIMULATED_VOCABULARY);
              deliver(new EngineResult(unstopped, v.text(), v.promptTokens(),
                  v.cachedPromptTokens(), v.prefillNanos(), v.decodeNanos()), l);
              mine.complete(v);
            });
            return mine;
          }
        }));
    assertEquals(Set.of("aStopTokenIdEndsTheStreamedOutputWithIt"), failed);
  }

  /** The simulated engine's default vocabulary ({@code SimulatedEngine.Builder}'s). */
  private static final int SIMULATED_VOCABULARY = 151_936;

  /** A listener passing every event to {@code l} but for the removals, which it drops. */
  private static CacheEventListener withoutRemovals(CacheEventListener l) {
    return new CacheEventListener() {
      @Override
      public void onBlocksStored(long parent, long[] hashes, int[] tokens) {
        l.onBlocksStored(parent, hashes, tokens);
      }

      @Override
      public void onBlocksStored(CacheScope scope, long parent, long[] hashes, int[] tokens) {
        l.onBlocksStored(scope, parent, hashes, tokens);
      }

      @Override
      public void onAllCleared() {
        l.onAllCleared();
      }
    };
  }

  @Test
  void anEngineThatNeverReportsRemovalsIsCaught() {
    // it evicts as its cache fills, and tells the listener nothing of it
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          @Override
          public void setCacheEventListener(CacheEventListener l) {
            e.setCacheEventListener(withoutRemovals(l));
          }
        }));
    assertEquals(Set.of("fillingTheCacheBeyondItsCapacityReportsRemovals"), failed);
  }

  /**
   * A listener passing every event to {@code l}, and each throw of {@code l} to
   * {@code onThrow}, which returns whether to pass later events on.
   */
  private static CacheEventListener guarded(CacheEventListener l,
      java.util.function.Predicate<Throwable> onThrow) {
    return new CacheEventListener() {
      volatile boolean passing = true;

      private void pass(Runnable call) {
        if (!passing) {
          return;
        }
        try {
          call.run();
        } catch (Throwable t) { // a checked exception thrown undeclared too
          passing = onThrow.test(t);
        }
      }

      @Override
      public void onBlocksStored(long parent, long[] hashes, int[] tokens) {
        pass(() -> l.onBlocksStored(parent, hashes, tokens));
      }

      @Override
      public void onBlocksStored(CacheScope scope, long parent, long[] hashes, int[] tokens) {
        pass(() -> l.onBlocksStored(scope, parent, hashes, tokens));
      }

      @Override
      public void onBlocksRemoved(long[] hashes) {
        pass(() -> l.onBlocksRemoved(hashes));
      }

      @Override
      public void onAllCleared() {
        pass(l::onAllCleared);
      }
    };
  }

  /**
   * The checks failed by an engine whose request's future stays open when its cache event
   * listener throws what {@code escapes} picks: the throw escapes the request's completion.
   */
  private static Set<String> failingWhenAListenerThrowEscapes(
      java.util.function.Predicate<Throwable> escapes) {
    return failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          volatile boolean escaped;

          @Override
          public void setCacheEventListener(CacheEventListener l) {
            e.setCacheEventListener(guarded(l, t -> {
              escaped |= escapes.test(t);
              return true;
            }));
          }

          @Override
          public CompletableFuture<EngineResult> execute(InferenceRequest r) {
            CompletableFuture<EngineResult> mine = new CompletableFuture<>();
            e.execute(r).whenComplete((v, err) -> {
              if (escaped) {
                escaped = false;
                return;
              }
              if (err != null) {
                mine.completeExceptionally(cause(err));
              } else {
                mine.complete(v);
              }
            });
            return mine;
          }
        }));
  }

  @Test
  void anEngineThatACacheEventListenerThrowingAnErrorBreaksIsCaught() {
    // an Error thrown by the listener escapes the request's completion: its future stays open
    // (as SimulatedEngine's and ReferenceEngine's did)
    assertEquals(Set.of("aCacheEventListenerThatThrowsBreaksNeitherTheRequestsNorLaterEvents"),
        failingWhenAListenerThrowEscapes(t -> t instanceof Error));
  }

  @Test
  void anEngineThatACacheEventListenerThrowingACheckedExceptionBreaksIsCaught() {
    // a checked exception the listener throws undeclared escapes the request's completion, as
    // the catch of exceptions and Errors lets it through: its future stays open (as
    // SimulatedEngine's and ReferenceEngine's did)
    assertEquals(Set.of("aCacheEventListenerThatThrowsBreaksNeitherTheRequestsNorLaterEvents"),
        failingWhenAListenerThrowEscapes(
            t -> !(t instanceof RuntimeException || t instanceof Error)));
  }

  @Test
  void anEngineThatStopsCallingACacheEventListenerThatThrewIsCaught() {
    // the requests are sound, but after the first throw the listener hears of nothing more (as
    // vLLM's event subscriber, whose thread an Error thrown by the listener ended)
    Set<String> failed = failingTests(InferenceEngineContractTest.class,
        () -> new EngineKit((e, n) -> new EngineWrapper(e) {
          @Override
          public void setCacheEventListener(CacheEventListener l) {
            e.setCacheEventListener(guarded(l, t -> false));
          }
        }));
    assertEquals(Set.of("aCacheEventListenerThatThrowsBreaksNeitherTheRequestsNorLaterEvents"),
        failed);
  }

  // ---------------------------------------------------------------- transports

  /** The kit over in-memory transports on perfect links, each wrapped by {@code wrap}. */
  static class TransportKit extends InMemoryTransportKit {
    final java.util.function.UnaryOperator<Transport> wrap;

    TransportKit(java.util.function.UnaryOperator<Transport> wrap) {
      super(1);
      this.wrap = wrap;
    }

    @Override
    Transport wrap(Transport transport) {
      return wrap.apply(transport);
    }
  }

  /** Drops every one-way message above {@code carried} bytes; requests it passes on. */
  static class OneWayCappedTransport extends ForwardingTransport {
    final int carried;

    OneWayCappedTransport(Transport t, int carried) {
      super(t);
      this.carried = carried;
    }

    @Override
    public void send(PeerAddress to, byte[] payload) {
      if (payload.length <= carried) {
        delegate.send(to, payload);
      }
    }
  }

  /** Sleeps while {@code condition} holds, for at most {@code most} (a broken close's wait). */
  private static void waitWhile(BooleanSupplier condition, Duration most) {
    long end = System.nanoTime() + most.toNanos();
    while (condition.getAsBoolean() && System.nanoTime() - end < 0) {
      try {
        Thread.sleep(5);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
    }
  }

  /** Completes {@code to}, unless null, with {@code v} or {@code err} unwrapped. */
  private static <T> void pass(CompletableFuture<T> to, T v, Throwable err) {
    if (to == null) {
      return;
    }
    if (err != null) {
      to.completeExceptionally(cause(err));
    } else {
      to.complete(v);
    }
  }

  @Test
  void theWellBehavedTransportPassesEverything() {
    assertEquals(Set.of(), failingTests(TransportContractTest.class,
        () -> new TransportKit(ForwardingTransport::new)));
  }

  @Test
  void aTransportThatMatchesAnswersToRequestsByOrderIsCaught() {
    // the oldest waiting request takes whichever answer comes first
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          final ArrayDeque<CompletableFuture<byte[]>> waiting = new ArrayDeque<>();

          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            synchronized (waiting) {
              waiting.add(mine);
            }
            t.request(to, p, timeout).whenComplete((v, err) -> {
              CompletableFuture<byte[]> oldest;
              synchronized (waiting) {
                oldest = waiting.poll();
              }
              pass(oldest, v, err);
            });
            return mine;
          }
        }));
    // the answer to the request after the cancelled ones goes to the oldest cancelled one
    Set<String> always = Set.of("answersGivenInAnotherOrderReachTheirOwnRequests",
        "aRequestWhoseFutureIsCancelledHoldsNothingMore");
    assertTrue(failed.containsAll(always), failed.toString());
    // requests from many threads at once are caught only when their answers happen to come in
    // another order than the requests went, which depends on the threads' timing
    Set<String> sometimes = Set.of("callsFromManyThreadsAtOnceEachGetTheirOwnAnswer");
    Set<String> others = new java.util.HashSet<>(failed);
    others.removeAll(always);
    others.removeAll(sometimes);
    assertEquals(Set.of(), others);
  }

  @Test
  void aTransportWhoseMaxMessageBytesIsNotPositiveOrChangesIsCaught() {
    Set<String> zero = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public int maxMessageBytes() {
            return 0;
          }
        }));
    assertTrue(zero.contains("maxMessageBytesIsPositiveAndTheSameOnEveryCall"), zero.toString());
    Set<String> changing = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          final java.util.concurrent.atomic.AtomicInteger calls =
              new java.util.concurrent.atomic.AtomicInteger();

          @Override
          public int maxMessageBytes() {
            return 1 << (20 + calls.getAndIncrement() % 2);
          }
        }));
    assertTrue(changing.contains("maxMessageBytesIsPositiveAndTheSameOnEveryCall"),
        changing.toString());
    // declaring 1 MiB at times, it carries 2 MiB: the limit's check may catch it as well
    assertTrue(Set.of("maxMessageBytesIsPositiveAndTheSameOnEveryCall",
        "aRequestAboveTheLimitFailsTooLargeAndNeverReachesThePeer").containsAll(changing),
        changing.toString());
  }

  @Test
  void aTransportThatCarriesMoreThanItsMaxMessageBytesIsCaught() {
    // it declares 4 KiB but sends larger requests all the same
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public int maxMessageBytes() {
            return 4_096;
          }
        }));
    assertEquals(Set.of("aRequestAboveTheLimitFailsTooLargeAndNeverReachesThePeer"), failed);
  }

  @Test
  void aTransportThatTimesOutEarlyIsCaught() {
    // a request fails TIMEOUT at 60% of its timeout: after half of it, the kit's check used to
    // look, the request was still waiting
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            Duration early = timeout.compareTo(Duration.ofMinutes(1)) <= 0 && !timeout.isNegative()
                ? timeout.multipliedBy(6).dividedBy(10) : timeout;
            return t.request(to, p, early);
          }
        }));
    assertEquals(Set.of("timeoutIsHonouredAndALateAnswerDoesNotOverrideIt"), failed);
  }

  @Test
  void aTransportThatKeepsDeliveringAfterCloseIsCaught() {
    // close() fails its own pending requests and refuses new ones, but the listener stays up
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          final Set<CompletableFuture<byte[]>> pending = ConcurrentHashMap.newKeySet();
          volatile boolean closed;

          @Override
          public void send(PeerAddress to, byte[] payload) {
            if (!closed) {
              t.send(to, payload);
            }
          }

          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            if (closed) {
              mine.completeExceptionally(new io.github.prefixrouter.spi.TransportException(
                  io.github.prefixrouter.spi.TransportException.Kind.CLOSED, "closed"));
              return mine;
            }
            pending.add(mine);
            t.request(to, p, timeout).whenComplete((v, err) -> {
              pending.remove(mine);
              pass(mine, v, err);
            });
            return mine;
          }

          @Override
          public void close() {
            closed = true;
            for (CompletableFuture<byte[]> f : pending) {
              f.completeExceptionally(new io.github.prefixrouter.spi.TransportException(
                  io.github.prefixrouter.spi.TransportException.Kind.CLOSED, "closed"));
            }
          }
        }));
    assertEquals(Set.of("aClosedTransportDeliversNothingInbound"), failed);
  }

  /** A handler passing every call to {@code h}; subclasses change one thing. */
  static class ForwardingHandler implements Transport.InboundHandler {
    final Transport.InboundHandler h;

    ForwardingHandler(Transport.InboundHandler h) {
      this.h = h;
    }

    @Override
    public void onMessage(PeerAddress from, byte[] payload) {
      h.onMessage(from, payload);
    }

    @Override
    public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
      return h.onRequest(from, payload);
    }
  }

  @Test
  void aTransportThatGivesTheHandlerTheConnectionsAddressIsCaught() {
    // the sender's node id is right, but its address is the one its connection came from (a
    // source port nothing listens at), not the one it is reached at
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public void start(InboundHandler handler) {
            t.start(new ForwardingHandler(handler) {
              PeerAddress connection(PeerAddress from) {
                return new PeerAddress(from.nodeId(), from.address() + ":40312");
              }

              @Override
              public void onMessage(PeerAddress from, byte[] payload) {
                h.onMessage(connection(from), payload);
              }

              @Override
              public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
                return h.onRequest(connection(from), payload);
              }
            });
          }
        }));
    assertEquals(Set.of("theHandlerIsGivenTheSendersOwnAddress"), failed);
  }

  @Test
  void aTransportThatReportsEveryHandlerFailureWithoutItsMessageIsCaught() {
    // the serving side answers any failure of its handler with a bare "failed" (as a plain
    // HTTP 500 would): the requester sees PROTOCOL, but not why
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public void start(InboundHandler handler) {
            t.start(new ForwardingHandler(handler) {
              @Override
              public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
                CompletableFuture<byte[]> answer = h.onRequest(from, payload);
                if (answer == null) {
                  return null;
                }
                CompletableFuture<byte[]> bare = new CompletableFuture<>();
                answer.whenComplete((v, err) -> pass(bare, v, err == null ? null
                    : new io.github.prefixrouter.spi.TransportException(
                        io.github.prefixrouter.spi.TransportException.Kind.PROTOCOL,
                        "the peer failed the request")));
                return bare;
              }
            });
          }
        }));
    assertEquals(Set.of("aHandlersProtocolFailureReachesTheRequesterWithItsMessage",
        "aHandlersProtocolMessageOfAHundredPrintableCharactersArrivesWhole"), failed);
  }

  @Test
  void aTransportThatCutsAHandlersMessageToAFieldOf80BytesIsCaught() {
    // the serving side carries the handler's PROTOCOL message in a reason field of 80 bytes
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public void start(InboundHandler handler) {
            t.start(new ForwardingHandler(handler) {
              @Override
              public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
                CompletableFuture<byte[]> answer = h.onRequest(from, payload);
                if (answer == null) {
                  return null;
                }
                CompletableFuture<byte[]> cut = new CompletableFuture<>();
                answer.whenComplete((v, err) -> {
                  Throwable c = cause(err);
                  if (c instanceof io.github.prefixrouter.spi.TransportException te
                      && te.kind() == io.github.prefixrouter.spi.TransportException.Kind.PROTOCOL) {
                    String why = te.getMessage().substring((te.kind() + ": ").length());
                    c = new io.github.prefixrouter.spi.TransportException(te.kind(),
                        why.substring(0, Math.min(80, why.length())));
                  }
                  pass(cut, v, c);
                });
                return cut;
              }
            });
          }
        }));
    assertEquals(Set.of("aHandlersProtocolMessageOfAHundredPrintableCharactersArrivesWhole"),
        failed);
  }

  @Test
  void aTransportThatRefusesCallsFromInsideItsHandlerIsCaught() {
    // a guard against re-entrant calls: while it delivers inbound traffic, its sends are
    // dropped and its requests fail at once
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          final ThreadLocal<Boolean> delivering = ThreadLocal.withInitial(() -> false);

          @Override
          public void start(InboundHandler handler) {
            t.start(new ForwardingHandler(handler) {
              @Override
              public void onMessage(PeerAddress from, byte[] payload) {
                delivering.set(true);
                try {
                  h.onMessage(from, payload);
                } finally {
                  delivering.set(false);
                }
              }

              @Override
              public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
                delivering.set(true);
                try {
                  return h.onRequest(from, payload);
                } finally {
                  delivering.set(false);
                }
              }
            });
          }

          @Override
          public void send(PeerAddress to, byte[] payload) {
            if (!delivering.get()) {
              t.send(to, payload);
            }
          }

          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            if (delivering.get()) {
              return CompletableFuture.failedFuture(
                  new io.github.prefixrouter.spi.TransportException(
                      io.github.prefixrouter.spi.TransportException.Kind.UNREACHABLE,
                      "re-entrant request refused"));
            }
            return t.request(to, p, timeout);
          }
        }));
    assertEquals(Set.of("aHandlerCanSendAndRequestThroughItsOwnTransport"), failed);
  }

  @Test
  void aTransportThatClearsAMessagesPayloadOnceSentIsCaught() {
    // it takes the array for its own: once the message is handed to the network, the buffer
    // goes back to its pool, which clears it
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public void send(PeerAddress to, byte[] payload) {
            t.send(to, payload);
            Arrays.fill(payload, (byte) 0);
          }
        }));
    assertEquals(Set.of("theTransportLeavesThePayloadsItIsGivenUnchanged"), failed);
  }

  @Test
  void aTransportThatCarriesNoMessageAboveADatagramIsCaught() {
    // one datagram a message, without fragmentation: a message above 1,400 bytes is dropped
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new OneWayCappedTransport(t, 1_400)));
    assertEquals(Set.of("aOneWayMessageAsLargeAsTheNodesGossipArrivesIntact"), failed);
  }

  @Test
  void aTransportDeclaringNoLimitThatDropsOneWayMessagesAbove64KiBIsCaught() {
    // no limit declared (the SPI's default), so a node may run gossipMessageBytes up to 16 MiB
    // on it; the kit sent only 64 KiB one way, and such a transport passed, its nodes then
    // losing every larger gossip message without a word
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new OneWayCappedTransport(t, 65_536) {
          @Override
          public int maxMessageBytes() {
            return Integer.MAX_VALUE;
          }
        }));
    assertEquals(Set.of("aOneWayMessageAsLargeAsTheNodesGossipArrivesIntact"), failed);
  }

  @Test
  void aTransportDeclaringALimitThatDropsOneWayMessagesBelowItIsCaught() {
    // 4 MiB declared, as the HTTP transport's default: a node may run gossipMessageBytes of
    // 4 MiB on it, so one-way messages of that size must arrive too, not only requests
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new OneWayCappedTransport(t, 65_536) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            return p.length > 4 << 20
                ? CompletableFuture.failedFuture(new io.github.prefixrouter.spi.TransportException(
                    io.github.prefixrouter.spi.TransportException.Kind.TOO_LARGE, "above 4 MiB"))
                : t.request(to, p, timeout);
          }

          @Override
          public int maxMessageBytes() {
            return 4 << 20;
          }
        }));
    assertEquals(Set.of("aOneWayMessageAsLargeAsTheNodesGossipArrivesIntact"), failed);
  }

  @Test
  void aTransportWhoseCancelledRequestsKeepTheirSlotIsCaught() {
    // at most 64 requests in flight: a request's slot is given back when its exchange ends, not
    // when the caller cancels its future, so requests cancelled while the peer holds them use
    // the slots up
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          final java.util.concurrent.atomic.AtomicInteger inFlight =
              new java.util.concurrent.atomic.AtomicInteger();

          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            if (inFlight.incrementAndGet() > 64) {
              inFlight.decrementAndGet();
              return CompletableFuture.failedFuture(
                  new io.github.prefixrouter.spi.TransportException(
                      io.github.prefixrouter.spi.TransportException.Kind.BUSY,
                      "64 requests in flight"));
            }
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            t.request(to, p, timeout).whenComplete((v, err) -> {
              inFlight.decrementAndGet();
              pass(mine, v, err);
            });
            return mine;
          }
        }));
    assertEquals(Set.of("aRequestWhoseFutureIsCancelledHoldsNothingMore"), failed);
  }

  @Test
  void aTransportWhoseCloseWaitsForTheCompletionsInProgressIsCaught() {
    // close drains gracefully: it waits, up to 3.1 s (a tenth of a second over the kit's bound
    // on a close), for the completions of requests in progress to end, the one that called it
    // too
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          final java.util.concurrent.atomic.AtomicInteger completing =
              new java.util.concurrent.atomic.AtomicInteger();

          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            t.request(to, p, timeout).whenComplete((v, err) -> {
              completing.incrementAndGet();
              try {
                pass(mine, v, err);
              } finally {
                completing.decrementAndGet();
              }
            });
            return mine;
          }

          @Override
          public void close() {
            waitWhile(() -> completing.get() > 0, Duration.ofMillis(3_100));
            t.close();
          }
        }));
    assertEquals(Set.of("closeCalledWhereARequestCompletesReturnsPromptly"), failed);
  }

  @Test
  void aTransportWhoseCloseDrainsThePendingRequestsIsCaught() {
    // a graceful close: it waits, up to 3.1 s (a tenth of a second over the kit's bound on a
    // close), for the answers of its pending requests before failing what is left with CLOSED
    // (in each of the four checks that close with a request pending, hence the checks at once)
    Set<String> failed = failingTestsAtOnce(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          final Set<CompletableFuture<byte[]>> pending = ConcurrentHashMap.newKeySet();

          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            CompletableFuture<byte[]> theirs = t.request(to, p, timeout);
            pending.add(theirs);
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            theirs.whenComplete((v, err) -> {
              pending.remove(theirs);
              pass(mine, v, err);
            });
            mine.whenComplete((v, err) -> theirs.cancel(false));
            return mine;
          }

          @Override
          public void close() {
            waitWhile(() -> !pending.isEmpty(), Duration.ofMillis(3_100));
            t.close();
          }
        }));
    assertEquals(Set.of("closeWithARequestPendingReturnsPromptly"), failed);
  }

  @Test
  void aTransportWhoseSendThrowsOnceClosedIsCaught() {
    // a closed transport's send throws IllegalStateException, as a closed channel's write does
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          volatile boolean closed;

          @Override
          public void send(PeerAddress to, byte[] payload) {
            if (closed) {
              throw new IllegalStateException("transport closed");
            }
            t.send(to, payload);
          }

          @Override
          public void close() {
            closed = true;
            t.close();
          }
        }));
    assertEquals(Set.of("callsFromTheCompletionOfARequestCloseFailedAreRefusedQuietly"), failed);
  }

  @Test
  void aTransportThatBlocksTheCallerWhileThePeerIsBusyIsCaught() {
    // send and request write through to the peer before they return, as a synchronous write
    // does: while the peer's handler is busy with an earlier message they wait, up to a write
    // timeout of 2.1 s (a tenth of a second over the kit's bound on such a call), for it to be
    // free
    Set<String> failed = failingTests(TransportContractTest.class, () -> {
      java.util.Map<String, java.util.concurrent.atomic.AtomicInteger> busy =
          new ConcurrentHashMap<>();
      return new TransportKit(t -> new ForwardingTransport(t) {
        final java.util.concurrent.atomic.AtomicInteger mine = busy.computeIfAbsent(
            t.localAddress().address(), k -> new java.util.concurrent.atomic.AtomicInteger());

        @Override
        public void start(InboundHandler handler) {
          t.start(new InboundHandler() {
            @Override
            public void onMessage(PeerAddress from, byte[] payload) {
              mine.incrementAndGet();
              try {
                handler.onMessage(from, payload);
              } finally {
                mine.decrementAndGet();
              }
            }

            @Override
            public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
              mine.incrementAndGet();
              try {
                return handler.onRequest(from, payload);
              } finally {
                mine.decrementAndGet();
              }
            }
          });
        }

        void writeThrough(PeerAddress to) {
          java.util.concurrent.atomic.AtomicInteger peer = busy.get(to.address());
          if (peer != null) {
            waitWhile(() -> peer.get() > 0, Duration.ofMillis(2_100));
          }
        }

        @Override
        public void send(PeerAddress to, byte[] payload) {
          writeThrough(to);
          t.send(to, payload);
        }

        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
          writeThrough(to);
          return t.request(to, p, timeout);
        }
      });
    });
    assertEquals(Set.of("requestAndSendNeverBlockTheCaller"), failed);
  }

  @Test
  void aTransportWhoseRequestsAreNotThreadSafeIsCaught() {
    // it numbers requests with a plain counter, read, then written back once the request is
    // prepared: two callers at once take one number, and one of them never gets an answer
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          int next;
          final java.util.Map<Integer, CompletableFuture<byte[]>> waiting =
              new java.util.HashMap<>();

          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            int id = next;
            try {
              Thread.sleep(2); // preparing the request
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            next = id + 1;
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            synchronized (waiting) {
              waiting.put(id, mine);
            }
            t.request(to, p, timeout).whenComplete((v, err) -> {
              CompletableFuture<byte[]> f;
              synchronized (waiting) {
                f = waiting.remove(id);
              }
              if (f != null) {
                pass(f, v, err);
              }
            });
            return mine;
          }
        }));
    assertEquals(Set.of("callsFromManyThreadsAtOnceEachGetTheirOwnAnswer"), failed);
  }

  @Test
  void aTransportThatTimesRequestsOutOnlyAtItsOwnDeadlineIsCaught() {
    // a request's timeout is left to the socket's read timeout of 5 s: a shorter one waits as
    // long (a timeout that is not positive still fails at once, a longer one is honoured)
    Duration readTimeout = Duration.ofSeconds(5);
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            boolean positive = !timeout.isNegative() && !timeout.isZero();
            return t.request(to, p,
                positive && timeout.compareTo(readTimeout) < 0 ? readTimeout : timeout);
          }
        }));
    assertEquals(Set.of("aTimeoutEndsTheRequestSoonAfterItPasses"), failed);
  }

  @Test
  void aTransportThatDeliversARequestAgainAfterItsAnswerIsCaught() {
    // an at-least-once delivery: a request's acknowledgement, due with its answer, is taken
    // for lost, and 100 ms after the answer the request is delivered to the peer once more
    // (the node would run it on its engine again); the requester keeps the first answer
    Set<String> failed = failingTests(TransportContractTest.class, () -> {
      TransportKit[] kit = new TransportKit[1];
      kit[0] = new TransportKit(t -> new ForwardingTransport(t) {
        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
          CompletableFuture<byte[]> mine = new CompletableFuture<>();
          t.request(to, p, timeout).whenComplete((v, err) -> {
            pass(mine, v, err);
            if (err == null) {
              synchronized (kit[0].net) { // the network's calls use its scheduler under it
                kit[0].sim.schedule(100_000_000L, () -> t.request(to, p, timeout));
              }
            }
          });
          return mine;
        }
      });
      return kit[0];
    });
    assertEquals(Set.of("everyRequestCompletesExactlyOnce"), failed);
  }

  @Test
  void aTransportThatRetriesAFailedRequestIsCaught() {
    // a request that fails for any reason but the transport's close (the peer's handler failed
    // it or refused it, no answer came in time) is sent once more, with the same timeout, as an
    // HTTP client retries a 5xx; the requester gets the second attempt's outcome
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            t.request(to, p, timeout).whenComplete((v, err) -> {
              if (err == null || kind(err) == TransportException.Kind.CLOSED) {
                pass(mine, v, err);
              } else {
                t.request(to, p, timeout).whenComplete((v2, err2) -> pass(mine, v2, err2));
              }
            });
            return mine;
          }
        }));
    assertEquals(Set.of("aRequestThatFailsOrTimesOutReachesItsHandlerOnce"), failed);
  }

  @Test
  void aTransportThatSplitsATimeoutIntoTwoAttemptsIsCaught() {
    // a request gets two attempts of half its timeout each, the second sent when the first had
    // no answer in time: it still fails TIMEOUT at its timeout, never sooner, but the peer was
    // given it twice
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            Duration attempt = timeout.compareTo(Duration.ofDays(1)) > 0 ? timeout
                : timeout.dividedBy(2);
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            t.request(to, p, attempt).whenComplete((v, err) -> {
              if (err != null && kind(err) == TransportException.Kind.TIMEOUT
                  && attempt.compareTo(Duration.ZERO) > 0) {
                t.request(to, p, attempt).whenComplete((v2, err2) -> pass(mine, v2, err2));
              } else {
                pass(mine, v, err);
              }
            });
            return mine;
          }
        }));
    assertEquals(Set.of("aRequestThatFailsOrTimesOutReachesItsHandlerOnce"), failed);
  }

  @Test
  void aTransportWhoseLateAnswerOverwritesTheOutcomeIsCaught() {
    // its own timer and its close fail a request at once, and let the exchange run on (close
    // lets go of the exchanges, refuses calls and drops inbound traffic); the exchange's
    // answer is set with obtrudeValue, so one that comes later is written over the failure
    Set<String> failed = failingTests(TransportContractTest.class, () -> {
      TransportKit[] kit = new TransportKit[1];
      kit[0] = new TransportKit(t -> new ForwardingTransport(t) {
        final Set<CompletableFuture<byte[]>> pending = ConcurrentHashMap.newKeySet();
        volatile boolean closed;

        @Override
        public void start(InboundHandler handler) {
          t.start(new ForwardingHandler(handler) {
            @Override
            public void onMessage(PeerAddress from, byte[] payload) {
              if (!closed) {
                h.onMessage(from, payload);
              }
            }

            @Override
            public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
              return closed ? CompletableFuture.failedFuture(
                  new TransportException(TransportException.Kind.CLOSED, "closed"))
                  : h.onRequest(from, payload);
            }
          });
        }

        @Override
        public void send(PeerAddress to, byte[] payload) {
          if (!closed) {
            t.send(to, payload);
          }
        }

        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
          boolean timed = !timeout.isNegative() && !timeout.isZero()
              && timeout.compareTo(Duration.ofDays(1)) < 0;
          if (closed) {
            return CompletableFuture.failedFuture(
                new TransportException(TransportException.Kind.CLOSED, "closed"));
          }
          if (!timed) { // fails TIMEOUT at once, or waits as long as it can
            return t.request(to, p, timeout);
          }
          CompletableFuture<byte[]> mine = new CompletableFuture<>();
          pending.add(mine);
          mine.whenComplete((v, err) -> pending.remove(mine));
          synchronized (kit[0].net) { // the network's calls use its scheduler under it
            kit[0].sim.schedule(timeout.toNanos(), () -> mine.completeExceptionally(
                new TransportException(TransportException.Kind.TIMEOUT, "no answer in time")));
          }
          t.request(to, p, java.time.temporal.ChronoUnit.FOREVER.getDuration())
              .whenComplete((v, err) -> {
                if (err == null) {
                  mine.obtrudeValue(v);
                } else {
                  pass(mine, v, err);
                }
              });
          return mine;
        }

        @Override
        public void close() {
          closed = true;
          for (CompletableFuture<byte[]> f : pending) {
            f.completeExceptionally(new TransportException(TransportException.Kind.CLOSED,
                "closed"));
          }
        }
      });
      return kit[0];
    });
    assertEquals(Set.of("timeoutIsHonouredAndALateAnswerDoesNotOverrideIt",
        "anAnswerAfterTheRequesterClosedDoesNotOverrideClosed"), failed);
  }

  @Test
  void aTransportWhoseTimerOverwritesAnAnswerIsCaught() {
    // it times a request out on a timer of its own, which the answer does not stop: when the
    // timeout passes, the timer writes TIMEOUT over the answer the request completed with
    Set<String> failed = failingTests(TransportContractTest.class, () -> {
      TransportKit[] kit = new TransportKit[1];
      kit[0] = new TransportKit(t -> new ForwardingTransport(t) {
        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
          if (timeout.isNegative() || timeout.isZero()
              || timeout.compareTo(Duration.ofDays(1)) >= 0) {
            return t.request(to, p, timeout); // fails TIMEOUT at once, or waits as it can
          }
          CompletableFuture<byte[]> mine = new CompletableFuture<>();
          synchronized (kit[0].net) { // the network's calls use its scheduler under it
            kit[0].sim.schedule(timeout.toNanos(), () -> mine.obtrudeException(
                new TransportException(TransportException.Kind.TIMEOUT, "no answer in time")));
          }
          t.request(to, p, java.time.temporal.ChronoUnit.FOREVER.getDuration())
              .whenComplete((v, err) -> pass(mine, v, err));
          return mine;
        }
      });
      return kit[0];
    });
    assertEquals(Set.of("anAnswerGivenInTimeIsNotOverriddenWhenTheTimeoutPasses"), failed);
  }

  /** The kind of a request's failure, or null if it is no {@link TransportException}. */
  private static TransportException.Kind kind(Throwable err) {
    return cause(err) instanceof TransportException te ? te.kind() : null;
  }

  /** {@code err} unwrapped from the {@link CompletionException} a dependent stage wraps it in. */
  private static Throwable cause(Throwable err) {
    return err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
  }

  @Test
  void aTransportWhoseCloseForgetsTheRequestsItHasSentIsCaught() {
    // a request waits 50 ms for its connection before it goes out; close fails the requests
    // still waiting with CLOSED, but forgets those already sent: their futures never complete.
    // Every check that closes while the peer holds a request catches it
    Set<String> failed = failingTests(TransportContractTest.class, () -> {
      TransportKit[] kit = new TransportKit[1];
      kit[0] = new TransportKit(t -> new ForwardingTransport(t) {
        final Set<CompletableFuture<byte[]>> connecting = ConcurrentHashMap.newKeySet();
        volatile boolean closed;

        @Override
        public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
          CompletableFuture<byte[]> mine = new CompletableFuture<>();
          if (closed) {
            mine.completeExceptionally(new io.github.prefixrouter.spi.TransportException(
                io.github.prefixrouter.spi.TransportException.Kind.CLOSED, "closed"));
            return mine;
          }
          connecting.add(mine);
          synchronized (kit[0].net) { // the network's calls use its scheduler under it
            kit[0].sim.schedule(50_000_000L, () -> {
              if (!connecting.remove(mine)) {
                return; // failed by close meanwhile
              }
              t.request(to, p, timeout).whenComplete((v, err) -> {
                if (!closed) {
                  pass(mine, v, err);
                }
              });
            });
          }
          return mine;
        }

        @Override
        public void close() {
          closed = true;
          t.close();
          for (CompletableFuture<byte[]> f : connecting) {
            if (connecting.remove(f)) {
              f.completeExceptionally(new io.github.prefixrouter.spi.TransportException(
                  io.github.prefixrouter.spi.TransportException.Kind.CLOSED, "closed"));
            }
          }
        }
      });
      return kit[0];
    });
    assertEquals(Set.of("closeFailsPendingRequestsWithClosed",
        "closeWithARequestPendingReturnsPromptly",
        "anAnswerAfterTheRequesterClosedDoesNotOverrideClosed",
        "callsFromTheCompletionOfARequestCloseFailedAreRefusedQuietly"), failed);
  }

  @Test
  void aTransportThatRefusesCallsFromARequestsCompletionIsCaught() {
    // a guard against re-entrant calls: while it completes a request's future (and so runs the
    // caller's callbacks), its sends are dropped and its requests fail at once
    Set<String> failed = failingTests(TransportContractTest.class,
        () -> new TransportKit(t -> new ForwardingTransport(t) {
          final ThreadLocal<Boolean> completing = ThreadLocal.withInitial(() -> false);

          @Override
          public void send(PeerAddress to, byte[] payload) {
            if (!completing.get()) {
              t.send(to, payload);
            }
          }

          @Override
          public CompletableFuture<byte[]> request(PeerAddress to, byte[] p, Duration timeout) {
            if (completing.get()) {
              return CompletableFuture.failedFuture(
                  new io.github.prefixrouter.spi.TransportException(
                      io.github.prefixrouter.spi.TransportException.Kind.UNREACHABLE,
                      "re-entrant request refused"));
            }
            CompletableFuture<byte[]> mine = new CompletableFuture<>();
            t.request(to, p, timeout).whenComplete((v, err) -> {
              completing.set(true);
              try {
                pass(mine, v, err);
              } finally {
                completing.set(false);
              }
            });
            return mine;
          }
        }));
    // the request made from the completion of one that close() failed fails UNREACHABLE
    assertEquals(Set.of("callsFromARequestsCompletionWork",
        "callsFromTheCompletionOfARequestCloseFailedAreRefusedQuietly"), failed);
  }

  /**
   * The kit over the in-memory network in real time (the system clock, a scheduler thread of its
   * own), run by a test thread that wakes {@code late} after each wait that runs out, as the
   * thread of a test on a loaded machine may (a garbage collection, other jobs on its core).
   */
  static class LateWakingTransportKit extends TransportContractTest {
    final io.github.prefixrouter.spi.Schedulers.ClosableScheduler timers =
        io.github.prefixrouter.spi.Schedulers.newSingleThread("kit-network");
    final InMemoryNetwork net = new InMemoryNetwork(io.github.prefixrouter.spi.Clock.system(),
        timers, new java.util.SplittableRandom(1));
    final Duration late;

    LateWakingTransportKit(Duration late) {
      this.late = late;
    }

    @Override
    protected Transport createTransport(String nodeId) {
      return net.transport(nodeId);
    }

    @Override
    protected PeerAddress unreachableAddress() {
      return InMemoryNetwork.addressOf("ghost");
    }

    @Override
    protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
      if (super.awaitCondition(condition, max)) {
        return true;
      }
      try {
        Thread.sleep(late.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      return condition.getAsBoolean();
    }
  }

  @Test
  void aTestThreadWakingLateDoesNotFailAWellBehavedTransportForAnEarlyTimeout()
      throws Exception {
    // the check waits half the timeout and then finds the request timed out, as it rightly did
    // meanwhile: the wait took longer than the whole timeout
    LateWakingTransportKit kit = new LateWakingTransportKit(Duration.ofMillis(300));
    Method check = TransportContractTest.class.getDeclaredMethod(
        "timeoutIsHonouredAndALateAnswerDoesNotOverrideIt");
    check.setAccessible(true);
    try {
      check.invoke(kit);
    } catch (InvocationTargetException e) {
      throw new AssertionError("a transport timing its request out on time failed the check: "
          + e.getCause(), e.getCause());
    } finally {
      closeAll(TransportContractTest.class, kit);
      kit.timers.close();
    }
  }
}
