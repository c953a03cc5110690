package io.github.prefixrouter.server;

import com.google.common.net.InetAddresses;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine;
import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.internal.ModelIds;
import io.github.prefixrouter.internal.WildcardAddress;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.transport.http.HttpTransport;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The settings of one {@link NodeMain} process, from command-line flags and an optional
 * properties file (flags win). Every key is accepted both as {@code --key value} /
 * {@code --key=value} and as {@code key=value} in the file, each once (a flag given twice, or
 * a key on two lines of the file, is refused); see {@link #USAGE}; {@code -h} is
 * {@code --help}. The flags
 * without a value ({@code --insecure}, {@code --help}) take {@code true} or {@code false} (in
 * any case) after {@code =} or in the file, and nothing else.
 */
public final class NodeOptions {

  /** The command-line help. */
  public static final String USAGE =
      String.join(
          "\n",
          "Usage: NodeMain [--config FILE] --id ID --listen HOST:PORT [--client HOST:PORT] [options]",
          "",
          "  Each flag once.",
          "",
          "  --config FILE            properties file with any of the keys below, each once",
          "                           (flags win); insecure and help there take true or false",
          "  --id ID                  this node's id (required)",
          "  --listen HOST:PORT       peer-to-peer address (required; port 0 picks one)",
          "  --advertise HOST:PORT    address peers should use, if different from --listen;",
          "                           required with --listen 0.0.0.0:PORT (and no wildcard);",
          "                           default the --listen address",
          "  --client HOST:PORT       client endpoint (POST /v1/chat/completions, /v1/completions,",
          "                           /v1/route/completions; GET /v1/models, /v1/stats,",
          "                           /metrics, /health); default 127.0.0.1:0; a",
          "                           completion with \"stream\": true is answered as server-sent",
          "                           events, a piece of output each (curl -N to watch them)",
          "  --seeds LIST             peers to join through: id@host:port,id@host:port, each id",
          "                           once (the node's own entry is skipped, so one list serves",
          "                           all); a host is an IP address ([v6] in brackets) or a name",
          "  --cluster-key-file FILE  file holding the shared cluster key: hex, one key per",
          "                           line, the first signs and all are accepted (for a key",
          "                           rotation), or one raw key; text in ASCII or UTF-8 (not",
          "                           UTF-16); or env PREFIX_ROUTER_CLUSTER_KEY (hex,",
          "                           comma-separated); one, and only one, is required",
          "  --cluster-key-check-ms N re-read --cluster-key-file this often and use its keys",
          "                           if they changed (0: never); default 10000",
          "  --insecure               no message authentication (trusted test networks only;",
          "                           not with a cluster key, from a file or the environment);",
          "                           default off",
          "  --tls-keystore FILE      TLS on the peer port: PKCS12 with this node's key and",
          "                           certificate (naming the address peers use)",
          "  --tls-truststore FILE    PKCS12 with the certificates to trust (a cluster CA);",
          "                           default the keystore's own",
          "  --tls-password-file FILE the password of both files, in UTF-8 or ASCII (or env",
          "                           PREFIX_ROUTER_TLS_PASSWORD); required with --tls-keystore",
          "  --tls-check-ms N         re-read the TLS files (peer and client) this often and",
          "                           use them if they changed (0: never); default 60000",
          "  --tls-bind-node-ids B    true: a peer's TLS certificate must name the node id it",
          "                           speaks for (a DNS or URI subject alternative name);",
          "                           client certificates required; default false",
          "  --client-tls-keystore FILE  TLS on the client port: PKCS12 with its key and",
          "                           certificate (naming the address clients use)",
          "  --client-tls-truststore FILE  require client certificates leading to one in this",
          "                           PKCS12 file (mutual TLS; /health needs none); default:",
          "                           ask for none",
          "  --client-tls-password-file FILE  the password of both client files (or env",
          "                           PREFIX_ROUTER_CLIENT_TLS_PASSWORD); required with",
          "                           --client-tls-keystore",
          "  --engine reference|URL   the reference engine, or an OpenAI-compatible server URL;",
          "                           default reference",
          "  --engine-api-key-file FILE  the server's API key (vLLM's and SGLang's --api-key),",
          "                           sent as a bearer token to its completions, /v1/models and",
          "                           /tokenize (and to a --tokenizer URL on the same scheme,",
          "                           host and port); in UTF-8 or ASCII, read once at the start",
          "                           (or env PREFIX_ROUTER_ENGINE_API_KEY); needs --engine URL;",
          "                           default: none sent",
          "  --model NAME             model name sent to the OpenAI-compatible server (the base",
          "                           model: a client's \"model\" naming it names no LoRA adapter);",
          "                           default: the one base model the server's /v1/models lists",
          "                           (with --engine reference: reference)",
          "  --model-id ID            what this node serves, for its peers: a node never serves",
          "                           a peer's request of another model id; default the base",
          "                           model's name (--model or the one the server lists) if",
          "                           it can be one (256 UTF-8 bytes at most, no control",
          "                           characters); none: no model id (to talk to nodes from",
          "                           before model ids)",
          "  --engine-slots N         requests the server runs at once (vLLM --max-num-seqs);",
          "                           more outstanding are its queue, for push-back; default",
          "                           256, or --engine-max-in-flight if that is lower",
          "  --engine-max-in-flight N requests outstanding at the server at most; more are",
          "                           busy (tried on a peer); default twice --engine-slots",
          "                           (512 when neither is given)",
          "  --engine-answer-budget SIZE  heap the server's answers being read and parsed may",
          "                           hold at once: bytes, or a number with k, m or g; an",
          "                           answer that cannot get its share waits while others give",
          "                           theirs back, and fails (tried on a peer; the node's",
          "                           shortage, not one of --engine-failures) once none has",
          "                           for 1 s; at least 192m; default 256m",
          "  --engine-request-timeout-ms N  how long the server may take to answer one request",
          "                           (then 504, not tried on a peer); below",
          "                           --engine-timeout-ms and --peer-max-handling-ms;",
          "                           default 240000",
          "  --engine-stream-idle-ms N  how long the server may send nothing while it streams",
          "                           a request (before its first chunk too); then the request",
          "                           fails and is tried on a peer; default 60000",
          "  --tokenizer auto|none|URL  how text prompts and chat conversations (the OpenAI",
          "                           routes) become token ids: auto asks the server's /tokenize",
          "                           (vLLM's; its chat template too), or tokenizes per character",
          "                           for the reference engine; URL is another vLLM-style",
          "                           /tokenize; none takes token ids only; default auto",
          "  --tokenizer-answer-budget SIZE  heap the tokenizer's /tokenize answers being read",
          "                           and parsed may hold at once: bytes, or a number with k,",
          "                           m or g; an answer that cannot get its share waits while",
          "                           others give theirs back, and is answered 503 (busy) once",
          "                           none has for 1 s; the cap on one answer is the largest",
          "                           that fits, at most 64 MiB: a prompt whose token list is",
          "                           longer is answered 502 (the answer too large); at least",
          "                           25m (a cap of 1 MiB); needs --engine URL or --tokenizer",
          "                           URL (not --tokenizer none); default 592m",
          "  --kv-events tcp://H:P    vLLM's KV-event publisher (--kv-events-config endpoint): the",
          "                           tree mirrors vLLM's cache exactly; --block-size must be vLLM's",
          "  --kv-events-replay tcp://H:P  vLLM's replay endpoint, to recover lost events",
          "  --kv-events-replay-backoff-ms MIN,MAX  after a failed replay, gaps get",
          "                           none for MIN ms, doubling with each failed one up to",
          "                           MAX ms (1 to 365 days); needs --kv-events-replay;",
          "                           default 1000,60000",
          "  --kv-events-silence REQUESTS,MS  make --kv-events' connection again (clearing the",
          "                           mirror) once no event arrived on it while the server",
          "                           completed REQUESTS requests that store a block, and MS",
          "                           ms passed (REQUESTS to 2147483647, MS to 365 days); 0 or",
          "                           0,MS: never; needs --kv-events; default 32,60000",
          "  --kv-events-topic T      take only events of this topic; default: every topic",
          "                           (vLLM's and SGLang's default topic is empty)",
          "  --engine-seed N          reference engine weight seed (same on all nodes); default 42",
          "  --engine-threads N       reference engine threads; default 1",
          "  --engine-cache-tokens N  reference engine prefix cache capacity; default 65536",
          "  --policy P               cost-aware | longest-prefix | local-only; default cost-aware",
          "  --block-size N           tokens per block (same on all nodes); default 16",
          "  --tree-capacity-tokens N the server's prefix cache in tokens: the self-managed tree's",
          "                           capacity (an engine without cache events) and the basis of",
          "                           how long a prefix is expected to stay cached; default",
          "                           --engine-cache-tokens (reference engine), else the size",
          "                           the server publishes, asked at the start for 5 s at most",
          "                           (vLLM's /metrics: vllm:cache_config_info block_size x",
          "                           num_gpu_blocks; SGLang's /get_server_info:",
          "                           max_total_num_tokens; 1 to 2^36) and logged, else 1048576",
          "                           (with a warning)",
          "  --mirror-limit-tokens N  the most tokens a tree mirroring the engine's cache events",
          "                           holds: beyond, the engine's removals are not arriving and",
          "                           its least recently stored blocks are dropped; 0 or at least",
          "                           --tree-capacity-tokens; default 0: 4 x that, at least",
          "                           16777216; needs --kv-events or --engine reference",
          "  --gossip-interval-ms N   anti-entropy interval; default 200",
          "  --gossip-message-bytes SIZE  the largest gossip message this node sends: bytes,",
          "                           or a number with k or m; 1k to 4m (the most the peer",
          "                           port carries); smaller takes more messages and rounds",
          "                           to deliver a snapshot, larger suits big caches and many",
          "                           peers; nodes may differ in it; default 64k",
          "  --peer-suspect-ms N      silence before a peer is suspected; default 2000",
          "  --peer-dead-ms N         silence before a peer is dropped; default 10000",
          "  --hop-limit N            forwards per request; default 1",
          "  --engine-timeout-ms N    the node's own limit on one engine run; default 600000",
          "  --engine-stall-ms N      with requests outstanding, how long the engine may give",
          "                           no output and no answer before the node routes around",
          "                           it (to peers, and pushing back); 0: never; default 30000",
          "  --engine-failures N      retryable failures of the engine in a row (refused",
          "                           connection, error status) after which the node routes",
          "                           around it, probing it at most once every 2 s until a",
          "                           request succeeds; 0: never; default 3",
          "  --initial-prefill-ns-per-token N  prefill time per uncached token until the",
          "                           engine's timings refine it (routing cost); default 100000",
          "  --peer-max-handling-ms N how long this node may take to answer a peer's forward",
          "                           (then 504 to the peer); default 300000",
          "  --stream-interval-ms N   how often at most a forwarded request's output goes back",
          "                           to the node streaming it to its client; 0 sends every",
          "                           piece at once; default 20",
          "  --watermarks LOW,HIGH    engine queue push-back watermarks; default 16,32",
          "  --peer-reader-threads N  requests read at once on the peer port, a thread each; a",
          "                           connection beyond is answered 503 (busy); default 64",
          "  --peer-max-unfinished-reads N  requests from one address whose body is still",
          "                           arriving on the peer port; one beyond is a 503; default 8",
          "  --client-reader-threads N  as --peer-reader-threads, on the client port; default 64",
          "  --client-max-unfinished-reads N  as --peer-max-unfinished-reads, on the client",
          "                           port; default 16",
          "                           (the four: 1 to 4096)",
          "  --peer-body-budget SIZE  heap the bodies being read on the peer port may hold",
          "                           at once, before they are authenticated: bytes, or a",
          "                           number with k, m or g; a body that cannot get its share",
          "                           waits while others give theirs back, and is answered 503",
          "                           (busy) once none has for 1 s; at least 8m; default 64m;",
          "                           as much again for the peers' answers to this node",
          "  --client-body-budget SIZE  heap the requests on the client port may hold at once",
          "                           (bodies being read, texts, parsed JSON; then prompts",
          "                           until their requests end): bytes, or",
          "                           a number with k, m or g (KiB, MiB, GiB); a request that",
          "                           cannot get its share waits while others give theirs",
          "                           back, and is answered 503 once none has for 1 s; at",
          "                           least 73m (one 8 MiB body's); default 256m",
          "  --ready-file FILE        write 'peer=HOST:PORT client=HOST:PORT' here once serving;",
          "                           removed at start (a previous run's) and on stop",
          "  --shutdown-grace-ms N    on SIGTERM, wait at most this long for accepted requests,",
          "                           then answer the rest 503; below the orchestrator's kill",
          "                           timeout; default 25000",
          "  --help, -h               this text");

  static final Set<String> KEYS =
      Set.of(
          "config", "id", "listen", "advertise", "client", "seeds", "cluster-key-file",
          "cluster-key-check-ms", "insecure", "tls-keystore", "tls-truststore", "tls-password-file",
          "tls-check-ms", "tls-bind-node-ids", "client-tls-keystore", "client-tls-truststore",
          "client-tls-password-file",
          "engine", "engine-api-key-file", "model", "model-id", "tokenizer", "tokenizer-answer-budget", "engine-slots", "engine-max-in-flight", "engine-answer-budget", "kv-events", "kv-events-replay", "kv-events-replay-backoff-ms", "kv-events-silence", "kv-events-topic", "engine-seed", "engine-threads", "engine-cache-tokens", "policy",
          "block-size", "tree-capacity-tokens", "mirror-limit-tokens", "gossip-interval-ms", "gossip-message-bytes", "peer-suspect-ms", "peer-dead-ms", "hop-limit",
          "watermarks", "peer-reader-threads", "peer-max-unfinished-reads",
          "client-reader-threads", "client-max-unfinished-reads", "client-body-budget",
          "peer-body-budget",
          "ready-file",
          "shutdown-grace-ms", "engine-request-timeout-ms", "engine-stream-idle-ms", "engine-timeout-ms",
          "engine-stall-ms", "engine-failures", "peer-max-handling-ms",
          "initial-prefill-ns-per-token",
          "stream-interval-ms", "help");

  private static final Set<String> FLAGS_WITHOUT_VALUE = Set.of("insecure", "help");
  /** The flags that name a file the node reads (--ready-file, which it writes, has its own check). */
  private static final List<String> FILE_FLAGS = List.of("cluster-key-file", "tls-keystore",
      "tls-truststore", "tls-password-file", "client-tls-keystore", "client-tls-truststore",
      "client-tls-password-file", "engine-api-key-file");

  final String id;
  final String listenHost;
  final int listenPort;
  final String advertise;
  final String clientHost;
  final int clientPort;
  final List<PeerAddress> seeds;
  /** The cluster keys, signing key first; null when insecure. */
  final List<byte[]> clusterKeys;
  /** The file they came from, re-read every {@link #clusterKeyCheck}; null if none. */
  final Path clusterKeyFile;
  /** How often to re-read {@link #clusterKeyFile}; zero: never. */
  final Duration clusterKeyCheck;
  /** TLS on the peer port: the node's PKCS12 keystore, or null for plain HTTP. */
  final Path tlsKeystore;
  /** The PKCS12 trust store, or null for the keystore's own certificates. */
  final Path tlsTruststore;
  /** The password of both TLS files, as read at the start; null without TLS. */
  final char[] tlsPassword;
  /** The password file of the TLS files, read again at every check; null: the environment's. */
  final Path tlsPasswordFile;
  /** How often to re-read the TLS files, the peer port's and the client port's; zero: never. */
  final Duration tlsCheck;
  /** TLS on the client port: its PKCS12 keystore, or null for plain HTTP. */
  final Path clientTlsKeystore;
  /** The client port's PKCS12 trust store: clients must present a certificate; null: none. */
  final Path clientTlsTruststore;
  /** The password of both client TLS files, as read at the start; null without client TLS. */
  final char[] clientTlsPassword;
  /** The password file of the client TLS files, read again at every check; null: from env. */
  final Path clientTlsPasswordFile;
  /** Whether a peer's TLS certificate must name the node id it speaks for. */
  final boolean tlsBindNodeIds;
  final String engine;
  /**
   * The OpenAI-compatible server's API key ({@code --engine-api-key-file}, or env
   * {@code PREFIX_ROUTER_ENGINE_API_KEY}), read once at the start; null for none.
   */
  final String engineApiKey;
  final String model;
  /** The node's model id: null for the base model's name, empty for none. */
  final String modelId;
  /** The tokenize endpoint ({@code --tokenizer URL}); null for auto or none. */
  final java.net.URI tokenizerUri;
  /** False with {@code --tokenizer none}: the node takes token ids only. */
  final boolean tokenizes;
  /**
   * The answer budget of the tokenizer that asks a {@code /tokenize} endpoint, in bytes
   * ({@code --tokenizer-answer-budget}); 0 when not given ({@link
   * EngineTokenizer#DEFAULT_ANSWER_BUDGET}).
   */
  final long tokenizerAnswerBudget;
  /** The OpenAI-compatible server's slots and outstanding-request cap; 0 when not given. */
  final int engineSlots;
  final int engineMaxInFlight;
  /** The OpenAI-compatible engine's answer budget in bytes; 0 when not given. */
  final long engineAnswerBudget;
  /** vLLM's KV-event endpoint, replay endpoint and topic; null when not given. */
  final String kvEvents;
  final String kvEventsReplay;
  final String kvEventsTopic;
  /** The replay backoff, first and longest wait; null when not given (the subscriber's). */
  final Duration kvEventsReplayBackoffMin;
  final Duration kvEventsReplayBackoffMax;
  /**
   * The silence check's requests and least time ({@code --kv-events-silence}; 0 requests: off);
   * the time null when not given (the subscriber's).
   */
  final int kvEventsSilenceRequests;
  final Duration kvEventsSilenceTime;
  final long engineSeed;
  final int engineThreads;
  final int engineCacheTokens;
  final RouterConfig config;
  /**
   * Whether {@code --tree-capacity-tokens} was given: if not, a node in front of a model server
   * asks the server for its KV-cache size at the start ({@link NodeMain#withTreeCapacity}).
   */
  final boolean treeCapacityGiven;
  /**
   * The reader limits of the peer port (the transport's {@code readerThreads} and
   * {@code maxUnfinishedReadsPerAddress}) and of the client port; 0 when not given (the
   * defaults hold).
   */
  final int peerReaderThreads;
  final int peerMaxUnfinishedReads;
  final int clientReaderThreads;
  final int clientMaxUnfinishedReads;
  /** The client port's body budget in bytes ({@code --client-body-budget}); 0 when not given. */
  final long clientBodyBudget;
  /**
   * The peer port's body budget in bytes ({@code --peer-body-budget}, the transport's
   * {@code bodyBudget}); 0 when not given.
   */
  final long peerBodyBudget;
  final Path readyFile;
  /** The OpenAI-compatible server's answer limit, and the peer port's; null when not given. */
  final Duration engineRequestTimeout;
  /** {@code --engine-stream-idle-ms}, or null for the adapter's default. */
  final Duration engineStreamIdle;
  final Duration peerMaxHandling;
  /** How long a stop waits for accepted requests before answering the rest 503. */
  final Duration shutdownGrace;
  final boolean help;

  private NodeOptions(Map<String, String> v, Map<String, String> env) {
    this.help = v.containsKey("help");
    if (help) {
      id = null;
      listenHost = clientHost = advertise = engine = engineApiKey = model = modelId = null;
      tokenizerUri = null;
      tokenizes = false;
      kvEvents = kvEventsReplay = kvEventsTopic = null;
      kvEventsReplayBackoffMin = kvEventsReplayBackoffMax = null;
      kvEventsSilenceRequests = 0;
      kvEventsSilenceTime = null;
      listenPort = clientPort = engineThreads = engineCacheTokens = engineSlots = engineMaxInFlight = 0;
      peerReaderThreads = peerMaxUnfinishedReads = clientReaderThreads = clientMaxUnfinishedReads = 0;
      clientBodyBudget = peerBodyBudget = engineAnswerBudget = tokenizerAnswerBudget = 0;
      engineSeed = 0;
      seeds = List.of();
      clusterKeys = null;
      clusterKeyFile = null;
      clusterKeyCheck = null;
      tlsKeystore = tlsTruststore = clientTlsKeystore = clientTlsTruststore = null;
      tlsPassword = clientTlsPassword = null;
      tlsPasswordFile = clientTlsPasswordFile = null;
      tlsCheck = null;
      tlsBindNodeIds = false;
      config = null;
      treeCapacityGiven = false;
      readyFile = null;
      shutdownGrace = null;
      engineRequestTimeout = peerMaxHandling = engineStreamIdle = null;
      return;
    }
    for (String f : FILE_FLAGS) {
      if (v.containsKey(f) && v.get(f).isBlank()) {
        // an empty path is the working directory: it failed only at start, as "Is a directory"
        throw new IllegalArgumentException("--" + f + " must name a file, was empty");
      }
    }
    for (String f : FILE_FLAGS) {
      checkPath(f, v.get(f));
    }
    checkPath("ready-file", v.get("ready-file"));
    this.id = nodeId("--id", required(v, "id"));
    String[] listen = hostPort("listen", required(v, "listen"));
    this.listenHost = listen[0];
    this.listenPort = port("listen", listen[1]);
    this.advertise = v.get("advertise");
    if (advertise != null) {
      String[] a = hostPort("advertise", advertise);
      peerPort("advertise", a[1]);
      if (WildcardAddress.is(a[0])) {
        // gossiped to peers, who would connect to their own host: to themselves, or to nobody
        throw new IllegalArgumentException("--advertise " + advertise + " is every interface, "
            + "no address peers can reach: give the address peers reach this node at");
      }
    } else if (WildcardAddress.is(listenHost)) {
      throw new IllegalArgumentException("--listen " + listenHost + " (every interface) needs "
          + "--advertise HOST:PORT, the address peers reach this node at");
    }
    String[] client = hostPort("client", v.getOrDefault("client", "127.0.0.1:0"));
    this.clientHost = client[0];
    this.clientPort = port("client", client[1]);
    this.seeds = parseSeeds(v.getOrDefault("seeds", ""));
    boolean insecure = v.containsKey("insecure");
    String keyFile = v.get("cluster-key-file");
    String envKey = fromEnv(env, "PREFIX_ROUTER_CLUSTER_KEY");
    if (insecure && (keyFile != null)) {
      throw new IllegalArgumentException("--insecure and --cluster-key-file are exclusive");
    }
    if (insecure && envKey != null) {
      // the key would be ignored, and the node would run without authentication unawares
      throw new IllegalArgumentException("--insecure and env PREFIX_ROUTER_CLUSTER_KEY are "
          + "exclusive: unset the variable for a node without authentication, or drop --insecure");
    }
    if (keyFile != null && envKey != null) {
      // the file's keys would be taken and the variable's silently ignored
      throw new IllegalArgumentException("--cluster-key-file and env PREFIX_ROUTER_CLUSTER_KEY "
          + "are exclusive: give the cluster keys one way, unset the variable or drop the flag");
    }
    this.clusterKeyFile = insecure || keyFile == null ? null : Path.of(keyFile);
    if (insecure) {
      this.clusterKeys = null;
    } else if (keyFile != null) {
      this.clusterKeys = ClusterKeys.read(clusterKeyFile);
    } else if (envKey != null) {
      this.clusterKeys = ClusterKeys.parse(envKey, "PREFIX_ROUTER_CLUSTER_KEY");
    } else {
      throw new IllegalArgumentException(
          "a cluster key is required: --cluster-key-file FILE or env PREFIX_ROUTER_CLUSTER_KEY "
              + "(or --insecure on a trusted test network)");
    }
    for (int i = 0; clusterKeys != null && i < clusterKeys.size(); i++) {
      if (clusterKeys.get(i).length < 16) {
        throw new IllegalArgumentException((clusterKeys.size() == 1 ? "the cluster key"
            : "cluster key " + (i + 1) + " of " + clusterKeys.size())
            + " must have at least 16 bytes, had " + clusterKeys.get(i).length);
      }
    }
    long distinctKeys = clusterKeys == null ? 0
        : clusterKeys.stream().map(java.nio.ByteBuffer::wrap).distinct().count();
    if (distinctKeys > 4) {
      throw new IllegalArgumentException(
          "at most 4 distinct cluster keys (the signing key and 3 others), had " + distinctKeys);
    }
    long keyCheckMs = longValue(v, "cluster-key-check-ms", 10_000);
    if (keyCheckMs < 0 || keyCheckMs > Duration.ofDays(1).toMillis()) {
      throw new IllegalArgumentException(
          "--cluster-key-check-ms must be 0 to a day in milliseconds, was " + keyCheckMs);
    }
    if (v.containsKey("cluster-key-check-ms") && clusterKeyFile == null) {
      throw new IllegalArgumentException("--cluster-key-check-ms needs --cluster-key-file");
    }
    this.clusterKeyCheck = Duration.ofMillis(keyCheckMs);
    this.tlsKeystore = v.containsKey("tls-keystore") ? Path.of(v.get("tls-keystore")) : null;
    this.tlsTruststore = v.containsKey("tls-truststore") ? Path.of(v.get("tls-truststore")) : null;
    this.tlsPassword = tlsPassword(v, env, "tls-keystore", "tls-truststore", "tls-password-file",
        "PREFIX_ROUTER_TLS_PASSWORD");
    this.tlsPasswordFile = v.containsKey("tls-password-file")
        ? Path.of(v.get("tls-password-file")) : null;
    this.clientTlsKeystore = v.containsKey("client-tls-keystore")
        ? Path.of(v.get("client-tls-keystore")) : null;
    this.clientTlsTruststore = v.containsKey("client-tls-truststore")
        ? Path.of(v.get("client-tls-truststore")) : null;
    this.clientTlsPassword = tlsPassword(v, env, "client-tls-keystore", "client-tls-truststore",
        "client-tls-password-file", "PREFIX_ROUTER_CLIENT_TLS_PASSWORD");
    this.clientTlsPasswordFile = v.containsKey("client-tls-password-file")
        ? Path.of(v.get("client-tls-password-file")) : null;
    if (tlsKeystore == null && clientTlsKeystore == null && v.containsKey("tls-check-ms")) {
      throw new IllegalArgumentException(
          "--tls-check-ms needs --tls-keystore or --client-tls-keystore");
    }
    if (tlsKeystore == null && v.containsKey("tls-bind-node-ids")) {
      throw new IllegalArgumentException("--tls-bind-node-ids needs --tls-keystore");
    }
    long tlsCheckMs = longValue(v, "tls-check-ms", 60_000);
    if (tlsCheckMs < 0 || tlsCheckMs > Duration.ofDays(1).toMillis()) {
      throw new IllegalArgumentException(
          "--tls-check-ms must be 0 to a day in milliseconds, was " + tlsCheckMs);
    }
    this.tlsCheck = Duration.ofMillis(tlsCheckMs);
    this.tlsBindNodeIds = v.containsKey("tls-bind-node-ids")
        && onOff("tls-bind-node-ids", v.get("tls-bind-node-ids"));
    this.engine = v.getOrDefault("engine", "reference");
    if (!engine.equals("reference") && !engine.startsWith("http://") && !engine.startsWith("https://")) {
      throw new IllegalArgumentException("--engine must be 'reference' or an http(s) URL, was " + engine);
    }
    this.engineApiKey = engineApiKey(v, env, engine);
    this.model = v.get("model");
    // blank as the config file's blank value, which is trimmed to empty: spaces name no model
    if (model != null && model.isBlank()) {
      throw new IllegalArgumentException("--model must not be empty or blank (leave it out to "
          + "take the one base model the server lists)");
    }
    String id = v.get("model-id");
    if (id != null && id.isBlank()) {
      throw new IllegalArgumentException("--model-id must not be empty or blank (none: no model "
          + "id)");
    }
    this.modelId = id == null ? null : id.equals("none") ? "" : id;
    // the node's RouterConfig takes it when it starts: a bad one is a bad flag, not a failed
    // start (--model stands for it when --model-id is not given; "none" is no model id)
    String configModelId = modelId != null ? modelId : model;
    String modelIdProblem = configModelId == null || configModelId.isEmpty() ? null
        : ModelIds.problem(configModelId);
    if (modelIdProblem != null) {
      throw new IllegalArgumentException(modelIdProblem.replace("modelId", modelId != null
          ? "--model-id" : "--model (the model id when --model-id is not given)"));
    }
    String tok = v.getOrDefault("tokenizer", "auto");
    this.tokenizes = !tok.equals("none");
    if (tok.equals("auto") || tok.equals("none")) {
      this.tokenizerUri = null;
    } else if (tok.startsWith("http://") || tok.startsWith("https://")) {
      String redacted = io.github.prefixrouter.internal.UrlUserInfo.redacted(tok);
      if (redacted != null) {
        // as for --engine: the HTTP client sends nothing of it, and it would stand in every
        // message and banner naming the tokenizer: the password too (checked before the URL
        // is parsed, whose errors quote it whole)
        throw new IllegalArgumentException("--tokenizer must not carry user information "
            + "(user:password@): the HTTP client sends no credentials from a URL; a tokenizer "
            + "on the engine's server gets its key (--engine-api-key-file), was " + redacted);
      }
      try {
        this.tokenizerUri = new java.net.URI(tok);
      } catch (java.net.URISyntaxException e) {
        throw new IllegalArgumentException("--tokenizer is not a URL: " + e.getMessage(), e);
      }
      int port = tokenizerUri.getPort(); // -1: none given, the scheme's
      if (tokenizerUri.getHost() == null || port == 0 || port > 65535) {
        // java.net.URI reads no host with an underscore (a compose service name, say), and
        // the HTTP client sends nothing to a URL without one; it takes any port java.net.URI
        // reads, and a port above 65535 failed every prompt ("port out of range") once serving
        throw new IllegalArgumentException("--tokenizer needs a host an HTTP client can use "
            + "(letters, digits, hyphens and dots, or an IP address, IPv6 in brackets: "
            + "http://[::1]:8000) and a port 1 to 65535 (or none), was " + tok);
      }
    } else {
      throw new IllegalArgumentException(
          "--tokenizer must be auto, none or an http(s) URL of a /tokenize endpoint, was " + tok);
    }
    this.tokenizerAnswerBudget = tokenizerAnswerBudget(v);
    if (tokenizerAnswerBudget != 0 && (!tokenizes
        || tokenizerUri == null && engine.equals("reference"))) {
      // as --engine-answer-budget needs --engine URL: a budget nothing would use
      throw new IllegalArgumentException("--tokenizer-answer-budget needs a tokenizer that asks "
          + "a /tokenize endpoint: --engine URL (with --tokenizer auto) or --tokenizer URL ("
          + (tokenizes ? "the reference engine's per-character tokenizer"
              : "--tokenizer none takes token ids only and") + " reads no answers)");
    }
    this.engineRequestTimeout = millis(v, "engine-request-timeout-ms");
    this.peerMaxHandling = millis(v, "peer-max-handling-ms");
    if (peerMaxHandling != null && peerMaxHandling.compareTo(Duration.ofDays(1)) > 0) {
      // the transport's own bound (HttpTransport.Builder.maxHandlingTime)
      throw new IllegalArgumentException("--peer-max-handling-ms must be at most a day ("
          + Duration.ofDays(1).toMillis() + " ms), was " + v.get("peer-max-handling-ms"));
    }
    if (engine.equals("reference") && engineRequestTimeout != null) {
      throw new IllegalArgumentException("--engine-request-timeout-ms needs --engine URL (the "
          + "reference engine runs in the process: --engine-timeout-ms bounds it)");
    }
    this.engineStreamIdle = millis(v, "engine-stream-idle-ms");
    if (engine.equals("reference") && engineStreamIdle != null) {
      throw new IllegalArgumentException("--engine-stream-idle-ms needs --engine URL (the "
          + "reference engine runs in the process and streams no HTTP answer)");
    }
    this.engineSlots = v.containsKey("engine-slots") ? intValue(v, "engine-slots", 0) : 0;
    this.engineMaxInFlight =
        v.containsKey("engine-max-in-flight") ? intValue(v, "engine-max-in-flight", 0) : 0;
    for (String k : List.of("engine-slots", "engine-max-in-flight")) {
      if (v.containsKey(k) && intValue(v, k, 0) < 1) {
        throw new IllegalArgumentException("--" + k + " must be at least 1, was " + v.get(k));
      }
    }
    this.engineAnswerBudget = engineAnswerBudget(v);
    if (engine.equals("reference") && engineAnswerBudget != 0) {
      throw new IllegalArgumentException("--engine-answer-budget needs --engine URL (the "
          + "reference engine reads no answers)");
    }
    if (engine.equals("reference") && (engineSlots != 0 || engineMaxInFlight != 0)) {
      throw new IllegalArgumentException(
          "--engine-slots and --engine-max-in-flight need --engine URL (the reference engine's "
              + "threads are --engine-threads)");
    }
    if (!engine.equals("reference")) {
      for (String k : List.of("engine-seed", "engine-threads", "engine-cache-tokens")) {
        if (v.containsKey(k)) {
          throw new IllegalArgumentException("--" + k + " needs --engine reference (with --engine "
              + "URL the server's own settings decide it)");
        }
      }
      openAiBuilder(); // the adapter's checks, so that a bad value is a bad flag
    }
    this.kvEvents = v.get("kv-events");
    this.kvEventsReplay = v.get("kv-events-replay");
    this.kvEventsTopic = v.get("kv-events-topic");
    String silence = v.get("kv-events-silence");
    if (kvEvents == null) {
      // the ones given, only: an operator who gave the topic looked for a replay flag too
      List<String> given = new ArrayList<>();
      for (String k : List.of("kv-events-replay", "kv-events-topic", "kv-events-silence")) {
        if (v.containsKey(k)) {
          given.add("--" + k);
        }
      }
      if (!given.isEmpty()) {
        int last = given.size() - 1;
        throw new IllegalArgumentException(last == 0 ? given.get(0) + " needs --kv-events"
            : String.join(", ", given.subList(0, last)) + " and " + given.get(last)
                + " need --kv-events");
      }
    }
    String backoff = v.get("kv-events-replay-backoff-ms");
    if (backoff != null && kvEventsReplay == null) {
      // it paces replays after a failed one: without a replay endpoint there are none
      throw new IllegalArgumentException("--kv-events-replay-backoff-ms needs --kv-events-replay");
    }
    if (backoff != null) {
      String[] mm = backoff.split(",", -1);
      if (mm.length != 2) {
        throw new IllegalArgumentException("--kv-events-replay-backoff-ms must be MIN,MAX, was "
            + backoff);
      }
      long min = parseLong("kv-events-replay-backoff-ms", mm[0]);
      long max = parseLong("kv-events-replay-backoff-ms", mm[1]);
      if (min < 1 || max < min || max > Duration.ofDays(365).toMillis()) {
        throw new IllegalArgumentException("--kv-events-replay-backoff-ms must be MIN,MAX with "
            + "1 <= MIN <= MAX <= 365 days in milliseconds, was " + backoff);
      }
      this.kvEventsReplayBackoffMin = Duration.ofMillis(min);
      this.kvEventsReplayBackoffMax = Duration.ofMillis(max);
    } else {
      this.kvEventsReplayBackoffMin = this.kvEventsReplayBackoffMax = null;
    }
    if (silence != null) {
      String[] rt = silence.split(",", -1);
      if (rt.length == 1 && rt[0].trim().equals("0")) {
        this.kvEventsSilenceRequests = 0;
        this.kvEventsSilenceTime = Duration.ZERO; // not used: the check is off
      } else if (rt.length != 2) {
        throw new IllegalArgumentException("--kv-events-silence must be REQUESTS,MS, or 0 to "
            + "turn it off, was " + silence);
      } else {
        long requests = parseLong("kv-events-silence", rt[0]);
        long ms = parseLong("kv-events-silence", rt[1]);
        long maxMs = Duration.ofDays(365).toMillis(); // the subscriber's longest time
        if (requests < 0 || requests > Integer.MAX_VALUE || ms < 0 || ms > maxMs) {
          throw new IllegalArgumentException("--kv-events-silence must be REQUESTS,MS with "
              + "REQUESTS 0 (off) to " + Integer.MAX_VALUE + " and MS 0 to " + maxMs
              + " (365 days), was " + silence);
        }
        this.kvEventsSilenceRequests = (int) requests;
        this.kvEventsSilenceTime = Duration.ofMillis(ms);
      }
    } else {
      this.kvEventsSilenceRequests = 0;
      this.kvEventsSilenceTime = null;
    }
    if (kvEvents != null) {
      if (engine.equals("reference")) {
        throw new IllegalArgumentException(
            "--kv-events needs --engine URL (the reference engine reports its cache itself)");
      }
      kvEventsBuilder(); // the checks the subscriber makes, so that a bad value fails here
    } else if (!engine.equals("reference") && v.containsKey("mirror-limit-tokens")) {
      // without cache events the tree is self-managed, at --tree-capacity-tokens: the limit of
      // a mirror was accepted and silently ignored
      throw new IllegalArgumentException("--mirror-limit-tokens needs --kv-events or --engine "
          + "reference (it bounds a tree mirroring the engine's cache events; without them the "
          + "tree holds --tree-capacity-tokens)");
    }
    this.engineSeed = longValue(v, "engine-seed", 42);
    this.engineThreads = intValue(v, "engine-threads", 1);
    this.engineCacheTokens = intValue(v, "engine-cache-tokens", 65536);
    this.treeCapacityGiven = v.containsKey("tree-capacity-tokens");
    RouterConfig.Builder cb = RouterConfig.builder();
    cb.policy(policy(v.getOrDefault("policy", "cost-aware")));
    if (v.containsKey("block-size")) {
      cb.blockSize(intValue(v, "block-size", 16));
    }
    if (v.containsKey("tree-capacity-tokens")) {
      cb.treeCapacityTokens(longValue(v, "tree-capacity-tokens", 0));
    } else if (engine.equals("reference") && engineCacheTokens >= 1) {
      // the routing's estimate of how long a prefix stays cached (local caching) divides this
      // capacity by the insertion rate, also when the tree mirrors the engine: the reference
      // engine's cache is the capacity (a value below the block size is refused below)
      cb.treeCapacityTokens(Math.max(engineCacheTokens,
          v.containsKey("block-size") ? intValue(v, "block-size", 16) : 16));
    }
    if (v.containsKey("mirror-limit-tokens")) {
      cb.mirrorLimitTokens(longValue(v, "mirror-limit-tokens", 0));
    }
    if (v.containsKey("gossip-interval-ms")) {
      cb.gossip(Duration.ofMillis(longValue(v, "gossip-interval-ms", 200)), RouterConfig.defaults().gossipFanout());
    }
    if (v.containsKey("gossip-message-bytes")) {
      cb.gossipMessageBytes(gossipMessageBytes(v.get("gossip-message-bytes")));
    }
    if (v.containsKey("peer-suspect-ms") || v.containsKey("peer-dead-ms")) {
      RouterConfig d = RouterConfig.defaults();
      cb.peerTimeouts(
          Duration.ofMillis(longValue(v, "peer-suspect-ms", d.peerSuspectAfter().toMillis())),
          Duration.ofMillis(longValue(v, "peer-dead-ms", d.peerDeadAfter().toMillis())));
    }
    if (v.containsKey("initial-prefill-ns-per-token")) {
      cb.initialPrefillNanosPerToken(longValue(v, "initial-prefill-ns-per-token", 0));
    }
    Duration engineTimeout = millis(v, "engine-timeout-ms");
    if (engineTimeout != null) {
      cb.engineTimeout(engineTimeout);
    }
    Duration stall = millis(v, "engine-stall-ms", 0);
    if (stall != null) {
      cb.engineStallTimeout(stall);
    }
    if (v.containsKey("engine-failures")) {
      cb.engineFailureLimit(intValue(v, "engine-failures", 0));
    }
    if (v.containsKey("stream-interval-ms")) {
      cb.streamInterval(Duration.ofMillis(longValue(v, "stream-interval-ms", 20)));
    }
    if (v.containsKey("hop-limit")) {
      cb.hopLimit(intValue(v, "hop-limit", 1));
    }
    if (v.containsKey("watermarks")) {
      String[] w = v.get("watermarks").split(",", -1); // "16,32," is no LOW,HIGH
      if (w.length != 2) {
        throw new IllegalArgumentException("--watermarks must be LOW,HIGH, was " + v.get("watermarks"));
      }
      cb.watermarks(parseInt("watermarks", w[0]), parseInt("watermarks", w[1]));
    }
    try {
      this.config = cb.build();
    } catch (IllegalArgumentException e) {
      // RouterConfig names its fields; the operator typed flags (or config file keys)
      throw new IllegalArgumentException(configFlagNames(e.getMessage()), e);
    }
    if (engine.equals("reference")) {
      // the reference engine's own limits (ReferenceEngine.Builder), checked here so that a bad
      // value is a bad flag (status 2, naming it) rather than a failure while starting
      if (engineThreads < 1 || engineThreads > 256) {
        throw new IllegalArgumentException("--engine-threads must be 1 to 256, was " + engineThreads);
      }
      if (engineCacheTokens < config.blockSize()) {
        throw new IllegalArgumentException("--engine-cache-tokens must be at least the block size ("
            + config.blockSize() + "), was " + engineCacheTokens);
      }
    } else {
      checkRequestTimeoutBelowLimits(engineRequestTimeout, config.engineTimeout(),
          v.containsKey("engine-timeout-ms"), peerMaxHandling);
    }
    this.peerReaderThreads = readerLimit(v, "peer-reader-threads");
    this.peerMaxUnfinishedReads = readerLimit(v, "peer-max-unfinished-reads");
    this.clientReaderThreads = readerLimit(v, "client-reader-threads");
    this.clientMaxUnfinishedReads = readerLimit(v, "client-max-unfinished-reads");
    this.clientBodyBudget = bodyBudget(v, "client-body-budget");
    this.peerBodyBudget = peerBodyBudget(v);
    this.readyFile = v.containsKey("ready-file") ? Path.of(v.get("ready-file")) : null;
    if (readyFile != null && (readyFile.toString().isEmpty() || Files.isDirectory(readyFile))) {
      // it is replaced once serving and removed at start and stop
      throw new IllegalArgumentException("--ready-file must name a file, not the directory "
          + (readyFile.toString().isEmpty() ? "'' (the working directory)" : readyFile));
    }
    long graceMs = longValue(v, "shutdown-grace-ms", 25_000);
    if (graceMs < 0 || graceMs > Duration.ofDays(365).toMillis()) {
      throw new IllegalArgumentException(
          "--shutdown-grace-ms must be 0 to 365 days in milliseconds, was " + graceMs);
    }
    this.shutdownGrace = Duration.ofMillis(graceMs);
  }

  /**
   * The password of a port's TLS files: from the password file ({@link #passwordFile}), else
   * from the environment; null without the keystore, whose companion flags are then refused.
   *
   * @throws IllegalArgumentException naming the flags: a truststore or password file without the
   *     keystore, the environment's variable without the keystore (a port meant for TLS would
   *     speak plain HTTP), a keystore without a password, a password file that cannot be read,
   *     a password file and the environment's variable both given; the variable set but empty
   *     (or blank) counts as unset
   */
  private static char[] tlsPassword(Map<String, String> v, Map<String, String> env,
      String keystore, String truststore, String passwordFile, String envName) {
    if (!v.containsKey(keystore)) {
      for (String k : List.of(truststore, passwordFile)) {
        if (v.containsKey(k)) {
          throw new IllegalArgumentException("--" + k + " needs --" + keystore);
        }
      }
      if (fromEnv(env, envName) != null) {
        // the variable would be silently ignored, the port speaking plain HTTP
        throw new IllegalArgumentException("env " + envName + " needs --" + keystore
            + ": give the keystore, or unset the variable for a port without TLS");
      }
      return null;
    }
    Secret password = secret(v, env, passwordFile, envName, "password");
    if (password != null) {
      return password.value().toCharArray();
    }
    boolean emptyEnv = env.get(envName) != null; // set, but blank
    throw new IllegalArgumentException("--" + keystore + " needs a password: --" + passwordFile
        + " FILE or env " + envName + (emptyEnv ? " (env " + envName + " is empty)" : ""));
  }

  /**
   * The variable {@code name} of the environment; null if it is unset, or set but empty or blank
   * ({@code KEY=}, or a compose file substituting an unset variable): no secret given. An empty
   * TLS password used to be taken for one.
   */
  private static String fromEnv(Map<String, String> env, String name) {
    String value = env.get(name);
    return value == null || value.isBlank() ? null : value;
  }

  /** A secret as given, and where from ({@code "--flag FILE"} or {@code "env NAME"}). */
  private record Secret(String value, String from, boolean inFile) {}

  /**
   * The secret of the file of {@code --flag} ({@link #secretFile}), else of the variable
   * {@code envName} as it is set ({@link #fromEnv}); null if neither is given.
   *
   * @param what the secret, {@code "password"} or {@code "API key"}, as the messages name it
   * @throws IllegalArgumentException if both are given (the file's would be taken and the
   *     variable's silently ignored), or the file cannot be read or holds no secret
   */
  private static Secret secret(Map<String, String> v, Map<String, String> env, String flag,
      String envName, String what) {
    String file = v.get(flag);
    String variable = fromEnv(env, envName);
    if (file != null && variable != null) {
      // "the password", "the key"
      String noun = what.substring(what.lastIndexOf(' ') + 1);
      throw new IllegalArgumentException("--" + flag + " and env " + envName
          + " are exclusive: give the " + noun + " one way, unset the variable or drop the flag");
    }
    if (file != null) {
      return new Secret(secretFile(flag, Path.of(file), what), "--" + flag + " " + file, true);
    }
    return variable == null ? null : new Secret(variable, "env " + envName, false);
  }

  /** The variable an OpenAI-compatible server's API key may come from. */
  static final String ENGINE_API_KEY_ENV = "PREFIX_ROUTER_ENGINE_API_KEY";

  /**
   * The OpenAI-compatible server's API key: from {@code --engine-api-key-file} (read as a
   * password file, {@link #secretFile}), else from the environment; null for none. Read once:
   * a model server's key is fixed when the server starts. No message names the key.
   *
   * @throws IllegalArgumentException naming the flag or the variable: a key with the reference
   *     engine (which asks no server), a key file and the variable both given, a file that
   *     cannot be read or holds no key, a key that is not printable ASCII without spaces (which
   *     a bearer token is); the variable set but empty (or blank) counts as unset
   */
  private static String engineApiKey(Map<String, String> v, Map<String, String> env,
      String engine) {
    boolean file = v.containsKey("engine-api-key-file");
    if (engine.equals("reference") && (file || fromEnv(env, ENGINE_API_KEY_ENV) != null)) {
      // the key would be silently unused: a node meant to run next to a server runs the demo
      throw new IllegalArgumentException((file ? "--engine-api-key-file"
          : "env " + ENGINE_API_KEY_ENV) + " needs --engine URL (the reference engine asks no "
          + "server)" + (file ? "" : ": unset the variable, or give the server's URL"));
    }
    Secret s = secret(v, env, "engine-api-key-file", ENGINE_API_KEY_ENV, "API key");
    if (s == null) {
      return null;
    }
    String key = s.inFile() ? s.value() : s.value().strip();
    if (key.chars().anyMatch(c -> c < 0x21 || c > 0x7e)) {
      // the header would be refused by the HTTP client at every request; the key is not shown
      throw new IllegalArgumentException(s.from() + ": the API key must be printable ASCII "
          + "without spaces, as a bearer token is" + (key.regionMatches(true, 0, "Bearer ", 0, 7)
              ? " (give the key without 'Bearer ': the node sends that)" : ""));
    }
    return key;
  }

  /** The peer port's TLS password, read again from its file at every call if it has one. */
  Supplier<char[]> tlsPasswordSource() {
    return passwordSource(tlsPassword, tlsPasswordFile, "tls-password-file");
  }

  /** The client port's TLS password, read again from its file at every call if it has one. */
  Supplier<char[]> clientTlsPasswordSource() {
    return passwordSource(clientTlsPassword, clientTlsPasswordFile, "client-tls-password-file");
  }

  private static Supplier<char[]> passwordSource(char[] atStart, Path file, String flag) {
    if (file == null) {
      char[] kept = atStart.clone();
      return kept::clone;
    }
    return () -> passwordFile(flag, file);
  }

  /** The largest password file read: far above any password. */
  static final int MAX_PASSWORD_FILE_BYTES = 64 << 10;

  /**
   * The password in a password file: its text in UTF-8 (or ASCII), a UTF-8 byte order mark
   * skipped and trailing white space (the file's newline) dropped; a password may begin with a
   * space.
   *
   * @throws IllegalArgumentException naming the flag and the file if it cannot be read, is larger
   *     than {@link #MAX_PASSWORD_FILE_BYTES} (another file named by mistake, not read further),
   *     is not UTF-8 text (saved as UTF-16, or in another encoding): its password would be
   *     another than the one the file shows, reported as a wrong password; or holds no password
   *     (empty, or white space only), as an empty cluster key file holds no key
   */
  static char[] passwordFile(String flag, Path file) {
    return secretFile(flag, file, "password").toCharArray();
  }

  /**
   * The secret in a file ({@link #passwordFile}'s rules), {@code what} naming it in the message
   * of a file that holds none.
   */
  static String secretFile(String flag, Path file, String what) {
    byte[] raw = NodeMain.readAtMost(file, MAX_PASSWORD_FILE_BYTES, "--" + flag + " ");
    if (raw.length > MAX_PASSWORD_FILE_BYTES) {
      throw new IllegalArgumentException("--" + flag + " " + file + " is larger than "
          + MAX_PASSWORD_FILE_BYTES + " bytes: not a password file");
    }
    String utf16 = ClusterKeys.textEncoding(raw);
    if (utf16 != null) {
      throw new IllegalArgumentException("--" + flag + " " + file + " is text saved as " + utf16
          + ": save it as UTF-8 or ASCII");
    }
    // an editor's byte order mark is no part of the password
    int from = ClusterKeys.utf8ByteOrderMark(raw);
    String text;
    try {
      text = StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
          .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT)
          .decode(java.nio.ByteBuffer.wrap(raw, from, raw.length - from)).toString();
    } catch (java.nio.charset.CharacterCodingException e) {
      throw new IllegalArgumentException("--" + flag + " " + file + " is not UTF-8 text: save "
          + "it as UTF-8 or ASCII", e);
    }
    String secret = text.stripTrailing();
    if (secret.isEmpty()) {
      // a file emptied by mistake, or not yet written: its empty password was handed to the
      // keystore, which refused it as a wrong one
      throw new IllegalArgumentException("--" + flag + " " + file + " holds no " + what
          + " (it is empty or white space only)");
    }
    return secret;
  }

  /**
   * A reader limit: 1 to {@value ClientEndpoint#MAX_READER_THREADS} (the bound of the client
   * endpoint and of {@code HttpTransport.Builder}); 0 when not given.
   */
  private static int readerLimit(Map<String, String> v, String key) {
    if (!v.containsKey(key)) {
      return 0;
    }
    int n = intValue(v, key, 0);
    if (n < 1 || n > ClientEndpoint.MAX_READER_THREADS) {
      throw new IllegalArgumentException("--" + key + " must be 1 to "
          + ClientEndpoint.MAX_READER_THREADS + ", was " + n);
    }
    return n;
  }

  /**
   * A body budget ({@link ClientEndpoint}'s {@code bodyBudget}): at least
   * {@value ClientEndpoint#MIN_BODY_BUDGET} bytes; 0 when not given.
   */
  private static long bodyBudget(Map<String, String> v, String key) {
    return budget(v, key, ClientEndpoint.MIN_BODY_BUDGET,
        "one request of the largest body, 8 MiB, read or tokenized");
  }

  /**
   * The OpenAI-compatible engine's answer budget
   * ({@link io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine.Builder#answerBudget}):
   * at least what one answer of the engine's default limit takes; 0 when not given.
   */
  private static long engineAnswerBudget(Map<String, String> v) {
    return budget(v, "engine-answer-budget",
        io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine.Builder
            .minAnswerBudget(8 << 20),
        "one answer of the largest size, 8 MiB, with its text, parsed JSON and output");
  }

  /**
   * The answer budget of the tokenizer that asks a {@code /tokenize} endpoint
   * ({@link EngineTokenizer}): at least {@link EngineTokenizer#MIN_ANSWER_BUDGET}, what one
   * answer of 1 MiB takes; 0 when not given.
   */
  private static long tokenizerAnswerBudget(Map<String, String> v) {
    return budget(v, "tokenizer-answer-budget", EngineTokenizer.MIN_ANSWER_BUDGET,
        "one answer of 1 MiB, with its text and parsed JSON");
  }

  /**
   * {@code --gossip-message-bytes}, a {@link #bytes size} of
   * {@link RouterConfig#MIN_GOSSIP_MESSAGE_BYTES} up to the peer transport's
   * {@code maxMessageBytes}, which the node leaves at its default (4 MiB): the transport drops a
   * larger message, so a node sending them would never deliver its large snapshots.
   *
   * @throws IllegalArgumentException naming the flag, the range and why, if it is outside
   */
  private static int gossipMessageBytes(String value) {
    long b = bytes("gossip-message-bytes", value);
    long max = HttpTransport.DEFAULT_MAX_MESSAGE_BYTES;
    if (b < RouterConfig.MIN_GOSSIP_MESSAGE_BYTES || b > max) {
      throw new IllegalArgumentException("--gossip-message-bytes must be 1k to " + (max >> 20)
          + "m (" + RouterConfig.MIN_GOSSIP_MESSAGE_BYTES + " to " + max + " bytes: the peer "
          + "port carries no larger message), was " + value);
    }
    return (int) b;
  }

  /**
   * The peer port's body budget ({@link HttpTransport.Builder#bodyBudget}): at least twice the
   * transport's {@code maxMessageBytes}, which the node leaves at its default; 0 when not given.
   */
  private static long peerBodyBudget(Map<String, String> v) {
    long min = 2L * HttpTransport.DEFAULT_MAX_MESSAGE_BYTES;
    return budget(v, "peer-body-budget", min,
        "one message of the largest size, " + (min >> 21) + " MiB, while it is read");
  }

  /**
   * The budget flag {@code key}, a {@link #bytes size} of at least {@code min} bytes, what
   * {@code holds} says the least budget must hold; 0 when not given.
   *
   * @throws IllegalArgumentException naming the flag, the least size and why, if it is smaller
   */
  private static long budget(Map<String, String> v, String key, long min, String holds) {
    if (!v.containsKey(key)) {
      return 0;
    }
    long b = bytes(key, v.get(key));
    if (b < min) {
      throw new IllegalArgumentException("--" + key + " must be at least " + (min >> 20) + "m ("
          + min + " bytes: " + holds + "), was " + v.get(key));
    }
    return b;
  }

  /**
   * A size: a number of bytes, or a number followed by {@code k}, {@code m} or {@code g} (either
   * case) for KiB, MiB or GiB ({@code 256m} is 268435456 bytes).
   *
   * @throws IllegalArgumentException naming the flag if it is something else, or above
   *     {@link Long#MAX_VALUE} bytes
   */
  static long bytes(String key, String value) {
    String s = value.trim();
    int shift = 0;
    if (!s.isEmpty()) {
      switch (Character.toLowerCase(s.charAt(s.length() - 1))) {
        case 'k' -> shift = 10;
        case 'm' -> shift = 20;
        case 'g' -> shift = 30;
        default -> shift = 0;
      }
    }
    String digits = shift == 0 ? s : s.substring(0, s.length() - 1);
    if (digits.isEmpty() || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
      throw new IllegalArgumentException("--" + key + " needs a size: a number of bytes, or a "
          + "number with k, m or g (KiB, MiB, GiB) such as 256m; was '" + value + "'");
    }
    try {
      long n = Long.parseLong(digits);
      if (n > Long.MAX_VALUE >> shift) {
        throw new NumberFormatException();
      }
      return n << shift;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("--" + key + " is too large, was '" + value + "'");
    }
  }

  /**
   * The OpenAI-compatible engine the flags describe (URL, API key, model, slots, in-flight cap,
   * request timeout), without the KV-event subscription.
   *
   * @throws IllegalArgumentException naming the bad setting
   */
  io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine.Builder openAiBuilder() {
    var b = io.github.prefixrouter.engine.openai.OpenAiCompatibleEngine.builder();
    try {
      b.baseUrl(engine);
    } catch (IllegalArgumentException e) { // "baseUrl is not a URL: ...": named as the flag
      throw new IllegalArgumentException(flagName(e.getMessage()), e);
    }
    if (model != null) {
      b.model(model);
    }
    if (engineSlots != 0) {
      b.slots(engineSlots);
    }
    if (engineMaxInFlight != 0) {
      b.maxInFlight(engineMaxInFlight);
    }
    if (engineAnswerBudget != 0) {
      b.answerBudget(engineAnswerBudget);
    }
    if (engineRequestTimeout != null) {
      b.requestTimeout(engineRequestTimeout);
    }
    if (engineStreamIdle != null) {
      b.streamIdleTimeout(engineStreamIdle);
    }
    if (engineApiKey != null) {
      b.apiKey(engineApiKey);
    }
    try {
      // validates; the engine built holds its HTTP client's selector thread until closed
      b.build().close();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(flagName(e.getMessage()), e);
    }
    return b;
  }

  /**
   * Refuses an OpenAI-compatible server's request timeout that is not below the node's own
   * limits, each flag not given counted at its default: at or above the engine timeout the node
   * ends the request first, and at or above the peer port's handling limit the transport answers
   * a peer's forward 504 first, so the request timeout set would never be reached.
   *
   * @param requestTimeout {@code --engine-request-timeout-ms}, or null for the adapter's default
   * @param engineTimeout the config's engine timeout ({@code --engine-timeout-ms} or its default)
   * @param engineTimeoutGiven whether {@code --engine-timeout-ms} was given
   * @param peerMaxHandling {@code --peer-max-handling-ms}, or null for the transport's default
   * @throws IllegalArgumentException naming both flags of each pair out of order
   */
  private static void checkRequestTimeoutBelowLimits(Duration requestTimeout,
      Duration engineTimeout, boolean engineTimeoutGiven, Duration peerMaxHandling) {
    String request = "--engine-request-timeout-ms (" + (requestTimeout != null
        ? requestTimeout.toMillis() + " ms)"
        : OpenAiCompatibleEngine.DEFAULT_REQUEST_TIMEOUT.toMillis() + " ms, the default)");
    Duration timeout =
        requestTimeout != null ? requestTimeout : OpenAiCompatibleEngine.DEFAULT_REQUEST_TIMEOUT;
    Duration handling =
        peerMaxHandling != null ? peerMaxHandling : HttpTransport.DEFAULT_MAX_HANDLING_TIME;
    List<String> problems = new ArrayList<>();
    if (timeout.compareTo(engineTimeout) >= 0) {
      problems.add(request + " must be below --engine-timeout-ms (" + engineTimeout.toMillis()
          + (engineTimeoutGiven ? " ms)" : " ms, the default)")
          + ", the node's own limit on one engine run, which would end the request first");
    }
    if (timeout.compareTo(handling) >= 0) {
      problems.add(request + " must be below --peer-max-handling-ms (" + handling.toMillis()
          + (peerMaxHandling != null ? " ms)" : " ms, the default)")
          + ", after which a peer's forward is answered 504 first");
    }
    if (!problems.isEmpty()) {
      throw new IllegalArgumentException(String.join("; ", problems));
    }
  }

  /** A duration flag in milliseconds, 1 ms to 365 days, or null when not given. */
  private static Duration millis(Map<String, String> v, String key) {
    return millis(v, key, 1);
  }

  /** The duration flag {@code key} in milliseconds, {@code least} (0 or 1) to 365 days. */
  private static Duration millis(Map<String, String> v, String key, long least) {
    if (!v.containsKey(key)) {
      return null;
    }
    long ms = longValue(v, key, 0);
    if (ms < least || ms > Duration.ofDays(365).toMillis()) {
      throw new IllegalArgumentException("--" + key + " must be "
          + (least == 0 ? "0 (never)" : String.valueOf(least)) + " to 365 days in milliseconds, was "
          + v.get(key));
    }
    return Duration.ofMillis(ms);
  }

  /**
   * The RouterConfig fields the flags set, and the flags (longest field names first, so that no
   * name is replaced inside a longer one).
   */
  private static final List<Map.Entry<String, String>> CONFIG_FLAGS = List.of(
      Map.entry("initialPrefillNanosPerToken", "--initial-prefill-ns-per-token"),
      Map.entry("treeCapacityTokens", "--tree-capacity-tokens"),
      Map.entry("gossipMessageBytes", "--gossip-message-bytes"),
      Map.entry("mirrorLimitTokens", "--mirror-limit-tokens"),
      Map.entry("engineStallTimeout", "--engine-stall-ms"),
      Map.entry("engineFailureLimit", "--engine-failures"),
      Map.entry("peerSuspectAfter", "--peer-suspect-ms"),
      Map.entry("gossipInterval", "--gossip-interval-ms"),
      Map.entry("streamInterval", "--stream-interval-ms"),
      Map.entry("highWatermark", "--watermarks HIGH"),
      Map.entry("engineTimeout", "--engine-timeout-ms"),
      Map.entry("peerDeadAfter", "--peer-dead-ms"),
      Map.entry("lowWatermark", "--watermarks LOW"),
      Map.entry("blockSize", "--block-size"),
      Map.entry("hopLimit", "--hop-limit"));

  private static final java.util.regex.Pattern DURATION =
      java.util.regex.Pattern.compile("\\bPT[-0-9.HMS]+\\b");

  /**
   * A RouterConfig validation message with the flags in place of the config's field names, and
   * its durations ({@code PT0.2S}) in milliseconds, as the flags take them.
   */
  static String configFlagNames(String message) {
    String m = message.replaceFirst("^invalid RouterConfig: ", "bad settings: ");
    for (Map.Entry<String, String> e : CONFIG_FLAGS) {
      m = m.replaceAll("\\b" + e.getKey() + "\\b", e.getValue());
    }
    java.util.regex.Matcher d = DURATION.matcher(m);
    StringBuilder out = new StringBuilder();
    while (d.find()) {
      String ms;
      try {
        ms = Duration.parse(d.group()).toMillis() + " ms";
      } catch (RuntimeException notADuration) {
        ms = d.group();
      }
      d.appendReplacement(out, java.util.regex.Matcher.quoteReplacement(ms));
    }
    d.appendTail(out);
    return out.toString();
  }

  private static String flagName(String message) {
    return message.replace("maxInFlight", "--engine-max-in-flight").replace("slots", "--engine-slots")
        .replace("baseUrl", "--engine")
        .replace("with apiKey", "with --engine-api-key-file FILE or env " + ENGINE_API_KEY_ENV);
  }

  /**
   * The subscription to vLLM's KV events the flags describe (endpoint, replay endpoint, replay
   * backoff, silence check, topic), without the block size; null without {@code --kv-events}.
   */
  VllmKvEventSubscriber.Builder kvEventsBuilder() {
    if (kvEvents == null) {
      return null;
    }
    VllmKvEventSubscriber.Builder b = VllmKvEventSubscriber.builder();
    // the subscriber's messages name the endpoint, not the flag: which of the two was bad
    try {
      b.endpoint(kvEvents);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("--kv-events: " + e.getMessage(), e);
    }
    if (kvEventsReplay != null) {
      try {
        b.replayEndpoint(kvEventsReplay);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--kv-events-replay: " + e.getMessage(), e);
      }
    }
    if (kvEventsReplayBackoffMin != null) {
      b.replayBackoff(kvEventsReplayBackoffMin, kvEventsReplayBackoffMax);
    }
    if (kvEventsSilenceTime != null) {
      b.silenceLimit(kvEventsSilenceRequests, kvEventsSilenceTime);
    }
    if (kvEventsTopic != null) {
      b.topic(kvEventsTopic);
    }
    return b;
  }

  /**
   * The largest {@code --config} file read: far above every key with a long seed list and
   * comments; a larger file is another named by mistake, refused without being read further.
   */
  static final int MAX_CONFIG_FILE_BYTES = 1 << 20;

  /**
   * Parses flags (and the properties file named by {@code --config}).
   *
   * @param args the command line's flags
   * @param env the environment ({@code PREFIX_ROUTER_CLUSTER_KEY},
   *     {@code PREFIX_ROUTER_TLS_PASSWORD}, {@code PREFIX_ROUTER_CLIENT_TLS_PASSWORD},
   *     {@code PREFIX_ROUTER_ENGINE_API_KEY})
   * @return the settings
   * @throws IllegalArgumentException naming the bad or missing setting (the flag, or the key of
   *     the {@code --config} file, as written)
   */
  public static NodeOptions parse(String[] args, Map<String, String> env) {
    Map<String, String> flags = new LinkedHashMap<>();
    Map<String, String> typed = new LinkedHashMap<>(); // a flag without a value, as written
    for (int i = 0; i < args.length; i++) {
      // -h as every benchmarks/run command takes it (as a flag's value it is read below)
      String a = args[i].equals("-h") ? "--help" : args[i];
      if (!a.startsWith("--")) {
        throw new IllegalArgumentException("unexpected argument '" + a + "'; flags start with --");
      }
      String key = a.substring(2);
      String value = null;
      int eq = key.indexOf('=');
      if (eq >= 0) {
        value = key.substring(eq + 1);
        key = key.substring(0, eq);
      }
      // before its value is looked for: a misspelt flag last on the line is unknown, and was
      // refused as one that "needs a value"
      checkKey(key, "flag --");
      if (value == null) {
        if (FLAGS_WITHOUT_VALUE.contains(key)) {
          value = "true";
        } else if (i + 1 >= args.length) {
          throw new IllegalArgumentException("--" + key + " needs a value");
        } else {
          value = args[++i];
          if (isFlag(value)) {
            // a value left out (a script's unset variable): the next flag was taken for it
            throw new IllegalArgumentException("--" + key + " needs a value, but is followed by "
                + "the flag " + value);
          }
        }
      }
      String earlier = flags.putIfAbsent(key, value);
      if (earlier != null && key.equals("help")) {
        // -h and --help both (a wrapper's and the user's): help, if either asks for it
        flags.put(key, String.valueOf(onOff(key, earlier) || onOff(key, value)));
      } else if (earlier != null && FLAGS_WITHOUT_VALUE.contains(key)) {
        // as typed: "'true' and 'true'" named no value the user gave
        throw new IllegalArgumentException("--" + key + " is given twice: " + typed.get(key)
            + " and " + args[i] + " (keep one)");
      } else if (earlier != null) {
        throw new IllegalArgumentException("--" + key + " is given twice: '" + earlier + "' and '"
            + value + "' (keep one)");
      }
      typed.putIfAbsent(key, args[i]);
    }
    if (flags.containsKey("help") && onOff("help", flags.get("help"))) {
      // help on the command line is all the user asked for: a --config that cannot be read (a
      // wrapper's default path) was read first, and exited 2 instead of printing the usage
      return new NodeOptions(Map.of("help", "true"), env);
    }
    Map<String, String> all = new LinkedHashMap<>();
    if (flags.containsKey("config")) {
      if (flags.get("config").isBlank()) {
        // as for the other file flags: the working directory, refused as "Is a directory"
        throw new IllegalArgumentException("--config must name a file, was empty");
      }
      checkPath("config", flags.get("config"));
      Path file = Path.of(flags.get("config"));
      byte[] raw = NodeMain.readAtMost(file, MAX_CONFIG_FILE_BYTES, "--config ");
      if (raw.length > MAX_CONFIG_FILE_BYTES) {
        // another file named by mistake (a log, /dev/zero): it was read whole, into memory
        throw new IllegalArgumentException("--config " + file + " is larger than "
            + MAX_CONFIG_FILE_BYTES + " bytes: not a config file");
      }
      List<String> lines;
      try {
        String text = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(java.nio.charset.CodingErrorAction.REPORT)
            .onUnmappableCharacter(java.nio.charset.CodingErrorAction.REPORT)
            .decode(java.nio.ByteBuffer.wrap(raw)).toString();
        // split as Files.readAllLines splits: at \n, \r or \r\n, no line after the last break
        lines = new ArrayList<>(new java.io.BufferedReader(new java.io.StringReader(text))
            .lines().toList());
      } catch (java.nio.charset.CharacterCodingException e) {
        throw new IllegalArgumentException("cannot read --config " + file + ": it is not UTF-8 "
            + "(save it as UTF-8 or ASCII)", e);
      }
      if (!lines.isEmpty() && lines.get(0).startsWith("\uFEFF")) {
        // an editor's byte order mark is no part of the first key: it made that key unknown,
        // refused under a name that looks like a known one ("unknown key in f: id")
        lines.set(0, lines.get(0).substring(1));
      }
      all.putAll(readConfig(file, lines));
    }
    all.putAll(flags);
    for (String key : FLAGS_WITHOUT_VALUE) {
      if (all.containsKey(key) && !onOff(key, all.get(key))) {
        all.remove(key);
      }
    }
    return new NodeOptions(all, env);
  }

  /**
   * Refuses a file flag's value that no path can be (a NUL character), naming the flag: the
   * InvalidPathException of {@code Path.of} named none, and printed the NUL.
   *
   * @param value the value, or null when the flag is not given
   */
  private static void checkPath(String flag, String value) {
    if (value == null) {
      return;
    }
    try {
      Path.of(value);
    } catch (java.nio.file.InvalidPathException e) {
      StringBuilder shown = new StringBuilder();
      value.chars().forEach(c -> shown.append(c == 0 ? "\\0" : c < 0x20 || c == 0x7f
          ? String.format(Locale.ROOT, "\\u%04x", c) : String.valueOf((char) c)));
      throw new IllegalArgumentException("--" + flag + " must name a file, was '" + shown + "': "
          + e.getReason(), e);
    }
  }

  /** Whether a command-line argument is one of the flags ({@code --key} or {@code --key=value}). */
  private static boolean isFlag(String arg) {
    if (!arg.startsWith("--")) {
      return false;
    }
    int eq = arg.indexOf('=');
    return KEYS.contains(eq >= 0 ? arg.substring(2, eq) : arg.substring(2));
  }

  /**
   * The value of a flag without a value given as {@code key=value} (in the file, or as
   * {@code --key=value}): {@code true} or {@code false} in any case. Anything else is refused
   * rather than taken for either: {@code insecure=no} turned authentication off.
   */
  private static boolean onOff(String key, String value) {
    if (value.equalsIgnoreCase("true")) {
      return true;
    }
    if (value.equalsIgnoreCase("false")) {
      return false;
    }
    throw new IllegalArgumentException("--" + key + " must be true or false, was '" + value + "'");
  }

  /**
   * The keys and values of a properties file ({@link Properties#load(Reader)}'s format), each key
   * checked; a key given on two lines is refused, naming both, rather than the last one taken,
   * and so is the key {@code config}, since no other file is read from it.
   */
  private static Map<String, String> readConfig(Path file, List<String> lines) {
    Map<String, String> values = new LinkedHashMap<>();
    Map<String, Integer> lineOf = new LinkedHashMap<>();
    int i = 0;
    while (i < lines.size()) {
      int first = i;
      StringBuilder entry = new StringBuilder(lines.get(i++));
      String start = lines.get(first).stripLeading();
      boolean comment = start.startsWith("#") || start.startsWith("!");
      // a line ending in an odd number of backslashes goes on in the next (not a comment's)
      while (!comment && endsInOddBackslashes(entry) && i < lines.size()) {
        entry.append('\n').append(lines.get(i++));
      }
      Properties p = new Properties();
      try {
        p.load(new java.io.StringReader(entry.toString()));
      } catch (IOException | IllegalArgumentException e) { // a malformed \\uXXXX escape
        throw new IllegalArgumentException("line " + (first + 1) + " of --config " + file + ": "
            + e.getMessage(), e);
      }
      for (String k : p.stringPropertyNames()) {
        checkKey(k, "key in " + file + " (line " + (first + 1) + "): ");
        if (k.equals("config")) {
          // no file is read from a file: the key was taken and its file silently never read
          throw new IllegalArgumentException("key config in --config " + file + " (line "
              + (first + 1) + "): a config file cannot name another; give its keys in this "
              + "file, or --config on the command line");
        }
        Integer earlier = lineOf.putIfAbsent(k, first + 1);
        if (earlier != null) {
          throw new IllegalArgumentException("key " + k + " is given twice in --config " + file
              + ": on line " + earlier + " and on line " + (first + 1) + " (keep one)");
        }
        values.put(k, p.getProperty(k).trim());
      }
    }
    return values;
  }

  private static boolean endsInOddBackslashes(CharSequence s) {
    int n = 0;
    for (int k = s.length() - 1; k >= 0 && s.charAt(k) == '\\'; k--) {
      n++;
    }
    return n % 2 == 1;
  }

  private static void checkKey(String key, String what) {
    if (!KEYS.contains(key)) {
      throw new IllegalArgumentException("unknown " + what + key + " (see --help)");
    }
  }

  private static String required(Map<String, String> v, String key) {
    String s = v.get(key);
    if (s == null || s.isEmpty()) {
      throw new IllegalArgumentException("--" + key + " is required (see --help)");
    }
    return s;
  }

  /** A node id ({@code --id}, or one in {@code --seeds}), checked as peers check it. */
  private static String nodeId(String what, String id) {
    try {
      return PeerAddress.checkNodeId(id);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(what + ": " + e.getMessage().replace("nodeId", "a node id")
          + ", was '" + id + "'", e);
    }
  }

  /**
   * HOST:PORT split in two, the host checked as a host name or IP address (by its form: nothing
   * is looked up here), the brackets of an IPv6 address (which it must have) removed.
   */
  private static String[] hostPort(String what, String s) {
    String unbracketed = unbracketedIpv6(s);
    if (unbracketed != null) {
      throw new IllegalArgumentException("--" + what + " has an IPv6 address without brackets, "
          + "whose last part cannot be told from a port: write it in brackets, " + unbracketed
          + ", was '" + s + "'");
    }
    int i = s.lastIndexOf(':');
    if (i <= 0 || i == s.length() - 1) {
      throw new IllegalArgumentException("--" + what + " must be HOST:PORT, was '" + s + "'");
    }
    String host = s.substring(0, i);
    boolean bracketed = host.startsWith("[") && host.endsWith("]");
    if (bracketed) {
      host = host.substring(1, host.length() - 1);
    }
    String problem = hostProblem(host, bracketed);
    if (problem != null) {
      throw new IllegalArgumentException("--" + what + " host " + problem + ", was '" + s + "'");
    }
    return new String[] {host, s.substring(i + 1)};
  }

  /**
   * How to write HOST:PORT {@code s} if it is an IPv6 address without brackets, or one and a
   * port ({@code [::1]:PORT}, {@code [::1]:8000 or [::1:8000]:PORT}); null if it is neither.
   * Taken apart at its last colon, {@code fd00::2:1}, an address given without its port, would
   * be host {@code fd00::2} and port 1.
   */
  private static String unbracketedIpv6(String s) {
    int i = s.lastIndexOf(':');
    if (s.startsWith("[") || i < 0 || s.indexOf(':') == i) {
      return null;
    }
    String host = s.substring(0, i);
    boolean split = InetAddresses.isInetAddress(host);
    boolean whole = InetAddresses.isInetAddress(s);
    if (split && whole) {
      return "[" + host + "]" + s.substring(i) + " or [" + s + "]:PORT";
    }
    return split ? "[" + host + "]" + s.substring(i) : whole ? "[" + s + "]:PORT" : null;
  }

  /**
   * Why {@code host} is neither an IP address nor a host name, by its form alone; null if it is
   * one. A host name is labels of letters, digits and hyphens (1 to 63 characters, no hyphen
   * first or last) between dots, at most 253 characters, its last label not all digits;
   * underscores are refused as the HTTP client refuses them in a URL.
   */
  static String hostProblem(String host, boolean bracketed) {
    if (host.isEmpty()) {
      return "is empty";
    }
    if (bracketed || host.indexOf(':') >= 0) {
      if (!InetAddresses.isInetAddress(host) || host.indexOf(':') < 0) {
        return "is not an IPv6 address";
      }
      return null;
    }
    if (InetAddresses.isInetAddress(host)) {
      return null; // IPv4
    }
    // a fully qualified name's final dot is not one of its 253 characters
    String name = host.endsWith(".") ? host.substring(0, host.length() - 1) : host;
    if (name.length() > 253) {
      return "is not a host name: it has more than 253 characters";
    }
    String[] labels = name.split("\\.", -1);
    for (String label : labels) {
      for (int k = 0; k < label.length(); k++) {
        char c = label.charAt(k);
        boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
            || c == '-';
        if (!ok) {
          return "has a character no host name has, "
              + (c == ' ' ? "a space" : c > ' ' && c < 0x7f ? "'" + c + "'"
                  : String.format("U+%04X", (int) c))
              + " (a host name is letters, digits, hyphens and dots; or an IP address)";
        }
      }
      if (label.isEmpty() || label.length() > 63) {
        return "is not a host name: a part between dots must have 1 to 63 characters";
      }
      if (label.startsWith("-") || label.endsWith("-")) {
        return "is not a host name: a part between dots cannot begin or end with a hyphen";
      }
    }
    if (labels[labels.length - 1].chars().allMatch(c -> c >= '0' && c <= '9')) {
      return "is not an IP address (four numbers 0 to 255) nor a host name";
    }
    return null;
  }

  private static int port(String what, String s) {
    int p = portNumber(what, s);
    if (p < 0 || p > 65535) {
      throw new IllegalArgumentException("--" + what + " port must be 0 to 65535, was " + p);
    }
    return p;
  }

  /** The port of an address peers connect to: 1 to 65535 (0 picks none there). */
  private static void peerPort(String what, String s) {
    int p = portNumber(what, s);
    if (p < 1 || p > 65535) {
      throw new IllegalArgumentException("--" + what + " port must be 1 to 65535, was " + p);
    }
  }

  /** A port as written after the host: digits only (no sign or space, which URLs refuse). */
  private static int portNumber(String what, String s) {
    if (!s.isEmpty() && s.chars().allMatch(c -> c >= '0' && c <= '9')) {
      try {
        Integer.parseInt(s);
      } catch (NumberFormatException e) {
        // digits beyond an int said "needs an integer"; none of them is a port
        throw new IllegalArgumentException("--" + what + " port must be at most 65535, was " + s);
      }
    }
    int p = parseInt(what, s);
    if (!s.chars().allMatch(c -> c >= '0' && c <= '9')) {
      throw new IllegalArgumentException("--" + what + " port must be digits only, was '" + s + "'");
    }
    return p;
  }

  private static int parseInt(String what, String s) {
    try {
      return Integer.parseInt(asciiInteger(what, s));
    } catch (NumberFormatException e) {
      throw notANumber(what, s);
    }
  }

  /**
   * The error of a value {@code s} of {@code --what} that does not parse: out of range if it is
   * an integer beyond its type (it said "needs an integer", which it is), above or below every
   * value the flag takes (the type's range, which it named, is not the flag's).
   */
  private static IllegalArgumentException notANumber(String what, String s) {
    if (s.trim().matches("[+-]?[0-9]+")) {
      return new IllegalArgumentException("--" + what + " is out of range, was '" + s + "': "
          + (s.trim().startsWith("-") ? "below" : "above") + " any value it takes");
    }
    return new IllegalArgumentException("--" + what + " needs an integer, was '" + s + "'");
  }

  /** An int setting; a value outside int range is rejected, never truncated. */
  private static int intValue(Map<String, String> v, String key, int dflt) {
    String s = v.get(key);
    return s == null ? dflt : parseInt(key, s);
  }

  private static long longValue(Map<String, String> v, String key, long dflt) {
    String s = v.get(key);
    return s == null ? dflt : parseLong(key, s);
  }

  private static long parseLong(String what, String s) {
    try {
      return Long.parseLong(asciiInteger(what, s));
    } catch (NumberFormatException e) {
      throw notANumber(what, s);
    }
  }

  /**
   * {@code s} trimmed, if it is an integer in ASCII digits: {@code Integer.parseInt} also takes
   * the digits of other scripts (Arabic-Indic, full-width), which no number the help asks for is.
   */
  private static String asciiInteger(String what, String s) {
    String t = s.trim();
    if (!t.matches("[+-]?[0-9]+")) {
      throw notANumber(what, s);
    }
    return t;
  }

  static RoutingPolicy policy(String s) {
    switch (s.toLowerCase(Locale.ROOT).replace('_', '-')) {
      case "cost-aware":
        return RoutingPolicy.COST_AWARE;
      case "longest-prefix":
      case "paper":
        return RoutingPolicy.LONGEST_PREFIX;
      case "local-only":
      case "local":
        return RoutingPolicy.LOCAL_ONLY;
      default:
        throw new IllegalArgumentException(
            "--policy must be cost-aware, longest-prefix or local-only, was '" + s + "'");
    }
  }

  static List<PeerAddress> parseSeeds(String s) {
    List<PeerAddress> out = new ArrayList<>();
    Map<String, String> entryOf = new LinkedHashMap<>();
    for (String part : s.split(",")) {
      String p = part.trim();
      if (p.isEmpty()) {
        continue;
      }
      int at = p.indexOf('@');
      if (at <= 0 || at == p.length() - 1) {
        throw new IllegalArgumentException("--seeds entries must be id@host:port, was '" + p + "'");
      }
      String id = nodeId("--seeds entry '" + p + "'", p.substring(0, at));
      String[] hp = hostPort("seeds", p.substring(at + 1));
      peerPort("seeds", hp[1]);
      if (WildcardAddress.is(hp[0])) {
        throw new IllegalArgumentException("--seeds entry '" + p + "' is every interface, no "
            + "address of a peer: give the address the peer is reached at");
      }
      String earlier = entryOf.putIfAbsent(id, p);
      if (earlier != null) {
        // which address would the node join through? a copy-paste slip, refused
        throw new IllegalArgumentException("--seeds names node " + id + " twice: '" + earlier
            + "' and '" + p + "'");
      }
      try {
        out.add(new PeerAddress(id, p.substring(at + 1)));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException("--seeds entry '" + p + "': " + e.getMessage(), e);
      }
    }
    return List.copyOf(out);
  }
}
