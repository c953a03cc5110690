package io.github.prefixrouter.testing;

import com.google.common.math.LongMath;
import io.github.prefixrouter.internal.Durations;
import io.github.prefixrouter.internal.RecentWarnings;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Scheduler;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.function.BooleanSupplier;
import java.util.random.RandomGenerator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An in-process network of {@link Transport}s for tests and simulations, on an injected clock
 * and scheduler (normally one {@link SimulatedScheduler} for the whole cluster), with seeded,
 * controllable faults per directed link: one-way delay, jitter, loss, duplication, reordering,
 * and partitions; plus crashes of whole nodes.
 *
 * <h2>Model</h2>
 * <ul>
 *   <li>Every message (one-way, request, or answer) crosses a directed link {@code from -> to}
 *       whose {@link Link} settings apply: it is lost with probability {@code loss}, otherwise
 *       delivered after {@code delay + uniform[0, jitter)}, plus, with probability
 *       {@code reorder}, an extra {@code uniform[0, delay + jitter]} so it may overtake or be
 *       overtaken; with probability {@code duplicate} a second copy is delivered independently.
 *       Payloads are copied on send.
 *   <li>A partition between two nodes (one-way or both ways) drops everything on the link.
 *   <li>A request to an address nobody registered, or whose transport is closed or not
 *       started, fails with {@code UNREACHABLE} after a round trip, like a refused connection:
 *       the request crosses the link there, and the refusal comes back over the reverse link,
 *       each with its link's delay and faults (a refusal lost on the way back is a
 *       {@code TIMEOUT}). So is a request to an address where another node's open, started
 *       transport is (a seed or peer list with the wrong id), its refusal naming both ids, and
 *       a message sent there is dropped; either way the sender logs a warning naming both ids,
 *       as the HTTP transport does: once per address and id (each transport remembers the
 *       1,024 pairs seen most recently, and one forgotten warns again), at most 10 such
 *       warnings a minute of the network's clock, the next one logged saying how many were
 *       left out. A transport's {@code close()} is a graceful stop, as
 *       {@code HttpTransport.close()} is: a request its handler holds unanswered then (the
 *       node's process stopping, maybe back at its address already) fails with {@code BUSY}
 *       ("&lt;receiver&gt; is busy: transport closed", what an HTTP sender reports of the 503
 *       that close answers it) a link's delay after the close: the answer travels back over the
 *       reverse link, with its delay and faults (one lost on the way is a {@code TIMEOUT}),
 *       and the handler's later answer is dropped. A process killed or hung is a
 *       {@link #crash}. A message or request is bound to the transport open at its address when it
 *       is sent (if one is), as one sent over a connection to a process is: if that transport
 *       has closed by the time it arrives (its node stopped, and may be back at its address
 *       already), the request fails with {@code UNREACHABLE}, as a reset connection does, its
 *       failure travelling back over the reverse link like a refusal, and a message is
 *       dropped; neither reaches a transport registered at the address since. A request to a
 *       {@link #crash crashed} node (one sent before the crash included, even if the node is
 *       back at its address when it arrives), or lost on the way, simply gets no answer: the
 *       requester sees {@code TIMEOUT}. A duplicated request (a fault the
 *       {@link Transport} contract rules out, which the node copes with) runs the handler
 *       twice; the requester keeps the first answer, and the second counts as dropped, as does
 *       an answer arriving after its request timed out.
 *   <li>A handler's exceptional answer reaches the requester as that {@link TransportException}
 *       if it is one, else as {@code PROTOCOL}; so does a null answer. A request whose timeout
 *       is not positive fails at once with {@code TIMEOUT}; one longer than a long of
 *       nanoseconds waits that long.
 *   <li>Deliveries run as scheduler tasks, never on the sender's thread.
 * </ul>
 * Same seed, same scheduler, same calls: same deliveries. Thread-safe (coarse lock): the
 * transports' calls use the scheduler under the network's lock only, so calls from many threads
 * at once (as a node makes them) are safe on a scheduler that is not thread-safe, such as a
 * {@link SimulatedScheduler}, as long as its tasks do not run meanwhile (one thread advances a
 * simulation). Arguments must not be null.
 */
public final class InMemoryNetwork {

  private static final Logger LOG = LoggerFactory.getLogger(InMemoryNetwork.class);

  /**
   * Address and id pairs remembered by each transport for its warning of another node at an
   * address, as the HTTP transport remembers them.
   */
  private static final int MAX_WRONG_IDS = 1024;
  /** Warnings of another node at an address each transport logs a minute at most. */
  private static final int WARNINGS_PER_MINUTE = 10;

  /**
   * Settings of a directed link. Delay and jitter together must be less than a long of
   * nanoseconds (about 292 years), so that every link the constructor accepts can carry
   * messages; a message whose extra delay from reordering takes it further is scheduled
   * {@link Long#MAX_VALUE} nanoseconds ahead.
   *
   * @param delay one-way base delay
   * @param jitter extra uniform delay in {@code [0, jitter)}
   * @param loss probability that a message is lost, in [0, 1]
   * @param duplicate probability that a message is delivered twice, in [0, 1]
   * @param reorder probability that a message gets an extra random delay, in [0, 1]
   */
  public record Link(Duration delay, Duration jitter, double loss, double duplicate,
      double reorder) {

    /** The bound delay plus jitter stays under: a long of nanoseconds. */
    private static final Duration MAX_DELAY = Duration.ofNanos(Long.MAX_VALUE);

    /** No delay, no faults. */
    public static final Link PERFECT = new Link(Duration.ZERO, Duration.ZERO, 0, 0, 0);

    /**
     * Checks the settings.
     *
     * @param delay one-way base delay, {@code >= 0}
     * @param jitter extra uniform delay bound, {@code >= 0}
     * @param loss loss probability
     * @param duplicate duplication probability
     * @param reorder reordering probability
     * @throws NullPointerException if a duration is null
     * @throws IllegalArgumentException if a duration is negative, if delay plus jitter is not
     *     less than a long of nanoseconds, or if a probability is outside [0, 1]
     */
    public Link {
      Objects.requireNonNull(delay, "delay");
      Objects.requireNonNull(jitter, "jitter");
      if (delay.isNegative() || jitter.isNegative()) {
        throw new IllegalArgumentException("delay and jitter must be >= 0");
      }
      if (delay.compareTo(MAX_DELAY) >= 0 || jitter.compareTo(MAX_DELAY) >= 0
          || delay.plus(jitter).compareTo(MAX_DELAY) >= 0) {
        throw new IllegalArgumentException("delay plus jitter must be less than "
            + Long.MAX_VALUE + " ns (about 292 years), was delay " + delay + ", jitter " + jitter);
      }
      checkProbability("loss", loss);
      checkProbability("duplicate", duplicate);
      checkProbability("reorder", reorder);
    }

    /**
     * A fault-free link.
     *
     * @param delay the one-way delay
     * @return a link with this delay and no jitter or faults
     */
    public static Link delay(Duration delay) {
      return new Link(delay, Duration.ZERO, 0, 0, 0);
    }

    /**
     * This link with another jitter.
     *
     * @param j the jitter bound
     * @return a copy of this link with jitter {@code j}
     */
    public Link withJitter(Duration j) {
      return new Link(delay, j, loss, duplicate, reorder);
    }

    /**
     * This link with another loss probability.
     *
     * @param p the loss probability
     * @return a copy of this link with loss {@code p}
     */
    public Link withLoss(double p) {
      return new Link(delay, jitter, p, duplicate, reorder);
    }

    /**
     * This link with another duplication probability.
     *
     * @param p the duplication probability
     * @return a copy of this link with duplication {@code p}
     */
    public Link withDuplicate(double p) {
      return new Link(delay, jitter, loss, p, reorder);
    }

    /**
     * This link with another reordering probability.
     *
     * @param p the reordering probability
     * @return a copy of this link with reordering {@code p}
     */
    public Link withReorder(double p) {
      return new Link(delay, jitter, loss, duplicate, p);
    }

    private static void checkProbability(String name, double p) {
      if (!(p >= 0.0 && p <= 1.0)) {
        throw new IllegalArgumentException(name + " must be a probability in [0, 1], was " + p);
      }
    }
  }

  private final Clock clock;
  private final Scheduler scheduler;
  private final RandomGenerator random;
  private final Map<String, MemoryTransport> byAddress = new HashMap<>();
  private final Map<Edge, Link> links = new HashMap<>();
  private final Set<Edge> cut = new HashSet<>();
  private final Set<String> crashed = new HashSet<>();
  private Link defaultLink = Link.PERFECT;
  private long sent;
  private long delivered;
  private long dropped;
  private long bytes;
  /** The latest good reading of {@link #clockMillis}. */
  private volatile long latestMillis;

  /**
   * A network on any clock and scheduler.
   *
   * @param clock the cluster's clock
   * @param scheduler the cluster's scheduler
   * @param random the seeded source of every fault decision
   */
  public InMemoryNetwork(Clock clock, Scheduler scheduler, RandomGenerator random) {
    this.clock = Objects.requireNonNull(clock, "clock");
    this.scheduler = Objects.requireNonNull(scheduler, "scheduler");
    this.random = Objects.requireNonNull(random, "random");
  }

  /**
   * A network on a simulated scheduler with faults drawn from {@code seed}.
   *
   * @param sim the cluster's simulated clock and scheduler
   * @param seed the seed of every fault decision
   */
  public InMemoryNetwork(SimulatedScheduler sim, long seed) {
    this(sim, sim, new java.util.SplittableRandom(seed));
  }

  /**
   * The address the in-memory transport of {@code nodeId} has: {@code mem:<nodeId>}.
   *
   * @param nodeId a valid node id
   * @return the node's address on any in-memory network
   */
  public static PeerAddress addressOf(String nodeId) {
    return new PeerAddress(nodeId, "mem:" + nodeId);
  }

  /**
   * Creates and registers the transport of {@code nodeId}, at its address {@link #addressOf}. A
   * node may be registered again after its previous transport was closed (a restart): what was
   * sent to the previous one and is still on its way never reaches the new one.
   *
   * @param nodeId the node's id
   * @return the node's transport, not yet started
   * @throws IllegalStateException if an open transport already has this node id
   */
  public Transport transport(String nodeId) {
    return transport(addressOf(nodeId));
  }

  /**
   * Creates and registers the transport of node {@code address.nodeId()} at
   * {@code address.address()}, any address no open transport has. A node may be registered
   * again after its previous transport was closed (a restart), at another address too, as a
   * process restarted on another host is: requests to its old address are then refused like any
   * to an address nobody listens at. What was sent to the transport an address had before
   * never reaches the one registered there after it.
   *
   * @param address the node's id and the address it listens at
   * @return the node's transport, not yet started
   * @throws IllegalStateException if an open transport already has this node id or this address
   */
  public synchronized Transport transport(PeerAddress address) {
    Objects.requireNonNull(address, "address");
    for (MemoryTransport open : byAddress.values()) {
      if (!open.closed && open.address.nodeId().equals(address.nodeId())) {
        throw new IllegalStateException(
            "node " + address.nodeId() + " already has an open transport");
      }
    }
    MemoryTransport old = byAddress.get(address.address());
    if (old != null && !old.closed) {
      throw new IllegalStateException(
          "address " + address.address() + " already has an open transport");
    }
    MemoryTransport t = new MemoryTransport(address);
    byAddress.put(address.address(), t);
    crashed.remove(address.nodeId());
    return t;
  }

  /**
   * Sets the settings of links without their own.
   *
   * @param link the settings
   */
  public synchronized void setDefaultLink(Link link) {
    this.defaultLink = Objects.requireNonNull(link, "link");
  }

  /**
   * Sets the settings of the directed link {@code from -> to}.
   *
   * @param from the sending node's id
   * @param to the receiving node's id
   * @param link the settings
   */
  public synchronized void setLink(String from, String to, Link link) {
    links.put(new Edge(from, to), Objects.requireNonNull(link, "link"));
  }

  /**
   * Sets both directions between {@code a} and {@code b}.
   *
   * @param a one node's id
   * @param b the other node's id
   * @param link the settings of both directions
   */
  public synchronized void setLinkBothWays(String a, String b, Link link) {
    setLink(a, b, link);
    setLink(b, a, link);
  }

  /**
   * Drops everything from {@code from} to {@code to} until {@link #heal}.
   *
   * @param from the sending node's id
   * @param to the receiving node's id
   */
  public synchronized void partitionOneWay(String from, String to) {
    cut.add(new Edge(from, to));
  }

  /**
   * Drops everything between every node of {@code a} and every node of {@code b}.
   *
   * @param a node ids on one side
   * @param b node ids on the other side
   */
  public synchronized void partition(Set<String> a, Set<String> b) {
    for (String x : a) {
      for (String y : b) {
        cut.add(new Edge(x, y));
        cut.add(new Edge(y, x));
      }
    }
  }

  /** Removes every partition. */
  public synchronized void heal() {
    cut.clear();
  }

  /**
   * Crashes a node (its process killed or hung, or its host lost): from now on nothing it sends
   * leaves and nothing reaches it (requests to it time out, those already on their way to it
   * and those its handler holds too, also once its transport is closed); its transport stays
   * "open" from its own point of view, as a hung process would. Closing a transport without a
   * crash is a graceful stop instead (see the class description). Registering a new transport for the id
   * ({@link #transport}) after closing the old one restarts it: what was sent to the crashed
   * one never reaches the new one, and its requests still get no answer.
   *
   * @param nodeId the node's id
   */
  public synchronized void crash(String nodeId) {
    crashed.add(nodeId);
    for (MemoryTransport t : byAddress.values()) {
      if (!t.closed && t.address.nodeId().equals(nodeId)) {
        t.hasCrashed = true;
      }
    }
  }

  /**
   * The network's clock.
   *
   * @return the clock given at construction
   */
  public Clock clock() {
    return clock;
  }

  /**
   * Messages handed to the network (copies by duplication not counted).
   *
   * @return the count since construction
   */
  public synchronized long messagesSent() {
    return sent;
  }

  /**
   * Messages delivered to a handler or a pending request. A message is counted when it has been
   * handed over (after the handler's call returns). An answer (or a refusal) that finds its
   * request no longer pending is not: one arriving after the request timed out, its caller
   * cancelled its future or its transport closed, or the second answer to a duplicated request,
   * counts as dropped.
   *
   * @return the count since construction
   */
  public synchronized long messagesDelivered() {
    return delivered;
  }

  /**
   * Messages lost, cut by a partition or crash, or addressed to nobody: arriving where no open,
   * started transport of the addressed node is, or after the transport they were sent to
   * closed (a request so refused or reset counts here too; the refusal or reset that travels
   * back is a message of its own); and answers and refusals that arrive
   * when their request is no longer pending (late, cancelled by its caller, or a duplicated
   * request's second answer).
   *
   * @return the count since construction
   */
  public synchronized long messagesDropped() {
    return dropped;
  }

  /**
   * Payload bytes handed to the network.
   *
   * @return the count since construction
   */
  public synchronized long bytesSent() {
    return bytes;
  }

  // ---------------------------------------------------------------- delivery

  /**
   * Schedules {@code delivery} over the link, applying faults. Returns false if the message was
   * dropped at once (lost, partitioned, crashed endpoint). The delivery answers whether anybody
   * took the message; one nobody took counts as dropped.
   */
  private synchronized boolean transmit(String from, String to, int size,
      BooleanSupplier delivery) {
    sent++;
    bytes += size;
    Edge edge = new Edge(from, to);
    if (crashed.contains(from) || crashed.contains(to) || cut.contains(edge)) {
      dropped++;
      return false;
    }
    Link l = links.getOrDefault(edge, defaultLink);
    if (l.loss() > 0 && random.nextDouble() < l.loss()) {
      dropped++;
      return false;
    }
    int copies = l.duplicate() > 0 && random.nextDouble() < l.duplicate() ? 2 : 1;
    for (int c = 0; c < copies; c++) {
      long d = l.delay().toNanos();
      long j = l.jitter().toNanos();
      if (j > 0) {
        d += random.nextLong(j);
      }
      if (l.reorder() > 0 && random.nextDouble() < l.reorder()) {
        // delay + jitter + 1 fits (Link's bound); the sum past the end of time saturates
        long extra = random.nextLong(l.delay().toNanos() + j + 1);
        d = LongMath.saturatedAdd(d, extra);
      }
      scheduler.schedule(d, () -> {
        synchronized (InMemoryNetwork.this) {
          if (crashed.contains(to) || cut.contains(edge)) {
            dropped++;
            return;
          }
        }
        boolean taken = delivery.getAsBoolean();
        synchronized (InMemoryNetwork.this) {
          if (taken) {
            delivered++;
          } else {
            dropped++;
          }
        }
      });
    }
    return true;
  }

  /**
   * The transport open at {@code to}'s address, whatever its node, or null: the incarnation a
   * message or request sent there now is bound to.
   */
  private synchronized MemoryTransport openAt(PeerAddress to) {
    MemoryTransport t = byAddress.get(to.address());
    return t == null || t.closed ? null : t;
  }

  private synchronized MemoryTransport lookup(PeerAddress to) {
    MemoryTransport t = byAddress.get(to.address());
    if (t == null || !t.address.nodeId().equals(to.nodeId())) {
      return null;
    }
    return t;
  }

  /**
   * The id of the node whose open, started transport is at {@code to}'s address if it is not
   * {@code to}'s node, else null: the node there refuses what is addressed to another.
   */
  private synchronized String otherNodeAt(PeerAddress to) {
    MemoryTransport t = byAddress.get(to.address());
    if (t == null || t.closed || t.handler == null || t.address.nodeId().equals(to.nodeId())) {
      return null;
    }
    return t.address.nodeId();
  }

  /**
   * The network's clock in milliseconds, for the bound on warnings; a reading that throws
   * gives the latest good one (0 before any).
   */
  private long clockMillis() {
    try {
      long now = Math.floorDiv(clock.nanoTime(), 1_000_000L);
      latestMillis = now;
      return now;
    } catch (Throwable e) { // a clock shut down, a host's bug: no warning is worth a delivery
      return latestMillis;
    }
  }

  private final class MemoryTransport implements Transport {
    final PeerAddress address;
    volatile InboundHandler handler;
    volatile boolean closed;
    /** Whether its node {@link #crash crashed} while it was open. */
    volatile boolean hasCrashed;
    /** "address expected-id" to the id of the node found there (warned once each). */
    private final RecentWarnings otherNodes =
        new RecentWarnings(MAX_WRONG_IDS, WARNINGS_PER_MINUTE);
    private final Map<Long, Pending> pending = new HashMap<>();
    private long nextId;
    /**
     * The requests delivered to this transport's handler and not answered yet, each with what
     * fails it at its sender should this transport close first (its busy answer), in the order
     * they came.
     */
    private final Map<Long, Runnable> handling = new LinkedHashMap<>();
    private long nextHandling;

    MemoryTransport(PeerAddress address) {
      this.address = address;
    }

    @Override
    public void start(InboundHandler h) {
      Objects.requireNonNull(h, "handler");
      synchronized (this) {
        if (handler != null) {
          throw new IllegalStateException("transport of " + address + " already started");
        }
        if (closed) {
          throw new IllegalStateException("transport of " + address + " is closed");
        }
        handler = h;
      }
    }

    @Override
    public PeerAddress localAddress() {
      return address;
    }

    @Override
    public void send(PeerAddress to, byte[] payload) {
      Objects.requireNonNull(to, "to");
      Objects.requireNonNull(payload, "payload");
      if (closed) {
        return;
      }
      byte[] copy = payload.clone();
      MemoryTransport bound = openAt(to);
      transmit(address.nodeId(), to.nodeId(), copy.length, () -> {
        if (bound != null && (bound.closed || bound.hasCrashed)) {
          // the incarnation it was sent to is gone: lost with its connection, never handed to
          // one registered at the address since
          return false;
        }
        MemoryTransport dest = lookup(to);
        if (dest == null) {
          noteOtherNode(to);
        }
        return dest != null && dest.deliverMessage(address, copy);
      });
    }

    @Override
    public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
      Objects.requireNonNull(to, "to");
      Objects.requireNonNull(payload, "payload");
      Objects.requireNonNull(timeout, "timeout");
      CompletableFuture<byte[]> f = new CompletableFuture<>();
      if (timeout.isNegative() || timeout.isZero()) {
        f.completeExceptionally(new TransportException(TransportException.Kind.TIMEOUT,
            "timeout must be positive, was " + timeout));
        return f;
      }
      // a timer cannot count further than a long of nanoseconds, and nobody waits longer
      long timeoutNanos = Durations.saturatedNanos(timeout);
      long id;
      Pending p;
      synchronized (this) {
        if (closed) {
          f.completeExceptionally(
              new TransportException(TransportException.Kind.CLOSED, "transport is closed"));
          return f;
        }
        id = nextId++;
        p = new Pending(f);
        pending.put(id, p);
      }
      // under the network's lock, as every use of the scheduler by a call is: a simulated
      // scheduler is not thread-safe, and the node calls its transport from many threads
      synchronized (InMemoryNetwork.this) {
        p.timer = scheduler.schedule(timeoutNanos, () -> fail(id,
            new TransportException(TransportException.Kind.TIMEOUT,
                "no answer from " + to + " within " + timeout)));
      }
      // a request whose future the caller cancels is let go of, as of a failed one: its timer
      // and its entry go now, not at its timeout, and an answer arriving later is dropped
      f.whenComplete((bytes, err) -> {
        if (f.isCancelled()) {
          letGo(id);
        }
      });
      byte[] copy = payload.clone();
      String from = address.nodeId();
      synchronized (this) {
        if (pending.get(id) != p) {
          // a close() on another thread since the entry was made has failed the request, maybe
          // before its timer was set (or, on a real scheduler, the timer has already fired):
          // nothing is sent and no timer stays behind. The check and the send are under this
          // lock, which close() takes first, so that a close() comes wholly before the send or
          // after it (the network's lock is only ever taken inside this one, never around it)
          synchronized (InMemoryNetwork.this) {
            p.timer.cancel();
          }
          return f;
        }
        transmitRequest(id, to, from, copy);
      }
      return f;
    }

    /** Sends a registered request, whose answer or refusal completes its entry. */
    private void transmitRequest(long id, PeerAddress to, String from, byte[] copy) {
      MemoryTransport bound = openAt(to);
      transmit(from, to.nodeId(), copy.length, () -> {
        if (bound != null && bound.hasCrashed) {
          return false; // sent to an incarnation that crashed since: no answer ever comes
        }
        if (bound != null && bound.closed) {
          // sent to an incarnation that closed since (maybe back at its address already): its
          // connection is reset, never handed to the new one; the failure travels back over
          // the reverse link
          transmit(to.nodeId(), from, 0, () -> fail(id, new TransportException(
              TransportException.Kind.UNREACHABLE, "the connection to " + to + " was reset: its"
                  + " transport closed before the request arrived")));
          return false;
        }
        MemoryTransport dest = lookup(to);
        // if the receiver closes before it answers (its process stopping, maybe back at its
        // address already), it answers the request busy, as HttpTransport.close() answers 503:
        // the answer travels back over the reverse link
        long key = dest == null ? -1 : dest.handle(() -> transmit(to.nodeId(), from, 0,
            () -> fail(id, new TransportException(TransportException.Kind.BUSY,
                to + " is busy: transport closed"))));
        if (key < 0) {
          // connection refused: the refusal travels back over the reverse link
          String other = dest == null ? noteOtherNode(to) : null;
          transmit(to.nodeId(), from, 0, () -> fail(id, new TransportException(
              TransportException.Kind.UNREACHABLE, other != null
                  ? "the node at " + to.address() + " is " + other + ", not " + to.nodeId()
                  : "nobody listens at " + to)));
          return false;
        }
        CompletableFuture<byte[]> answer;
        try {
          answer = dest.handler.onRequest(address, copy);
        } catch (Throwable e) { // an Error, a checked exception thrown undeclared too
          answer = CompletableFuture.failedFuture(e);
        }
        if (answer == null) {
          answer = CompletableFuture.failedFuture(new TransportException(
              TransportException.Kind.PROTOCOL, "handler returned no answer"));
        }
        answer.whenComplete((bytes, err) -> {
          if (!dest.handled(key)) { // closed first: its busy answer went back instead
            return;
          }
          byte[] back = bytes == null ? null : bytes.clone();
          // taken only by a request still pending: an answer arriving after its request timed
          // out (or was closed), or a duplicated request's second answer, is dropped
          transmit(to.nodeId(), from, back == null ? 0 : back.length, () -> {
            if (err == null && back == null) {
              return fail(id, new TransportException(TransportException.Kind.PROTOCOL,
                  "peer's handler answered null"));
            } else if (err != null) {
              Throwable t = err instanceof java.util.concurrent.CompletionException
                  && err.getCause() != null ? err.getCause() : err;
              return fail(id, t instanceof TransportException te ? te
                  : new TransportException(TransportException.Kind.PROTOCOL,
                      "peer failed the request: " + t, t));
            } else {
              return succeed(id, back);
            }
          });
        });
        return true;
      });
    }

    /**
     * If another node's transport listens at {@code to}'s address (a seed or peer list with the
     * wrong id: everything sent to it is refused), logs a warning naming both ids, once per
     * address and id, at most {@link #WARNINGS_PER_MINUTE} a minute, as the HTTP transport
     * does.
     *
     * @return the id of the node there, or null if none other listens there
     */
    private String noteOtherNode(PeerAddress to) {
      String other = otherNodeAt(to);
      if (other == null) {
        return null;
      }
      long leftOut = otherNodes.admit(to.address() + " " + to.nodeId(), other, clockMillis());
      if (leftOut >= 0) {
        LOG.warn("{}: the node at {} is {}, not {}; messages to {} are refused there (check the "
            + "seeds or peer list){}", address.nodeId(), to.address(), other, to.nodeId(),
            to.nodeId(), leftOut == 0 ? "" : " (" + leftOut + " more such warnings left out "
            + "before this one, above " + WARNINGS_PER_MINUTE + " a minute)");
      }
      return other;
    }

    /**
     * Takes a request to hand to the handler, with what fails it at its sender should this
     * transport close before its answer; -1 if it is closed or not started (the request is
     * refused).
     */
    private synchronized long handle(Runnable onClose) {
      if (closed || handler == null) {
        return -1;
      }
      long key = nextHandling++;
      handling.put(key, onClose);
      return key;
    }

    /** Whether the request taken as {@code key} may be answered: false once this closed. */
    private synchronized boolean handled(long key) {
      return handling.remove(key) != null;
    }

    /** Hands a message to the handler; false if this transport is closed or not started. */
    private boolean deliverMessage(PeerAddress from, byte[] payload) {
      InboundHandler h = handler;
      if (closed || h == null) {
        return false;
      }
      try {
        h.onMessage(from, payload);
      } catch (Throwable e) { // an Error, a checked exception thrown undeclared too
        // a handler must not throw; the network drops the message like a real one would
      }
      return true;
    }

    /** Completes a pending request; false if it is no longer pending (nothing took it). */
    private boolean succeed(long id, byte[] value) {
      Pending p;
      synchronized (this) {
        p = pending.remove(id);
      }
      if (p != null) {
        Scheduler.Cancellable timer = p.timer;
        if (timer != null) {
          timer.cancel();
        }
        p.future.complete(value);
      }
      return p != null;
    }

    /** Forgets a request its caller cancelled: its entry and its timeout timer. */
    private void letGo(long id) {
      Pending p;
      synchronized (this) {
        p = pending.remove(id);
      }
      if (p != null && p.timer != null) {
        synchronized (InMemoryNetwork.this) {
          p.timer.cancel();
        }
      }
    }

    /** Fails a pending request; false if it is no longer pending (nothing took it). */
    private boolean fail(long id, Throwable t) {
      Pending p;
      synchronized (this) {
        p = pending.remove(id);
      }
      if (p != null) {
        if (p.timer != null) {
          p.timer.cancel();
        }
        p.future.completeExceptionally(t);
      }
      return p != null;
    }

    @Override
    public void close() {
      Map<Long, Pending> toFail;
      List<Runnable> busy;
      synchronized (this) {
        if (closed) {
          return;
        }
        closed = true;
        toFail = new HashMap<>(pending);
        pending.clear();
        busy = new ArrayList<>(handling.values());
        handling.clear();
      }
      synchronized (InMemoryNetwork.this) {
        for (Pending p : toFail.values()) {
          if (p.timer != null) {
            p.timer.cancel();
          }
        }
      }
      for (Iterator<Pending> it = toFail.values().iterator(); it.hasNext(); ) {
        it.next().future.completeExceptionally(
            new TransportException(TransportException.Kind.CLOSED, "transport closed"));
      }
      // the requests its handler had not answered: answered busy, in the order they came
      busy.forEach(Runnable::run);
    }
  }

  /**
   * The directed link {@code from -> to}, by its two node ids: node ids may hold any printable
   * character, {@code "->"} too, so no string joining them names one link only.
   */
  private record Edge(String from, String to) {}

  private static final class Pending {
    final CompletableFuture<byte[]> future;
    volatile Scheduler.Cancellable timer;

    Pending(CompletableFuture<byte[]> future) {
      this.future = future;
    }
  }
}
