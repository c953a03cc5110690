package io.github.prefixrouter.engine.vllm;

import io.github.prefixrouter.internal.zmq.ZmtpEndpoint;
import io.github.prefixrouter.internal.zmq.ZmtpOptions;
import io.github.prefixrouter.internal.zmq.ZmtpProtocolException;
import io.github.prefixrouter.internal.zmq.ZmtpSocket;
import io.github.prefixrouter.spi.CacheEventListener;
import java.io.IOException;
import java.net.InetAddress;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import java.util.random.RandomGenerator;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads vLLM's KV-cache events from its ZeroMQ publisher ({@code vllm serve ...
 * --kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq", ...}'}) and hands
 * them, in order, to a {@link VllmKvEventReceiver} (or, in tests, another sink). Speaks ZMTP
 * 3.0 itself: no ZeroMQ library is needed.
 *
 * <p><b>One thread.</b> {@link #start()} creates exactly one thread, with the builder's {@link
 * Builder#threadFactory ThreadFactory} (by default a daemon thread named {@code
 * prefix-router-kv-events}). It is the adapter's only thread: it connects, reads, replays and
 * calls the sink, so the sink is never called from two threads at once. {@link #close()} stops
 * it promptly (it closes the connection the thread is blocked on) and waits for it to end,
 * except while it looks up the publisher's host name: the JDK's lookup cannot be interrupted
 * and may take as long as the system's resolver does (tens of seconds for a name server that
 * does not answer), so {@code close()} returns at once, and the thread ends by itself when the
 * lookup returns, without connecting and without calling the sink again.
 *
 * <p><b>The stream.</b> The thread connects a SUB socket to the publisher's endpoint,
 * subscribes to the topic and reads messages of three frames: the topic (exactly the
 * configured one, others being counted and ignored; any topic when the configured one is empty,
 * the default), an 8-byte big-endian sequence number and
 * the msgpack payload, which this class does not look into. A message of another shape is
 * counted as malformed and dropped. When the connection breaks (the publisher restarted, the
 * network failed, the peer broke the protocol or a limit), it is counted and made again after
 * a backoff that doubles from the minimum to the maximum and restarts at the minimum after a
 * successful handshake (with {@link Builder#jitter} each wait is drawn from the upper half of
 * the current backoff). A broken connection starts the stream over at once ({@link
 * VllmKvEventReceiver#reset()}: the mirror is cleared), because the messages published until
 * the next connection are lost, and a publisher that restarted with an empty cache may
 * continue at the very sequence number expected. A connection that stays open but delivers
 * nothing while the engine serves (its peer gone without a reset, a firewall dropping the flow)
 * is dropped and made again the same way, once the engine has completed {@link
 * Builder#silenceLimit enough requests} that store a block since the last message (the adapter
 * reports them to {@link #requestCompleted}).
 *
 * <p><b>Replay.</b> A message whose sequence number is above the sink's {@link
 * KvEventSink#nextSeq()} means messages were lost (the publisher drops messages for a slow
 * subscriber, and everything published while disconnected is lost). With a replay endpoint
 * configured, the thread then opens a DEALER connection to it, asks for everything from {@code
 * nextSeq()} on, passes each replayed message before the live one to {@link
 * KvEventSink#onReplayed}, stops at vLLM's end marker (sequence number -1) or at the live
 * message's sequence number, closes the connection, and then passes the live message (no
 * replay is asked for a live number above {@link VllmKvEventReceiver#MAX_SEQ}, which the sink
 * drops as malformed whatever comes before it). vLLM keeps a bounded buffer, so a replay may
 * start after the first missing message, or fail; either way the live message follows and the
 * sink decides what a remaining gap means. After a failed replay, gaps go to the sink without a
 * replay (as after a failed one) for the {@link Builder#replayBackoff replay backoff}, which
 * doubles from its minimum to its maximum with each failed replay and restarts at the minimum
 * after a replay that succeeds: a replay endpoint that does not answer, or answers slowly,
 * would otherwise hold the live stream on every gap, and under sustained loss keep the
 * subscriber behind the publisher for good. The replay endpoint's host name is looked up at the
 * first replay of each live connection and the address kept until a replay cannot connect to
 * it: the lookup counts in the replay's time limit but cannot be cut short, so a slow name
 * server holds the live stream once per connection (and after such a failure), not on every
 * replay.
 *
 * <p><b>Failures never stop the thread:</b> an exception or {@link Error} from the sink (the
 * receiver's decoder running out of heap on a large batch, say) is logged and counted, and the
 * next message is read. An {@link Error} or unchecked exception while connecting or reading
 * (the heap running out while a large message is read, say) is logged and taken as a failed
 * connection, a broken one (the sink is reset) or a failed replay, as an I/O error there is.
 * See {@link Stats} for the counters.
 */
public final class VllmKvEventSubscriber implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(VllmKvEventSubscriber.class);

  /** The name of the default reader thread. */
  public static final String THREAD_NAME = "prefix-router-kv-events";

  /** The frames of every message: topic, sequence number, payload. */
  static final int FRAMES = 3;

  /** The sequence number of vLLM's end-of-replay marker. */
  static final long END_OF_REPLAY = -1;

  private static final long JOIN_MILLIS = 10_000;
  private static final long JOIN_STEP_MILLIS = 10;

  /** A replay as a whole ends after this many replay timeouts (the live stream waits). */
  static final int REPLAY_STEPS = 8;

  private final ZmtpEndpoint endpoint;
  private final ZmtpEndpoint replayEndpoint;
  private final byte[] topic;
  private final String topicName;
  private final KvEventSink sink;
  /** The sink when it is the library's receiver (always, outside this package's tests). */
  private final VllmKvEventReceiver receiver;
  private final ThreadFactory threadFactory;
  private final long minBackoffNanos;
  private final long maxBackoffNanos;
  private final RandomGenerator jitter;
  private final ZmtpOptions liveOptions;
  private final ZmtpOptions replayOptions;
  private final long replayTimeoutNanos;
  private final long minReplayBackoffNanos;
  private final long maxReplayBackoffNanos;
  /** Tokens per block, for telling which completed requests store one (1 if not given). */
  private final int blockSize;
  /** Requests storing a block after which a silent connection is dropped; 0: never. */
  private final int silenceRequests;
  private final long silenceNanos;
  /** {@link System#nanoTime()}, or the test's clock: times the silence only. */
  private final LongSupplier clock;
  /** Replay timeouts a replay may take in all: {@link #REPLAY_STEPS}, or fewer in tests. */
  private final int replaySteps;

  /** Guards the silence check's state below, shared by the reader and the request threads. */
  private final Object silenceLock = new Object();
  /** The established live connection, null while there is none. Guarded by silenceLock. */
  private ZmtpSocket watched;
  /** When the last message arrived, or the connection was made. Guarded by silenceLock. */
  private long quietSince;
  /** Requests storing a block completed since then. Guarded by silenceLock. */
  private long requestsSince;
  /** Set while the reader replays a gap: the check holds. Guarded by silenceLock. */
  private boolean replaying;
  /** Set when {@link #requestCompleted} dropped {@link #watched}. Guarded by silenceLock. */
  private boolean silenceDrop;
  /** The counts that made the drop, for the reader's warning. Guarded by silenceLock. */
  private long droppedAfterRequests;
  private long droppedAfterNanos;
  /** Silence drops in a row without a message between them (for the log). Reader's only. */
  private long silentInARow;

  private final AtomicLong connects = new AtomicLong();
  private final AtomicLong connectFailures = new AtomicLong();
  private final AtomicLong disconnects = new AtomicLong();
  private final AtomicLong messages = new AtomicLong();
  private final AtomicLong malformedMessages = new AtomicLong();
  private final AtomicLong otherTopicMessages = new AtomicLong();
  private final AtomicLong replaysRequested = new AtomicLong();
  private final AtomicLong replayedMessages = new AtomicLong();
  private final AtomicLong replayFailures = new AtomicLong();
  private final AtomicLong replaysSkipped = new AtomicLong();
  private final AtomicLong sinkFailures = new AtomicLong();
  private final AtomicLong silenceReconnects = new AtomicLong();

  private final CountDownLatch closing = new CountDownLatch(1);
  private volatile boolean closed;
  private volatile ZmtpSocket live;
  private volatile ZmtpSocket replay;
  /** True while the thread looks up a host name (which cannot be interrupted). */
  private volatile boolean resolving;
  private final HostResolver resolver;
  private Thread thread; // guarded by this
  /** Errors and unchecked exceptions the reader thread took on its connections (for its log). */
  private long readerFailures; // the reader thread's only
  /** The current replay backoff, 0 after a replay that succeeded. The reader thread's only. */
  private long replayBackoffNanos;
  /** Gaps before this ({@link System#nanoTime()}) get no replay. The reader thread's only. */
  private long replaysResumeAt;
  /**
   * The replay endpoint's address, looked up at the first replay of a live connection and
   * forgotten when a replay cannot connect to it or the live connection is made again (null
   * meanwhile). The reader thread's only.
   */
  private InetAddress replayAddress;

  private VllmKvEventSubscriber(Builder b, KvEventSink sink) {
    this.endpoint = b.endpoint;
    this.replayEndpoint = b.replayEndpoint;
    this.topicName = b.topic;
    this.topic = b.topic.getBytes(StandardCharsets.UTF_8);
    this.sink = sink;
    this.receiver = sink instanceof VllmKvEventReceiver r ? r : null;
    this.threadFactory = b.threadFactory;
    this.resolver = b.resolver;
    this.minBackoffNanos = b.minBackoff.toNanos();
    this.maxBackoffNanos = b.maxBackoff.toNanos();
    this.jitter = b.jitter;
    this.liveOptions =
        new ZmtpOptions(
            b.connectTimeout,
            b.handshakeTimeout,
            b.readTimeout,
            b.idleTimeout,
            b.maxMessageBytes,
            b.maxFrames);
    this.replayTimeoutNanos = b.replayTimeout.toNanos();
    this.minReplayBackoffNanos = b.minReplayBackoff.toNanos();
    this.maxReplayBackoffNanos = b.maxReplayBackoff.toNanos();
    this.blockSize = Math.max(1, b.blockSize);
    this.silenceRequests = b.silenceRequests;
    this.silenceNanos = b.silenceTime.toNanos();
    this.clock = b.clock;
    this.replaySteps = b.replaySteps;
    this.replayOptions =
        new ZmtpOptions(
            b.replayTimeout,
            b.replayTimeout,
            b.replayTimeout,
            b.replayTimeout,
            b.maxMessageBytes,
            b.maxFrames);
  }

  /**
   * A builder; the endpoint and either a listener with the block size (hosts) or a sink (tests)
   * are required.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  /**
   * Starts the reader thread.
   *
   * @throws IllegalStateException if already started or closed, or if the thread factory
   *     returns null
   */
  public synchronized void start() {
    if (closed) {
      throw new IllegalStateException("closed");
    }
    if (thread != null) {
      throw new IllegalStateException("already started");
    }
    Thread t = threadFactory.newThread(this::run);
    if (t == null) {
      throw new IllegalStateException("the thread factory returned no thread");
    }
    thread = t;
    t.start();
  }

  /**
   * Stops the reader thread: closes its connections, and waits (up to 10 seconds) for it to end,
   * unless called from that thread or the thread is looking up a host name (which cannot be
   * interrupted, and may take as long as the system's resolver does): such a thread ends by
   * itself when the lookup returns, without connecting and without calling the sink again.
   * Idempotent.
   */
  @Override
  public void close() {
    Thread t;
    synchronized (this) {
      closed = true;
      t = thread;
    }
    closing.countDown();
    closeQuietly(live);
    closeQuietly(replay);
    if (t != null && t != Thread.currentThread()) {
      long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(JOIN_MILLIS);
      try {
        // in short steps, to see the thread enter a name lookup: it is not waited for (see
        // connect), since a resolver that does not answer would hold close() for as long
        while (t.isAlive() && !resolving && end - System.nanoTime() > 0) {
          t.join(JOIN_STEP_MILLIS);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      }
      if (t.isAlive() && resolving) {
        log.debug("left the KV-event reader thread {} in a host name lookup; it ends when the "
            + "lookup returns", t.getName());
      } else if (t.isAlive()) {
        log.warn("the KV-event reader thread {} did not stop within {} ms (blocked in the sink?)",
            t.getName(), JOIN_MILLIS);
      }
    }
  }

  /**
   * The counters so far.
   *
   * @return a snapshot of the subscriber's counters
   */
  public Stats stats() {
    return new Stats(
        connects.get(),
        connectFailures.get(),
        disconnects.get(),
        messages.get(),
        malformedMessages.get(),
        otherTopicMessages.get(),
        replaysRequested.get(),
        replayedMessages.get(),
        replayFailures.get(),
        replaysSkipped.get(),
        sinkFailures.get(),
        silenceReconnects.get());
  }

  /**
   * Tells the subscriber that its engine completed a request, so that it notices a connection
   * that has silently stopped delivering while the engine keeps serving ({@link
   * Builder#silenceLimit}). The engine adapter calls it for each request the server answered
   * in full ({@code OpenAiCompatibleEngine} does); a host's own adapter may too. It counts only
   * requests that made vLLM store a block, and so publish an event: those whose computed tokens
   * (the prompt and the output, but the last output token, whose KV is never computed) fill more
   * whole blocks than the prefix cache served; with {@code cachedPromptTokens} unknown, the
   * request is not counted (a long cached prefix with a short new suffix and output stores
   * nothing, and could not be told from one that stores blocks). vLLM computes a prompt's last
   * token again even when it is cached, so a prompt of whole blocks that reports one block fewer
   * cached is taken as wholly cached.
   *
   * <p>Once {@code silenceLimit}'s requests have been counted since the last message arrived (or
   * the connection was made) and its time has passed, this call closes the connection (on the
   * calling thread; it takes a lock shared with the reader thread for a few instructions): the
   * reader thread counts it in {@link Stats#silenceReconnects()}, logs a warning and reconnects
   * as after any lost connection. Cheap otherwise; does nothing while not connected or while
   * the reader replays a gap, and nothing with the check off.
   *
   * @param promptTokens the prompt's tokens the engine processed
   * @param outputTokens the tokens it generated; 0 if not known
   * @param cachedPromptTokens of the prompt's tokens, those its prefix cache served, or -1 if
   *     the engine does not report it (the request is then not counted)
   */
  public void requestCompleted(int promptTokens, int outputTokens, int cachedPromptTokens) {
    if (silenceRequests == 0
        || !storesABlock(blockSize, promptTokens, outputTokens, cachedPromptTokens)) {
      return;
    }
    ZmtpSocket drop;
    synchronized (silenceLock) {
      if (watched == null || silenceDrop || replaying) {
        return;
      }
      long n = ++requestsSince;
      long quiet = clock.getAsLong() - quietSince;
      if (n < silenceRequests || quiet < silenceNanos) {
        return;
      }
      silenceDrop = true;
      droppedAfterRequests = n;
      droppedAfterNanos = quiet;
      drop = watched;
      watched = null;
    }
    silenceReconnects.incrementAndGet();
    drop.close(); // the reader thread, blocked on it, takes it as lost
  }

  /**
   * Whether a request of these counts made an engine of {@code blockSize}-token blocks store at
   * least one block (see {@link #requestCompleted}).
   */
  static boolean storesABlock(int blockSize, int promptTokens, int outputTokens,
      int cachedPromptTokens) {
    if (promptTokens <= 0 || cachedPromptTokens < 0) {
      return false;
    }
    long computed = (long) promptTokens + Math.max(outputTokens, 1) - 1;
    long full = computed / blockSize;
    long cachedBlocks = cachedPromptTokens / blockSize;
    if (promptTokens % blockSize == 0
        && cachedBlocks == promptTokens / blockSize - 1) {
      cachedBlocks++; // its last block computed again, as a cached prompt's always is
    }
    return full > cachedBlocks;
  }


  /**
   * The counters of the receiver that decodes the messages and applies them to the listener
   * (batches and events applied, malformed batches, gaps, restarts, block-size mismatches).
   *
   * @return the receiver's counters so far
   */
  public VllmKvEventReceiver.Stats receiverStats() {
    if (receiver == null) {
      throw new IllegalStateException("built with a sink of its own, not a receiver");
    }
    return receiver.stats();
  }

  /**
   * The subscriber's counters.
   *
   * @param connects connections to the publisher whose handshake completed
   * @param connectFailures attempts that failed before the handshake completed (refused,
   *     timed out, or a peer that is not a ZMTP 3 publisher)
   * @param disconnects established connections that broke (not counting {@link #close()})
   * @param messages well-formed messages of the topic received live
   * @param malformedMessages live messages dropped for their shape (not 3 frames, or a
   *     sequence number frame that is not 8 bytes); a sequence number no message can follow
   *     (negative, or {@code Long.MAX_VALUE}) is passed on for the sink to drop (the receiver
   *     counts it in {@link VllmKvEventReceiver.Stats#malformedBatches()} and clears)
   * @param otherTopicMessages live messages of another topic that the publisher let through
   *     (a topic starting with ours, when ours is not empty), ignored
   * @param replaysRequested replays asked for, after a gap in the sequence numbers
   * @param replayedMessages messages received by replay and passed to the sink
   * @param replayFailures replays that failed (no connection, timeout, malformed answer, an
   *     {@link Error} or unchecked exception while replaying)
   * @param replaysSkipped gaps that got no replay because a replay had failed within the
   *     {@link Builder#replayBackoff replay backoff}; the live message went to the sink as it is
   * @param sinkFailures exceptions and {@link Error}s thrown by the sink, logged and ignored
   * @param silenceReconnects connections dropped and made again because no message had
   *     arrived while the engine completed requests that store blocks ({@link
   *     Builder#silenceLimit}); each is counted in {@code disconnects} too
   */
  public record Stats(
      long connects,
      long connectFailures,
      long disconnects,
      long messages,
      long malformedMessages,
      long otherTopicMessages,
      long replaysRequested,
      long replayedMessages,
      long replayFailures,
      long replaysSkipped,
      long sinkFailures,
      long silenceReconnects) {}

  @Override
  public String toString() {
    return "VllmKvEventSubscriber{" + endpoint + ", topic=" + topicName
        + (replayEndpoint == null ? "" : ", replay=" + replayEndpoint) + "}";
  }

  // ---- the reader thread ----

  private void run() {
    long backoff = minBackoffNanos;
    boolean failing = false;
    // connections lost in a row without a message: a publisher closing every connection after
    // its handshake is reconnected at the minimum backoff (one breaking the protocol or a limit
    // on each, ever more slowly), and logged only at the 1st, 2nd, 4th, 8th... loss of the run
    long quietLosses = 0;
    while (!closed) {
      ZmtpSocket s = new ZmtpSocket(ZmtpSocket.Type.SUB, liveOptions);
      live = s;
      replayAddress = null; // vLLM may have restarted elsewhere: looked up again
      if (closed) {
        s.close();
        break;
      }
      boolean established = false;
      boolean received = false;
      long messagesBefore = messages.get();
      try {
        connect(s, resolve(endpoint.host()), endpoint.port());
        s.subscribe(topic);
        established = true;
        synchronized (silenceLock) {
          watched = s;
          quietSince = clock.getAsLong();
          requestsSince = 0;
          silenceDrop = false;
        }
        connects.incrementAndGet();
        failing = false;
        if (Long.bitCount(quietLosses) <= 1) { // the first, or after a loss that was logged
          log.info("connected to vLLM's KV-event publisher at {} (topic '{}')", endpoint,
              topicName);
        } else {
          log.debug("connected to {} again", endpoint);
        }
        while (!closed) {
          List<byte[]> message = s.receive();
          received = true;
          if (silenceRequests > 0) {
            synchronized (silenceLock) {
              quietSince = clock.getAsLong();
              requestsSince = 0;
            }
          }
          silentInARow = 0;
          handle(message);
        }
      } catch (IOException | RuntimeException | Error e) {
        // an Error (the heap running out while a message of up to maxMessageBytes is read, say)
        // or an unchecked exception breaks this connection, not the thread: ended, nothing would
        // reach the sink again, nothing would reconnect and the mirror would stay as it is
        boolean silent;
        long silentRequests;
        long silentNanos;
        synchronized (silenceLock) {
          silent = silenceDrop;
          silentRequests = droppedAfterRequests;
          silentNanos = droppedAfterNanos;
          silenceDrop = false;
          watched = null;
        }
        if (!(e instanceof IOException) && !silent) {
          readerFailed("its connection to " + endpoint, e);
        }
        if (closed) {
          break;
        }
        if (established && !refusedBeforeAMessage(e, silent, messages.get() > messagesBefore)) {
          // the publisher worked (or may have: it went away, or went silent): the backoff
          // starts over
          backoff = minBackoffNanos;
        }
        long wait = delay(backoff);
        if (established && silent) {
          disconnects.incrementAndGet();
          resetSink(); // as after any lost connection: what was published meanwhile is lost
          quietLosses = received ? 1 : quietLosses + 1;
          silentInARow++;
          String what = "no KV-event message from {} {} ({} s) while the engine completed {} "
              + "requests that store blocks: taken as a dead connection, dropped, the mirror "
              + "cleared; reconnecting in {} ms ({} drop(s) for silence in a row)";
          Object[] args = {endpoint, received ? "since the last one" : "since connecting",
              TimeUnit.NANOSECONDS.toSeconds(silentNanos), silentRequests,
              TimeUnit.NANOSECONDS.toMillis(wait), silentInARow};
          if (VllmKvEventReceiver.logNow(silentInARow)) {
            log.warn(what, args);
          } else {
            log.debug(what, args);
          }
        } else if (established) {
          disconnects.incrementAndGet();
          // the messages published from now until a new connection are lost (removals among
          // them), and the publisher may restart with an empty cache and lose exactly as many
          // messages as this stream had seen, which sequence numbers cannot show: the sink
          // starts over now, not when (or if) the connection is made again
          resetSink();
          quietLosses = received ? 1 : quietLosses + 1;
          if (VllmKvEventReceiver.logNow(quietLosses)) {
            log.warn("KV-event connection to {} lost ({}); reconnecting in {} ms ({} lost in a "
                + "row without a message)", endpoint, e.toString(),
                TimeUnit.NANOSECONDS.toMillis(wait), quietLosses);
          } else {
            log.debug("KV-event connection to {} lost ({}), {} in a row", endpoint, e.toString(),
                quietLosses);
          }
        } else {
          connectFailures.incrementAndGet();
          if (!failing) {
            log.warn("cannot connect to vLLM's KV-event publisher at {} ({}); retrying",
                endpoint, e.toString());
          } else {
            log.debug("cannot connect to {} ({}); retrying in {} ms",
                endpoint, e.toString(), TimeUnit.NANOSECONDS.toMillis(wait));
          }
          failing = true;
        }
        s.close();
        try {
          if (closing.await(wait, TimeUnit.NANOSECONDS)) {
            break;
          }
        } catch (InterruptedException ie) {
          break; // the thread's owner wants it to end
        }
        backoff = Math.min(maxBackoffNanos, backoff * 2);
      } finally {
        s.close();
        live = null;
      }
    }
    log.debug("KV-event reader for {} stopped", endpoint);
  }

  /**
   * Whether an established connection ended as one the publisher refuses: in a protocol or
   * limit error (a message too large or of too many frames, reserved flags, bad framing), or an
   * {@link Error} or unchecked exception while reading (the heap running out on a message, say),
   * before any message of the topic was taken. The backoff then goes on doubling, as after a
   * failed connect: it used to start over at every handshake, and a publisher (or a proxy)
   * whose first message always broke a limit was reconnected at the minimum backoff for ever,
   * the mirror cleared and a loss logged each time. A connection that delivered a message, or
   * that ended otherwise (closed by the publisher, timed out, dropped for silence), shows a
   * publisher that works, and the backoff starts over.
   */
  private static boolean refusedBeforeAMessage(Throwable e, boolean silent, boolean delivered) {
    return !delivered && !silent
        && (e instanceof ZmtpProtocolException || !(e instanceof IOException));
  }

  /**
   * The wait for {@code backoff}, drawn from the host's jitter source if there is one. That
   * source is host code, called on the reader thread while it handles a broken connection: if it
   * throws, or draws a wait out of {@code [backoff / 2, backoff]}, the reader waits
   * {@code backoff} itself and goes on (ended, nothing would reconnect; a negative wait would
   * make it reconnect without pause).
   */
  private long delay(long backoff) {
    try {
      long d = delay(backoff, jitter);
      if (d >= backoff / 2 && d <= backoff) {
        return d;
      }
      readerFailed("its jitter source", new IllegalStateException(
          "jitter drew a wait of " + d + " ns for a backoff of " + backoff + " ns"));
    } catch (Throwable e) {
      readerFailed("its jitter source", e);
    }
    return backoff;
  }

  /** The wait for {@code backoff}: itself, or with jitter uniform in its upper half. */
  static long delay(long backoff, RandomGenerator jitter) {
    if (jitter == null) {
      return backoff;
    }
    long half = backoff / 2;
    return half + jitter.nextLong(backoff - half + 1);
  }

  private void handle(List<byte[]> msg) {
    if (msg.size() != FRAMES || msg.get(1).length != 8) {
      malformedMessages.incrementAndGet();
      log.debug("dropped a malformed KV-event message of {} frame(s)", msg.size());
      return;
    }
    if (topic.length > 0 && !Arrays.equals(msg.get(0), topic)) {
      otherTopicMessages.incrementAndGet();
      return;
    }
    long seq = seq(msg.get(1));
    messages.incrementAndGet();
    byte[] payload = msg.get(2);
    long next = nextSeq();
    // a number outside 0..MAX_SEQ (negative, or one no number can follow) is the sink's to
    // drop as malformed: a replay up to it would be thrown away with it
    if (next >= 0 && seq > next && seq <= VllmKvEventReceiver.MAX_SEQ
        && replayEndpoint != null) {
      if (replayBackoffNanos > 0 && System.nanoTime() - replaysResumeAt < 0) {
        // a replay failed a moment ago: another one would most likely fail too, holding the
        // live stream meanwhile; the gap goes to the sink as it is, as after a failed replay
        replaysSkipped.incrementAndGet();
      } else {
        replayHoldingTheSilenceCheck(next, seq);
        if (closed) {
          return; // closed during the replay: nothing more reaches the sink
        }
      }
    }
    try {
      sink.onMessage(seq, payload);
    } catch (Throwable e) {
      sinkFailed("message " + seq, e);
    }
  }

  /**
   * {@link #replay}, with the silence check held meanwhile: the live stream's messages wait in
   * its connection while the reader asks for the gap (up to {@link #REPLAY_STEPS} replay
   * timeouts), so requests completed then are no sign of a dead connection; the count and the
   * time start afresh when the replay ends.
   */
  private void replayHoldingTheSilenceCheck(long from, long liveSeq) {
    if (silenceRequests == 0) {
      replay(from, liveSeq);
      return;
    }
    synchronized (silenceLock) {
      replaying = true;
    }
    try {
      replay(from, liveSeq);
    } finally {
      synchronized (silenceLock) {
        replaying = false;
        quietSince = clock.getAsLong();
        requestsSince = 0;
      }
    }
  }

  private long nextSeq() {
    try {
      return sink.nextSeq();
    } catch (Throwable e) {
      sinkFailed("nextSeq", e);
      return -1;
    }
  }

  private void resetSink() {
    try {
      sink.reset();
    } catch (Throwable e) {
      sinkFailed("reset", e);
    }
  }

  /**
   * Logs an {@link Error} or unchecked exception the reader thread took on a connection, with
   * its stack trace at warn level the 1st, 2nd, 4th, 8th... time (the others at debug), so that
   * one repeated on every connection cannot flood the log. Called on the reader thread only.
   */
  private void readerFailed(String what, Throwable e) {
    readerFailures++;
    if (VllmKvEventReceiver.logNow(readerFailures)) {
      log.warn("the KV-event reader failed on {} ({} such failures so far)", what,
          readerFailures, e);
    } else {
      log.debug("the KV-event reader failed on {}", what, e);
    }
  }

  private void sinkFailed(String what, Throwable e) {
    if (sinkFailures.incrementAndGet() == 1) {
      log.warn("the KV-event sink failed on {} (later failures are logged at debug level)",
          what, e);
    } else {
      log.debug("the KV-event sink failed on {}", what, e);
    }
  }

  /** Replays {@code [from, liveSeq)} into the sink, as far as the publisher still has it. */
  private void replay(long from, long liveSeq) {
    replaysRequested.incrementAndGet();
    ZmtpSocket r = new ZmtpSocket(ZmtpSocket.Type.DEALER, replayOptions);
    replay = r;
    if (closed) {
      r.close();
      return;
    }
    int received = 0;
    // the live stream waits meanwhile: the replay as a whole is bounded too, not only each step
    long deadline = System.nanoTime() + replaySteps * replayTimeoutNanos;
    try {
      if (replayAddress == null) {
        // counted in the deadline, but cannot be cut short: once per live connection, not per
        // gap, and again only after a replay could not connect
        replayAddress = resolve(replayEndpoint.host());
      }
      try {
        connect(r, replayAddress, replayEndpoint.port());
      } catch (IOException | RuntimeException | Error e) {
        replayAddress = null; // vLLM may have moved: looked up again at the next replay
        throw e;
      }
      r.send(List.of(new byte[0], seqBytes(from)));
      long last = Long.MIN_VALUE;
      while (!closed) {
        if (System.nanoTime() - deadline > 0) {
          throw replayTooLong();
        }
        List<byte[]> m;
        try {
          // bounded as a whole as well: commands (PINGs, say) restart the replay timeout
          m = r.receiveBefore(deadline);
        } catch (SocketTimeoutException e) {
          throw System.nanoTime() - deadline >= 0 ? replayTooLong() : e;
        }
        if (m.size() != FRAMES || m.get(0).length != 0 || m.get(1).length != 8) {
          throw new IOException("a replayed message of " + m.size()
              + " frame(s) is not [empty, 8-byte sequence number, payload]");
        }
        long seq = seq(m.get(1));
        if (seq == END_OF_REPLAY) {
          break;
        }
        if (seq < 0 || seq <= last) {
          throw new IOException("replayed sequence number " + seq + " after " + last);
        }
        if (seq >= liveSeq) {
          break;
        }
        last = seq;
        received++;
        replayedMessages.incrementAndGet();
        try {
          sink.onReplayed(seq, m.get(2));
        } catch (Throwable e) {
          sinkFailed("replayed message " + seq, e);
        }
      }
      log.debug("replayed {} KV-event message(s) from {} before {}", received, from, liveSeq);
      replayBackoffNanos = 0;
    } catch (IOException | RuntimeException | Error e) {
      // an Error or unchecked exception here (the heap running out while a replayed message is
      // read, say) fails the replay, as an IOException does, rather than ending the thread
      if (!(e instanceof IOException)) {
        readerFailed("a replay from " + replayEndpoint, e);
      }
      if (!closed) {
        replayBackoffNanos = replayBackoffNanos == 0
            ? minReplayBackoffNanos
            : Math.min(maxReplayBackoffNanos, replayBackoffNanos * 2);
        replaysResumeAt = System.nanoTime() + replayBackoffNanos;
        // a replay endpoint that is down fails every replay, one per gap: sampled, as gaps are
        long failures = replayFailures.incrementAndGet();
        if (VllmKvEventReceiver.logNow(failures)) {
          log.warn("KV-event replay from {} (sequence numbers {} to {}) failed after {} "
              + "message(s): {} ({} replays failed so far); gaps get no replay for {} ms",
              replayEndpoint, from, liveSeq - 1, received, e.toString(), failures,
              TimeUnit.NANOSECONDS.toMillis(replayBackoffNanos));
        } else {
          log.debug("KV-event replay from {} (sequence numbers {} to {}) failed after {} "
              + "message(s): {}; gaps get no replay for {} ms", replayEndpoint, from,
              liveSeq - 1, received, e.toString(),
              TimeUnit.NANOSECONDS.toMillis(replayBackoffNanos));
        }
      }
    } finally {
      r.close();
      replay = null;
    }
  }

  private IOException replayTooLong() {
    return new IOException("the replay took longer than " + replaySteps + " x the replay "
        + "timeout (" + TimeUnit.NANOSECONDS.toMillis(replayTimeoutNanos) + " ms)");
  }

  static long seq(byte[] b) {
    long v = 0;
    for (int i = 0; i < 8; i++) {
      v = (v << 8) | (b[i] & 0xff);
    }
    return v;
  }

  static byte[] seqBytes(long v) {
    byte[] b = new byte[8];
    for (int i = 7; i >= 0; i--) {
      b[i] = (byte) v;
      v >>>= 8;
    }
    return b;
  }

  /**
   * Looks up {@code host} (flagged: {@link #close()} does not wait for a lookup, which cannot
   * be interrupted). A close during the lookup fails it, so nothing more is connected and
   * nothing more reaches the sink.
   */
  private InetAddress resolve(String host) throws IOException {
    InetAddress address;
    resolving = true;
    try {
      address = resolver.resolve(host);
    } finally {
      resolving = false;
    }
    if (closed) {
      throw new SocketException("closed");
    }
    return address;
  }

  /** Connects {@code s} to {@code address:port}. */
  private static void connect(ZmtpSocket s, InetAddress address, int port) throws IOException {
    s.connect(new ZmtpEndpoint(address.getHostAddress(), port));
  }

  /** Looks up a host name (tests inject a slow one). */
  @FunctionalInterface
  interface HostResolver {
    /**
     * The address of {@code host}.
     *
     * @throws IOException if it has none ({@link java.net.UnknownHostException})
     */
    InetAddress resolve(String host) throws IOException;
  }

  private static void closeQuietly(ZmtpSocket s) {
    if (s != null) {
      s.close();
    }
  }

  /** Configures a {@link VllmKvEventSubscriber}. */
  public static final class Builder {
    private ZmtpEndpoint endpoint;
    private ZmtpEndpoint replayEndpoint;
    private String topic = "";
    private KvEventSink sink;
    private CacheEventListener listener;
    private int blockSize;
    private ThreadFactory threadFactory =
        r -> {
          Thread t = new Thread(r, THREAD_NAME);
          t.setDaemon(true);
          return t;
        };
    private Duration minBackoff = Duration.ofMillis(100);
    private Duration maxBackoff = Duration.ofSeconds(5);
    private RandomGenerator jitter;
    private Duration connectTimeout = ZmtpOptions.DEFAULTS.connectTimeout();
    private Duration handshakeTimeout = ZmtpOptions.DEFAULTS.handshakeTimeout();
    private Duration readTimeout = ZmtpOptions.DEFAULTS.readTimeout();
    private Duration idleTimeout = ZmtpOptions.DEFAULTS.idleTimeout();
    private Duration replayTimeout = Duration.ofSeconds(2);
    private Duration minReplayBackoff = Duration.ofSeconds(1);
    private Duration maxReplayBackoff = Duration.ofMinutes(1);
    private int maxMessageBytes = ZmtpOptions.DEFAULTS.maxMessageBytes();
    private int maxFrames = ZmtpOptions.DEFAULTS.maxFrames();
    private HostResolver resolver = InetAddress::getByName;
    private int silenceRequests = 32;
    private Duration silenceTime = Duration.ofSeconds(60);
    private LongSupplier clock = System::nanoTime;
    private int replaySteps = REPLAY_STEPS;

    private Builder() {}

    /** The host name lookup (tests inject one that does not answer). */
    Builder resolver(HostResolver resolver) {
      this.resolver = Objects.requireNonNull(resolver, "resolver");
      return this;
    }

    /**
     * The publisher's endpoint, {@code tcp://host:port} (vLLM's {@code endpoint}, with the
     * host it runs on in place of {@code *}). Required.
     *
     * @param endpoint vLLM's {@code endpoint} with its host in place of {@code *}, e.g.
     *     {@code tcp://127.0.0.1:5557}
     * @return this builder
     * @throws IllegalArgumentException if it is not a {@code tcp://host:port} endpoint
     */
    public Builder endpoint(String endpoint) {
      this.endpoint = ZmtpEndpoint.parse(endpoint);
      return this;
    }

    /**
     * The publisher's replay endpoint, {@code tcp://host:port} (vLLM's {@code
     * replay_endpoint}); without one, lost messages are not replayed.
     *
     * @param replayEndpoint vLLM's {@code replay_endpoint}, e.g. {@code tcp://127.0.0.1:5558}
     * @return this builder
     * @throws IllegalArgumentException if it is not a {@code tcp://host:port} endpoint
     */
    public Builder replayEndpoint(String replayEndpoint) {
      this.replayEndpoint = ZmtpEndpoint.parse(replayEndpoint);
      return this;
    }

    /**
     * The topic, as given to vLLM or SGLang ({@code topic} in {@code --kv-events-config}). The
     * default is empty, as theirs is: the subscriber then takes every message of the publisher,
     * whatever its topic. A non-empty topic takes only messages of exactly that topic (ZeroMQ
     * lets through every topic starting with it; the others are counted and ignored).
     *
     * @param topic the topic
     * @return this builder
     */
    public Builder topic(String topic) {
      this.topic = Objects.requireNonNull(topic, "topic");
      return this;
    }

    /**
     * Where decoded events go: the node's cache-event listener. The subscriber applies them
     * through a {@link VllmKvEventReceiver} of {@link #blockSize} tokens per block.
     *
     * @param listener the node's listener, handed to the engine adapter in {@code setCacheEventListener}
     * @return this builder
     */
    public Builder listener(CacheEventListener listener) {
      this.listener = Objects.requireNonNull(listener, "listener");
      return this;
    }

    /**
     * The node's block size in tokens (vLLM's {@code --block-size}); required with a listener.
     *
     * @param blockSize tokens per block, positive
     * @return this builder
     * @throws IllegalArgumentException if it is not positive
     */
    public Builder blockSize(int blockSize) {
      if (blockSize <= 0) {
        throw new IllegalArgumentException("blockSize must be positive, was " + blockSize);
      }
      this.blockSize = blockSize;
      return this;
    }

    /**
     * When to take a connection that delivers nothing while the engine serves as dead: once
     * the engine has completed {@code requests} requests that store a block ({@link
     * VllmKvEventSubscriber#requestCompleted}) since the last message arrived, or since the
     * connection was made, and at least {@code after} has passed since then, the connection is
     * dropped and made again (counted in {@link Stats#silenceReconnects()}, logged as a
     * warning), as after any lost connection: the mirror is cleared and the next message
     * starts it afresh. Default 32 requests and 60 s; 0 requests turns the check off.
     *
     * <p>vLLM publishes each block it stores in the step that stores it, before the request's
     * answer is sent, so on a working connection a request that stored a block is followed by
     * a message within moments; 32 such requests without one, over a minute, does not happen
     * while the stream works. The requests guard a quiet engine (vLLM publishes nothing while
     * idle, so silence alone means nothing); the time guards a burst of short requests
     * completing while a message is on its way. While the reader is held by a replay (at most
     * {@value VllmKvEventSubscriber#REPLAY_STEPS} times the {@link #replayTimeout replay
     * timeout}, 16 s by default) the check holds, and starts afresh when it ends. Without it, a silent connection was noticed only by TCP
     * keep-alive, after 2 h 11 min on Linux's defaults, and the mirror stayed frozen meanwhile.
     *
     * @param requests completed requests storing a block, at least 0 (0: off)
     * @param after the least time since the last message, at least 0, at most 365 days
     * @return this builder
     * @throws IllegalArgumentException if {@code requests} or {@code after} is out of range
     */
    public Builder silenceLimit(int requests, Duration after) {
      Objects.requireNonNull(after, "after");
      if (requests < 0 || after.isNegative() || after.compareTo(ZmtpOptions.MAX_TIMEOUT) > 0) {
        throw new IllegalArgumentException("silenceLimit needs requests >= 0 and 0 <= after <= "
            + "365 days, was " + requests + ", " + after);
      }
      this.silenceRequests = requests;
      this.silenceTime = after;
      return this;
    }

    /** The clock of the silence check, in nanoseconds (tests); default {@link System#nanoTime()}. */
    Builder clock(LongSupplier nanoClock) {
      this.clock = Objects.requireNonNull(nanoClock, "nanoClock");
      return this;
    }

    /**
     * Replay timeouts a replay may take in all, instead of {@value
     * VllmKvEventSubscriber#REPLAY_STEPS} (tests: a replay limit a slow host lookup can pass
     * without the test waiting 8 timeouts, each timeout long enough for a stall of the machine).
     */
    Builder replaySteps(int steps) {
      if (steps < 1 || steps > REPLAY_STEPS) {
        throw new IllegalArgumentException("steps must be 1 to " + REPLAY_STEPS + ", was " + steps);
      }
      this.replaySteps = steps;
      return this;
    }

    /** Where messages go, instead of a listener (tests). */
    Builder sink(KvEventSink sink) {
      this.sink = Objects.requireNonNull(sink, "sink");
      return this;
    }

    /**
     * Creates the one reader thread; default: a daemon thread named {@value VllmKvEventSubscriber#THREAD_NAME}.
     *
     * @param threadFactory the factory of the reader thread
     * @return this builder
     */
    public Builder threadFactory(ThreadFactory threadFactory) {
      this.threadFactory = Objects.requireNonNull(threadFactory, "threadFactory");
      return this;
    }

    /**
     * The wait before reconnecting: {@code min} after the first failure, doubling with each
     * failure up to {@code max}; default 100 ms to 5 s. It goes back to {@code min} when a
     * connection whose handshake completed ends, unless that connection ended in a protocol or
     * limit error (or an {@link Error} while reading) before any message arrived on it: a
     * publisher whose first message always breaks a limit is retried ever more slowly, not at
     * {@code min} for ever.
     *
     * @param min the first wait, positive
     * @param max the longest wait, at least {@code min}, at most 365 days
     * @return this builder
     */
    public Builder reconnectBackoff(Duration min, Duration max) {
      checkBackoff("reconnect", min, max);
      this.minBackoff = min;
      this.maxBackoff = max;
      return this;
    }

    /** Refuses a {@code what} backoff unless 0 < min <= max <= 365 days. */
    private static void checkBackoff(String what, Duration min, Duration max) {
      Objects.requireNonNull(min, "min");
      Objects.requireNonNull(max, "max");
      if (min.isNegative() || min.isZero() || max.compareTo(min) < 0
          || max.compareTo(ZmtpOptions.MAX_TIMEOUT) > 0) {
        throw new IllegalArgumentException(
            what + " backoff needs 0 < min <= max <= 365 days, was " + min + ", " + max);
      }
    }

    /**
     * Draws each reconnect wait uniformly from the upper half of the current backoff, so that
     * many subscribers of one publisher do not reconnect in step; default: no jitter.
     *
     * @param random the source of the jitter (seeded by the host)
     * @return this builder
     */
    public Builder jitter(RandomGenerator random) {
      this.jitter = Objects.requireNonNull(random, "random");
      return this;
    }

    /**
     * The TCP connect timeout; default 5 s.
     *
     * @param d the timeout, positive, at most 365 days
     * @return this builder
     */
    public Builder connectTimeout(Duration d) {
      this.connectTimeout = d;
      return this;
    }

    /**
     * How long the ZMTP handshake may take; default 5 s.
     *
     * @param d the timeout, positive, at most 365 days
     * @return this builder
     */
    public Builder handshakeTimeout(Duration d) {
      this.handshakeTimeout = d;
      return this;
    }

    /**
     * How long a message may take to arrive once its first byte has: a publisher that stops
     * inside a message is disconnected after it; default 10 s.
     *
     * @param d the timeout, positive, at most 365 days
     * @return this builder
     */
    public Builder readTimeout(Duration d) {
      this.readTimeout = d;
      return this;
    }

    /**
     * Reconnect when no message has arrived for this long; default {@link Duration#ZERO}, never
     * (vLLM publishes nothing while idle, and sends no heartbeats).
     *
     * @param d the timeout, at most 365 days, or zero for none
     * @return this builder
     */
    public Builder idleTimeout(Duration d) {
      this.idleTimeout = d;
      return this;
    }

    /**
     * The timeout of each step of a replay (connect, handshake, each replayed message);
     * default 2 s. The live stream waits meanwhile, so a replay as a whole ends (counted as
     * failed) after {@value VllmKvEventSubscriber#REPLAY_STEPS} times this, however steadily its
     * messages (or commands) arrive. The lookup of the replay endpoint's host name counts in
     * that time but cannot be cut short; it is made at the first replay of each live connection
     * and again only after a replay that could not connect.
     *
     * @param d the timeout, positive, at most 365 days
     * @return this builder
     */
    public Builder replayTimeout(Duration d) {
      this.replayTimeout = d;
      return this;
    }

    /**
     * How long gaps get no replay after a failed one: {@code min} after the first failure,
     * doubling with each failed replay up to {@code max}, and back to none after a replay that
     * succeeds; default 1 s to 1 min. Meanwhile a gap goes to the sink as it is, as after a
     * failed replay (the receiver clears the mirror), and is counted in {@link
     * Stats#replaysSkipped()}: the live stream waits during a replay (up to {@value
     * VllmKvEventSubscriber#REPLAY_STEPS} times the {@link #replayTimeout replay timeout}), and
     * a replay endpoint that does not answer held it on every gap, keeping the subscriber ever
     * further behind the publisher while messages kept being lost.
     *
     * @param min the first wait, positive
     * @param max the longest wait, at least {@code min}, at most 365 days
     * @return this builder
     */
    public Builder replayBackoff(Duration min, Duration max) {
      checkBackoff("replay", min, max);
      this.minReplayBackoff = min;
      this.maxReplayBackoff = max;
      return this;
    }

    /**
     * The largest message accepted (sum of its frames); default 16 MiB.
     *
     * @param n the limit in bytes
     * @return this builder
     */
    public Builder maxMessageBytes(int n) {
      this.maxMessageBytes = n;
      return this;
    }

    /**
     * The most frames a message may have; default 16. Every vLLM message has 3 frames (topic,
     * sequence number, payload), so {@link #build()} refuses a limit below 3, which no message
     * could pass.
     *
     * @param n the limit, at least 3
     * @return this builder
     */
    public Builder maxFramesPerMessage(int n) {
      this.maxFrames = n;
      return this;
    }

    /**
     * Builds the subscriber (not started).
     *
     * @return the subscriber; {@link VllmKvEventSubscriber#start()} starts it
     * @throws IllegalStateException if the endpoint or the listener is missing, or a listener
     *     is given without a block size
     * @throws IllegalArgumentException if a timeout or limit is out of range
     */
    public VllmKvEventSubscriber build() {
      if (endpoint == null) {
        throw new IllegalStateException("endpoint is required");
      }
      KvEventSink s = sink;
      if (s == null) {
        if (listener == null) {
          throw new IllegalStateException("listener is required");
        }
        if (blockSize == 0) { // the setter refuses any other value that is not positive
          throw new IllegalStateException(
              "blockSize is required with a listener (vLLM's --block-size)");
        }
        s = new VllmKvEventReceiver(listener, blockSize);
      } else if (listener != null) {
        throw new IllegalStateException("give either a listener or a sink, not both");
      }
      if (maxFrames < FRAMES) {
        // every message would break the limit: the reader would drop the connection, clear
        // the mirror and reconnect for ever, taking no message
        throw new IllegalArgumentException("maxFramesPerMessage must be at least " + FRAMES
            + " (a vLLM message has " + FRAMES + " frames), was " + maxFrames);
      }
      if (replayTimeout == null || replayTimeout.isNegative() || replayTimeout.isZero()
          || replayTimeout.compareTo(ZmtpOptions.MAX_TIMEOUT) > 0) {
        throw new IllegalArgumentException(
            "replayTimeout must be positive and at most 365 days, was " + replayTimeout);
      }
      return new VllmKvEventSubscriber(this, s);
    }
  }
}
