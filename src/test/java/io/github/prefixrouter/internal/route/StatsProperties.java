package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.InFlightLimitException;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.testing.ForwardingEngine;
import io.github.prefixrouter.testing.ForwardingTransport;
import io.github.prefixrouter.testing.InMemoryNetwork;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.DoubleRange;
import net.jqwik.api.constraints.LongRange;

/**
 * The request counters of {@link NodeStats} (requests, answers, tokens, fallbacks, push-back;
 * not the cold placements or the estimated cached tokens, which the clients do not see, nor
 * gossip's) match what happened, in random scenarios of a simulated
 * cluster (lossy links, engines that fail or stall, push-back, transports at their limit of
 * requests in flight to a peer, clients that cancel, streamed
 * requests whose listeners throw or cancel the future they stream to, the answer's own pieces
 * included): the test counts the outcomes
 * itself, from the futures the clients got, the frames each node's transport carried and the
 * runs each engine failed, and compares them with each node's {@code stats()}.
 */
class StatsProperties {

  /** What the test saw of one node. */
  static final class Seen {
    long requests;
    long servedLocally;
    long forwarded;
    long failed;
    long promptTokens;
    long cachedPromptTokens;
    long actualCached;
    long servedForPeers;
    long refusedForPeers;
    long pushedBack;
    final Map<FallbackCause, Long> fallbacks = new EnumMap<>(FallbackCause.class);
    /** Request ids the node's engine failed retryably (the node may then try a peer). */
    final Set<String> localFailed = new HashSet<>();
    final Set<String> localFailedCounted = new HashSet<>();
    /** The futures of the requests submitted here, by id. */
    final Map<String, CompletableFuture<InferenceResponse>> submitted = new LinkedHashMap<>();
    /** The forwards awaiting their answer at the transport, as request id @ peer. */
    final Set<String> pendingForwards = new HashSet<>();
    /** Forwards the node gave up on before the transport answered (a streamed one's timeout). */
    final Set<String> endedByNode = new HashSet<>();
    /** Request ids whose client's listener threw (the node abandons them). */
    final Set<String> listenerThrew = new HashSet<>();

    void fallback(FallbackCause c) {
      fallbacks.merge(c, 1L, Long::sum);
    }
  }

