package io.github.prefixrouter.transport.http;

import com.google.common.base.Throwables;
import com.google.common.util.concurrent.Uninterruptibles;
import com.sun.net.httpserver.Headers;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import com.sun.net.httpserver.HttpsExchange;
import com.sun.net.httpserver.HttpsServer;
import io.github.prefixrouter.internal.CountedFailureLog;
import io.github.prefixrouter.internal.GuardedClock;
import io.github.prefixrouter.internal.InFlightLimitException;
import io.github.prefixrouter.internal.RecentWarnings;
import io.github.prefixrouter.internal.WildcardAddress;
import io.github.prefixrouter.internal.tls.CertificateNodeIds;
import io.github.prefixrouter.internal.wire.BodyBudget;
import io.github.prefixrouter.internal.wire.CappedBody;
import io.github.prefixrouter.internal.wire.InboundReaders;
import io.github.prefixrouter.internal.wire.IoDeadline;
import io.github.prefixrouter.internal.wire.JdkHttpClients;
import io.github.prefixrouter.internal.wire.JdkHttpServers;
import io.github.prefixrouter.internal.wire.KeyedLanes;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.spi.TransportException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.ProtocolException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.channels.ClosedChannelException;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link Transport} over HTTP/1.1 built on the JDK alone: {@link HttpServer} (or
 * {@link HttpsServer} with TLS) for inbound traffic and {@link HttpClient} for outbound.
 *
 * <p>The JDK server leaves Nagle's algorithm on for accepted connections unless the system
 * property {@code sun.net.httpserver.nodelay} is {@code true}, and then an answer's body waits
 * for the peer's delayed acknowledgement of its headers (about 40 ms on Linux). {@link #start}
 * sets the property to {@code true} if the host has not set it, before the server is created; a
 * host that created a JDK HTTP server of its own earlier sets it on its command line
 * (docs/deployment.md, "JVM settings for the HTTP servers").
 *
 * <p>The JDK client keeps an idle connection for {@code jdk.httpclient.keepalive.timeout}
 * seconds (by default 1200 on JDK 17, 30 on JDK 25), no shorter than a peer's JDK server keeps
 * it open (30 s by default), and a request sent into a connection as the server's idle close
 * crosses it fails as {@code UNREACHABLE}. {@link #start} sets the property to 20 if the host
 * has not set it, before the client is built. The JDK reads it once, as the JVM builds its first
 * HTTP client, whoever builds it: in a host that built a JDK HTTP client of its own earlier,
 * setting it here has no effect and the transport keeps idle connections as long as the JDK's
 * default, unless the host sets it on its command line (docs/deployment.md, "JVM settings for
 * the HTTP clients").
 *
 * <h2>Wire protocol</h2>
 * One-way messages are {@code POST /prefix-router/v1/message} (answered 204 before delivery);
 * requests are {@code POST /prefix-router/v1/request}, answered 200 with the handler's bytes.
 * The body is the opaque payload. Headers carry the envelope: {@code PR-Sender} (node id),
 * {@code PR-Sender-Address}, {@code PR-Recipient} (node id), {@code PR-Timestamp} (sender's
 * epoch milliseconds), {@code PR-Nonce}, {@code PR-Mac} and {@code PR-Key} (the id of the key
 * the MAC was made with, for warnings). Status codes: 400 an envelope out of form (a sender,
 * address, timestamp or nonce header missing or malformed) or a body that cannot be read, 405 a method other than POST, 401 failed
 * authentication or replay, 413 too large (mapped to {@link TransportException.Kind#TOO_LARGE}),
 * 503 busy (mapped to {@link TransportException.Kind#BUSY}), 504 handler timed out at the peer,
 * 500 handler failed, or the peer's HMAC threw as it checked the MAC or signed the answer (see
 * "Security"), or anything else threw as the peer received it (see "Handler failures"). A
 * request answered 504 fails with {@link TransportException.Kind#TIMEOUT}; one answered with
 * another status than 200, 413 and 503, or with an answer the HTTP client cannot parse (a status
 * line that is none, more interim answers than it takes, a {@code Content-Length} that is no
 * number, a chunked body whose chunk framing is out of form), fails with
 * {@link TransportException.Kind#PROTOCOL}.
 *
 * <p>A peer address is {@code host:port} alone (an IPv6 host in brackets). An address with
 * anything more (a path, query, fragment or user info, as in {@code "10.0.0.5:80/admin?"}) is
 * never sent to: a request to it fails at once with {@link TransportException.Kind#UNREACHABLE},
 * a message to it is dropped and counted; an inbound envelope naming one as its sender's address
 * is refused as malformed (400), and {@link Builder#advertisedAddress} refuses one. The client
 * connects to a peer's address directly, whatever proxy the host's JVM is set up with for its
 * own traffic ({@code http.proxyHost}, {@code java.net.useSystemProxies}, a default
 * {@link java.net.ProxySelector}), which it never asks.
 *
 * <h2>Handler failures</h2>
 * An exception (a checked one thrown undeclared included, as code in a language without checked
 * exceptions may throw it) or an {@link Error} (an {@link AssertionError}, a
 * {@link StackOverflowError}) thrown by the {@link InboundHandler} loses only what it was
 * handling. Thrown by
 * {@code onRequest}, it fails that request: 500, which the sender's transport reports as
 * {@code PROTOCOL} with the error's message. Thrown by {@code onMessage}, after the message was
 * answered 204, it is logged (an Error at error level), and the reader thread that delivered the
 * message goes on reading. Neither is rethrown, a {@link VirtualMachineError} such as
 * {@link OutOfMemoryError} included: the thread is the transport's own, so rethrowing would only
 * end that thread and report the error to its uncaught-exception handler (standard error) while
 * the other threads went on; a host that must stop on an {@code OutOfMemoryError} runs with
 * {@code -XX:+ExitOnOutOfMemoryError}, which acts where the error is thrown, on any thread.
 * Anything thrown as a message or request is received, outside the handler (an
 * {@link Error}, or a checked exception thrown undeclared, as the transport reads, checks or
 * hands it on: the heap running out, a timer thread that cannot start), is this node's failure
 * and lost alike: the message or request is answered 500 at once (unless an answer was written
 * already), counted ({@link Stats#internalErrors()}), logged, and not counted as malformed, a
 * body that cannot be read being the only {@link IOException} that is; the reader slot, the
 * share of the body budget and the inbound slot it held are given back, and the thread goes on.
 * A request that already holds its inbound slot as it fails to be handed on (its handling
 * limit cannot be set) has its 500 written by the server threads, as every answer, and holds
 * the slot until it is written.
 * A request's answer (the handler's, or the 504 of the handling limit) that the server threads'
 * executor cannot take to be written, whatever it throws (a thread it cannot start), has its
 * connection closed at once without an answer, as the thread that hands it on (the one that
 * completed the handler's future, or the timer's) must not write: its sender's request fails
 * {@code UNREACHABLE} at once. Its inbound slot is given back, and it is counted and logged
 * alike ({@link Stats#internalErrors()}). So is an answer, a 204 included, that throws an
 * {@link Error} as it is written (the heap running out): its exchange is closed, its sender
 * failing at once, and the thread writing it goes on; a message whose 204 threw is delivered
 * all the same, received whole and authenticated.
 * At most {@link #WARNINGS_PER_MINUTE} lines a minute are logged for such failures, those of the
 * HMAC below included, the next one logged saying how many were left out.
 *
 * <h2>Security</h2>
 * With a cluster key, every message and every answer carries an HMAC-SHA256 binding the sender's
 * id and address, the recipient's id, the timestamp, the nonce and the payload (see
 * {@link MessageAuthenticator}); the receiver also rejects timestamps outside the replay window
 * and nonces it has already accepted (see {@link ReplayGuard}). A message failing either check is
 * dropped and counted in {@link Stats}, never delivered. Nodes' wall clocks must agree to within
 * the replay window (NTP is ample): a message refused as stale is answered 401 saying how far
 * its timestamp is from the receiver's clock, and the receiver warns once per sender. A node
 * signs with one cluster key and may accept up to three more, so the key can be rotated while
 * the cluster runs ({@link #updateClusterKeys}). A message or answer refused under a key this
 * node does not hold is warned of once per sender and key (its {@code PR-Key} header names the
 * key), at most {@link #WARNINGS_PER_MINUTE} such warnings a minute; the
 * {@link #MAX_OTHER_NODES} pairs seen most recently are remembered, so strangers naming made-up
 * keys can neither fill the log nor silence the warning of a peer's real one for longer than
 * they keep sending. The other warnings logged once per key (a stale sender, a peer that says it
 * is another node, a sender its certificate does not name) are bounded alike, each kind on its
 * own. TLS is optional: pass
 * the host's {@link SSLContext} to encrypt traffic; it is used for both the server and the
 * client, so the context's trust store must accept the peers' certificates (and their addresses
 * must match the certificates).
 * The MAC proves only that a message comes from a holder of the cluster key, not which node:
 * with {@link Builder#bindNodeIdsToCertificates} on, the server also requires a client
 * certificate, and a message, request or answer (of any status: an error answer, which carries
 * no MAC, too, and the answer to a one-way message) is accepted only if the TLS certificate it
 * came with names the node id it claims to come from, so that a key holder can speak only for
 * the ids its own certificate names.
 * The HMAC comes from the host's JCA providers (a hardware token's, say), which may throw,
 * whatever it throws, as a MAC is made or checked. A message or request whose MAC cannot be
 * checked for that is answered 500 at once (its sender's request fails with {@code PROTOCOL},
 * its message counts as failed), counted ({@link Stats#internalErrors()}) and logged (see
 * "Handler failures"); it is not delivered, its nonce is not taken, and it is counted neither as
 * malformed nor as failing authentication, since its sender did nothing wrong. A request whose
 * answer cannot be signed for that is answered 500 at once too, counted and logged alike, and
 * the server thread writing it goes on. A request whose answer's MAC cannot be checked for that
 * fails at once with {@code UNREACHABLE}, what was thrown its cause ({@code CLOSED} once the
 * transport is closed), and gives its in-flight slot back; so does one that cannot be signed
 * (see "Limits and back-pressure").
 *
 * <h2>Limits and back-pressure</h2>
 * Inbound bodies above {@code maxMessageBytes} are refused from their {@code Content-Length}
 * header before any byte is read, and bodies without a length are cut off at the cap (413). The
 * 413 says {@code Connection: close}: the body is left unread, and the JDK server drains at most
 * 64 KiB of it before it closes the connection, so a sender that kept the connection would send
 * its next request into a closed one and fail it as {@code UNREACHABLE}. A body that cannot
 * be read (a chunked one with a malformed chunk size, one the JDK server's stream fails with an
 * unchecked exception included) is answered 400, and its connection closed after the answer.
 * An outbound request above {@code maxMessageBytes} fails at once, before anything is sent,
 * with {@link TransportException.Kind#TOO_LARGE}, and so does one the peer refused with 413
 * (its limit is lower); an answer above it fails with {@code TOO_LARGE} too, whichever side's
 * limit it exceeds (the serving side answers 413 instead of sending it). Outbound,
 * at most {@code maxInFlightPerPeer} requests and messages may be outstanding to one peer (one
 * address, however its host's case, its IPv6 literal or its port is spelled), and the last
 * {@code min(4, maxInFlightPerPeer / 4)} of those slots (4 of the default 64; none for a limit
 * below 4) are kept for messages: a request fails at once with {@code BUSY} when
 * {@code maxInFlightPerPeer} minus those are outstanding (counted, {@link Stats#outboundBusy()};
 * a refusal raised here, which the node does not take for the peer's push-back: it does not cool
 * the peer down, and counts the fallback as {@code FallbackCause.IN_FLIGHT_LIMIT}), a message
 * is dropped (and counted) when all are, so that forwards holding their share of a peer's slots (long generations) leave
 * room for the node's gossip (its heartbeat, its push-back) and CANCELs to that peer. A
 * request's slot is free again before its future completes, a future its caller cancels
 * included. A request or message whose building or handing to the HTTP client throws (the
 * cluster key's HMAC, which comes from the host's JCA providers, failing as it signs; an
 * {@link Error} of the client, a thread it cannot start) gives its slot back at once and is not
 * thrown on: the request fails with {@code UNREACHABLE}, what was thrown its cause
 * ({@code CLOSED} once the transport is closed, and when the client refuses it as a close shut
 * its executor down), and the message is dropped and counted. The client speaks HTTP/1.1, one
 * exchange per connection at a time: an exchange takes an idle connection to the peer if the
 * HTTP client's pool holds one, else it
 * opens a connection of its own (with TLS, a handshake of its own), so a burst of requests and
 * messages to a peer with no idle connection opens as many connections at once, and
 * {@code maxInFlightPerPeer} is the only bound on them. Inbound, at most
 * {@code maxInboundRequests} requests are handled at once; more are answered 503, by the server
 * threads as below (see "Answers to a peer that stops reading" there for when a connection is
 * closed instead). A request
 * holds its slot until its answer (the handler's, the 504 of {@code maxHandlingTime}, the 503 of
 * {@link #close()}, the 500 of a request that cannot be handed on) has been written, or its write has failed or been cut, or its connection
 * has been closed unwritten, so that the answers waiting for a server thread or being written
 * are never more than {@code maxInboundRequests} either. A connection
 * that has started a request must deliver all of it (request line, headers and body; over TLS
 * the handshake too, counted from the connection's first byte) within
 * {@code inboundIoTimeout}, and take an answer within the same time
 * once it is written, or it is closed and counted ({@link Stats#slowConnectionsClosed()}). A
 * connection that sends nothing holds no reader thread; the JDK server closes it after its idle
 * interval ({@code sun.net.httpserver.idleInterval}, 30 s by default), without counting it.
 * Every connection that starts a request is read (and authenticated) on a reader thread of its
 * own, so one that stalls holds only its own thread and never delays anyone else's request: at
 * most {@code readerThreads} requests are read at once (a connection beyond is answered 503 by
 * one of 4 refuser threads, its body not read, within 1 s or {@code inboundIoTimeout} if
 * shorter, and closed at once when those are busy too),
 * and at most {@code maxUnfinishedReadsPerAddress} requests from one address may have unfinished
 * bodies (one beyond waits for one of them to finish, so that a peer's burst of requests is not
 * refused while the machine is busy, and is answered 503 once none has finished for 1 s); both
 * are counted ({@link Stats#readsRefused()}). The bodies being read, before they are
 * authenticated, hold at most {@code bodyBudget} bytes of heap all together (default 64 MiB;
 * {@link Builder#bodyBudget}): a body whose share is held by others waits while they give
 * theirs back, and is answered 503 once none has for 1 s ({@link Stats#bodyBudgetRefused()}).
 * These 503s carry {@code Retry-After: 1}; a sender's request fails with {@code BUSY}. They
 * also say {@code Connection: close}, as the body is left unread (all or part of it).
 * The peers' answers to this transport's own requests take their shares of a budget of their
 * own, of the same size, as they arrive, until they are authenticated and handed on (apart, so
 * that strangers who hold the inbound budget cannot fail this node's forwards): one that cannot
 * get its share within the same wait fails its request with {@code TOO_LARGE} (this node's
 * shortage, not the peer's fault), counted alike.
 * Answers are written by the server threads under the same I/O deadline, never by the thread
 * that completed the handler's future; so are the 504 of a handler that outlasted
 * {@code maxHandlingTime} (never the timer thread, which fires the deadlines), the 503s of
 * {@link #close()} and the 500 of a request that cannot be handed on. At most {@code max(1, serverThreads / 2)} of them write the answers to one
 * peer address (its connections' remote IP address) at once; the address's other answers wait
 * in its own queue, in order, holding their inbound slots, so that a peer that does not read
 * its answers leaves the other threads to everyone else (docs/deployment.md, "Answers to a peer
 * that stops reading"). The 503 of a request beyond {@code maxInboundRequests} is written so
 * too, never by the reader thread, but holds no slot: it waits in its address's queue only
 * behind fewer than {@code maxUnfinishedReadsPerAddress} answers, and while fewer than
 * {@code maxInboundRequests + maxUnfinishedReadsPerAddress + max(1, serverThreads / 2)} such
 * 503s wait or are written to all addresses together; else its connection is closed unanswered
 * at once instead (its sender fails the request as {@code UNREACHABLE}), so that peers that
 * send requests and read none of their 503s hold no reader thread, and no more than that many
 * answers per address and in all. The other answers without a body (the refusals before
 * authentication, 400, 401, 405 and 413; a message's 204; the per-address and body-budget
 * 503s; the 503 of {@link #close()} and the 500 of a failure before a request takes its slot)
 * are written on the reader thread, under the same I/O deadline: a connection that pipelines
 * requests and reads none of these holds its reader thread until {@code inboundIoTimeout}, as
 * one stalled in its headers does, and no other.
 *
 * <h2>Threads</h2>
 * The transport is an adapter the host creates, so unlike the core it owns threads, all daemon
 * threads. Its own are named {@code prefix-router-http-<nodeId>-...}: up to
 * {@code readerThreads} reader threads reading (started on demand, idle ones expire; one done
 * with its request may still be on its way back to the pool as the next one starts, which then
 * starts another, so there may be a few more, idle),
 * {@code serverThreads} threads writing answers, one client executor (cached, idle threads
 * expire) and one timer thread. The JDK names the others: the HTTP server's
 * {@code HTTP-Dispatcher} (started from the timer thread, so that it is a daemon whichever thread
 * calls {@link #start}) and {@code idle-timeout-task}, and the HTTP client's
 * {@code HttpClient-<n>-SelectorManager}. {@link #close()} stops all of them, as does a
 * {@link #start} that fails once the address is bound. The JDK 17 {@link HttpClient} cannot be
 * closed: its selector thread, started from a thread {@link #start} builds the client on, is
 * interrupted, which ends it.
 *
 * <h2>Close</h2>
 * {@link #close()} fails every pending outbound request with {@code CLOSED}, cancels the
 * one-way messages still awaiting their answer (closing their connections), stops accepting
 * inbound traffic, answers inbound requests still being handled with 503 and releases its
 * threads. It waits at most {@code inboundIoTimeout} for the answers being written (the 503s
 * among them), then closes the connections of those still blocked, and of those no server
 * thread has started (not written), giving back their inbound slots. A message or request still
 * being read or authenticated never reaches the handler: it is answered 503 if its body was
 * read in full, or its connection is closed mid-body (the sender sees it as unreachable, so a
 * forward falls back as for any peer that went away); a message already
 * being delivered (answered 204 just before) may still reach it while close runs or just after
 * it returns, since close does not wait for the handler. It is idempotent, and may be called
 * from any thread, the transport's own included (a callback of a request it completes): it
 * leaves the calling thread's interrupt status as it was. Called while {@link #start} is
 * binding, it waits
 * for start to finish and then stops what it started, the port included; {@link #start} after
 * it throws {@link IllegalStateException}. Messages sent after close are dropped; requests
 * fail with {@code CLOSED}.
 *
 * <p>Instances are thread-safe.
 */
public final class HttpTransport implements Transport {

  private static final Logger log = LoggerFactory.getLogger(HttpTransport.class);

  static final String MESSAGE_PATH = "/prefix-router/v1/message";
  static final String REQUEST_PATH = "/prefix-router/v1/request";
  static final String H_SENDER = "PR-Sender";
  static final String H_SENDER_ADDRESS = "PR-Sender-Address";
  static final String H_RECIPIENT = "PR-Recipient";
  static final String H_TIMESTAMP = "PR-Timestamp";
  static final String H_NONCE = "PR-Nonce";
  static final String H_MAC = "PR-Mac";
  static final String H_ERROR = "PR-Error";
  /** On a 401 for a message addressed to another node: the id of the node that answered. */
  static final String H_NODE = "PR-Node";
  /**
   * The id of the cluster key a message or answer is signed with ({@code Stats#clusterKeys}), so
   * that a node refusing it can say which key its sender uses. Not authenticated: it only names
   * the key in a warning.
   */
  static final String H_KEY_ID = "PR-Key";
  /**
   * Keys remembered at most for each warning logged once per key (a key this node does not
   * accept, another node at an address, a sender its certificate does not name, a stale
   * sender): the most recently seen, so a key forgotten warns again.
   */
  static final int MAX_OTHER_NODES = 1024;
  /**
   * Warnings of each such kind logged per minute at most: the messages that cause them are
   * unauthenticated (a foreign key, another node), or signed by any key holder under any id it
   * likes, so a sender could otherwise fill the log, a line a message.
   */
  static final int WARNINGS_PER_MINUTE = 10;
  static final String TAG_MESSAGE = "message";
  static final String TAG_REQUEST = "request";
  static final String TAG_RESPONSE = "response";
  /** A pending request that holds no in-flight slot yet. */
  private static final String NO_SLOT = "";
  /** The default {@link Builder#maxMessageBytes}: 4 MiB. */
  public static final int DEFAULT_MAX_MESSAGE_BYTES = 4 << 20;
  /**
   * The default {@link Builder#bodyBudget}, 64 MiB, when {@code maxMessageBytes} is at most half
   * of it.
   */
  public static final long DEFAULT_BODY_BUDGET = 64L << 20;
  /** The default {@link Builder#maxHandlingTime}: 5 min. */
  public static final Duration DEFAULT_MAX_HANDLING_TIME = Duration.ofMinutes(5);
  /** Seconds a peer told it is busy should wait ({@code Retry-After}): about a busy cool-down. */
  static final String RETRY_AFTER_SECONDS = "1";
  /**
   * Threads answering 503 to the connections beyond {@code readerThreads}, each for at most 1 s
   * (or {@code inboundIoTimeout} if shorter); beyond them too, a connection is closed at once.
   */
  static final int REFUSER_THREADS = 4;
  /** The first step of the heap a body being read takes ({@link #readBody}). */
  private static final int FIRST_BODY_STEP = 8 << 10;
  /** The longest request timeout honoured (a long of nanoseconds, about 292 years). */
  private static final Duration LONGEST_TIMEOUT = Duration.ofNanos(Long.MAX_VALUE).minusSeconds(1);

  private final Builder config;
  /** The host's wall clock, read through its guard ({@link Builder#wallClockMillis}). */
  private final LongSupplier wallClockMillis;
  /** The cluster keys; null when authentication is disabled. Replaced by a key rotation. */
  private volatile MessageAuthenticator auth;
  private final ReplayGuard replayGuard; // null when authentication is disabled
  private final String bootId;
  private final AtomicLong nonceCounter = new AtomicLong();
  /**
   * Outbound requests waiting for an answer, each to the peer address whose in-flight slot it
   * holds ({@link #NO_SLOT} before it has one). Whoever removes a request completes it, after
   * giving its slot back ({@link #settle}).
   */
  private final Map<CompletableFuture<byte[]>, String> pending = new ConcurrentHashMap<>();
  /** Requests and messages outstanding per peer address; an address with none has no entry. */
  private final Map<String, Integer> inFlightByPeer = new ConcurrentHashMap<>();
  /**
   * One-way messages handed to the HTTP client and not yet answered: {@link #close()} cancels
   * them, which closes their connections (the timer that cuts them after messageTimeout stops).
   */
  private final Set<CompletableFuture<HttpResponse<Void>>> messagesInFlight =
      ConcurrentHashMap.newKeySet();
  /** Inbound requests whose handler has not answered yet, each holding an inbound slot. */
  private final Set<HttpExchange> inboundPending = ConcurrentHashMap.newKeySet();
  /**
   * Slots of {@code maxInboundRequests} held: by the requests being handled
   * ({@link #inboundPending}) and by the answers handed to the server threads and not yet written
   * or dropped ({@link #replies}).
   */
  private final AtomicInteger inboundRequests = new AtomicInteger();
  /**
   * Answers handed to the server threads and neither written nor dropped yet, each holding its
   * request's inbound slot but for the 503s of a full server ({@link #writeBusy}):
   * {@link #close()} drops those still waiting once it stops waiting.
   */
  private final Set<Reply> replies = ConcurrentHashMap.newKeySet();
  /**
   * The 503s of a full server among {@link #replies}, which hold no inbound slot: at most
   * {@link #maxBusyReplies} of them, all peer addresses together ({@link #writeBusy}).
   */
  private final AtomicInteger busyReplies = new AtomicInteger();
  /**
   * The answers by the address of the peer they go to: at most
   * {@link #writersPerPeer}({@code serverThreads}) of a peer's are handed to the server threads
   * at once, the others wait in its lane, in order. Each holds an inbound slot, so they are at
   * most {@code maxInboundRequests}; but for the 503s of a full server, which hold none, wait
   * in a lane only behind fewer than {@code maxUnfinishedReadsPerAddress} others, and are at
   * most {@link #maxBusyReplies} more ({@link #writeBusy}).
   */
  private final KeyedLanes<Object, Reply> lanes;
  private final AtomicBoolean started = new AtomicBoolean();
  private final AtomicBoolean closed = new AtomicBoolean();
  /**
   * Held by {@link #start} and {@link #close()} while they run, so that a close() called while
   * start() binds stops everything start() made; never held while calling the handler.
   */
  private final Object lifecycle = new Object();
  /** Runs in {@link #start} before the server is bound (for tests: a close() during start). */
  volatile Runnable beforeBind = () -> { };
  /**
   * Runs in {@link #start} once the server accepts connections, before start returns (for
   * tests: inbound traffic while start runs).
   */
  volatile Runnable whileStarting = () -> { };
  /**
   * How long a request beyond its address's cap of unfinished reads waits with none of them
   * finishing before it is refused; null (the default): {@link InboundReaders#waitFor} of the
   * I/O timeout. For tests, set before {@link #start}: a wait no stall of a busy machine
   * outlasts, where a test asserts that a burst is not refused.
   */
  volatile Duration unfinishedReadWait;
  private final Counters counters = new Counters();
  /** The heap the inbound bodies being read and authenticated hold ({@link #readBody}). */
  private final BodyBudget bodies;
  /**
   * The budget of the peers' answers to this transport's own requests: of the same size as
   * {@link #bodies} but apart from it, so that strangers holding the inbound budget cannot fail
   * this node's forwards.
   */
  private final BodyBudget answers;
  /** "address expected-id" to the id the node at that address said it has (warned once each). */
  private final RecentWarnings otherNodes = warnings();
  /**
   * "who key-id" for each warning of a key this node does not accept, so that strangers naming
   * made-up keys cannot use up the warnings of a peer's real one.
   */
  private final RecentWarnings foreignKeys = warnings();
  /**
   * "claimed-id certificate-subject" for each warning of a sender its certificate does not name
   * ({@link Builder#bindNodeIdsToCertificates}).
   */
  private final RecentWarnings uncertifiedSenders = warnings();
  /** Sender ids warned of once for a stale timestamp. */
  private final RecentWarnings staleSenders = warnings();
  /**
   * This node's own failures as it receives messages and requests ({@link #failedHere}): their
   * count ({@link Stats#internalErrors()}) and their lines, at most
   * {@link #WARNINGS_PER_MINUTE} a minute by the wall clock.
   */
  private final CountedFailureLog ownFailures;

  private volatile InboundHandler handler;
  private volatile PeerAddress localAddress;
  private HttpServer server;
  private ThreadPoolExecutor serverExecutor;
  private InboundReaders readers;
  private ExecutorService clientExecutor;
  private ScheduledExecutorService timer;
  private IoDeadline ioDeadline;
  /** The HTTP client, whose selector thread {@link #close()} ends (JDK 17's cannot be closed). */
  private JdkHttpClients.Client built;
  private HttpClient client;

  private HttpTransport(Builder b) {
    this.config = b.copy();
    this.wallClockMillis =
        GuardedClock.of("transport " + b.nodeId, b.wallClockMillis::getAsLong)::nanoTime;
    this.ownFailures = new CountedFailureLog(log, WARNINGS_PER_MINUTE, wallClockMillis);
    this.bodies = new BodyBudget(config.effectiveBodyBudget(),
        InboundReaders.waitFor(config.inboundIoTimeout), counters.bodyBudgetRefused::increment);
    this.answers = new BodyBudget(config.effectiveBodyBudget(),
        InboundReaders.waitFor(config.inboundIoTimeout), counters.bodyBudgetRefused::increment);
    this.lanes = new KeyedLanes<>(writersPerPeer(config.serverThreads));
    if (b.clusterKey != null) {
      List<byte[]> keys = new ArrayList<>();
      keys.add(b.clusterKey);
      keys.addAll(b.acceptedClusterKeys);
      this.auth = new MessageAuthenticator(keys);
      this.replayGuard = new ReplayGuard(b.replayWindow.toMillis(), b.maxNoncesPerSender);
    } else {
      this.auth = null;
      this.replayGuard = null;
    }
    byte[] boot = new byte[8];
    new SecureRandom().nextBytes(boot);
    StringBuilder sb = new StringBuilder();
    for (byte x : boot) {
      sb.append(String.format("%02x", x));
    }
    this.bootId = sb.toString();
  }

  /**
   * A builder; {@code nodeId}, a listen address and a key choice are required.
   *
   * @return a new builder
   */
  public static Builder builder() {
    return new Builder();
  }

  // ---------------------------------------------------------------- lifecycle

  /**
   * Binds the server and starts delivering inbound traffic. A {@link #close()} called while it
   * runs waits for it and then stops what it started. The handler may be called before it
   * returns, as soon as the server accepts connections; {@link #send}, {@link #request} and
   * {@link #localAddress} work from then on, the handler's own calls included.
   *
   * <p>If it fails once the address is bound (a thread that cannot be created, say), it
   * releases the port and the threads it started, and the transport is closed.
   *
   * @throws IllegalStateException if called twice or after close
   * @throws java.io.UncheckedIOException if the listen address cannot be bound; its message
   *     names the address and why (the JDK's message: "Address already in use", say)
   */
  @Override
  public void start(InboundHandler handler) {
    Objects.requireNonNull(handler, "handler");
    synchronized (lifecycle) {
      startLocked(handler);
    }
  }

  private void startLocked(InboundHandler handler) {
    if (closed.get()) {
      throw new IllegalStateException("transport is closed");
    }
    if (!started.compareAndSet(false, true)) {
      throw new IllegalStateException("transport already started");
    }
    this.handler = handler;
    beforeBind.run();
    String prefix = "prefix-router-http-" + config.nodeId;
    try {
      InetSocketAddress bind = new InetSocketAddress(config.listenHost, config.listenPort);
      if (config.sslContext != null) {
        server = JdkHttpServers.createHttps(bind, config.backlog, config.sslContext,
            config.bindNodeIds ? JdkHttpServers.ClientCertificates.REQUIRED
                : JdkHttpServers.ClientCertificates.NONE);
      } else {
        server = JdkHttpServers.create(bind, config.backlog);
      }
    } catch (IOException e) {
      started.set(false);
      // says why too (an address in use, one not on this host): a host logs the message
      throw new java.io.UncheckedIOException("cannot listen on " + config.listenHost + ":"
          + config.listenPort + (e.getMessage() != null ? ": " + e.getMessage() : ""), e);
    }
    try {
      startBound(prefix);
    } catch (RuntimeException | Error e) {
      // a thread that cannot be created, say: the port and the threads started so far are
      // released, not left to a close() the caller has no reason to call
      closed.set(true);
      try {
        closeNow();
      } catch (RuntimeException | Error suppressed) {
        e.addSuppressed(suppressed);
      }
      throw e;
    }
  }

  /** The rest of {@link #start}, once the server is bound. */
  private void startBound(String prefix) {
    serverExecutor =
        new ThreadPoolExecutor(
            config.serverThreads,
            config.serverThreads,
            60,
            TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(),
            daemonThreads(prefix + "-server"));
    clientExecutor = Executors.newCachedThreadPool(daemonThreads(prefix + "-client"));
    ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, daemonThreads(prefix + "-timer"));
    t.setRemoveOnCancelPolicy(true);
    timer = t;
    // the JDK server reads requests with blocking reads on its executor's threads: every task
    // runs under the I/O deadline, or a connection that stalls mid-request (anyone's, before any
    // authentication) holds a thread forever
    ioDeadline = new IoDeadline(timer, config.inboundIoTimeout, counters.slowConnectionsClosed::increment);
    // each connection that starts a request is read on a thread of its own (up to
    // readerThreads, beyond which it is refused), so a stalled connection holds only its
    // own; the answers, for authenticated requests only, are written by the serverThreads
    Duration readWait = unfinishedReadWait;
    readers = new InboundReaders(config.readerThreads, config.maxUnfinishedReadsPerAddress,
        readWait != null ? readWait : InboundReaders.waitFor(config.inboundIoTimeout),
        daemonThreads(prefix + "-reader"),
        counters.readsRefused::increment);
    // a connection beyond them is answered 503 by one of a few refusers, under a short
    // deadline, so that its sender takes this node for busy, not failed; one cut there is
    // counted once, as refused
    server.setExecutor(readers.executor(ioDeadline, REFUSER_THREADS,
        new IoDeadline(timer, InboundReaders.waitFor(config.inboundIoTimeout), () -> { }),
        daemonThreads(prefix + "-refuser")));
    server.createContext(MESSAGE_PATH, ex -> handleInbound(ex, false));
    server.createContext(REQUEST_PATH, ex -> handleInbound(ex, true));
    // the address and the client before the server starts: the handler may be called as soon
    // as it does, and may send and request from there (send and request take a client for a
    // started transport, and buildRequest needs the address)
    String advertised = config.advertisedAddress;
    if (advertised == null) {
      InetSocketAddress a = server.getAddress();
      advertised = hostPort(config.listenHost, a.getPort()); // never a wildcard (see build())
    }
    localAddress = new PeerAddress(config.nodeId, advertised);
    HttpClient.Builder cb =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(config.connectTimeout)
            .followRedirects(HttpClient.Redirect.NEVER)
            // peers directly: without a selector of its own, the client takes the host's default,
            // and a proxy the host set up for its own traffic (http.proxyHost, say) carried
            // every message and request to the peers
            .proxy(HttpClient.Builder.NO_PROXY)
            .executor(clientExecutor);
    if (config.sslContext != null) {
      cb.sslContext(config.sslContext);
    }
    // the client's selector thread starts as the client is built: built so, close() ends it
    built = JdkHttpClients.build(cb, prefix + "-client-build");
    client = built.http();
    // the JDK server's dispatcher thread is a daemon only if the thread starting it is one (a
    // host's main thread is not): started on the timer thread, it never keeps the JVM alive
    try {
      Uninterruptibles.getUninterruptibly(timer.submit(server::start));
    } catch (ExecutionException e) {
      Throwables.throwIfUnchecked(e.getCause());
      throw new IllegalStateException("cannot start the HTTP server", e.getCause());
    }
    whileStarting.run();
    log.info(
        "{} listening on {} ({}, {})",
        config.nodeId,
        advertised,
        config.sslContext == null ? "plain HTTP"
            : config.bindNodeIds ? "TLS, node ids bound to certificates" : "TLS",
        auth != null ? "HMAC-SHA256 authentication, cluster keys " + auth.keyIds().keySet()
            + " (the first signs)" : "NO authentication");
  }

  @Override
  public PeerAddress localAddress() {
    PeerAddress a = localAddress;
    if (a == null) {
      throw new IllegalStateException("transport not started");
    }
    return a;
  }

  /** The builder's {@link Builder#maxMessageBytes}: the largest payload sent or accepted. */
  @Override
  public int maxMessageBytes() {
    return config.maxMessageBytes;
  }

  /**
   * Fails every pending request with {@code CLOSED}, cancels the one-way messages still awaiting
   * their answer, answers inbound requests still in progress with 503, stops the server and
   * releases all threads. Waits at most {@code inboundIoTimeout}
   * for the answers being written, whatever a peer does, after a {@link #start} in progress.
   * Idempotent.
   */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    // shutting a pool down interrupts its threads, this one too if it is one of them (the node
    // closes the transport from whichever thread completes its last request): leave this
    // thread's interrupt status as it was
    boolean wasInterrupted = Thread.currentThread().isInterrupted();
    try {
      synchronized (lifecycle) { // after a start() in progress, which it would miss
        closeNow();
      }
    } finally {
      if (!wasInterrupted) {
        Thread.interrupted();
      }
    }
  }

  private void closeNow() {
    for (CompletableFuture<byte[]> f : pending.keySet()) {
      if (settle(f)) {
        f.completeExceptionally(
            new TransportException(TransportException.Kind.CLOSED, "transport closed"));
      }
    }
    // a message whose peer stalls in its answer was cut only by the timer, stopped below: its
    // exchange, its connection and the HTTP client's selector thread would outlive close
    for (CompletableFuture<HttpResponse<Void>> m : messagesInFlight) {
      m.cancel(true);
    }
    if (serverExecutor != null) {
      // the 503s are written by the server threads under the I/O deadline, as every answer is,
      // never by the closing thread: a peer that leaves its answers unread must not block it
      // (it may be the timer thread, which drives the deadlines). The closing thread waits for
      // them at most the I/O timeout; a write still blocked then is cut by the interrupt of
      // shutdownNow, which closes its connection
      for (HttpExchange ex : inboundPending) {
        if (inboundPending.remove(ex)) {
          writeLater(ex, 503, "transport closed");
        }
      }
      serverExecutor.shutdown();
      Uninterruptibles.awaitTerminationUninterruptibly(serverExecutor, config.inboundIoTimeout);
    }
    if (server != null) {
      server.stop(0);
    }
    if (serverExecutor != null) {
      serverExecutor.shutdownNow();
      // the answers no server thread has started by now are not written: their connections
      // are closed (server.stop closed them already) and their inbound slots given back
      for (Reply r : replies) {
        r.drop();
      }
      lanes.clear();
    }
    if (readers != null) {
      readers.shutdownNow();
    }
    if (timer != null) {
      timer.shutdownNow();
    }
    if (clientExecutor != null) {
      clientExecutor.shutdownNow();
    }
    if (built != null) {
      // JDK 17's HttpClient cannot be closed: its selector thread ran until the client was
      // garbage collected, for as long as the host held this transport (after a failed start
      // too). Ended, it fails what the client still had in progress
      built.end();
    }
    log.info("{} transport closed: {}", config.nodeId, stats());
  }

  // ---------------------------------------------------------------- outbound

  /**
   * Best effort: never throws for delivery problems; drops (and counts) what it cannot send, a
   * message whose building throws (its HMAC failing, say) included.
   */
  @Override
  public void send(PeerAddress to, byte[] payload) {
    Objects.requireNonNull(to, "to");
    Objects.requireNonNull(payload, "payload");
    if (closed.get() || client == null) {
      counters.messagesDropped.increment();
      return;
    }
    if (payload.length > config.maxMessageBytes) {
      counters.messagesDropped.increment();
      log.warn("dropping {}-byte message to {}: above maxMessageBytes", payload.length, to);
      return;
    }
    String peer = peerKey(to.address());
    if (!acquire(peer, config.maxInFlightPerPeer)) {
      counters.messagesDropped.increment();
      counters.outboundBusy.increment();
      return;
    }
    HttpRequest req;
    try {
      req = buildRequest(to, payload, MESSAGE_PATH, TAG_MESSAGE, config.messageTimeout, nextNonce());
    } catch (Throwable e) { // a bad address; or the HMAC (the host's JCA provider), say, threw
      release(peer);
      counters.messagesDropped.increment();
      log.warn("dropping message to {}: {}", to,
          e instanceof IllegalArgumentException ? e.getMessage() : "cannot build it: " + e);
      return;
    }
    CompletableFuture<HttpResponse<Void>> f;
    try {
      f = client.sendAsync(req, HttpResponse.BodyHandlers.discarding());
    } catch (Throwable e) { // executor shut down by a concurrent close, an Error: never sent
      release(peer);
      counters.messagesDropped.increment();
      return;
    }
    // counted once the client took it, before its outcome (registered below) can be counted
    counters.messagesSent.increment();
    counters.bytesOut.add(payload.length);
    messagesInFlight.add(f);
    f.whenComplete(
        (r, e) -> {
          messagesInFlight.remove(f);
          release(peer);
          // an answer, whatever its status, from a server whose certificate does not name the
          // node is not taken: its 204 says nothing of the message reaching the node, nor its
          // 401 that the node at that address is another one
          String uncertified = e == null ? uncertifiedAnswer(to, r) : null;
          if (e != null || uncertified != null || r.statusCode() != 204) {
            counters.messagesFailed.increment();
            if (e == null && uncertified == null) {
              noteOtherNode(to, r);
            }
            if (log.isDebugEnabled()) {
              log.debug("message to {} failed: {}", to, e != null ? e.toString()
                  : uncertified != null ? "answer " + r.statusCode() + " came with a TLS "
                  + "certificate that does not name " + to.nodeId() + " (" + uncertified + ")"
                  : r.statusCode());
            }
          }
        });
    try {
      // the HTTP client's timeout ends when the answer's headers arrive: a peer that stalls in
      // the body would hold this message's in-flight slot (and the connection) forever
      ScheduledFuture<?> limit =
          timer.schedule(() -> f.cancel(true), config.messageTimeout.toNanos(), TimeUnit.NANOSECONDS);
      f.whenComplete((r, e) -> limit.cancel(false));
    } catch (RuntimeException e) { // timer shut down by a concurrent close
      f.cancel(true);
    }
    if (closed.get()) {
      f.cancel(true); // close() may have let go of the messages in flight before this one
    }
  }

  @Override
  public CompletableFuture<byte[]> request(PeerAddress to, byte[] payload, Duration timeout) {
    Objects.requireNonNull(to, "to");
    Objects.requireNonNull(payload, "payload");
    Objects.requireNonNull(timeout, "timeout");
    CompletableFuture<byte[]> result = new RequestFuture();
    if (timeout.isNegative() || timeout.isZero()) {
      result.completeExceptionally(
          new TransportException(TransportException.Kind.TIMEOUT, "timeout must be positive, was " + timeout));
      return result;
    }
    // a timer cannot count further, and nobody waits longer
    Duration limit = timeout.compareTo(LONGEST_TIMEOUT) > 0 ? LONGEST_TIMEOUT : timeout;
    if (client == null) {
      result.completeExceptionally(
          new TransportException(
              closed.get() ? TransportException.Kind.CLOSED : TransportException.Kind.UNREACHABLE,
              closed.get() ? "transport closed" : "transport not started"));
      return result;
    }
    pending.put(result, NO_SLOT);
    if (closed.get()) {
      pending.remove(result);
      result.completeExceptionally(new TransportException(TransportException.Kind.CLOSED, "transport closed"));
      return result;
    }
    if (payload.length > config.maxMessageBytes) {
      fail(result, TransportException.Kind.TOO_LARGE,
          "request of " + payload.length + " bytes exceeds maxMessageBytes " + config.maxMessageBytes, null);
      return result;
    }
    String peer = peerKey(to.address());
    int slots = config.maxInFlightPerPeer - slotsForMessages(config.maxInFlightPerPeer);
    if (!acquire(peer, slots)) {
      counters.outboundBusy.increment();
      int kept = config.maxInFlightPerPeer - slots;
      // raised here, not said by the peer: the node does not take it for the peer's push-back
      fail(result, new InFlightLimitException(slots + " requests and messages already in flight to "
          + to + (kept == 0 ? "" : " (the other " + kept + " of maxInFlightPerPeer "
          + config.maxInFlightPerPeer + " are kept for messages)")));
      return result;
    }
    if (!pending.replace(result, NO_SLOT, peer)) {
      release(peer); // closed meanwhile: close() completed it
      return result;
    }
    // completed by the caller otherwise than by cancel() (which gives the slot back first):
    // the slot is given back then
    result.whenComplete((v, e) -> settle(result));
    String nonce = nextNonce();
    HttpRequest req;
    try {
      // the HTTP client's own timeout is a backstop; the timer below decides
      req = buildRequest(to, payload, REQUEST_PATH, TAG_REQUEST, limit.plusSeconds(1), nonce);
    } catch (IllegalArgumentException e) {
      fail(result, TransportException.Kind.UNREACHABLE, "bad peer address " + to.address() + ": " + e.getMessage(), e);
      return result;
    } catch (Throwable e) { // the HMAC (the host's JCA provider), say, threw: never sent
      fail(result, kindOf(e), "cannot build the request to " + to + ": " + e, e);
      return result;
    }
    // the answer takes its heap from the answers' budget as it arrives, until it is
    // authenticated and handed on, as inbound bodies do from theirs: given back however the
    // request ends
    BodyBudget.Share share = answers.share();
    result.whenComplete((v, e) -> share.close());
    CompletableFuture<HttpResponse<byte[]>> http;
    try {
      ScheduledFuture<?> timeoutTask =
          timer.schedule(
              () -> fail(result, TransportException.Kind.TIMEOUT,
                  "no answer from " + to + " within " + limit.toMillis() + " ms", null),
              limit.toNanos(),
              TimeUnit.NANOSECONDS);
      result.whenComplete((v, e) -> timeoutTask.cancel(false));
      http = client.sendAsync(req,
          info -> CappedBody.orFail(info, config.maxMessageBytes, TooLargeException::new, share));
    } catch (RuntimeException e) { // executors shut down by a concurrent close: never sent
      fail(result, TransportException.Kind.CLOSED, "transport closed", e);
      return result;
    } catch (Throwable e) { // an Error (a thread the client cannot start, say): never sent
      fail(result, kindOf(e), "request to " + to + " not sent: " + e, e);
      return result;
    }
    // counted once the client took it, before its answer (handled below) can complete it
    counters.requestsSent.increment();
    counters.bytesOut.add(payload.length);
    result.whenComplete((v, e) -> {
      if (e != null) {
        http.cancel(true);
      }
    });
    http.whenComplete(
        (resp, err) -> {
          if (err != null) {
            Throwable c = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
            if (refusedShare(c)) {
              // this node's shortage, not the peer's fault: the node runs the request itself
              // and does not cool the peer down, as for an answer above maxMessageBytes
              fail(result, TransportException.Kind.TOO_LARGE, "the answer from " + to
                  + " could not get its share of the heap this node gives the answers to its"
                  + " requests being read before they are authenticated (" + answers.capacity()
                  + " bytes, bodyBudget): other answers held it", c);
              return;
            }
            fail(result, kindOf(c), "request to " + to + " failed: " + c, c);
            return;
          }
          try {
            completeFromResponse(result, to, nonce, resp);
          } catch (Throwable e) { // the HMAC (the host's JCA provider), say, threw as it checked
            // the answer: thrown on, it would be lost in this callback's own future, and the
            // request would hold its slot until its timeout
            fail(result, kindOf(e), "cannot check the answer from " + to + ": " + e, e);
          }
        });
    return result;
  }

  /**
   * The future {@link #request} returns. Its caller's {@link #cancel} takes the request out of
   * the pending ones and gives back its in-flight slot before the future completes, as the
   * transport's own completions do ({@link #settle}): the callbacks the caller registered (which
   * run before the transport's own) find the slot free, so a node that sends the peer a CANCEL
   * or forwards again from them, at the peer's limit, is not refused as busy. The futures made
   * from it are plain ones.
   */
  private final class RequestFuture extends CompletableFuture<byte[]> {
    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
      settle(this);
      return super.cancel(mayInterruptIfRunning);
    }

    @Override
    public <U> CompletableFuture<U> newIncompleteFuture() {
      return new CompletableFuture<>();
    }
  }

  /**
   * Of a peer's {@code maxInFlightPerPeer} slots, the last ones, which requests may not take:
   * forwards of long generations holding all the others leave room for one-way messages
   * (gossip, CANCELs, streamed output), so that a peer kept busy by this node's forwards still
   * hears its heartbeat and push-back. {@code min(4, maxInFlightPerPeer / 4)}: 4 of the default
   * 64; none below 4.
   */
  static int slotsForMessages(int maxInFlightPerPeer) {
    return Math.min(4, maxInFlightPerPeer / 4);
  }

  /**
   * Takes one of the peer's slots if fewer than {@code limit} of them are taken; false if not.
   * Entries exist only while something is in flight, so addresses of peers long gone (churn)
   * take no memory.
   */
  private boolean acquire(String peer, int limit) {
    boolean[] taken = new boolean[1];
    inFlightByPeer.compute(peer, (k, n) -> {
      int c = n == null ? 0 : n;
      if (c >= limit) {
        return n;
      }
      taken[0] = true;
      return c + 1;
    });
    return taken[0];
  }

  private void release(String peer) {
    inFlightByPeer.computeIfPresent(peer, (k, n) -> n <= 1 ? null : n - 1);
  }

  /**
   * The key {@code maxInFlightPerPeer} counts a peer's requests and messages under: its address
   * with the spellings of one host and port folded, so that a peer known under two (from a seed
   * list and from gossip, say) is not given twice the limit. A host name is taken in lower case
   * (host names are case-insensitive); an IPv6 literal in the JDK's own form (groups without
   * leading zeros or {@code ::}; an IPv4-mapped one as the IPv4 address it is connected to); a
   * port without leading zeros. Nothing is looked up: a name stays a name (two names of one
   * host still count apart), and an IPv6 literal is parsed only when it is one (hex digits,
   * colons and dots), which is never resolved. An address that is not {@code host:port}, or
   * with a zone id, is its own key (a request to it fails as a bad address anyway).
   */
  static String peerKey(String address) {
    int colon = address.lastIndexOf(':');
    if (colon <= 0 || colon == address.length() - 1 || address.length() - colon > 8) {
      return address;
    }
    int port = 0;
    for (int i = colon + 1; i < address.length(); i++) {
      char c = address.charAt(i);
      if (c < '0' || c > '9') {
        return address;
      }
      port = port * 10 + (c - '0');
    }
    if (port > 65535) {
      return address;
    }
    // a leading zero is spelled away; the port 0 keeps its one
    boolean plainPort = address.charAt(colon + 1) != '0' || colon + 2 == address.length();
    if (address.charAt(0) == '[') {
      String host = address.substring(0, colon);
      if (host.length() < 3 || host.charAt(host.length() - 1) != ']' || !ipv6Literal(host)) {
        return address;
      }
      try {
        // bracketed, a literal is parsed or refused, never resolved
        java.net.InetAddress a = java.net.InetAddress.getByName(host);
        String literal = a.getHostAddress();
        return (a instanceof java.net.Inet6Address ? "[" + literal + "]" : literal) + ":" + port;
      } catch (java.net.UnknownHostException | RuntimeException e) {
        return address;
      }
    }
    boolean upperCase = false;
    for (int i = 0; i < colon; i++) {
      char c = address.charAt(i);
      if (c == ':') {
        return address;
      }
      upperCase |= c >= 'A' && c <= 'Z';
    }
    if (!upperCase && plainPort) {
      return address; // the common case, on every send: already its own key, nothing allocated
    }
    return address.substring(0, colon).toLowerCase(java.util.Locale.ROOT) + ":" + port;
  }

  /** Whether {@code [...]} holds only what an IPv6 literal without a zone id may: hex, : and . */
  private static boolean ipv6Literal(String bracketed) {
    boolean colon = false;
    for (int i = 1; i < bracketed.length() - 1; i++) {
      char c = bracketed.charAt(i);
      if (c == ':') {
        colon = true;
      } else if (c != '.' && Character.digit(c, 16) < 0) {
        return false;
      }
    }
    return colon;
  }

  /** Peer addresses with requests or messages in flight now (for tests). */
  int peersInFlight() {
    return inFlightByPeer.size();
  }

  /**
   * Requests from the host {@code address} whose body is being read now, their reader slots
   * held (for tests: to wait until stalled bodies hold their address's slots).
   */
  int unfinishedReadsFrom(java.net.InetAddress address) {
    return readers.unfinishedReads(new InetSocketAddress(address, 0));
  }

  /**
   * Inbound requests whose handler has not answered yet, none answered 504 or 503 in its place
   * (for tests: to wait until the handling limit has answered a request).
   */
  int requestsBeingHandled() {
    return inboundPending.size();
  }

  /** Slots of {@code maxInboundRequests} held now (for tests). */
  int inboundSlotsHeld() {
    return inboundRequests.get();
  }

  /**
   * The 503s of a full server handed to the server threads or waiting in a lane, neither
   * written nor dropped yet (for tests).
   */
  int busyAnswersHeld() {
    return (int) replies.stream().filter(r -> !r.holdsSlot).count();
  }

  /** Peer addresses with answers handed to the server threads or waiting (for tests). */
  int answerLanes() {
    return lanes.keys();
  }

  /** Answers to the host {@code address} handed to the server threads now (for tests). */
  int answersBeingWrittenTo(java.net.InetAddress address) {
    return lanes.running(address);
  }

  /** Answers to the host {@code address} waiting in its lane now (for tests). */
  int answersWaitingFor(java.net.InetAddress address) {
    return lanes.waiting(address);
  }

  /**
   * Reader threads reading a connection's request now, refusers not counted (for tests: to
   * wait until stalled connections hold theirs).
   */
  int readersInUse() {
    return readers.readersInUse();
  }

  private void completeFromResponse(
      CompletableFuture<byte[]> result, PeerAddress to, String nonce, HttpResponse<byte[]> resp) {
    int status = resp.statusCode();
    byte[] body = resp.body() == null ? new byte[0] : resp.body();
    String error = resp.headers().firstValue(H_ERROR).orElse("");
    if (status != 200 && !certified(result, to, resp)) {
      // an error answer is not signed: with node ids bound to certificates, its connection's
      // certificate alone says who gave it, and an impostor's 503, or its 500 saying the node
      // serves another model, would have the node skip the peer asked
      return;
    }
    switch (status) {
      case 200 -> {
        MessageAuthenticator keys = auth;
        if (keys != null) {
          String mac = resp.headers().firstValue(H_MAC).orElse(null);
          if (!verified(keys.verify(mac, body, TAG_RESPONSE, to.nodeId(), config.nodeId, nonce, "200"))) {
            noteForeignKey(keys, "the answers of " + to,
                resp.headers().firstValue(H_KEY_ID).orElse(null));
            fail(result, TransportException.Kind.PROTOCOL,
                "answer from " + to + " failed authentication; dropped", null);
            return;
          }
        }
        if (!certified(result, to, resp)) {
          return;
        }
        if (settle(result)) {
          counters.bytesIn.add(body.length);
          result.complete(body);
        }
      }
      case 503 -> fail(result, TransportException.Kind.BUSY, to + " is busy" + suffix(error), null);
      case 504 -> fail(result, TransportException.Kind.TIMEOUT, to + " timed out handling the request" + suffix(error), null);
      case 401 -> {
        String other = noteOtherNode(to, resp);
        fail(result, TransportException.Kind.PROTOCOL, other != null
            ? "the node at " + to.address() + " is " + other + ", not " + to.nodeId() + suffix(error)
            : to + " rejected the request's authentication" + suffix(error), null);
      }
      case 413 -> fail(result, TransportException.Kind.TOO_LARGE, to + " refused the request or its answer as too large" + suffix(error), null);
      default -> fail(result, TransportException.Kind.PROTOCOL, to + " answered HTTP " + status + suffix(error), null);
    }
  }

  /**
   * With {@link Builder#bindNodeIdsToCertificates} on, whether the TLS certificate an answer (of
   * any status) came with names the node the request was sent to; if not, counts and warns of
   * it ({@link #uncertifiedAnswer}) and fails the request with {@code PROTOCOL}. Always true
   * with the option off.
   */
  private boolean certified(CompletableFuture<byte[]> result, PeerAddress to,
      HttpResponse<byte[]> resp) {
    String certificate = uncertifiedAnswer(to, resp);
    if (certificate == null) {
      return true;
    }
    fail(result, TransportException.Kind.PROTOCOL, "answer from " + to + " came with a TLS "
        + "certificate that does not name " + to.nodeId() + " (" + certificate + "); dropped",
        null);
    return false;
  }

  /**
   * With {@link Builder#bindNodeIdsToCertificates} on, checks that the TLS certificate an answer
   * to a request or a message (of any status) came with names the node it was sent to; if not,
   * counts and warns of it ({@link #noteUncertified}).
   *
   * @return null if the certificate names the node (always, with the option off); else the
   *     certificate's description, printable
   */
  private String uncertifiedAnswer(PeerAddress to, HttpResponse<?> resp) {
    if (!config.bindNodeIds) {
      return null;
    }
    X509Certificate leaf = CertificateNodeIds.leaf(resp.sslSession().orElse(null));
    if (CertificateNodeIds.names(leaf, to.nodeId())) {
      return null;
    }
    noteUncertified("an answer", to.nodeId(), to.address(), leaf);
    return sanitize(CertificateNodeIds.describe(leaf));
  }

  /**
   * If a peer answered 401 saying it is another node than the one addressed (a seed or peer
   * list with the wrong id: every message to it fails), logs a warning naming both ids, once per
   * address and id.
   *
   * @return the id the peer says it has, or null if the answer does not say another one
   */
  private String noteOtherNode(PeerAddress to, HttpResponse<?> resp) {
    if (resp.statusCode() != 401) {
      return null;
    }
    String other = resp.headers().firstValue(H_NODE).orElse(null);
    if (other == null || other.equals(to.nodeId())) {
      return null;
    }
    other = sanitize(other);
    String key = to.address() + " " + to.nodeId();
    long leftOut = otherNodes.admit(key, other, wallClockMillis.getAsLong());
    if (leftOut >= 0) {
      log.warn("{}: the node at {} is {}, not {}; messages to {} are refused there (check the "
          + "seeds or peer list){}", config.nodeId, to.address(), other, to.nodeId(), to.nodeId(),
          leftOut(leftOut));
    }
    return other;
  }

  /**
   * After a MAC check failed: if the sender names, as its signing key, a key this node does not
   * hold, warns once per sender and key that this node does not accept that key, which is what a
   * key rotation with a step skipped looks like. The {@link #MAX_OTHER_NODES} sender and key
   * pairs seen most recently are remembered; one forgotten since it was last seen warns again. At
   * most {@link #WARNINGS_PER_MINUTE} such warnings are logged a minute (the next one logged
   * says how many were left out); a pair left out is not remembered, so it warns once the
   * minute is over. A failure under a key this node holds (or naming none) is a forgery or a
   * corruption, and stays a debug line.
   */
  private void noteForeignKey(MessageAuthenticator keys, String whose, String keyId) {
    if (keyId == null || !keyId.matches("[0-9a-f]{8}") || keys.keyIds().containsKey(keyId)) {
      return;
    }
    String key = whose + " " + keyId;
    long leftOut = foreignKeys.admit(key, keyId, wallClockMillis.getAsLong());
    if (leftOut < 0) {
      return; // warned of already, or left out this minute (the next warning counts it)
    }
    log.warn("{}: {} are signed with cluster key {}, which this node does not accept (it "
        + "accepts {}); they are refused (docs/deployment.md, \"Rotating the cluster key\"){}",
        config.nodeId, whose, keyId, keys.keyIds().keySet(), leftOut(leftOut));
  }

  /** A warning's note of the {@code n} warnings of its kind left out before it, if any. */
  private static String leftOut(long n) {
    return n == 0 ? "" : " (" + n + " more such warnings left out before this one, above "
        + WARNINGS_PER_MINUTE + " a minute)";
  }

  private static RecentWarnings warnings() {
    return new RecentWarnings(MAX_OTHER_NODES, WARNINGS_PER_MINUTE);
  }

  /**
   * Counts a message or request that a failure of this node's own answers 500
   * ({@link Stats#internalErrors()}), and logs it: at most {@link #WARNINGS_PER_MINUTE} such
   * lines a minute, all kinds together (the next one logged says how many were left out), since
   * a provider or a heap that fails once fails for every message that arrives meanwhile
   * ({@link CountedFailureLog}).
   *
   * @param what what failed, and what was thrown
   * @param trace what was thrown, to log with its stack trace (at error level for an
   *     {@link Error}); null for none
   */
  private void failedHere(String what, Throwable trace) {
    ownFailures.failed(trace, "{}: {}", config.nodeId, what);
  }

  /**
   * Counts a message or answer refused because the certificate of its TLS connection does not
   * name the node id it claims to come from ({@link Builder#bindNodeIdsToCertificates}), and
   * warns once per claimed id and certificate subject (the {@link #MAX_OTHER_NODES} pairs seen
   * most recently remembered, at most {@link #WARNINGS_PER_MINUTE} warnings a minute; the
   * others are debug lines).
   */
  private void noteUncertified(String what, String claimed, String address, X509Certificate leaf) {
    counters.senderNotInCertificate.increment();
    String id = sanitize(claimed);
    String key = id + " " + sanitize(CertificateNodeIds.subject(leaf));
    long leftOut = uncertifiedSenders.admit(key, id, wallClockMillis.getAsLong());
    if (leftOut >= 0) {
      log.warn("{}: refused {} claiming to come from {} (at {}): its TLS certificate, {}, does not "
          + "name {} (docs/deployment.md, \"Binding node ids to certificates\"){}", config.nodeId,
          what, id, sanitize(address), sanitize(CertificateNodeIds.describe(leaf)), id,
          leftOut(leftOut));
    } else if (log.isDebugEnabled()) {
      log.debug("{}: refused {} claiming to come from {} (at {}) over TLS with {}", config.nodeId,
          what, id, sanitize(address), sanitize(CertificateNodeIds.describe(leaf)));
    }
  }

  /**
   * Says how far a stale message's timestamp is from this node's clock, and warns once per
   * sender (the {@link #MAX_OTHER_NODES} senders seen most recently remembered, at most
   * {@link #WARNINGS_PER_MINUTE} warnings a minute): a sender whose clock is off by more than
   * the replay window has every message refused, which otherwise showed only as
   * {@link Stats#replaysRejected()} here and as failures of its own at debug level there. The
   * sender's MAC was verified, so only key holders reach this.
   *
   * @return the distance, for the refusal's text
   */
  private String noteStale(PeerAddress from, long timestamp, long now) {
    String apart;
    try {
      long behind = Math.subtractExact(now, timestamp);
      apart = behind > 0 ? behind + " ms behind" : Math.absExact(behind) + " ms ahead of";
    } catch (ArithmeticException e) {
      apart = "further than a long can count from";
    }
    String distance = "timestamp is " + apart + " this node's clock, beyond the replay window of "
        + config.replayWindow.toMillis() + " ms";
    String id = sanitize(from.nodeId());
    long leftOut = staleSenders.admit(id, distance, now);
    if (leftOut >= 0) {
      log.warn("{}: refused a message from {} (at {}) whose {}: the hosts' clocks disagree (check "
          + "NTP), or the message was replayed late; while they disagree, every message it sends "
          + "here is refused (docs/deployment.md, \"Authentication\"){}", config.nodeId, id,
          sanitize(from.address()), distance, leftOut(leftOut));
    }
    return distance;
  }

  /** Senders warned of for a stale timestamp (for tests). */
  Set<String> staleSendersSeen() {
    return staleSenders.seen().keySet();
  }

  /** "claimed-id certificate-subject" for each sender refused for its certificate (for tests). */
  Set<String> uncertifiedSendersSeen() {
    return uncertifiedSenders.seen().keySet();
  }

  /** "whose key-id" for each warning of a key this node does not accept (for tests). */
  Set<String> foreignKeysSeen() {
    return foreignKeys.seen().keySet();
  }

  /** "address expected-id" to the id the node there said it has, for each warning logged. */
  Map<String, String> otherNodesSeen() {
    return otherNodes.seen();
  }

  /** The peer's error text (not authenticated), printable and shortened, for a failure. */
  private static String suffix(String error) {
    return error.isEmpty() ? "" : ": " + sanitize(error);
  }

  private void fail(CompletableFuture<byte[]> f, TransportException.Kind kind, String message, Throwable cause) {
    fail(f, new TransportException(kind, message, cause));
  }

  private void fail(CompletableFuture<byte[]> f, TransportException e) {
    if (settle(f) && f.completeExceptionally(e)) {
      counters.requestsFailed.increment();
    }
  }

  /**
   * Takes a request out of the pending ones and gives back its in-flight slot, before it is
   * completed: the slot is free when the future's callbacks run (a node that forwards again
   * from them, at the peer's limit, is not refused as busy).
   *
   * @return true if this call took it out (and so completes it); false if another did
   */
  private boolean settle(CompletableFuture<byte[]> f) {
    String peer = pending.remove(f);
    if (peer == null) {
      return false;
    }
    if (!peer.isEmpty()) {
      release(peer);
    }
    return true;
  }

  /** Whether {@code t}, or one of its causes, is the body budget's refusal of a share. */
  private static boolean refusedShare(Throwable t) {
    for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
      if (c instanceof BodyBudget.Refused) {
        return true;
      }
    }
    return false;
  }

  private TransportException.Kind kindOf(Throwable t) {
    if (t instanceof TooLargeException) {
      // the answer is above this node's cap: a peer of a higher cap would answer alike
      return TransportException.Kind.TOO_LARGE;
    }
    if (t instanceof HttpConnectTimeoutException || t instanceof ConnectException) {
      return TransportException.Kind.UNREACHABLE;
    }
    if (t instanceof HttpTimeoutException) {
      return TransportException.Kind.TIMEOUT;
    }
    if (closed.get() || t instanceof ClosedChannelException) {
      return closed.get() ? TransportException.Kind.CLOSED : TransportException.Kind.UNREACHABLE;
    }
    if (t instanceof SSLException) {
      return TransportException.Kind.PROTOCOL;
    }
    if (t instanceof ProtocolException
        || t instanceof UncheckedIOException u && u.getCause() instanceof ProtocolException
        || JdkHttpClients.malformedChunk(t)) {
      // a malformed answer (the HTTP client's: a status line that is none, too many interim
      // answers, a chunked body out of form; CappedBody's: a Content-Length that is no number),
      // as one of an unexpected status is
      return TransportException.Kind.PROTOCOL;
    }
    return TransportException.Kind.UNREACHABLE;
  }

  private HttpRequest buildRequest(
      PeerAddress to, byte[] payload, String path, String tag, Duration timeout, String nonce) {
    requireHostPort(to.address());
    URI uri = URI.create((config.sslContext != null ? "https://" : "http://") + to.address() + path);
    String ts = Long.toString(wallClockMillis.getAsLong());
    PeerAddress me = localAddress;
    HttpRequest.Builder b =
        HttpRequest.newBuilder(uri)
            .timeout(timeout)
            .header(H_SENDER, me.nodeId())
            .header(H_SENDER_ADDRESS, me.address())
            .header(H_RECIPIENT, to.nodeId())
            .header(H_TIMESTAMP, ts)
            .header(H_NONCE, nonce)
            .header("Content-Type", "application/octet-stream")
            .POST(HttpRequest.BodyPublishers.ofByteArray(payload));
    MessageAuthenticator keys = auth;
    if (keys != null) {
      b.header(H_MAC, keys.sign(payload, tag, me.nodeId(), me.address(), to.nodeId(), ts, nonce));
      b.header(H_KEY_ID, keys.signingKeyId());
    }
    return b.build();
  }

  /**
   * Checks that a peer address is {@code host:port} and nothing more. The address is put in
   * front of the protocol's path, so one with a path, query or fragment of its own ({@code
   * "10.0.0.5:80/admin?"}) would send the request to another path of that host, and one with
   * user info names the same host under another in-flight limit.
   *
   * @throws IllegalArgumentException if it is not
   */
  static void requireHostPort(String address) {
    URI u;
    try {
      u = new URI("http://" + address);
    } catch (java.net.URISyntaxException e) {
      throw new IllegalArgumentException("address must be host:port, was " + address);
    }
    if (u.getHost() == null || u.getPort() < 0 || u.getPort() > 65535
        || u.getRawUserInfo() != null || !address.equals(u.getRawAuthority())) {
      throw new IllegalArgumentException("address must be host:port, was " + address);
    }
  }

  /** Counts a MAC check's outcome ({@link MessageAuthenticator#verify}); true if it passed. */
  private boolean verified(int key) {
    if (key == MessageAuthenticator.NO_KEY) {
      counters.authFailures.increment();
      return false;
    }
    if (key > 0) {
      counters.otherKeyAuthentications.increment();
    }
    return true;
  }

  // ---------------------------------------------------------------- key rotation

  /**
   * Replaces the cluster keys while the transport runs: from now on messages and answers are
   * signed with {@code signingKey}, and inbound ones pass if any of the given keys produced their
   * MAC. A message being checked while the keys change is checked against the old keys or the
   * new ones, never a mix.
   *
   * <p>A rotation from key A to key B without a moment in which two nodes cannot authenticate
   * each other takes three steps, each finished on every node before the next begins: (1)
   * signing key A, accepting B; (2) signing key B, accepting A; (3) B alone, once
   * {@link Stats#otherKeyAuthentications()} has stopped growing on every node (nobody signs with
   * A any more). {@link Stats#clusterKeys()} shows each node's keys by id. docs/deployment.md
   * ("Rotating the cluster key") has the procedure for {@code NodeMain}, which re-reads its key
   * file.
   *
   * @param signingKey the key to sign with, at least 16 bytes; also accepted
   * @param acceptedKeys further keys to accept, at least 16 bytes each, at most 3 distinct
   *     besides the signing key (a repeat is ignored)
   * @throws IllegalStateException if the transport was built with
   *     {@link Builder#insecureWithoutAuthentication()}; or if the host's JCA providers, which
   *     give the HmacSHA256 and the SHA-256 of the keys' ids (a hardware token's, say), throw as
   *     the keys are set up, whatever they throw (what they threw is its cause), and the keys in
   *     use then stay as they were
   * @throws IllegalArgumentException if a key is null or too short, or there are too many; the
   *     keys in use then stay as they were
   */
  public void updateClusterKeys(byte[] signingKey, byte[]... acceptedKeys) {
    if (auth == null) {
      throw new IllegalStateException(
          "this transport was built without authentication; it has no cluster keys to update");
    }
    List<byte[]> keys = new ArrayList<>();
    keys.add(signingKey);
    if (acceptedKeys == null) {
      throw new IllegalArgumentException("acceptedKeys is null");
    }
    keys.addAll(Arrays.asList(acceptedKeys));
    MessageAuthenticator next = new MessageAuthenticator(keys);
    auth = next;
    counters.keyUpdates.increment();
    log.info("{}: cluster keys now {} (the first signs)", config.nodeId, next.keyIds().keySet());
  }

  private String nextNonce() {
    return bootId + "-" + Long.toHexString(nonceCounter.incrementAndGet());
  }

  // ---------------------------------------------------------------- inbound

  private void handleInbound(HttpExchange ex, boolean isRequest) {
    try {
      if (readers.refusing()) {
        // beyond readerThreads (counted when it was refused): not a byte of its body is read
        busy(ex, "too many requests being read at once");
        return;
      }
      if (closed.get()) {
        respondQuietly(ex, 503, new byte[0], "transport closed", null);
        return;
      }
      if (!"POST".equals(ex.getRequestMethod())) {
        ex.getResponseHeaders().add("Allow", "POST");
        respondQuietly(ex, 405, new byte[0], "use POST", null);
        return;
      }
      Headers h = ex.getRequestHeaders();
      long declared = parseLong(h.getFirst("Content-Length"), -1);
      if (declared > config.maxMessageBytes) {
        counters.oversizeRejected.increment();
        ex.getResponseHeaders().add("Connection", "close"); // its body is left unread
        respondQuietly(ex, 413, new byte[0], "body of " + declared + " bytes exceeds " + config.maxMessageBytes, null);
        return;
      }
      InetSocketAddress remote = ex.getRemoteAddress();
      if (!readers.tryAcquire(remote)) {
        busy(ex, "too many unfinished requests from this address");
        return;
      }
      byte[] body;
      Checked checked;
      boolean unreadable = false;
      BodyBudget.Share share;
      try {
        share = bodies.share();
      } catch (Throwable e) { // the heap ran out, say: the reader slot is given back all the same
        readers.release(remote);
        throw e;
      }
      // the share of the body budget is held until the body is authenticated (or refused), and
      // given back before any answer is written: a sender that does not read its answer must
      // not hold it
      try (share) {
        try {
          body = readBody(ex.getRequestBody(), declared, config.maxMessageBytes, share);
        } catch (IOException e) { // the body alone: an IOException thrown by anything else is
          // this node's failure, not a malformed message (answered 500 below)
          body = null;
          unreadable = true;
        } finally {
          readers.release(remote);
        }
        checked = body == null ? null : check(ex, h, body, isRequest);
      } catch (BodyBudget.Refused e) {
        busy(ex, e.getMessage());
        return;
      }
      // every answer of this thread is written under the I/O deadline, which ends only when the
      // message is handed on: a refusal first drains what is left of the body (the JDK server
      // reads up to 64 KiB of it), and a sender that stalls there, or does not read its
      // answers, would otherwise hold this reader thread for ever
      if (unreadable) {
        if (!ioDeadline.passed()) {
          // the body failed the read, not the I/O deadline (counted as a slow connection)
          counters.malformedRejected.increment();
        }
        respondQuietly(ex, 400, new byte[0], "cannot read body", null);
        if (!ioDeadline.endPhase()) {
          log.debug("closed a connection that did not deliver its request within {}", config.inboundIoTimeout);
        }
        return;
      }
      if (body == null) {
        counters.oversizeRejected.increment();
        ex.getResponseHeaders().add("Connection", "close"); // the rest of its body is unread
        respondQuietly(ex, 413, new byte[0], "body exceeds " + config.maxMessageBytes + " bytes", null);
        return;
      }
      if (checked.status != 0) {
        respondQuietly(ex, checked.status, new byte[0], checked.error, null);
        return;
      }
      PeerAddress from = checked.from;
      if (closed.get()) {
        // closed while the body was read and checked: close() has returned, deliver nothing
        respondQuietly(ex, 503, new byte[0], "transport closed", null);
        return;
      }
      counters.bytesIn.add(body.length);
      if (!isRequest) {
        counters.messagesReceived.increment();
        respondQuietly(ex, 204, null, null, null);
        // received whole and authenticated: delivered even if the deadline passed meanwhile
        ioDeadline.endPhase();
        try {
          handler.onMessage(from, body);
        } catch (Error e) { // not rethrown: see "Handler failures" in the class Javadoc
          log.error("inbound message handler threw an Error for a message from {}", from, e);
        } catch (Throwable e) { // a checked exception thrown undeclared too: it was taken for
          // the body failing to be read, and answered 400 after the 204
          log.warn("inbound message handler failed for a message from {}", from, e);
        }
        return;
      }
      handleRequest(ex, from, body, checked.nonce);
    } catch (Throwable e) { // anything else, an Error or a checked exception thrown undeclared
      // included: this node's failure, answered 500 unless an answer was written already (the
      // reader slot, the body's share and the inbound slot were given back on the way here). Not
      // rethrown, as the JDK server would leave the exchange unanswered: see "Handler failures"
      failedHere("unexpected failure handling inbound traffic", e);
      if (ex.getResponseCode() < 0) {
        // counted once: a 500 that cannot be written either is the same failure (its exchange
        // closed all the same)
        respond(ex, 500, new byte[0], "internal error", null, null);
      }
    }
  }

  /**
   * Answers a request refused for a limit of the reading of requests 503 with
   * {@code Retry-After}, as a busy peer: its sender fails the request with
   * {@link TransportException.Kind#BUSY}. The answer says {@code Connection: close}: the body is
   * left unread (all or part of it), and the JDK server drains at most 64 KiB of it before it
   * closes the connection, so a sender that kept the connection would send its next request
   * into a closed one and fail it as {@code UNREACHABLE}.
   */
  private void busy(HttpExchange ex, String error) {
    ex.getResponseHeaders().add("Retry-After", RETRY_AFTER_SECONDS);
    ex.getResponseHeaders().add("Connection", "close");
    respondQuietly(ex, 503, new byte[0], error, null);
  }

  /**
   * What the checks of an inbound envelope decided: accepted ({@code status} 0, from whom and
   * with which nonce) or refused with {@code status} and {@code error}.
   */
  private record Checked(PeerAddress from, String nonce, int status, String error) {
    static Checked refused(int status, String error) {
      return new Checked(null, null, status, error);
    }
  }

  /**
   * Checks an inbound envelope and its body: its form, its recipient, its MAC, the certificate
   * of its connection ({@link Builder#bindNodeIdsToCertificates}) and the replay guard, in that
   * order, counting and logging a refusal. Writes nothing (a header of the answer at most), so
   * that the caller can give back the body's share before answering.
   */
  private Checked check(HttpExchange ex, Headers h, byte[] body, boolean isRequest) {
    String sender = h.getFirst(H_SENDER);
    String senderAddress = h.getFirst(H_SENDER_ADDRESS);
    String recipient = h.getFirst(H_RECIPIENT);
    String ts = h.getFirst(H_TIMESTAMP);
    String nonce = h.getFirst(H_NONCE);
    PeerAddress from;
    long timestamp;
    try {
      from = new PeerAddress(sender, senderAddress);
      // the node sends its replies there, and its gossip tells others to
      requireHostPort(senderAddress);
      timestamp = Long.parseLong(Objects.requireNonNull(ts, H_TIMESTAMP));
      Objects.requireNonNull(nonce, H_NONCE);
      if (nonce.isEmpty() || nonce.length() > 64) {
        throw new IllegalArgumentException("nonce must have 1 to 64 characters");
      }
    } catch (RuntimeException e) {
      counters.malformedRejected.increment();
      return Checked.refused(400, "bad envelope: " + e.getMessage());
    }
    if (!config.nodeId.equals(recipient)) {
      counters.authFailures.increment();
      // says who is here, so that a sender with a wrong id for this address can tell
      ex.getResponseHeaders().add(H_NODE, config.nodeId);
      return Checked.refused(401, "message addressed to another node");
    }
    MessageAuthenticator keys = auth;
    if (keys != null) {
      String tag = isRequest ? TAG_REQUEST : TAG_MESSAGE;
      int key;
      try {
        key = keys.verify(h.getFirst(H_MAC), body, tag, sender, senderAddress, recipient, ts,
            nonce);
      } catch (Throwable e) { // the HMAC (the host's JCA provider) threw: this node's failure,
        // not the sender's (neither malformed nor forged), answered at once whatever it threw
        failedHere("cannot check the MAC of a " + tag + " from " + from + ": " + e, null);
        return Checked.refused(500, "internal error: cannot check the MAC");
      }
      if (!verified(key)) {
        noteForeignKey(keys, "the messages of the node calling itself " + sanitize(sender) + " at "
            + sanitize(senderAddress), h.getFirst(H_KEY_ID));
        log.debug("dropping message from {} that failed authentication", from);
        return Checked.refused(401, "authentication failed");
      }
    }
    if (config.bindNodeIds) {
      // before the replay guard: a refused message leaves no nonce behind
      X509Certificate leaf = CertificateNodeIds.leaf(
          ex instanceof HttpsExchange hx ? hx.getSSLSession() : null);
      if (!CertificateNodeIds.names(leaf, sender)) {
        noteUncertified(isRequest ? "a request" : "a message", sender, senderAddress, leaf);
        return Checked.refused(401, "sender " + sender + " is not named by this "
            + "connection's TLS certificate");
      }
    }
    if (keys != null) {
      long now = wallClockMillis.getAsLong();
      ReplayGuard.Verdict v = replayGuard.check(sender, nonce, timestamp, now);
      if (v != ReplayGuard.Verdict.ACCEPT) {
        counters.replaysRejected.increment();
        log.debug("dropping message from {}: {}", from, v);
        String why = "rejected: " + v.name().toLowerCase(java.util.Locale.ROOT);
        if (v == ReplayGuard.Verdict.STALE) {
          why += ": " + noteStale(from, timestamp, now);
        }
        return Checked.refused(401, why);
      }
    }
    return new Checked(from, nonce, 0, null);
  }

  private void handleRequest(HttpExchange ex, PeerAddress from, byte[] body, String nonce) {
    if (inboundRequests.incrementAndGet() > config.maxInboundRequests) {
      inboundRequests.decrementAndGet();
      counters.inboundBusy.increment();
      // by a server thread, as every answer to an authenticated request: written on this reader
      // thread, it held the thread for as long as its peer did not read (up to inboundIoTimeout)
      writeBusy(ex);
      return;
    }
    inboundPending.add(ex);
    try {
      handOn(ex, from, body, nonce);
    } catch (Throwable e) { // before the handler's future took the request on (a timer that
      // cannot start its thread, say): this node's failure, answered 500 by a server thread,
      // holding its inbound slot until written, as every answer does; one taken out already (by
      // close() or the handling limit) is answered there
      if (inboundPending.remove(ex)) {
        failedHere("unexpected failure handling inbound traffic", e);
        Reply r;
        try {
          r = new Reply(ex, () -> respondQuietly(ex, 500, new byte[0], "internal error", null),
              "a 500 answer", true);
        } catch (Throwable again) { // the heap ran out, say: handleInbound answers it here
          inboundRequests.decrementAndGet();
          throw again;
        }
        hand(r);
      }
    }
  }

  /** The rest of {@link #handleRequest}, once the request holds an inbound slot. */
  private void handOn(HttpExchange ex, PeerAddress from, byte[] body, String nonce) {
    if (closed.get()) {
      // close() may have swept the pending exchanges before this one was added
      if (inboundPending.remove(ex)) {
        try {
          respondQuietly(ex, 503, new byte[0], "transport closed", null);
        } finally {
          inboundRequests.decrementAndGet();
        }
      }
      return;
    }
    // received whole and authenticated: the handler runs without the deadline, whatever it
    // says, and the answer is written under a deadline of its own
    ioDeadline.endPhase();
    counters.requestsReceived.increment();
    // the guard runs from before the handler is called: a handler that blocks in onRequest
    // (which it must not) is answered 504 in time all the same
    ScheduledFuture<?> guard;
    try {
      guard =
          timer.schedule(
              () -> {
                if (inboundPending.remove(ex)) {
                  // on a server thread under the I/O deadline: this timer thread also drives the
                  // request timeouts and the I/O deadlines, and a peer that leaves its earlier
                  // answers unread would block it in the write
                  writeLater(ex, 504, "handler did not answer in time");
                }
              },
              config.maxHandlingTime.toNanos(),
              TimeUnit.NANOSECONDS);
    } catch (RuntimeException closing) {
      guard = null;
    }
    CompletableFuture<byte[]> answer;
    try {
      answer = Objects.requireNonNull(handler.onRequest(from, body), "handler returned null");
    } catch (Throwable e) { // an Error, a checked exception too: the request must be answered
      answer = CompletableFuture.failedFuture(e);
    }
    ScheduledFuture<?> g = guard;
    answer.whenComplete(
        (bytes, err) -> {
          if (g != null) {
            g.cancel(false);
          }
          // the answer is written by a server thread under the I/O deadline, never by the
          // thread that completed the handler's future (an engine's or a scheduler's): a peer
          // that does not read its answer must not block that thread. One taken out already is
          // answered by whoever took it (the handling limit, close())
          if (inboundPending.remove(ex)) {
            hand(new Reply(ex, () -> answer(ex, from, nonce, bytes, err),
                "the answer to a request from " + from, true));
          }
        });
  }

  /**
   * Hands an answer without a body (an exchange already taken out of {@link #inboundPending})
   * to a server thread, which writes it under the I/O deadline ({@link #hand}).
   */
  private void writeLater(HttpExchange ex, int status, String error) {
    hand(new Reply(ex, () -> respondQuietly(ex, status, new byte[0], error, null),
        "a " + status + " answer", true));
  }

  /**
   * The 503s of a full server that may wait or be written at once, all peer addresses
   * together: {@code maxInboundRequests}, plus what one address may hold
   * ({@code maxUnfinishedReadsPerAddress} waiting and {@link #writersPerPeer} being written),
   * so that the total never closes a connection that a lone address's own bound keeps.
   */
  static int maxBusyReplies(int maxInboundRequests, int maxUnfinishedReadsPerAddress,
      int serverThreads) {
    return maxInboundRequests + maxUnfinishedReadsPerAddress + writersPerPeer(serverThreads);
  }

  /**
   * Hands the 503 of a request refused as {@code maxInboundRequests} are held to a server
   * thread, as {@link #hand} does, but it holds no inbound slot: it waits in its peer's lane
   * only behind fewer than {@code maxUnfinishedReadsPerAddress} answers, and only while fewer
   * than {@link #maxBusyReplies} of these 503s wait or are written, all addresses together.
   * Otherwise (its peer reads none of its answers, or has that many written at once; or peers
   * at many addresses do) its connection is closed unanswered at once instead (closing never
   * blocks), which its sender sees as {@code UNREACHABLE}: so these answers, each with its
   * connection open, are at most that many plus {@link #writersPerPeer} per peer address, at
   * most {@link #maxBusyReplies} in all, and never hold the reader thread.
   */
  private void writeBusy(HttpExchange ex) {
    if (busyReplies.incrementAndGet() > maxBusyReplies(config.maxInboundRequests,
        config.maxUnfinishedReadsPerAddress, config.serverThreads)) {
      // as many are waiting or being written already, to all addresses together
      busyReplies.decrementAndGet();
      ex.close();
      return;
    }
    Reply r;
    try {
      r = new Reply(ex,
          () -> respondQuietly(ex, 503, new byte[0], "too many requests in progress", null),
          "a 503 answer", false);
    } catch (Throwable e) { // the heap ran out, say: handleInbound answers it here
      busyReplies.decrementAndGet();
      throw e;
    }
    Boolean now = lanes.offer(r.peer, r, config.maxUnfinishedReadsPerAddress);
    if (now == null) {
      r.drop();
    } else if (now) {
      start(r);
    }
  }

  /**
   * Hands an answer to a server thread, which writes it under the I/O deadline, at once if
   * fewer than {@link #writersPerPeer} answers to its peer's address are handed on, else once
   * the answers ahead of it in its peer's lane are written. If close() has shut the executor
   * down, or it cannot take the task (an Error: a thread it cannot start, lost in the handler's
   * future if not caught here), the answer is dropped: its connection is closed on this thread
   * (an engine's, a scheduler's, the timer's), which must not write, so without an answer, and
   * its sender's request fails at once. Unless the transport is closed, that is this node's
   * failure, counted and logged as such ({@link #failedHere}).
   */
  private void hand(Reply r) {
    if (lanes.offer(r.peer, r)) {
      start(r);
    }
  }

  /**
   * The server threads that write the answers to one peer address at most at once: half of
   * them, at least one, so that a peer that does not read its answers (each held up to
   * {@code inboundIoTimeout}) leaves the others to everyone else.
   */
  static int writersPerPeer(int serverThreads) {
    return Math.max(1, serverThreads / 2);
  }

  /**
   * Hands {@code r}, which holds one of its peer's places in {@link #lanes}, to a server
   * thread; if the executor does not take it, drops it (see {@link #hand}) and passes the place
   * on to the peer's next answer, which it hands on alike.
   */
  private void start(Reply r) {
    while (r != null) {
      try {
        serverExecutor.execute(r);
        return;
      } catch (Throwable e) {
        r.drop();
        if (!closed.get()) {
          failedHere("cannot hand " + r.what + " to a server thread: " + e, e);
        }
        r = lanes.next(r.peer);
      }
    }
  }

  /** The key of the peer an answer goes to in {@link #lanes}: its connection's address. */
  private static Object peerOf(HttpExchange ex) {
    InetSocketAddress remote = ex.getRemoteAddress();
    java.net.InetAddress a = remote == null ? null : remote.getAddress();
    return a == null ? UNKNOWN_PEER : a;
  }

  private static final Object UNKNOWN_PEER = new Object();

  /**
   * An answer to an inbound request, taken out of {@link #inboundPending} and handed to the
   * server threads: it holds its request's slot of {@code maxInboundRequests} until it has been
   * written (or its write failed or was cut at the I/O deadline) or it is dropped, its
   * connection closed unwritten, so that the answers waiting for a thread or being written are
   * never more than {@code maxInboundRequests}; but for the 503 of a request refused as those
   * slots are held, which holds none ({@link #writeBusy}). Written or dropped once only.
   */
  private final class Reply implements Runnable {
    private final HttpExchange ex;
    private final Runnable write;
    /** The answer, for the log. */
    private final String what;
    /** Its peer's key in {@link #lanes}. */
    private final Object peer;
    private final AtomicBoolean settled = new AtomicBoolean();
    /** Whether it holds its request's inbound slot. */
    private final boolean holdsSlot;

    /**
     * @param write writes the answer and closes the exchange
     * @param what the answer, for the log
     * @param holdsSlot whether it holds its request's inbound slot, given back once it is
     *     written or dropped
     */
    Reply(HttpExchange ex, Runnable write, String what, boolean holdsSlot) {
      this.ex = ex;
      this.write = write;
      this.what = what;
      this.peer = peerOf(ex);
      this.holdsSlot = holdsSlot;
      replies.add(this);
    }

    /**
     * Writes the answer on this server thread, then hands its place in its peer's lane to the
     * peer's next answer: to another server thread, behind the answers to other peers handed
     * on meanwhile; once the transport is closing (its executor takes no more), this thread
     * writes the peer's next answers itself, until close() drops those left.
     */
    @Override
    public void run() {
      Reply next;
      try {
        write();
      } finally {
        next = lanes.next(peer);
      }
      while (next != null && closed.get()) {
        try {
          next.write();
        } finally {
          next = lanes.next(peer);
        }
      }
      if (next != null) {
        start(next);
      }
    }

    /** Writes the answer under the I/O deadline, then gives its slot back; once only. */
    private void write() {
      if (settled.compareAndSet(false, true)) {
        try {
          ioDeadline.run(write);
        } finally {
          settle();
        }
      }
    }

    /** Closes the connection unwritten (closing never blocks) and gives the slot back. */
    void drop() {
      if (settled.compareAndSet(false, true)) {
        try {
          ex.close();
        } finally {
          settle();
        }
      }
    }

    private void settle() {
      replies.remove(this);
      if (holdsSlot) {
        inboundRequests.decrementAndGet();
      } else {
        busyReplies.decrementAndGet();
      }
    }
  }

  private void answer(HttpExchange ex, PeerAddress from, String nonce, byte[] bytes, Throwable err) {
    if (err != null) {
      Throwable c = err instanceof CompletionException && err.getCause() != null ? err.getCause() : err;
      int status =
          c instanceof TransportException te && te.kind() == TransportException.Kind.BUSY ? 503 : 500;
      respondQuietly(ex, status, new byte[0], String.valueOf(c.getMessage()), null);
    } else if (bytes == null) {
      respondQuietly(ex, 500, new byte[0], "handler answer missing", null);
    } else if (bytes.length > config.maxMessageBytes) {
      // 413 as for a request above the cap: the sender's transport reports TOO_LARGE, and the
      // sender runs the request itself rather than on a peer whose answer would be as large
      respondQuietly(ex, 413, new byte[0], "answer of " + bytes.length
          + " bytes exceeds maxMessageBytes " + config.maxMessageBytes, null);
    } else {
      MessageAuthenticator keys = auth;
      String mac;
      try {
        mac = keys == null
            ? null
            : keys.sign(bytes, TAG_RESPONSE, config.nodeId, from.nodeId(), nonce, "200");
      } catch (Throwable e) { // the HMAC (the host's JCA provider) threw: answered all the same,
        // or the exchange would stay unanswered and this server thread end
        failedHere("cannot sign the answer to a request from " + from + ": " + e, null);
        respondQuietly(ex, 500, new byte[0], "internal error: cannot sign the answer", null);
        return;
      }
      counters.bytesOut.add(bytes.length);
      // the key id is added with the answer's other headers, under respond's guard: added here,
      // a throw (an Error: the heap running out) left the exchange open, counted nowhere
      respondQuietly(ex, 200, bytes, null, mac, keys == null ? null : keys.signingKeyId());
    }
  }

  /**
   * Writes an answer and closes its exchange: closed before its answer is whole, its connection
   * is closed, and its sender fails the request or message at once. An IOException or a
   * RuntimeException (the sender gone, the I/O deadline passed) is a debug line. Anything else
   * (an {@link Error}: the heap running out as the answer is written; a checked exception thrown
   * undeclared) is this node's failure, counted and logged by {@link #failedHere}, and not
   * rethrown: thrown on, it ended the server or reader thread, counted nowhere and printed by the
   * JVM, a stack trace each.
   */
  private void respondQuietly(HttpExchange ex, int status, byte[] body, String error, String mac) {
    respondQuietly(ex, status, body, error, mac, null);
  }

  /**
   * {@link #respondQuietly(HttpExchange, int, byte[], String, String)} with the id of the key
   * that signed the answer, {@code keyId} (null for none), in its {@link #H_KEY_ID} header.
   */
  private void respondQuietly(HttpExchange ex, int status, byte[] body, String error, String mac,
      String keyId) {
    Throwable failed = respond(ex, status, body, error, mac, keyId);
    if (failed != null) {
      failedHere("cannot answer " + status + " to " + ex.getRemoteAddress() + ": " + failed,
          failed);
    }
  }

  /**
   * {@link #respondQuietly} but for the count and the log of its own failure.
   *
   * @return what was thrown that is this node's failure (neither an IOException nor a
   *     RuntimeException); null if none
   */
  private static Throwable respond(HttpExchange ex, int status, byte[] body, String error,
      String mac, String keyId) {
    try (ex) {
      if (error != null) {
        ex.getResponseHeaders().add(H_ERROR, sanitize(error));
      }
      if (keyId != null) {
        ex.getResponseHeaders().add(H_KEY_ID, keyId);
      }
      if (mac != null) {
        ex.getResponseHeaders().add(H_MAC, mac);
      }
      if (body == null || body.length == 0) {
        ex.sendResponseHeaders(status, -1);
      } else {
        ex.sendResponseHeaders(status, body.length);
        try (OutputStream out = ex.getResponseBody()) {
          out.write(body);
        }
      }
    } catch (IOException | RuntimeException e) {
      log.debug("could not answer {}: {}", ex.getRemoteAddress(), e.toString());
    } catch (Throwable e) { // an Error too: the exchange is closed already
      return e;
    }
    return null;
  }

  private static String sanitize(String s) {
    StringBuilder sb = new StringBuilder(Math.min(s.length(), 200));
    for (int i = 0; i < s.length() && sb.length() < 200; i++) {
      char c = s.charAt(i);
      sb.append(c >= 0x20 && c < 0x7f ? c : '?');
    }
    return sb.toString();
  }

  /**
   * Reads a body of at most {@code cap} bytes, taking the heap of its buffer from {@code share}
   * as the bytes arrive ({@link BodyBudget.Share#read}): in steps from 8 KiB up, each twice the
   * last, up to its Content-Length if it has one (the last step is the exact length) or
   * {@code cap}, so that a sender holds about what it has sent, not what it declared (a step
   * being copied to holds its bytes as well as the last one, and a body without a length is
   * copied to its exact length at the end): at most twice {@code cap} in all.
   *
   * @param declared the Content-Length, at most {@code cap}, or negative for none
   * @return the body, or null if it holds more than {@code cap} bytes
   * @throws BodyBudget.Refused if the budget cannot give a step in time
   */
  static byte[] readBody(InputStream in, long declared, int cap, BodyBudget.Share share)
      throws IOException {
    BodyBudget.Body body = share.read(in, declared, cap, FIRST_BODY_STEP);
    if (body == null) {
      return null;
    }
    if (body.length() == body.bytes().length) {
      return body.bytes();
    }
    share.take(body.length());
    byte[] exact = Arrays.copyOf(body.bytes(), body.length());
    share.give(body.bytes().length);
    return exact;
  }

  private static long parseLong(String s, long dflt) {
    if (s == null) {
      return dflt;
    }
    try {
      return Long.parseLong(s.trim());
    } catch (NumberFormatException e) {
      return dflt;
    }
  }

  private static String hostPort(String host, int port) {
    return (host.indexOf(':') >= 0 && !host.startsWith("[") ? "[" + host + "]" : host) + ":" + port;
  }

  private static ThreadFactory daemonThreads(String prefix) {
    AtomicInteger n = new AtomicInteger();
    return r -> {
      Thread t = new Thread(r, prefix + "-" + n.incrementAndGet());
      t.setDaemon(true);
      return t;
    };
  }

  // ---------------------------------------------------------------- stats

  /**
   * A snapshot of this transport's counters.
   *
   * @return the counters now
   */
  public Stats stats() {
    return new Stats(
        counters.messagesSent.sum(),
        counters.messagesDropped.sum(),
        counters.messagesFailed.sum(),
        counters.requestsSent.sum(),
        counters.requestsFailed.sum(),
        counters.outboundBusy.sum(),
        counters.messagesReceived.sum(),
        counters.requestsReceived.sum(),
        counters.authFailures.sum(),
        counters.replaysRejected.sum(),
        counters.oversizeRejected.sum(),
        counters.malformedRejected.sum(),
        counters.inboundBusy.sum(),
        counters.slowConnectionsClosed.sum(),
        counters.bytesIn.sum(),
        counters.bytesOut.sum(),
        pending.size(),
        counters.readsRefused.sum(),
        counters.otherKeyAuthentications.sum(),
        counters.keyUpdates.sum(),
        counters.senderNotInCertificate.sum(),
        bodies.capacity() - bodies.available() + answers.capacity() - answers.available(),
        counters.bodyBudgetRefused.sum(),
        ownFailures.count(),
        clusterKeyIds());
  }

  private Map<String, Integer> clusterKeyIds() {
    MessageAuthenticator keys = auth;
    return keys == null ? Map.of() : Collections.unmodifiableMap(keys.keyIds());
  }

  /**
   * Counters of a transport since it was built.
   *
   * @param messagesSent one-way messages handed to the network
   * @param messagesDropped one-way messages dropped before sending (closed, too large, peer busy)
   * @param messagesFailed one-way messages the peer did not accept (network error or non-204)
   * @param requestsSent requests handed to the network
   * @param requestsFailed requests this transport failed (with a {@link TransportException} of
   *     any kind), sent or refused before sending (too large, at the peer's in-flight limit, also
   *     counted in {@code outboundBusy}, or not handed to the HTTP client); not those whose
   *     caller cancelled their future, nor those asked of a transport not started or closed, or
   *     ended by its {@code close()}, nor those given a timeout that is not positive
   * @param outboundBusy requests and messages refused locally: too many in flight to the peer
   * @param messagesReceived inbound one-way messages delivered to the handler
   * @param requestsReceived inbound requests delivered to the handler
   * @param authFailures inbound messages (and answers) dropped for a bad MAC or recipient
   * @param replaysRejected inbound messages dropped as stale or already seen
   * @param oversizeRejected inbound messages refused as larger than {@code maxMessageBytes}
   * @param malformedRejected inbound messages refused for a malformed envelope or a body that
   *     cannot be read (a malformed chunk, a body cut short, a connection reset mid-body)
   * @param inboundBusy inbound requests answered 503 because too many were in progress (or their
   *     connection closed, when their address's answers, or too many such 503s to all
   *     addresses, were not being taken)
   * @param slowConnectionsClosed inbound connections closed because their request (line,
   *     headers and body) did not arrive, or their answer was not taken, within
   *     {@code inboundIoTimeout}
   * @param bytesIn payload bytes accepted
   * @param bytesOut payload bytes sent
   * @param pendingRequests outbound requests waiting for an answer now
   * @param readsRefused inbound connections refused because {@code readerThreads} requests
   *     were being read (answered 503, or closed at once when the refusers were busy too), and
   *     requests answered 503 because their address had {@code maxUnfinishedReadsPerAddress}
   *     requests with unfinished bodies (once none of them had finished for 1 s)
   * @param otherKeyAuthentications inbound messages and answers whose MAC was made with an
   *     accepted cluster key other than this node's signing key: while it grows, some peer still
   *     signs with such a key (see {@link #updateClusterKeys})
   * @param keyUpdates calls of {@link #updateClusterKeys} that took effect
   * @param senderNotInCertificate inbound messages and requests, and answers, refused because
   *     the TLS certificate they came with does not name the node id they claim to come from
   *     ({@link Builder#bindNodeIdsToCertificates}); always 0 with that option off
   * @param bodyBudgetHeldBytes the heap the inbound bodies being read and authenticated, and
   *     the answers to this transport's requests being read and authenticated, hold now, in
   *     bytes, taken from their {@linkplain Builder#bodyBudget body budgets} (one each, so at
   *     most twice the budget)
   * @param bodyBudgetRefused inbound messages and requests answered 503, and requests failed
   *     with {@code TOO_LARGE}, because their body budget could not give what their body or
   *     answer needed while other bodies or answers held it
   * @param internalErrors inbound messages and requests answered 500 for a failure of this
   *     node's own, not its handler's: its HMAC (the host's JCA provider's) threw as it checked
   *     their MAC or signed the answer, or something else threw as it read, checked or handed
   *     them on; requests whose connection was closed without an answer because the server
   *     threads' executor could not take their answer; and messages and requests whose answer
   *     threw an {@link Error} as it was written, their connection closed (see "Handler
   *     failures" and "Security")
   * @param clusterKeys the ids of the cluster keys in use (the first 4 bytes of each key's
   *     SHA-256, in hex), in order, mapped to 1 for the signing key and 0 for the others; empty
   *     without authentication
   */
  public record Stats(
      long messagesSent,
      long messagesDropped,
      long messagesFailed,
      long requestsSent,
      long requestsFailed,
      long outboundBusy,
      long messagesReceived,
      long requestsReceived,
      long authFailures,
      long replaysRejected,
      long oversizeRejected,
      long malformedRejected,
      long inboundBusy,
      long slowConnectionsClosed,
      long bytesIn,
      long bytesOut,
      int pendingRequests,
      long readsRefused,
      long otherKeyAuthentications,
      long keyUpdates,
      long senderNotInCertificate,
      long bodyBudgetHeldBytes,
      long bodyBudgetRefused,
      long internalErrors,
      Map<String, Integer> clusterKeys) {}

  private static final class Counters {
    final LongAdder messagesSent = new LongAdder();
    final LongAdder messagesDropped = new LongAdder();
    final LongAdder messagesFailed = new LongAdder();
    final LongAdder requestsSent = new LongAdder();
    final LongAdder requestsFailed = new LongAdder();
    final LongAdder outboundBusy = new LongAdder();
    final LongAdder messagesReceived = new LongAdder();
    final LongAdder requestsReceived = new LongAdder();
    final LongAdder authFailures = new LongAdder();
    final LongAdder replaysRejected = new LongAdder();
    final LongAdder oversizeRejected = new LongAdder();
    final LongAdder malformedRejected = new LongAdder();
    final LongAdder inboundBusy = new LongAdder();
    final LongAdder slowConnectionsClosed = new LongAdder();
    final LongAdder bytesIn = new LongAdder();
    final LongAdder bytesOut = new LongAdder();
    final LongAdder readsRefused = new LongAdder();
    final LongAdder otherKeyAuthentications = new LongAdder();
    final LongAdder keyUpdates = new LongAdder();
    final LongAdder senderNotInCertificate = new LongAdder();
    final LongAdder bodyBudgetRefused = new LongAdder();
  }


  // ---------------------------------------------------------------- body cap

  /** An answer's body was larger than the cap. */
  static final class TooLargeException extends IOException {
    private static final long serialVersionUID = 1L;

    TooLargeException(String message) {
      super(message);
    }
  }

  // ---------------------------------------------------------------- builder

  /** Configures an {@link HttpTransport}; {@link #build()} validates everything. */
  public static final class Builder {
    private String nodeId;

    private String listenHost = "127.0.0.1";
    private int listenPort = -1;
    private String advertisedAddress;
    private byte[] clusterKey;
    private List<byte[]> acceptedClusterKeys = List.of();
    private boolean insecure;
    private SSLContext sslContext;
    private boolean bindNodeIds;
    private Duration connectTimeout = Duration.ofSeconds(2);
    private Duration messageTimeout = Duration.ofSeconds(5);
    private Duration maxHandlingTime = DEFAULT_MAX_HANDLING_TIME;
    private Duration inboundIoTimeout = Duration.ofSeconds(10);
    private Duration replayWindow = Duration.ofSeconds(30);
    private int maxNoncesPerSender = 1 << 17;
    private int maxMessageBytes = DEFAULT_MAX_MESSAGE_BYTES;
    private int maxInFlightPerPeer = 64;
    private int maxInboundRequests = 256;
    private int serverThreads = 4;
    private int readerThreads = 64;
    private int maxUnfinishedReadsPerAddress = 8;
    /** The body budget, if set ({@link #effectiveBodyBudget}). */
    private long bodyBudget;
    private boolean bodyBudgetSet;
    private int backlog = 128;
    private LongSupplier wallClockMillis = System::currentTimeMillis;

    private Builder() {}

    private Builder copy() {
      Builder b = new Builder();
      b.nodeId = nodeId;
      b.listenHost = listenHost;
      b.listenPort = listenPort;
      b.advertisedAddress = advertisedAddress;
      b.clusterKey = clusterKey == null ? null : clusterKey.clone();
      b.acceptedClusterKeys = acceptedClusterKeys;
      b.insecure = insecure;
      b.sslContext = sslContext;
      b.bindNodeIds = bindNodeIds;
      b.connectTimeout = connectTimeout;
      b.messageTimeout = messageTimeout;
      b.maxHandlingTime = maxHandlingTime;
      b.inboundIoTimeout = inboundIoTimeout;
      b.replayWindow = replayWindow;
      b.maxNoncesPerSender = maxNoncesPerSender;
      b.maxMessageBytes = maxMessageBytes;
      b.maxInFlightPerPeer = maxInFlightPerPeer;
      b.maxInboundRequests = maxInboundRequests;
      b.serverThreads = serverThreads;
      b.readerThreads = readerThreads;
      b.maxUnfinishedReadsPerAddress = maxUnfinishedReadsPerAddress;
      b.bodyBudget = bodyBudget;
      b.bodyBudgetSet = bodyBudgetSet;
      b.backlog = backlog;
      b.wallClockMillis = wallClockMillis;
      return b;
    }

    /**
     * This node's id (required); peers see it as the sender of everything sent.
     *
     * @param nodeId the node id
     * @return this builder
     */
    public Builder nodeId(String nodeId) {
      this.nodeId = nodeId;
      return this;
    }

    /**
     * Host and port to listen on (required); port 0 picks a free port.
     *
     * @param host the host or address to bind
     * @param port the port, 0 for any free one
     * @return this builder
     */
    public Builder listen(String host, int port) {
      this.listenHost = host;
      this.listenPort = port;
      return this;
    }

    /**
     * The {@code host:port} peers should use to reach this node, when it differs from the listen
     * address (for example behind NAT), and required when listening on a wildcard address
     * ({@code 0.0.0.0} or {@code ::}, in any spelling) or on a host name a URI cannot carry
     * (one with an underscore, such as {@code node_1}: {@link #build()} refuses it, since no
     * peer could send to it). Default: the listen host and the bound port. It is
     * {@code host:port} alone: {@link #build()} refuses one with a path, query, fragment or user
     * info, and the wildcard address, which peers cannot connect to.
     *
     * @param hostPort the address as {@code host:port}
     * @return this builder
     */
    public Builder advertisedAddress(String hostPort) {
      this.advertisedAddress = hostPort;
      return this;
    }

    /**
     * The shared cluster key for HMAC-SHA256 message authentication: at least 16 bytes, the same
     * on every node. This node signs with it and accepts it; {@link #acceptedClusterKeys} adds
     * keys it accepts as well, for a key rotation. Either this or
     * {@link #insecureWithoutAuthentication()} is required.
     *
     * @param key the shared key
     * @return this builder
     */
    public Builder clusterKey(byte[] key) {
      this.clusterKey = key == null ? null : key.clone();
      return this;
    }

    /**
     * Further cluster keys whose MACs inbound messages and answers may carry, besides
     * {@link #clusterKey}'s, which alone signs: the keys of a rotation in progress (see
     * {@link HttpTransport#updateClusterKeys}). At least 16 bytes each, at most 3 distinct
     * besides the signing key; default none.
     *
     * @param keys the keys to accept as well
     * @return this builder
     */
    public Builder acceptedClusterKeys(byte[]... keys) {
      if (keys == null) {
        throw new IllegalArgumentException("acceptedClusterKeys: keys is null");
      }
      List<byte[]> copy = new ArrayList<>();
      for (byte[] k : keys) {
        copy.add(k == null ? null : k.clone());
      }
      this.acceptedClusterKeys = Collections.unmodifiableList(copy);
      return this;
    }

    /**
     * Accept unauthenticated traffic. Only for tests or fully trusted networks.
     *
     * @return this builder
     */
    public Builder insecureWithoutAuthentication() {
      this.insecure = true;
      return this;
    }

    /**
     * Serve and connect over TLS with the host's context (default: plain HTTP). The context must
     * be initialized ({@link SSLContext#init}); {@link #build()} refuses one that is not.
     *
     * @param context the TLS context
     * @return this builder
     */
    public Builder tls(SSLContext context) {
      this.sslContext = context;
      return this;
    }

    /**
     * Binds node ids to TLS certificates (default off; needs {@link #tls}). The cluster key's MAC
     * proves only that a message comes from a holder of the key, so without this any holder can
     * send messages in any node's name. With it on:
     *
     * <ul>
     *   <li>the server requires a certificate of every client, trusted by the context's trust
     *       store: a client that presents none cannot connect;
     *   <li>a message or request is accepted only if the client certificate of the connection it
     *       came over names the node id it claims as its sender;
     *   <li>an answer to a request, of any status (an error answer, which carries no MAC,
     *       too: a 503 is not taken for the node being busy, nor a 500's text for its refusal),
     *       is accepted only if the server certificate of its connection names the node id the
     *       request was sent to (the id the answer claims);
     *   <li>so is the answer to a one-way message: one whose server certificate does not name
     *       the node it was sent to counts the message as failed whatever its status (a 204 is
     *       not taken for the message delivered, nor a 401's {@code PR-Node} for the node at
     *       that address being another one, which is not warned of).
     * </ul>
     *
     * <p>A certificate names a node id if one of the leaf certificate's subject alternative names
     * of type DNS or URI equals it exactly, case included ({@code keytool -ext
     * san=dns:n1,ip:10.0.0.1}, or a SPIFFE id such as {@code spiffe://example.org/node/n1} as a
     * URI name for that node id); the subject's common name does not count. Every node's
     * certificate must name its own id as well as the address peers use.
     *
     * <p>Anything else is refused as a message failing authentication is: an inbound message or
     * request is answered 401 and not delivered (its nonce not taken by the replay guard), a
     * request whose answer is refused fails with {@link TransportException.Kind#PROTOCOL}; each
     * is counted in {@link Stats#senderNotInCertificate()} and logged at warning level once per
     * claimed id and certificate subject. A key holder with a certificate of its own can still
     * lie about itself, but no longer about other nodes.
     *
     * @param on whether to bind node ids to certificates
     * @return this builder
     */
    public Builder bindNodeIdsToCertificates(boolean on) {
      this.bindNodeIds = on;
      return this;
    }

    /**
     * How long to wait for a TCP (and TLS) connection to a peer. Default 2 s.
     *
     * @param d the timeout, positive, at most a day
     * @return this builder
     */
    public Builder connectTimeout(Duration d) {
      this.connectTimeout = d;
      return this;
    }

    /**
     * How long a one-way message may take to be accepted, answer included, before it counts as
     * failed and its in-flight slot is released. Default 5 s.
     *
     * @param d the timeout, positive, at most a day
     * @return this builder
     */
    public Builder messageTimeout(Duration d) {
      this.messageTimeout = d;
      return this;
    }

    /**
     * How long an inbound request may wait for the handler before it is answered 504, counted
     * from when the handler is called: a handler that blocks in {@code onRequest} (which it must
     * not) is answered 504 in time too, and its late answer is dropped. Default 5 min.
     *
     * @param d the limit, positive, at most a day
     * @return this builder
     */
    public Builder maxHandlingTime(Duration d) {
      this.maxHandlingTime = d;
      return this;
    }

    /**
     * How long an inbound connection may take to deliver one whole request (request line,
     * headers and body) once it has started sending it, and to take one answer once it is being
     * written; a connection that takes longer is closed. This keeps peers that stall (and
     * strangers, before any authentication) from holding a reader or server thread for long. Set it
     * above {@code maxMessageBytes} divided by the slowest link's throughput. Default 10 s.
     *
     * @param d the deadline, positive, at most a day
     * @return this builder
     */
    public Builder inboundIoTimeout(Duration d) {
      this.inboundIoTimeout = d;
      return this;
    }

    /**
     * How far a message's timestamp may be from this node's clock. Default 30 s. Timestamps
     * are in milliseconds, so the window is too: {@link #build()} refuses one under a
     * millisecond, which would refuse every message not stamped in this very millisecond.
     *
     * @param d the window, at least a millisecond, at most a day
     * @return this builder
     */
    public Builder replayWindow(Duration d) {
      this.replayWindow = d;
      return this;
    }

    /**
     * Nonces remembered whole per sender at most (bounds replay-guard memory). Default 131,072.
     * This transport's own nonces, a boot id and a counter, are checked against a sliding window
     * of counters instead, which needs no such limit; the limit applies to nonces of other
     * shapes, which are also remembered at most 131,072 (or this limit if larger) over all
     * senders.
     *
     * @param n the limit
     * @return this builder
     */
    public Builder maxNoncesPerSender(int n) {
      this.maxNoncesPerSender = n;
      return this;
    }

    /**
     * Largest payload sent or accepted, in bytes. Default 4 MiB.
     *
     * @param bytes the limit in bytes
     * @return this builder
     */
    public Builder maxMessageBytes(int bytes) {
      this.maxMessageBytes = bytes;
      return this;
    }

    /**
     * Requests and messages outstanding to one peer at most. Default 64. The last
     * {@code min(4, n / 4)} of them are kept for messages: requests alone may have at most
     * {@code n - min(4, n / 4)} outstanding (60 of the default 64; all of a limit below 4), so
     * that forwards never leave a peer without the node's gossip. One peer is one
     * address however it is spelled (a host name in any case, an IPv6 literal in any form, a
     * port with leading zeros); nothing is looked up, so two names of one host count apart.
     *
     * @param n the limit
     * @return this builder
     */
    public Builder maxInFlightPerPeer(int n) {
      this.maxInFlightPerPeer = n;
      return this;
    }

    /**
     * Inbound requests handled at once at most; more are answered busy (503, written by the
     * {@link #serverThreads}; or their connection closed when {@link #maxUnfinishedReadsPerAddress}
     * answers already wait for their address, see the class Javadoc). Default 256. A request
     * holds its slot until its answer (the handler's, or the 504 of {@link #maxHandlingTime})
     * has been written, or its connection closed unwritten, so this also bounds the answers
     * waiting for one of the {@link #serverThreads} or being written.
     *
     * @param n the limit
     * @return this builder
     */
    public Builder maxInboundRequests(int n) {
      this.maxInboundRequests = n;
      return this;
    }

    /**
     * Threads writing the answers to inbound requests (authenticated ones only; requests are
     * read on the {@link #readerThreads}). Default 4. Each writes one answer at a time, in the
     * order they were handed over, under {@link #inboundIoTimeout}: an answer larger than its
     * connection's socket buffers take, to a peer that does not read it, holds its thread for
     * up to that long. At most {@code max(1, n / 2)} of them write the answers to one peer
     * address (the connections' remote IP address) at once, the address's others waiting in its
     * own queue, so that one address that reads nothing leaves the other threads to the other
     * addresses; {@code n} such answers to several addresses still delay every other answer (by
     * up to {@code inboundIoTimeout} for each {@code n} of them ahead; docs/deployment.md,
     * "Answers to a peer that stops reading"). Answers of a few KiB go into the buffers at once.
     *
     * @param n the number of threads
     * @return this builder
     */
    public Builder serverThreads(int n) {
      this.serverThreads = n;
      return this;
    }

    /**
     * Inbound requests read (and authenticated) at the same time at most, each on a thread of its
     * own so that a connection that stalls holds only its own; a connection that starts a
     * request beyond this is answered 503 with {@code Retry-After} without its body being read,
     * so that its sender takes this node for busy (a request fails with
     * {@link TransportException.Kind#BUSY}), by one of 4 more threads that give it 1 s (or
     * {@link #inboundIoTimeout} if shorter) for its request line and headers; when those 4 are
     * busy too, it is closed at once. Either is counted ({@link Stats#readsRefused()}). A
     * message's read counts until its handler, called once its 204 is written, returns. Threads are started on demand and end after 30 s idle. Default 64.
     *
     * @param n the limit, 1 to 4096
     * @return this builder
     */
    public Builder readerThreads(int n) {
      this.readerThreads = n;
      return this;
    }

    /**
     * Inbound requests from one remote address whose body is still being read at most; one
     * beyond waits for one of them to finish, and once none has finished for 1 s (or
     * {@link #inboundIoTimeout} if shorter) it is answered 503 and counted
     * ({@link Stats#readsRefused()}), so that one address cannot hold the {@link #readerThreads}
     * with bodies it never finishes. Default 8.
     *
     * @param n the limit, 1 to 4096
     * @return this builder
     */
    public Builder maxUnfinishedReadsPerAddress(int n) {
      this.maxUnfinishedReadsPerAddress = n;
      return this;
    }

    /**
     * The heap that the inbound bodies being read may hold at once, in bytes, all
     * {@link #readerThreads} together: the bodies of messages and requests from the moment
     * their reading starts until they are authenticated (or refused), which anyone who can
     * connect can make this node hold. A body takes its buffer in steps as its bytes arrive,
     * from 8 KiB up, each twice the last, up to its Content-Length (or {@code maxMessageBytes}
     * without one), so that a sender holds about what it has sent, not what it declares; at
     * most twice {@code maxMessageBytes} while a step is copied. A body whose
     * share does not come free waits while other bodies give theirs back, and is answered 503
     * with {@code Retry-After} once none has for 1 s (or {@link #inboundIoTimeout} if shorter),
     * as a busy peer is (its sender's request fails with
     * {@link TransportException.Kind#BUSY}), and counted ({@link Stats#bodyBudgetRefused()}).
     * Default {@value HttpTransport#DEFAULT_BODY_BUDGET} bytes (64 MiB: 16 bodies of the default
     * {@link #maxMessageBytes}, 4 MiB, at once), or twice {@code maxMessageBytes} if that is
     * more. Without the budget, {@code readerThreads} bodies of {@code maxMessageBytes} each
     * (256 MiB at the defaults) could be held before any authentication. The answers to this
     * transport's own requests have a budget of their own of the same size (so this node holds
     * at most twice {@code bytes} of bodies and answers being read): they take their shares of
     * it (from 64 KiB up) as they arrive and until they are authenticated, and one whose share
     * does not come free within the same wait fails its request with
     * {@link TransportException.Kind#TOO_LARGE}, counted alike. Apart, strangers who hold the
     * inbound budget cannot fail this node's forwards, and answers cannot delay the bodies.
     *
     * @param bytes the budget, at least twice {@link #maxMessageBytes} (what one body can take,
     *     so that one message alone always gets its share)
     * @return this builder
     */
    public Builder bodyBudget(long bytes) {
      this.bodyBudget = bytes;
      this.bodyBudgetSet = true;
      return this;
    }

    /** The body budget in effect: the one set, else the default for {@code maxMessageBytes}. */
    private long effectiveBodyBudget() {
      return bodyBudgetSet ? bodyBudget : Math.max(DEFAULT_BODY_BUDGET, 2L * maxMessageBytes);
    }

    /**
     * The wall clock (epoch milliseconds) used for message timestamps and the replay window.
     * Default {@link System#currentTimeMillis()}; tests inject their own. The transport reads it
     * through a guard, as a node reads its clock: a reading that throws gives the latest good
     * reading instead (the first failure logged at ERROR, later ones at WARN as their count
     * reaches a power of two), and every message and request is sent, and every one received
     * checked and answered, as with a good clock. While every reading throws, the transport's
     * time stands still: once its peers' clocks pass the last good reading by more than the
     * replay window, their messages are refused here as stale, and this node's there, each
     * answered 401. The transport reads the clock once as it is built: a clock that throws then
     * fails {@link #build()}.
     *
     * @param clock the wall clock, in milliseconds since the epoch
     * @return this builder
     */
    public Builder wallClockMillis(LongSupplier clock) {
      this.wallClockMillis = clock;
      return this;
    }

    /**
     * Validates the configuration and creates the transport (not yet listening; see
     * {@link HttpTransport#start}).
     *
     * @return the transport, not yet started
     * @throws IllegalArgumentException naming the first invalid setting
     * @throws IllegalStateException if the wall clock throws when read as the transport is built
     *     (its cause is what the clock threw), or if the host's JCA providers, which give the
     *     HmacSHA256 of the cluster keys and the SHA-256 of their ids, throw as the keys are set
     *     up, whatever they throw (its cause is what they threw)
     */
    public HttpTransport build() {
      if (nodeId == null) {
        throw new IllegalArgumentException("nodeId is required");
      }
      PeerAddress.checkNodeId(nodeId);
      if (listenHost == null || listenHost.isEmpty()) {
        throw new IllegalArgumentException("listen host is required");
      }
      if (listenPort < 0 || listenPort > 65535) {
        throw new IllegalArgumentException(
            "listen port must be 0 to 65535 (call listen(host, port)), was " + listenPort);
      }
      if (advertisedAddress == null && WildcardAddress.is(listenHost)) {
        // there is no address to tell peers: one on another host cannot reach a wildcard
        throw new IllegalArgumentException("listening on " + listenHost + " needs "
            + "advertisedAddress(host:port), the address peers reach this node at");
      }
      if (advertisedAddress == null) {
        // the listen host is what peers are told: one a URI cannot carry as a host (such as
        // "node_1") would make a node that starts but that no peer can send to, and whose
        // messages every peer refuses
        try {
          requireHostPort(hostPort(listenHost, Math.max(1, listenPort)));
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException("listen host " + listenHost + " cannot be told "
              + "to peers as this node's address (" + e.getMessage() + "): give "
              + "advertisedAddress(host:port), the address peers reach this node at", e);
        }
      } else {
        new PeerAddress(nodeId, advertisedAddress);
        try {
          requireHostPort(advertisedAddress);
        } catch (IllegalArgumentException e) {
          throw new IllegalArgumentException("advertisedAddress " + e.getMessage(), e);
        }
        if (WildcardAddress.is(URI.create("http://" + advertisedAddress).getHost())) {
          // peers would connect to their own machine
          throw new IllegalArgumentException("advertisedAddress " + advertisedAddress
              + " is the wildcard address, which peers cannot connect to: give the address "
              + "peers reach this node at");
        }
      }
      if (clusterKey == null && !insecure) {
        throw new IllegalArgumentException(
            "set clusterKey(bytes) for message authentication, or insecureWithoutAuthentication()");
      }
      if (clusterKey != null && insecure) {
        throw new IllegalArgumentException("clusterKey and insecureWithoutAuthentication() are exclusive");
      }
      if (clusterKey != null && clusterKey.length < 16) {
        throw new IllegalArgumentException(
            "clusterKey must have at least 16 bytes, had " + clusterKey.length);
      }
      if (clusterKey == null && !acceptedClusterKeys.isEmpty()) {
        throw new IllegalArgumentException("acceptedClusterKeys needs clusterKey(bytes), the key that signs");
      }
      if (clusterKey != null) {
        List<byte[]> keys = new ArrayList<>();
        keys.add(clusterKey);
        keys.addAll(acceptedClusterKeys);
        MessageAuthenticator.distinct(keys); // checks them all, with messages naming the key
      }
      if (sslContext != null) {
        try {
          sslContext.getSupportedSSLParameters();
        } catch (IllegalStateException e) {
          throw new IllegalArgumentException(
              "tls(context): the SSLContext is not initialized; call its init(...) first", e);
        }
      }
      if (bindNodeIds && sslContext == null) {
        throw new IllegalArgumentException("bindNodeIdsToCertificates(true) needs tls(context): "
            + "node ids are bound to the certificates of TLS connections");
      }
      requirePositive("connectTimeout", connectTimeout);
      requirePositive("messageTimeout", messageTimeout);
      requirePositive("maxHandlingTime", maxHandlingTime);
      requirePositive("inboundIoTimeout", inboundIoTimeout);
      requirePositive("replayWindow", replayWindow);
      if (replayWindow.compareTo(Duration.ofMillis(1)) < 0) {
        throw new IllegalArgumentException("replayWindow must be at least 1 ms (message "
            + "timestamps are in milliseconds), was " + replayWindow);
      }
      requireRange("maxMessageBytes", maxMessageBytes, 64, Integer.MAX_VALUE - 8);
      requireRange("maxInFlightPerPeer", maxInFlightPerPeer, 1, 1 << 20);
      requireRange("maxInboundRequests", maxInboundRequests, 1, 1 << 20);
      requireRange("serverThreads", serverThreads, 1, 1024);
      requireRange("readerThreads", readerThreads, 1, 4096);
      requireRange("maxUnfinishedReadsPerAddress", maxUnfinishedReadsPerAddress, 1, 4096);
      requireRange("maxNoncesPerSender", maxNoncesPerSender, 16, 1 << 24);
      if (effectiveBodyBudget() < 2L * maxMessageBytes) {
        throw new IllegalArgumentException("bodyBudget must be at least twice maxMessageBytes ("
            + 2L * maxMessageBytes + " bytes: what one body can take while it is read), was "
            + effectiveBodyBudget());
      }
      Objects.requireNonNull(wallClockMillis, "wallClockMillis");
      return new HttpTransport(this);
    }

    /** The longest duration setting: beyond it timers and the replay arithmetic overflow. */
    private static final Duration LONGEST_SETTING = Duration.ofDays(1);

    private static void requirePositive(String name, Duration d) {
      if (d == null || d.isNegative() || d.isZero() || d.compareTo(LONGEST_SETTING) > 0) {
        throw new IllegalArgumentException(name + " must be positive and at most a day, was " + d);
      }
    }

    private static void requireRange(String name, int v, int lo, int hi) {
      if (v < lo || v > hi) {
        throw new IllegalArgumentException(name + " must be between " + lo + " and " + hi + ", was " + v);
      }
    }
  }
}
