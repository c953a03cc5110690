package io.github.prefixrouter.server;

import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.internal.CommonPoolSize;
import io.github.prefixrouter.internal.CountedFailureLog;
import io.github.prefixrouter.spi.InferenceEngine;
import io.github.prefixrouter.spi.Schedulers;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs one prefix-router node as a process: an {@link HttpTransport} to its peers, an engine (the
 * {@link ReferenceEngine} or an {@link OpenAiCompatibleEngine} in front of vLLM, SGLang or
 * llama.cpp), the routing node, and a client endpoint (see {@link ClientEndpoint}): OpenAI-style
 * clients send text prompts and chat conversations ({@code /v1/completions},
 * {@code /v1/chat/completions}, tokenized by the model server's own tokenizer, {@code
 * --tokenizer}), load generators token ids ({@code /v1/route/completions}); answers come whole,
 * or streamed as server-sent events ({@code "stream": true}).
 *
 * <pre>
 * java -cp prefix-router.jar:guava.jar:slf4j-api.jar:slf4j-simple.jar \
 *     io.github.prefixrouter.server.NodeMain --id n1 --listen 127.0.0.1:7001 \
 *     --client 127.0.0.1:8001 --seeds n2@127.0.0.1:7002 --cluster-key-file cluster.key \
 *     --engine http://127.0.0.1:8000 --policy cost-aware
 * </pre>
 *
 * Flags and the properties file are described in {@link NodeOptions#USAGE} ({@code --help}).
 * Logs go through SLF4J; with slf4j-simple (the benchmarks jar's binding) a node logs at info
 * and above unless {@code -Dorg.slf4j.simpleLogger.defaultLogLevel} says otherwise: the class
 * sets that property to {@code info}, if it is not set, before it makes its logger. On SIGTERM
 * or SIGINT the node stops gracefully (accepted requests are answered; those still running
 * after {@code --shutdown-grace-ms} are answered 503 and cancelled on the engine) and prints
 * its stats. Exit status 2 means bad flags, printed with
 * the usage; 1 a node that could not start, printed as one line naming the part that failed
 * and why (a port in use, a file that cannot be read; anything else thrown, an {@link Error}
 * included, by its type and message), its stack trace logged at debug level.
 */
public final class NodeMain {

  /** slf4j-simple's default level, a system property; other bindings ignore it. */
  private static final String SIMPLE_LOGGER_DEFAULT_LEVEL =
      "org.slf4j.simpleLogger.defaultLogLevel";

  static {
    // before the logger below, the process's first when it runs a node: slf4j-simple reads its
    // default level once, as its first logger is made, and takes this property over a
    // simplelogger.properties; the benchmarks jar's sets off, for its simulators and other
    // mains, whose in-process nodes log as this one does
    if (System.getProperty(SIMPLE_LOGGER_DEFAULT_LEVEL) == null) {
      System.setProperty(SIMPLE_LOGGER_DEFAULT_LEVEL, "info");
    }
  }

  private static final Logger log = LoggerFactory.getLogger(NodeMain.class);

  private NodeMain() {}

  /**
   * Runs a node until SIGTERM or SIGINT; exits with status 2 on bad flags, 1 if the node cannot
   * start (see {@link NodeMain}).
   *
   * @param args the flags ({@link NodeOptions#USAGE})
   * @throws InterruptedException if interrupted while serving
   */
  public static void main(String[] args) throws InterruptedException {
    // before anything creates the pool: on 1 or 2 processors every message and request the
    // node sent to a peer started and ended a thread up to JDK 24 (about 30 a second per node
    // of an idle four-node cluster, 12 to 17% of its CPU)
    CommonPoolSize.twoAtLeast();
    int status = serve(args, System.getenv(), System.out, System.err,
        Runtime.getRuntime()::addShutdownHook);
    if (status != 0) {
      System.exit(status);
    }
  }

  /**
   * What {@link #main} does: registers the shutdown hook that stops the node, launches it
   * ({@link #launch}) and, if it runs, waits until the hook has stopped it. The hook is in place
   * before the start, so a SIGTERM at any time stops the node (one under way finishes its start
   * first) and removes its ready file; it used to be registered only after the ready file was
   * written, and a SIGTERM as the file appeared left the file of a node that no longer ran.
   *
   * @param addShutdownHook registers the hook ({@code Runtime::addShutdownHook})
   * @return the status to exit with
   */
  static int serve(String[] args, java.util.Map<String, String> env, java.io.PrintStream out,
      java.io.PrintStream err, java.util.function.Consumer<Thread> addShutdownHook)
      throws InterruptedException {
    java.util.concurrent.atomic.AtomicReference<Running> running =
        new java.util.concurrent.atomic.AtomicReference<>();
    CountDownLatch launched = new CountDownLatch(1);
    CountDownLatch stopped = new CountDownLatch(1);
    addShutdownHook.accept(new Thread(() -> {
      try {
        launched.await(); // a start under way ends first: its node, if any, is then stopped
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      Running r = running.get();
      if (r != null) {
        r.close();
      }
      stopped.countDown();
    }, "node-shutdown"));
    Launch launch;
    try {
      launch = launch(args, env, out, err);
      running.set(launch.running());
    } finally {
      launched.countDown();
    }
    if (launch.running() == null) {
      return launch.status();
    }
    stopped.await();
    return 0;
  }

  /** The base model's name of a node running the reference engine without {@code --model}. */
  static final String REFERENCE_MODEL = "reference";
  /** The reference engine's vocabulary and output limit (its defaults), which its tokenizer needs. */
  static final int REFERENCE_VOCABULARY = 1024;
  static final int REFERENCE_MAX_OUTPUT_TOKENS = 1024;
  /** How long tokenizing one prompt at the model server may take. */
  static final java.time.Duration TOKENIZE_TIMEOUT = java.time.Duration.ofSeconds(10);

  /**
   * How the banner names the tokenizer ({@link #tokenizer}'s): one that asks a {@code /tokenize}
   * with the cap on its answers and its answer budget ({@code --tokenizer-answer-budget}).
   */
  private static String tokenizerName(PromptTokenizer t) {
    if (t == null) {
      return "none (token ids only)";
    }
    return t instanceof EngineTokenizer e ? e.uri() + " (answers up to " + e.maxAnswerBytes()
        + " bytes, " + e.stats().answerBudgetBytes() + " bytes at once)"
        : "per character (reference engine)";
  }

  /**
   * The tokenizer of the OpenAI routes ({@code --tokenizer}): none, the given endpoint, or by
   * default the engine's (the reference engine's characters, or the server's {@code /tokenize}).
   * The engine's API key goes with it to the engine's server only: to its {@code /tokenize},
   * or to a {@code --tokenizer} URL of the same scheme, host and port ({@link #sameOrigin}),
   * never to another host. A tokenizer that asks a {@code /tokenize} has the answer budget
   * {@code --tokenizer-answer-budget} (by default {@link EngineTokenizer#DEFAULT_ANSWER_BUDGET})
   * and the cap on an answer that fits it ({@link EngineTokenizer#maxAnswerBytes(long)}).
   */
  static PromptTokenizer tokenizer(NodeOptions o) {
    if (!o.tokenizes) {
      return null;
    }
    if (o.tokenizerUri == null && o.engine.equals("reference")) {
      return new ReferenceTokenizer(REFERENCE_VOCABULARY, REFERENCE_MAX_OUTPUT_TOKENS);
    }
    java.net.URI uri = o.tokenizerUri != null ? o.tokenizerUri : EngineTokenizer.tokenizeUri(o.engine);
    String apiKey = o.engineApiKey != null && !o.engine.equals("reference")
        && sameOrigin(uri, java.net.URI.create(o.engine)) ? o.engineApiKey : null;
    long budget = o.tokenizerAnswerBudget != 0 ? o.tokenizerAnswerBudget
        : EngineTokenizer.DEFAULT_ANSWER_BUDGET;
    return new EngineTokenizer(uri, apiKey, java.time.Duration.ofSeconds(2), TOKENIZE_TIMEOUT,
        EngineTokenizer.maxAnswerBytes(budget), budget);
  }

  /**
   * Whether two http(s) URLs name the same server: the same scheme, host (in any case) and
   * port (an absent port the scheme's, 80 or 443).
   */
  static boolean sameOrigin(java.net.URI a, java.net.URI b) {
    String scheme = String.valueOf(a.getScheme()).toLowerCase(Locale.ROOT);
    return scheme.equals(String.valueOf(b.getScheme()).toLowerCase(Locale.ROOT))
        && a.getHost() != null && b.getHost() != null
        && a.getHost().equalsIgnoreCase(b.getHost())
        && port(a) == port(b);
  }

  private static int port(java.net.URI u) {
    return u.getPort() != -1 ? u.getPort()
        : "https".equalsIgnoreCase(u.getScheme()) ? 443 : 80;
  }

  /** The demo tokenizer's text of one output token of the reference engine. */
  static java.util.function.IntFunction<String> referenceText() {
    ReferenceTokenizer t = new ReferenceTokenizer(REFERENCE_VOCABULARY,
        REFERENCE_MAX_OUTPUT_TOKENS);
    return id -> t.outputText(new int[] {id}, "");
  }

  /**
   * What {@link #main} does until the node serves: the node started (its banner, and the stats
   * line its {@link Running#close()} prints, printed to {@code out}), or (running null) the
   * status to exit with, its reason printed to {@code err}: 2 for bad flags (with the usage),
   * 1 for a node that could not start (one line naming what failed; the stack trace is logged
   * at debug level), 0 after {@code --help}.
   */
  static Launch launch(String[] args, java.util.Map<String, String> env,
      java.io.PrintStream out, java.io.PrintStream err) {
    NodeOptions o;
    try {
      o = NodeOptions.parse(args, env);
    } catch (IllegalArgumentException e) {
      err.println("error: " + e.getMessage());
      err.println();
      err.println(NodeOptions.USAGE);
      return new Launch(null, 2);
    }
    if (o.help) {
      out.println(NodeOptions.USAGE);
      return new Launch(null, 0);
    }
    try {
      return new Launch(start(o, out), 0);
    } catch (IOException | RuntimeException e) {
      // an operator's problem (a port taken, a file that cannot be read): one line saying so;
      // the stack trace is for a developer, at debug level
      String why = String.valueOf(e.getMessage()).replaceAll("\\s*\\R\\s*", " ");
      err.println("error: node " + o.id + " could not start: " + why);
      log.debug("node {} could not start", o.id, e);
      return new Launch(null, 1);
    }
  }

  /** The outcome of {@link #launch}: a running node, or null and the exit status. */
  record Launch(Running running, int status) {}

  /**
   * A node that could not start: which part failed (the peer port, the client port, the TLS
   * files, the ready file...) and why, in one line.
   */
  static final class StartFailure extends IOException {
    private static final long serialVersionUID = 1L;

    StartFailure(String part, Throwable cause) {
      super(part + ": " + reason(cause), cause);
    }
  }

  /**
   * Why a start failed, for an operator: a host that does not resolve; the message of a setting
   * refused ({@link IllegalArgumentException}, {@link IllegalStateException}, which name what
   * they refuse); else the I/O problem deepest in the causes (an address in use, a file not
   * found, with its path); else the failure's type and message.
   */
  static String reason(Throwable e) {
    IOException deepestIo = null;
    for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
      if (t instanceof java.nio.channels.UnresolvedAddressException
          || t instanceof java.net.UnknownHostException) {
        return "the host does not resolve to an address";
      }
      if (t instanceof IOException io) {
        deepestIo = io;
      }
    }
    String m = e.getMessage();
    boolean refusal = e instanceof IllegalArgumentException || e instanceof IllegalStateException;
    if (refusal && m != null && !m.isBlank()) {
      return m;
    }
    if (deepestIo != null) {
      return ioReason(deepestIo);
    }
    return m == null || m.isBlank() ? e.getClass().getSimpleName()
        : e.getClass().getSimpleName() + ": " + m;
  }

  /** An I/O failure in words: a file's problem with its path, else the JDK's message. */
  static String ioReason(IOException e) {
    if (e instanceof java.nio.file.FileSystemException f && f.getFile() != null) {
      return f.getFile() + ": " + fileProblem(e);
    }
    return fileProblem(e);
  }

  /**
   * The first {@code max + 1} bytes of a file at most: more than {@code max} means the file is
   * larger, for the caller to refuse without reading it whole (another file named by mistake, a
   * log or {@code /dev/zero}).
   *
   * @param what how the message names the file before its path ({@code "--flag "}, or empty)
   * @throws IllegalArgumentException {@code "cannot read " + what + file + ": "} and the problem
   *     ({@link #fileProblem}) if it cannot be read
   */
  static byte[] readAtMost(Path file, int max, String what) {
    try (InputStream in = Files.newInputStream(file)) {
      return in.readNBytes(max + 1);
    } catch (IOException e) {
      throw new IllegalArgumentException("cannot read " + what + file + ": " + fileProblem(e), e);
    }
  }

  /**
   * An I/O failure on a file in words, without its path (the caller names the file): "no such
   * file", "permission denied", the system's reason, else the JDK's message or the type.
   */
  static String fileProblem(IOException e) {
    if (e instanceof java.nio.file.NoSuchFileException) {
      return "no such file";
    }
    if (e instanceof java.nio.file.AccessDeniedException) {
      return "permission denied";
    }
    if (e instanceof java.nio.file.FileSystemException f) {
      return f.getReason() != null ? f.getReason() : f.getClass().getSimpleName();
    }
    String m = e.getMessage();
    return m == null || m.isBlank() ? e.getClass().getSimpleName() : m;
  }

  /** HOST:PORT, an IPv6 host in brackets. */
  private static String address(String host, int port) {
    return (host.indexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port;
  }

  /** {@link #start(NodeOptions, java.io.PrintStream)} printing to {@code System.out}. */
  static Running start(NodeOptions o) throws IOException {
    return start(o, System.out);
  }

  /**
   * Starts a node from parsed options; {@link Running#close()} stops it.
   *
   * @param out where the banner, and the stats line of the stop, are printed
   * @throws StartFailure naming the part that failed, after stopping what had started, whatever
   *     was thrown, an {@link Error} included (its cause)
   */
  static Running start(NodeOptions o, java.io.PrintStream out) throws IOException {
    String[] part = {"the node"};
    try {
      return startParts(o, part, out);
    } catch (Throwable e) { // an Error too (a JCA provider's, the heap): a failed start all the
      // same, reported in one line; escaping launch(), the JVM printed its stack trace
      throw new StartFailure(part[0], e);
    }
  }

  /** {@link #start}, which keeps in {@code part[0]} the part it is starting. */
  private static Running startParts(NodeOptions o, String[] part, java.io.PrintStream out)
      throws IOException {
    if (o.readyFile != null) {
      part[0] = "the ready file " + o.readyFile;
      // a previous run's file names ports this run may not serve on: whoever waits for the
      // file must see it only once this run serves
      Files.deleteIfExists(o.readyFile);
      // it is written last, through this file: a directory it cannot be written in (missing,
      // read-only) fails the start now, before a port opens and the seeds are joined; found
      // only once serving, it stopped a node that had served
      Path tmp = readyTemp(o.readyFile);
      Files.deleteIfExists(tmp);
      Files.createFile(tmp);
      Files.delete(tmp);
    }
    // whatever fails from here on (an engine's health check, a port taken, a bad address) must
    // not leave a half-started node behind: its transport's server thread would keep the
    // process alive and the node would serve its peers without a client endpoint; the engine
    // adapter, built first, would keep its HTTP client's thread
    InferenceEngine engine = null;
    HttpTransport transport = null;
    Schedulers.ClosableScheduler scheduler = null;
    // re-reads of the key file and the TLS files (peer and client), on a thread of their own:
    // file I/O and certificate parsing must not hold up the node's timers
    Schedulers.ClosableScheduler files = null;
    PrefixRouterNode node = null;
    ClientEndpoint endpoint = null;
    PromptTokenizer tokenizer = null;
    try {
      part[0] = "the engine " + o.engine;
      int startHealth = -1; // the status of the start's health check of a model server
      // the model server's KV-cache size, asked when --tree-capacity-tokens is not given
      OpenAiCompatibleEngine.CacheSize cacheSize = null;
      ReferenceEngine reference = null;
      String baseModel = o.model;
      if (o.engine.equals("reference")) {
        if (baseModel == null) {
          // OpenAI clients always name a model: the demo engine's is this one, so that naming it
          // (as /v1/models lists it) is the base model rather than an adapter's scope
          baseModel = REFERENCE_MODEL;
        }
        reference = ReferenceEngine.builder()
            .seed(o.engineSeed)
            .vocabBuckets(REFERENCE_VOCABULARY)
            .maxOutputTokens(REFERENCE_MAX_OUTPUT_TOKENS)
            .blockSize(o.config.blockSize())
            .cacheCapacityTokens(o.engineCacheTokens)
            .threads(o.engineThreads)
            // with the demo tokenizer's text (one char per id), the engine ends its output at a
            // stop string as the endpoint reads it, instead of decoding on to max_tokens
            .stopText(o.tokenizes && o.tokenizerUri == null ? referenceText() : null)
            .build();
        engine = reference;
      } else {
        OpenAiCompatibleEngine.Builder b = o.openAiBuilder();
        if (baseModel == null) {
          baseModel = discoverBaseModel(o.engine, o.engineApiKey);
          if (baseModel != null) {
            b.model(baseModel);
          }
        }
        VllmKvEventSubscriber.Builder events = o.kvEventsBuilder();
        if (events != null) {
          b.kvEvents(events.blockSize(o.config.blockSize()));
        }
        OpenAiCompatibleEngine oe = b.build();
        engine = oe; // closed if its health check, or anything after, throws
        // asked alongside the health check: the start waits for the longer of the two
        java.util.concurrent.CompletableFuture<OpenAiCompatibleEngine.CacheSize> size =
            o.treeCapacityGiven ? null : oe.cacheSize(CACHE_SIZE_WAIT);
        startHealth = startHealth(oe, START_HEALTH_WAIT);
        if (size != null) {
          cacheSize = size.join();
        }
        String unhealthy = healthWarning(startHealth, o.engine, o.engineApiKey != null);
        if (unhealthy != null) {
          log.warn(unhealthy);
        }
      }
      part[0] = "the TLS files";
      TlsFiles tls = o.tlsKeystore == null ? null
          : new TlsFiles(TlsFiles.Use.PEER, o.tlsKeystore, o.tlsTruststore, o.tlsPasswordSource(),
              // a node whose own certificate does not name it would have all it sends refused
              o.tlsBindNodeIds ? o.id : null);
      part[0] = "the client TLS files (--client-tls-keystore"
          + (o.clientTlsTruststore != null ? ", --client-tls-truststore)" : ")");
      TlsFiles clientTls = o.clientTlsKeystore == null ? null
          : new TlsFiles(TlsFiles.Use.CLIENT, o.clientTlsKeystore, o.clientTlsTruststore,
              o.clientTlsPasswordSource(), null);
      part[0] = "the peer transport";
      HttpTransport.Builder tb = HttpTransport.builder().nodeId(o.id).listen(o.listenHost, o.listenPort);
      if (o.advertise != null) {
        tb.advertisedAddress(o.advertise);
      }
      if (o.clusterKeys != null) {
        tb.clusterKey(o.clusterKeys.get(0));
        tb.acceptedClusterKeys(o.clusterKeys.subList(1, o.clusterKeys.size()).toArray(new byte[0][]));
      } else {
        tb.insecureWithoutAuthentication();
      }
      if (tls != null) {
        tb.tls(tls.context()).bindNodeIdsToCertificates(o.tlsBindNodeIds);
      }
      if (o.peerReaderThreads != 0) {
        tb.readerThreads(o.peerReaderThreads);
      }
      if (o.peerMaxHandling != null) {
        tb.maxHandlingTime(o.peerMaxHandling);
      }
      if (o.peerMaxUnfinishedReads != 0) {
        tb.maxUnfinishedReadsPerAddress(o.peerMaxUnfinishedReads);
      }
      if (o.peerBodyBudget != 0) {
        tb.bodyBudget(o.peerBodyBudget);
      }
      transport = tb.build();
      scheduler = Schedulers.newSingleThread("prefix-router-" + o.id);
      part[0] = "the node";
      // a key the server refuses after the start (rotated, say) is logged, once, and /health
      // says so while it lasts
      EngineKeyWatch keyWatch = engine instanceof OpenAiCompatibleEngine
          ? new EngineKeyWatch(engine, o.engine, o.engineApiKey != null, startHealth) : null;
      RouterConfig config = withModelId(withGossipGeneration(
          cacheSize == null ? o.config : withTreeCapacity(o.config, cacheSize, o.engine)),
          o.modelId, baseModel);
      node = PrefixRouterNode.builder()
          .nodeId(o.id)
          .config(config)
          .transport(transport)
          .engine(keyWatch != null ? keyWatch : engine)
          .scheduler(scheduler)
          // its gossip draws the secret keying its slots against hash flooding from this: the
          // default seed, the node id's hash and the clock, is one a peer could work out
          .random(new java.util.SplittableRandom(new java.security.SecureRandom().nextLong()))
          .seeds(o.seeds)
          .build();
      part[0] = "the peer port " + address(o.listenHost, o.listenPort);
      node.start();
      part[0] = "the node";
      if (engine instanceof OpenAiCompatibleEngine oe && oe.kvEventSubscriber() != null) {
        PrefixRouterNode watched = node;
        KvEventsWatch watch = new KvEventsWatch(o.kvEvents, o.kvEventsTopic,
            oe.kvEventSubscriber()::stats, () -> {
              NodeStats s = watched.stats();
              return s.servedLocally() + s.servedForPeers();
            });
        watchKvEvents(scheduler, watch);
      }
      HttpTransport t = transport;
      ClusterKeys keys = null;
      boolean watchKeys = o.clusterKeyFile != null && !o.clusterKeyCheck.isZero();
      boolean watchTls = tls != null && !o.tlsCheck.isZero();
      boolean watchClientTls = clientTls != null && !o.tlsCheck.isZero();
      if (watchKeys || watchTls || watchClientTls) {
        files = Schedulers.newSingleThread("prefix-router-" + o.id + "-files");
      }
      if (watchKeys) {
        keys = new ClusterKeys(o.clusterKeyFile, o.clusterKeys, k -> t.updateClusterKeys(
            k.get(0), k.subList(1, k.size()).toArray(new byte[0][])));
        ClusterKeys k = keys;
        io.github.prefixrouter.spi.Scheduler s = files;
        long confirm = Math.min(ClusterKeys.CONFIRM.toNanos(), o.clusterKeyCheck.toNanos());
        watch(files, () -> checkKeys(s, k, confirm), o.clusterKeyCheck.toNanos());
      }
      ClusterKeys watchedKeys = keys;
      if (watchTls) {
        watch(files, tls::check, o.tlsCheck.toNanos());
      }
      if (watchClientTls) {
        watch(files, clientTls::check, o.tlsCheck.toNanos());
      }
      TlsFiles watchedTls = tls;
      TlsFiles watchedClientTls = clientTls;
      ReferenceEngine ref = reference;
      InferenceEngine eng = engine;
      PrefixRouterNode n = node;
      part[0] = "the tokenizer";
      tokenizer = tokenizer(o);
      PromptTokenizer tok = tokenizer;
      endpoint = new ClientEndpoint(node,
          () -> extraStats(n, t, watchedKeys, watchedTls, watchedClientTls, ref, eng, keyWatch,
              tok),
          4096,
          java.time.Duration.ofSeconds(10), baseModel,
          o.clientReaderThreads != 0 ? o.clientReaderThreads : ClientEndpoint.DEFAULT_READER_THREADS,
          o.clientMaxUnfinishedReads != 0 ? o.clientMaxUnfinishedReads
              : ClientEndpoint.DEFAULT_MAX_UNFINISHED_PER_ADDRESS,
          tokenizer, () -> System.currentTimeMillis() / 1000,
          new java.security.SecureRandom().nextLong(),
          o.clientBodyBudget != 0 ? o.clientBodyBudget : ClientEndpoint.DEFAULT_BODY_BUDGET,
          System::nanoTime,
          // in its request ids: peers remember requests by their origin and id for minutes,
          // across a restart of this node id, and every run takes a generation above the last
          Long.toString(config.gossipGeneration(), 36));
      if (keyWatch != null) {
        endpoint.watchEngineKey(keyWatch::refusedStatus);
      }
      part[0] = "the client port " + address(o.clientHost, o.clientPort);
      InetSocketAddress client = endpoint.start(o.clientHost, o.clientPort,
          clientTls == null ? null : clientTls.context(), o.clientTlsTruststore != null);
      // an IPv6 host in brackets, as the peer address is: written without them, the ready
      // file's and the banner's address could not be taken apart
      String clientAddress = address(client.getHostString(), client.getPort());
      String peerAddress = transport.localAddress().address();
      String clients = (clientTls == null ? "http://" : "https://") + clientAddress
          + (o.clientTlsTruststore != null ? " (client certificates required)" : "");
      String banner = String.format("node %s serving: peers %s, clients %s (/v1/chat/completions, /v1/completions, "
              + "/v1/route/completions), engine %s, tokenizer %s, policy %s",
          o.id, peerAddress, clients, o.engine, tokenizerName(tokenizer), o.config.policy());
      log.debug(banner);
      out.println(banner);
      if (o.readyFile != null) {
        part[0] = "the ready file " + o.readyFile;
        writeReadyFile(o.readyFile, "peer=" + peerAddress + " client=" + clientAddress + "\n");
      }
      return new Running(node, transport, engine, scheduler, files, endpoint, tokenizer,
          clientAddress, o.shutdownGrace, o.readyFile, out, config);
    } catch (Throwable e) { // a checked exception thrown undeclared too: rethrown as it is
      if (node != null) {
        stopPart("the node", node::close, e); // closes the transport too
      } else if (transport != null) {
        stopPart("the transport", transport::close, e);
      }
      stopParts(endpoint, tokenizer, scheduler, files, engine, e);
      throw e;
    }
  }

  /**
   * Stops what runs beside a node, once the node has stopped, in this order: the client endpoint
   * (which writes the answers it was given), the tokenizer, the scheduler, the re-reads of the
   * files, the engine; a part that is null is skipped. Each is stopped whatever the ones before
   * did or threw, an {@link Error} too, for a start that failed ({@code failure} not null) and a
   * stop alike.
   *
   * @param failure the failed start's exception, which what a part that fails to stop threw is
   *     added to as suppressed; null for a stop, which logs it (an {@code Error} at ERROR)
   */
  private static void stopParts(ClientEndpoint endpoint, PromptTokenizer tokenizer,
      Schedulers.ClosableScheduler scheduler, Schedulers.ClosableScheduler files,
      InferenceEngine engine, Throwable failure) {
    if (endpoint != null) {
      stopPart("the client endpoint", endpoint::stop, failure);
    }
    if (tokenizer != null) {
      stopPart("the tokenizer", tokenizer::close, failure);
    }
    if (scheduler != null) {
      stopPart("the scheduler", scheduler::close, failure);
    }
    if (files != null) {
      stopPart("the file re-reads", files::close, failure);
    }
    if (engine instanceof AutoCloseable c) {
      stopPart("the engine", c::close, failure);
    }
  }

  /**
   * Stops one part ({@link #stopParts}). Whatever its stop throws, an {@link Error} too (a host's
   * {@code close()} that breaks, a stack overflow), is added to {@code failure} as suppressed, or
   * for a stop logged (an {@code Error} at ERROR), and not thrown on: the parts after it are
   * stopped all the same.
   */
  private static void stopPart(String part, Stop stop, Throwable failure) {
    try {
      stop.run();
    } catch (Throwable e) { // an Error too: thrown on, it left the later parts running
      if (failure != null) {
        if (e != failure) { // the same instance (a preallocated OutOfMemoryError) is no more
          failure.addSuppressed(e);
        }
      } else {
        CountedFailureLog.log(log, e, "stopping {} failed", part);
      }
    }
  }

  /** A part's stop, which may throw. */
  private interface Stop {
    void run() throws Exception;
  }

  /**
   * Writes the ready file: {@code text} to its {@link #readyTemp} file, moved in place at once,
   * so that a reader sees the whole file or none. If the write or the move fails, the temporary
   * file is removed (it used to be left behind) and the failure thrown.
   */
  static void writeReadyFile(Path readyFile, String text) throws IOException {
    Path tmp = readyTemp(readyFile);
    try {
      Files.writeString(tmp, text, StandardCharsets.UTF_8);
      Files.move(tmp, readyFile, StandardCopyOption.ATOMIC_MOVE,
          StandardCopyOption.REPLACE_EXISTING);
    } catch (IOException | RuntimeException e) {
      try {
        Files.deleteIfExists(tmp);
      } catch (IOException suppressed) {
        e.addSuppressed(suppressed);
      }
      throw e;
    }
  }

  /** The file the ready file is written to before it is moved in place. */
  private static Path readyTemp(Path readyFile) {
    return readyFile.resolveSibling(readyFile.getFileName() + ".tmp");
  }

  /**
   * Every 15 s until it has spoken: a node told of KV events that receives none says so. A
   * check that throws is logged and the watch goes on (it used to end it silently).
   */
  static void watchKvEvents(io.github.prefixrouter.spi.Scheduler scheduler,
      KvEventsWatch watch) {
    scheduler.schedule(java.util.concurrent.TimeUnit.SECONDS.toNanos(15), () -> {
      String warning;
      try {
        warning = watch.check();
      } catch (RuntimeException e) {
        log.warn("the KV-events check failed; checking again in 15 s", e);
        warning = null;
      }
      if (warning != null) {
        log.warn(warning);
      } else {
        watchKvEvents(scheduler, watch);
      }
    });
  }

  /**
   * Runs {@code check} (a re-read of the cluster key file or the TLS files) every
   * {@code intervalNanos} until the scheduler closes.
   */
  private static void watch(io.github.prefixrouter.spi.Scheduler scheduler, Runnable check,
      long intervalNanos) {
    scheduler.schedule(intervalNanos, () -> {
      try {
        check.run();
      } finally {
        watch(scheduler, check, intervalNanos);
      }
    });
  }

  /**
   * Re-reads the cluster key file and, while a read finds changed keys that a second read has
   * to confirm, reads it again {@code confirmNanos} later, so that a rotation takes effect
   * {@link ClusterKeys#CONFIRM} after the check that saw it rather than a whole interval.
   */
  static void checkKeys(io.github.prefixrouter.spi.Scheduler scheduler, ClusterKeys keys,
      long confirmNanos) {
    if (keys.check()) {
      scheduler.schedule(confirmNanos, () -> checkKeys(scheduler, keys, confirmNanos));
    }
  }

  /** The process's counters besides the node's and the client endpoint's. */
  private static List<StatsTable.Section<?>> extraStats(PrefixRouterNode node, HttpTransport t,
      ClusterKeys keys, TlsFiles tls, TlsFiles clientTls, ReferenceEngine e,
      InferenceEngine engine, EngineKeyWatch keyWatch, PromptTokenizer tokenizer) {
    List<StatsTable.Section<?>> sections = new ArrayList<>();
    node.peerMessageStats().ifPresent(
        p -> sections.add(StatsTables.PEER_MESSAGES.section("peer_messages", p)));
    node.engineStallStats().ifPresent(
        w -> sections.add(StatsTables.ENGINE_WATCH.section("engine_watch", w)));
    node.cacheEventStats().ifPresent(
        tree -> sections.add(StatsTables.LOCAL_TREE.section("local_tree", tree)));
    sections.add(StatsTables.TRANSPORT.section("transport", t.stats()));
    if (keys != null) {
      sections.add(StatsTables.CLUSTER_KEY_FILE.section("cluster_key_file", keys.stats()));
    }
    if (tls != null) {
      sections.add(StatsTables.PEER_TLS.section("tls", tls.stats()));
    }
    if (clientTls != null) {
      sections.add(StatsTables.CLIENT_TLS.section("client_tls", clientTls.stats()));
    }
    if (e != null) {
      sections.add(StatsTables.REFERENCE_ENGINE.section("engine", e.stats()));
    }
    if (engine instanceof OpenAiCompatibleEngine oe) {
      sections.add(StatsTables.OPENAI_ENGINE.section("engine", oe.stats()));
    }
    if (keyWatch != null) {
      sections.add(StatsTables.ENGINE_KEY.section("engine_key", keyWatch.stats()));
    }
    if (engine instanceof OpenAiCompatibleEngine oe && oe.kvEventSubscriber() != null) {
      VllmKvEventSubscriber sub = oe.kvEventSubscriber();
      sections.add(StatsTables.KV_EVENTS.section("kv_events",
          new StatsTables.KvEventStats(sub.stats(), sub.receiverStats())));
    }
    if (tokenizer instanceof EngineTokenizer et) {
      sections.add(StatsTables.TOKENIZER.section("tokenizer", et.stats()));
    }
    return sections;
  }

  /** How long the start waits for the engine's health check before it goes on without it. */
  static final java.time.Duration START_HEALTH_WAIT = java.time.Duration.ofSeconds(10);

  /**
   * What is wrong with the engine's health check, if it does not pass within {@code wait}: the
   * line the start logs, or null when the server answered 2xx. A server that refuses this node's
   * credentials (401, 403) is told from one with nothing there (404 to both paths: a wrong
   * {@code --engine}), one that fails (another status) and one that does not answer; the line
   * points at the key's flag and variable and never shows the key. The check's own bound is the
   * engine's request timeout (minutes, for long generations), for which a server that takes
   * connections and never answers would hold the start; the node starts either way.
   *
   * @param engineUrl the server, as {@code --engine} gives it
   * @param keyGiven whether the node has the server's API key
   */
  static String healthWarning(OpenAiCompatibleEngine engine, java.time.Duration wait,
      String engineUrl, boolean keyGiven) {
    return healthWarning(startHealth(engine, wait), engineUrl, keyGiven);
  }

  /** The status of the engine's health check, or -1 for none within {@code wait}. */
  static int startHealth(OpenAiCompatibleEngine engine, java.time.Duration wait) {
    return engine.healthStatus()
        .completeOnTimeout(-1, wait.toNanos(), java.util.concurrent.TimeUnit.NANOSECONDS)
        .join();
  }

  /**
   * {@link #healthWarning(OpenAiCompatibleEngine, java.time.Duration, String, boolean)} of a
   * health check that got {@code status} (-1: no answer).
   */
  static String healthWarning(int status, String engineUrl, boolean keyGiven) {
    if (status >= 200 && status < 300) {
      return null;
    }
    if (status == 401 || status == 403) {
      return "engine at " + engineUrl + " refuses this node's credentials (HTTP " + status
          + ") at its health check, " + (keyGiven ? "with the API key given" : "without an API key")
          + ": give the server's key with --engine-api-key-file FILE or env "
          + NodeOptions.ENGINE_API_KEY_ENV;
    }
    if (status == 404) { // /v1/models, asked when /health was not found, was not found either
      return "engine at " + engineUrl + " fails its health check: HTTP 404 to GET /health and "
          + "GET /v1/models, nothing served there; check --engine, which must be the server's "
          + "root or its /v1";
    }
    if (status > 0) {
      return "engine at " + engineUrl + " fails its health check: HTTP " + status
          + " (GET /health, or GET /v1/models where /health is not found)";
    }
    return "engine at " + engineUrl + " does not answer its health check yet";
  }

  /**
   * The base model an OpenAI-compatible server serves, from its {@code GET /v1/models}: the one
   * entry without a {@code "parent"} (vLLM lists each LoRA adapter with its base model as
   * parent), or null, with a warning, when the server cannot tell (no answer, several base
   * models, the API key refused), the request cannot be sent (the HTTP client, or the host's
   * proxy selector it asks, throws: an {@link Error} too, a {@link VirtualMachineError}
   * included) or its answer is refused: above 1 MiB, not whole within 10 s,
   * nested deeper than 8, or taking more heap once parsed than a completions answer may
   * ({@link io.github.prefixrouter.internal.json.AnswerHeap}). Without it, a client naming the
   * base model in {@code "model"} would be taken to name an adapter, and its request routed on
   * prefixes cached for that adapter: none.
   *
   * @param apiKey the server's API key, sent as {@code Authorization: Bearer}; null for none
   */
  static String discoverBaseModel(String baseUrl, String apiKey) {
    // the base URL as the engine adapter and the tokenizer take it: with or without /v1
    String uri = EngineTokenizer.tokenizeUri(baseUrl).resolve("v1/models").toString();
    java.util.concurrent.CompletableFuture<java.net.http.HttpResponse<byte[]>> call = null;
    // JDK 17's client cannot be closed: its selector thread, which ran until the client was
    // garbage collected (for as long as the node ran, if the heap stayed quiet), is ended below
    io.github.prefixrouter.internal.wire.JdkHttpClients.Client client =
        io.github.prefixrouter.internal.wire.JdkHttpClients.build(java.net.http.HttpClient
            .newBuilder().connectTimeout(java.time.Duration.ofSeconds(5)),
            "prefix-router-models-client-build");
    try {
      java.net.http.HttpClient c = client.http();
      // at most 1 MiB, and the whole answer within 10 s: the request's timeout covers only its
      // headers, and a server stalling the body would otherwise hold the start for ever
      java.net.http.HttpRequest.Builder rb = java.net.http.HttpRequest.newBuilder(
          java.net.URI.create(uri)).timeout(java.time.Duration.ofSeconds(5)).GET();
      if (apiKey != null) {
        rb.header("Authorization", "Bearer " + apiKey);
      }
      call = c.sendAsync(rb.build(),
          info -> io.github.prefixrouter.internal.wire.CappedBody.orNull(info, 1 << 20));
      java.net.http.HttpResponse<byte[]> r = call.get(10, java.util.concurrent.TimeUnit.SECONDS);
      if (r.statusCode() == 200 && r.body() == null) {
        log.warn("{} answered more than 1 MiB: pass --model NAME (the base model), or a "
            + "client's \"model\" naming it is taken for a LoRA adapter", uri);
        return null;
      }
      if (r.statusCode() == 401 || r.statusCode() == 403) {
        // the node's requests will be refused alike: say what to look at
        log.warn("{} answered {}: the server refuses {}: give its key with "
            + "--engine-api-key-file FILE or env {} (and pass --model NAME, or a client's "
            + "\"model\" naming the base model is taken for a LoRA adapter)", uri, r.statusCode(),
            apiKey == null ? "requests without an API key" : "the API key given",
            NodeOptions.ENGINE_API_KEY_ENV);
        return null;
      }
      if (r.statusCode() == 404 || r.statusCode() == 405) {
        // vLLM, SGLang and llama.cpp all list their models there: the URL is likely wrong
        log.warn("{} answered {}: no model list there; check --engine, which must be the "
            + "server's root or its /v1 (the completions go to {}), and pass --model NAME, or "
            + "a client's \"model\" naming the base model is taken for a LoRA adapter", uri,
            r.statusCode(), uri.substring(0, uri.length() - "models".length()) + "completions");
        return null;
      }
      if (r.statusCode() != 200) {
        log.warn("{} answered {}: pass --model NAME (the base model), or a client's \"model\" "
            + "naming it is taken for a LoRA adapter", uri, r.statusCode());
        return null;
      }
      // parsed within the heap a completions answer may take: a list of names and ids never
      // takes more, and under 1 MiB of tiny objects ({"data":[{},{},...]}) would take 50 MB
      String text = new String(r.body(), java.nio.charset.StandardCharsets.UTF_8);
      Object root;
      try {
        root = io.github.prefixrouter.internal.json.Json.parse(text, 1 << 20, 8,
            io.github.prefixrouter.internal.json.AnswerHeap.maxParsedBytes(text.length()));
      } catch (io.github.prefixrouter.internal.json.Json.ParsedSizeException e) {
        log.warn("{}: pass --model NAME (the base model), or a client's \"model\" naming it is "
            + "taken for a LoRA adapter", io.github.prefixrouter.internal.json.AnswerHeap.tooLarge(
                "the answer of " + uri, e, "model names"));
        return null;
      }
      java.util.List<String> bases = new java.util.ArrayList<>();
      if (root instanceof java.util.Map<?, ?> m && m.get("data") instanceof java.util.List<?> data) {
        for (Object e : data) {
          if (e instanceof java.util.Map<?, ?> model && model.get("id") instanceof String id
              && (model.get("parent") == null
                  || model.get("parent") == io.github.prefixrouter.internal.json.Json.NULL)) {
            bases.add(id);
          }
        }
      }
      if (bases.size() == 1) {
        log.info("base model {} (from {}); pass --model to name it yourself", bases.get(0), uri);
        return bases.get(0);
      }
      log.warn("{} lists {} base models {}: pass --model NAME, or a client's \"model\" naming "
          + "the base model is taken for a LoRA adapter", uri, bases.size(), bases);
      return null;
    } catch (java.util.concurrent.ExecutionException
        | java.util.concurrent.TimeoutException | RuntimeException
        | Error e) { // an Error too (of the host's proxy selector as the request is sent, say)
      log.warn("could not read {} ({}): pass --model NAME, or a client's \"model\" naming the "
          + "base model is taken for a LoRA adapter", uri,
          e instanceof java.util.concurrent.ExecutionException && e.getCause() != null
              ? e.getCause().toString() : e.toString());
      if (call != null) {
        call.cancel(true); // a body still stalling: its connection is closed
      }
      return null;
    } catch (InterruptedException e) {
      if (call != null) {
        call.cancel(true);
      }
      Thread.currentThread().interrupt();
      return null;
    } finally {
      client.end();
    }
  }

  /** How long the start waits for the model server's KV-cache size ({@link #withTreeCapacity}). */
  static final java.time.Duration CACHE_SIZE_WAIT = java.time.Duration.ofSeconds(5);

  /**
   * {@code c} with the tree capacity of the model server's KV-cache size, as {@link
   * OpenAiCompatibleEngine#cacheSize} found it, logged with where it was read; without one (or
   * one below the block size), {@code c} as it is, with a warning saying how to set
   * {@code --tree-capacity-tokens}. A mirror limit given ({@code --mirror-limit-tokens}) below
   * the size found bounds it, with a warning: the configuration refuses a capacity above it.
   *
   * @param engineUrl the server, as {@code --engine} gives it
   */
  static RouterConfig withTreeCapacity(RouterConfig c, OpenAiCompatibleEngine.CacheSize size,
      String engineUrl) {
    String problem = size.tokens() == 0 ? size.detail()
        : size.tokens() < c.blockSize() ? size.detail() + ": " + size.tokens()
            + " tokens, below the block size (" + c.blockSize() + ")"
        : null;
    if (problem != null) {
      log.warn("tree capacity {} tokens: the KV-cache size of the engine at {} is not known ({}); "
          + "set --tree-capacity-tokens to the server's KV-cache size in tokens (vLLM logs it at "
          + "start as \"GPU KV cache size: N tokens\", SGLang as max_total_num_tokens)",
          c.treeCapacityTokens(), engineUrl, problem);
      return c;
    }
    long tokens = size.tokens();
    RouterConfig sized;
    try {
      sized = c.toBuilder().treeCapacityTokens(tokens).build();
    } catch (IllegalArgumentException belowMirrorLimit) {
      // the only setting a capacity from the block size up can break: an automatic mirror
      // limit follows the capacity, so this one was given
      long limit = c.mirrorLimitTokens();
      log.warn("tree capacity {} tokens: the engine's KV-cache size, {} tokens from {}, is above "
          + "--mirror-limit-tokens {}; raise that to at least {}, or set --tree-capacity-tokens",
          limit, tokens, size.detail(), limit, tokens);
      return c.toBuilder().treeCapacityTokens(limit).build();
    }
    log.info("tree capacity {} tokens: the engine's KV-cache size, from {}; "
        + "--tree-capacity-tokens N sets it instead", tokens, size.detail());
    return sized;
  }

  /**
   * {@code c} with the node's model id: {@code modelId} if given (empty for none), else the base
   * model's name, else (no base model known, or a name that cannot be a model id) none, with a
   * warning.
   */
  static RouterConfig withModelId(RouterConfig c, String modelId, String baseModel) {
    String id = modelId != null ? modelId : baseModel != null ? baseModel : "";
    if (modelId == null && baseModel == null) {
      log.warn("no model id (--model-id) and no base model known: peers serving another model"
          + " are not told apart from this node's");
    }
    String problem = modelId == null && baseModel != null
        ? io.github.prefixrouter.internal.ModelIds.problem(baseModel) : null;
    if (problem != null) {
      // a server's name for its model (a long local path, say) is not this node's to refuse:
      // the node starts, without a model id, rather than failing on it
      log.warn("the base model's name cannot be the model id ({}): pass --model-id ID; until "
          + "then peers serving another model are not told apart from this node's", problem);
      id = "";
    }
    return c.toBuilder().modelId(id).build();
  }

  /**
   * The config with a gossip generation from the wall clock (microseconds since the epoch) unless
   * one is set: a node id restarted on another host, or after a reboot, should start a higher
   * generation than its last run (a lower one is mended, at the cost of a snapshot of the node
   * to each peer). The node's default, its monotonic clock, restarts from an arbitrary origin.
   */
  static RouterConfig withGossipGeneration(RouterConfig c) {
    if (c.gossipGeneration() != 0) {
      return c;
    }
    return c.toBuilder().gossipGeneration(System.currentTimeMillis() * 1_000L).build();
  }

  /** A started node process's parts; {@link #close()} stops them in order and prints stats. */
  static final class Running implements AutoCloseable {
    final PrefixRouterNode node;
    final HttpTransport transport;
    final InferenceEngine engine;
    final Schedulers.ClosableScheduler scheduler;
    /** The re-reads of the key file and the TLS files (peer, client); null if there are none. */
    private final Schedulers.ClosableScheduler files;
    final ClientEndpoint endpoint;
    /** The OpenAI routes' tokenizer, closed after the endpoint stops; null for none. */
    final PromptTokenizer tokenizer;
    final String clientAddress;
    /** The node's configuration, as the start completed it; null where none was given. */
    final RouterConfig config;
    private final java.time.Duration shutdownGrace;
    private final java.nio.file.Path readyFile;
    /** Where the stats line is printed. */
    private final java.io.PrintStream out;
    private final AtomicBoolean closed = new AtomicBoolean();

    Running(PrefixRouterNode node, HttpTransport transport, InferenceEngine engine,
        Schedulers.ClosableScheduler scheduler, Schedulers.ClosableScheduler files,
        ClientEndpoint endpoint, PromptTokenizer tokenizer, String clientAddress,
        java.time.Duration shutdownGrace, java.nio.file.Path readyFile, java.io.PrintStream out,
        RouterConfig config) {
      this.out = out;
      this.config = config;
      this.tokenizer = tokenizer;
      this.files = files;
      this.shutdownGrace = shutdownGrace;
      this.readyFile = readyFile;
      this.node = node;
      this.transport = transport;
      this.engine = engine;
      this.scheduler = scheduler;
      this.endpoint = endpoint;
      this.clientAddress = clientAddress;
    }

    @Override
    public void close() {
      if (!closed.compareAndSet(false, true)) {
        return;
      }
      if (readyFile != null) {
        try { // the node stops serving now (its /health turns 503 at once)
          Files.deleteIfExists(readyFile);
        } catch (IOException e) {
          log.warn("could not remove the ready file {}", readyFile, e);
        }
      }
      try {
        // answers accepted requests (those still unanswered when the grace period ends with a
        // 503), then closes the transport; the endpoint then writes the answers it was given
        node.stop(shutdownGrace).join();
      } catch (Throwable e) { // an Error too: the rest is stopped all the same, and the stats
        // printed
        CountedFailureLog.log(log, e, "stopping {} failed", "the node");
      }
      try {
        stopParts(endpoint, tokenizer, scheduler, files, engine, null);
      } finally {
        printStats();
      }
    }

    /** The stats line a stop prints, also when a part failed to stop. */
    private void printStats() {
      NodeStats s = node.stats();
      GossipStats g = s.gossip();
      String summary = String.format(Locale.ROOT,
          "node %s stopped: requests=%d local=%d forwarded=%d failed=%d servedForPeers=%d "
              + "refusedForPeers=%d pushedBack=%d fallbacks=%s hitRate=%.3f peersLive=%d "
              + "gossipBytesIn=%d gossipBytesOut=%d gossipMalformed=%d gossipRejected=%d "
              + "peersDeclaredDead=%d nodeIdInUse=%b transport=%s",
          s.nodeId(), s.requests(), s.servedLocally(), s.forwarded(), s.failed(), s.servedForPeers(),
          s.refusedForPeers(), s.pushedBack(), s.fallbacks(), s.hitRate(), s.peersLive(),
          s.gossipBytesIn(), s.gossipBytesOut(), g.malformedDropped(), g.rejected(),
          g.membersDead(), g.nodeIdInUse(), transport.stats());
      log.debug(summary);
      out.println(summary);
    }
  }
}