  @Property(tries = 20)
  void everyCounterMatchesWhatHappened(
      @ForAll @LongRange(min = 1, max = 1_000_000) long seed,
      @ForAll @DoubleRange(min = 0, max = 0.3) double loss,
      @ForAll @DoubleRange(min = 0, max = 0.15) double failure,
      @ForAll @DoubleRange(min = 0, max = 0.05) double stall,
      @ForAll @DoubleRange(min = 0, max = 0.2) double cancel,
      @ForAll @DoubleRange(min = 0, max = 0.2) double listenerThrows,
      @ForAll @DoubleRange(min = 0, max = 0.3) double listenerCancels,
      @ForAll @DoubleRange(min = 0, max = 0.2) double inFlightLimit,
      @ForAll("policies") RoutingPolicy policy) {
    SplittableRandom r = new SplittableRandom(seed);
    RouterConfig cfg = RouterConfig.builder().policy(policy).initialPrefillNanosPerToken(200_000)
        .watermarks(1, 3).forwardTimeout(Duration.ofMillis(30), Duration.ofSeconds(5))
        .engineTimeout(Duration.ofSeconds(20)).build();
    Map<String, Seen> seen = new LinkedHashMap<>();
    for (int i = 0; i < 4; i++) {
      seen.put("n" + i, new Seen());
    }
    OracleCluster.Hooks hooks = new OracleCluster.Hooks();
    hooks.engineTweak = b -> b.slots(2).random(new SplittableRandom(seed ^ 0x5EED))
        .failureProbability(failure).stallProbability(stall);
    AtomicInteger engines = new AtomicInteger();
    hooks.engineWrap = e -> {
      Seen s = seen.get("n" + engines.getAndIncrement());
      return new ForwardingEngine(e) {
        @Override
        public CompletableFuture<EngineResult> execute(InferenceRequest q) {
          return delegate.execute(q).whenComplete((res, err) -> {
            Throwable t = err instanceof CompletionException ? err.getCause() : err;
            if (t instanceof EngineException ee && ee.retryable()) {
              s.localFailed.add(q.id());
            }
          });
        }
      };
    };
    AtomicInteger transports = new AtomicInteger();
    SplittableRandom limits = new SplittableRandom(seed ^ 0x11F1);
    hooks.transportWrap = t -> observed(atItsLimit(t, limits, inFlightLimit),
        seen.get("n" + transports.getAndIncrement()));
    OracleCluster c = new OracleCluster(4, cfg, seed, hooks);
    c.net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(2))
        .withJitter(Duration.ofMillis(3)).withLoss(loss).withReorder(0.2));
    c.rttNanos = Duration.ofMillis(4).toNanos();
    c.start();

    int[][] prefixes = new int[4][];
    for (int i = 0; i < prefixes.length; i++) {
      prefixes[i] = OracleCluster.prompt(seed * 31 + i, 160 + 32 * i);
      // each prefix cached at one node: requests for it elsewhere are forwarded there
      // (the engines may fail or stall this run too: a stalled one is cancelled)
      String warm = "warm-n" + i;
      CompletableFuture<EngineResult> w = c.engine("n" + i).execute(
          InferenceRequest.of(warm, OracleCluster.concat(prefixes[i], new int[] {1, 2, 3})));
      c.sim.advanceBy(Duration.ofSeconds(2).toNanos());
      if (!w.isDone()) {
        c.engine("n" + i).cancel(warm);
      }
    }
    List<String> origins = new ArrayList<>();
    List<InferenceRequest> requests = new ArrayList<>();
    List<CompletableFuture<InferenceResponse>> futures = new ArrayList<>();
    for (int i = 0; i < 70; i++) {
      int[] t = OracleCluster.concat(prefixes[r.nextInt(prefixes.length)],
          OracleCluster.prompt(r.nextLong(), 8 + r.nextInt(40)));
      InferenceRequest q = OracleCluster.request("r" + i, t);
      String at = "n" + r.nextInt(4);
      origins.add(at);
      requests.add(q);
      // some clients stream the output; some of their listeners throw (a client gone), some
      // cancel the future they stream to (a client that gives up on any piece, the last too)
      boolean streamed = r.nextInt(3) == 0;
      SplittableRandom lr = new SplittableRandom(r.nextLong());
      List<CompletableFuture<InferenceResponse>> mine = new ArrayList<>();
      CompletableFuture<InferenceResponse> f = !streamed ? c.node(at).submit(q)
          : c.node(at).submit(q, (tokens, text) -> {
            if (lr.nextDouble() < listenerThrows) {
              seen.get(at).listenerThrew.add(q.id());
              throw new IllegalStateException("client gone");
            }
            if (lr.nextDouble() < listenerCancels) {
              mine.get(0).cancel(true);
            }
          });
      mine.add(f);
      futures.add(f);
      seen.get(at).submitted.put(q.id(), f);
      if (r.nextDouble() < cancel) { // the client gives up after a while
        c.sim.schedule(r.nextLong(Duration.ofMillis(300).toNanos()), () -> f.cancel(true));
      }
      c.sim.advanceBy(r.nextLong(Duration.ofMillis(6).toNanos()));
    }
    c.sim.advanceBy(Duration.ofMinutes(30).toNanos());

    for (int i = 0; i < futures.size(); i++) {
      Seen s = seen.get(origins.get(i));
      s.requests++;
      CompletableFuture<InferenceResponse> f = futures.get(i);
      assertEquals(true, f.isDone(), "request " + i + " unanswered");
      if (f.isCompletedExceptionally()) {
        s.failed++;
        continue;
      }
      InferenceResponse resp = f.join();
      int cached = resp.result().cachedPromptTokens();
      if (resp.forwarded()) {
        s.forwarded++;
        if (cached >= 0) {
          s.actualCached += Math.min(cached, requests.get(i).length());
        }
      } else {
        s.servedLocally++;
      }
      int length = requests.get(i).length();
      s.promptTokens += length;
      if (cached >= 0) {
        s.cachedPromptTokens += Math.min(cached, length);
      }
    }
    for (Map.Entry<String, Seen> e : seen.entrySet()) {
      NodeStats st = c.node(e.getKey()).stats();
      Seen s = e.getValue();
      String n = e.getKey() + ": " + st;
      assertEquals(s.requests, st.requests(), "requests of " + n);
      assertEquals(s.servedLocally, st.servedLocally(), "servedLocally of " + n);
      assertEquals(s.forwarded, st.forwarded(), "forwarded of " + n);
      assertEquals(s.failed, st.failed(), "failed of " + n);
      assertEquals(s.promptTokens, st.promptTokens(), "promptTokens of " + n);
      assertEquals(s.cachedPromptTokens, st.cachedPromptTokens(), "cachedPromptTokens of " + n);
      assertEquals(s.actualCached, st.actualCachedTokens(), "actualCachedTokens of " + n);
      assertEquals(s.servedForPeers, st.servedForPeers(), "servedForPeers of " + n);
      assertEquals(s.refusedForPeers, st.refusedForPeers(), "refusedForPeers of " + n);
      assertEquals(s.pushedBack, st.pushedBack(), "pushedBack of " + n);
      for (FallbackCause cause : st.fallbacks().keySet()) {
        assertEquals(s.fallbacks.getOrDefault(cause, 0L), st.fallbacks().get(cause),
            "fallbacks " + cause + " of " + n);
      }
      assertEquals(0, st.inFlight(), "inFlight of " + n);
    }
  }

  /**
   * A transport that refuses a share {@code p} of its requests at once, as the HTTP transport
   * refuses one beyond its limit of requests in flight to the peer: nothing is sent.
   */
  static Transport atItsLimit(Transport t, SplittableRandom r, double p) {
    return new ForwardingTransport(t) {
      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        if (r.nextDouble() < p) {
          return CompletableFuture.failedFuture(
              new InFlightLimitException("requests already in flight to " + to));
        }
        return super.request(to, payload, timeout);
      }
    };
  }

  /**
   * A transport that counts what its node's forwards came back with (the origin's side) and
   * what it answered to its peers' forwards (the serving side).
   */
  static Transport observed(Transport t, Seen s) {
    return new AnswerWatchingTransport(t, (bytes, err) -> {
      ForwardCodec.Message m = bytes == null ? null : decode(bytes);
      if (m instanceof ForwardCodec.Result) {
        s.servedForPeers++;
      } else if (m instanceof ForwardCodec.Busy) {
        s.refusedForPeers++;
      }
    }) {
      @Override
      public void send(PeerAddress to, byte[] payload) {
        // a CANCEL of a forward still awaited at the transport: the client abandoned it, or the
        // node timed it out itself (a streamed forward without output for its timeout, or past
        // its overall bound), and its answer, when it comes, is not the node's business
        if (payload.length > 0 && payload[0] == ForwardCodec.CANCEL
            && decode(payload) instanceof ForwardCodec.Cancel m) {
          String key = m.requestId() + "@" + to.nodeId();
          CompletableFuture<InferenceResponse> f = s.submitted.get(m.requestId());
          if (s.pendingForwards.contains(key) && f != null && !f.isDone()
              && !s.listenerThrew.contains(m.requestId()) && s.endedByNode.add(key)) {
            s.fallback(FallbackCause.TIMEOUT);
          }
        }
        super.send(to, payload);
      }

      @Override
      public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload,
          Duration timeout) {
        String id = ((ForwardCodec.Forward) decode(payload)).requestId();
        if (s.localFailed.contains(id) && s.localFailedCounted.add(id)) {
          s.fallback(FallbackCause.LOCAL_FAILED);
        }
        String key = id + "@" + to.nodeId();
        s.pendingForwards.add(key);
        // the node gets the answer after the test has looked at it
        return super.request(to, payload, timeout).whenComplete((bytes, err) -> {
          s.pendingForwards.remove(key);
          if (s.endedByNode.remove(key)) {
            return; // the node timed it out already
          }
          // null: refused at once, while submit() routed it, before the test registered it
          CompletableFuture<InferenceResponse> f = s.submitted.get(id);
          if (f != null && f.isDone()) {
            return; // cancelled by its client: the node no longer waits for this answer
          }
          if (err != null) {
            Throwable e = err instanceof CompletionException ? err.getCause() : err;
            TransportException.Kind kind = e instanceof TransportException te ? te.kind()
                : TransportException.Kind.UNREACHABLE;
            switch (kind) {
              case TIMEOUT -> s.fallback(FallbackCause.TIMEOUT);
              case BUSY -> {
                if (e instanceof InFlightLimitException) {
                  s.fallback(FallbackCause.IN_FLIGHT_LIMIT); // raised here: no push-back
                } else {
                  s.fallback(FallbackCause.BUSY);
                  s.pushedBack++;
                }
              }
              case PROTOCOL -> s.fallback(FallbackCause.PROTOCOL_ERROR);
              case CLOSED -> s.fallback(FallbackCause.TRANSPORT_CLOSED);
              default -> s.fallback(FallbackCause.UNREACHABLE);
            }
            return;
          }
          ForwardCodec.Message m = decode(bytes);
          if (m instanceof ForwardCodec.Busy) {
            s.fallback(FallbackCause.BUSY);
            s.pushedBack++;
          } else if (m instanceof ForwardCodec.Failed) {
            s.fallback(FallbackCause.PEER_FAILED);
          } else if (!(m instanceof ForwardCodec.Result)) {
            s.fallback(FallbackCause.PROTOCOL_ERROR);
          }
        });
      }
    };
  }

  static ForwardCodec.Message decode(byte[] bytes) {
    try {
      return ForwardCodec.decode(bytes);
    } catch (MalformedMessageException e) {
      return null;
    }
  }

  @Provide
  Arbitrary<RoutingPolicy> policies() {
    return Arbitraries.of(RoutingPolicy.COST_AWARE, RoutingPolicy.LONGEST_PREFIX);
  }
}
