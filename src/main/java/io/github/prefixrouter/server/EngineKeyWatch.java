package io.github.prefixrouter.server;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.EngineException;
import io.github.prefixrouter.spi.EngineLoad;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.spi.InferenceEngine;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The node's engine, watched for its server refusing the node's API key. A request the server
 * refuses with 401 or 403 ({@link EngineException#httpStatus()}, never the message's text) is
 * logged at WARN, pointing at {@code --engine-api-key-file} and the key's variable: once, until
 * the server accepts the key again (answers a request), which is logged once at INFO; a refusal
 * with the other status (403 after 401) is logged too. The clients get a 502 for each such request, which does not
 * reach the operator; a line per request would come at the request rate. The refusal standing
 * ({@link #refusedStatus}) is also in the node's {@code GET /health}, {@code /v1/stats} and
 * {@code /metrics}. Everything else goes to
 * the engine as it is, and its futures are the engine's own.
 */
final class EngineKeyWatch implements InferenceEngine {

  private static final Logger log = LoggerFactory.getLogger(EngineKeyWatch.class);

  private final InferenceEngine engine;
  private final String engineUrl;
  private final boolean keyGiven;
  /** The status of the refusal last logged, or 0 while the server accepts the key. */
  private final AtomicInteger refused = new AtomicInteger();
  /**
   * The status with which the start's health check was refused (logged there), or 0: reported
   * until a completion is answered (or refused, which then is).
   */
  private volatile int refusedAtStart;

  /**
   * @param engine the engine watched
   * @param engineUrl its server, as {@code --engine} gives it
   * @param keyGiven whether the node has the server's API key
   */
  EngineKeyWatch(InferenceEngine engine, String engineUrl, boolean keyGiven) {
    this(engine, engineUrl, keyGiven, 0);
  }

  /**
   * @param startStatus the status the start's health check of the server got: 401 or 403, a
   *     refusal of the key, is reported ({@link #refusedStatus}) until a completion is answered;
   *     any other is ignored
   */
  EngineKeyWatch(InferenceEngine engine, String engineUrl, boolean keyGiven, int startStatus) {
    this.engine = engine;
    this.engineUrl = engineUrl;
    this.keyGiven = keyGiven;
    this.refusedAtStart = startStatus == 401 || startStatus == 403 ? startStatus : 0;
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request) {
    return watched(engine.execute(request));
  }

  @Override
  public CompletableFuture<EngineResult> execute(InferenceRequest request,
      OutputListener listener) {
    return watched(engine.execute(request, listener));
  }

  @Override
  public EngineLoad load() {
    return engine.load();
  }

  @Override
  public void cancel(String requestId) {
    engine.cancel(requestId);
  }

  @Override
  public boolean publishesCacheEvents() {
    return engine.publishesCacheEvents();
  }

  @Override
  public void setCacheEventListener(CacheEventListener listener) {
    engine.setCacheEventListener(listener);
  }

  @Override
  public void setCacheLossListener(Consumer<String> listener) {
    engine.setCacheLossListener(listener);
  }

  @Override
  public String toString() {
    return engine.toString();
  }

  /** The engine watched (for tests). */
  InferenceEngine watched() {
    return engine;
  }

  /**
   * The status with which the server last refused the node's key (401 or 403), at the start's
   * health check or on a completion, or 0 while it accepts it: since the server's last answer
   * of a completion. The node's {@code /health} says it.
   */
  int refusedStatus() {
    int status = refused.get();
    return status != 0 ? status : refusedAtStart;
  }

  /**
   * What the watch reports in {@code /v1/stats} and {@code /metrics} ({@code engine_key}).
   *
   * @param refusedStatus as {@link #refusedStatus()}
   */
  record Stats(int refusedStatus) {}

  /** A snapshot for {@code /v1/stats} and {@code /metrics}. */
  Stats stats() {
    return new Stats(refusedStatus());
  }

  /** {@code f}, the engine's own future (null too: the node reports that), watched. */
  private CompletableFuture<EngineResult> watched(CompletableFuture<EngineResult> f) {
    if (f != null) {
      f.whenComplete(this::completed);
    }
    return f;
  }

  /** Notes how a request ended: a refusal of the key, an answer, or neither. */
  private void completed(EngineResult result, Throwable failure) {
    Throwable c = failure instanceof CompletionException && failure.getCause() != null
        ? failure.getCause() : failure;
    if (c == null) {
      if (result != null) {
        refusedAtStart = 0;
        if (refused.getAndSet(0) != 0) {
          log.info("engine at {} accepts this node's credentials again", engineUrl);
        }
      }
      return;
    }
    // any other failure says nothing of the key: no answer, a timeout, or a status a proxy
    // or the server may give before it looks at the key (502, 429)
    int status = c instanceof EngineException e ? e.httpStatus().orElse(0) : 0;
    if (status == 401 || status == 403) {
      if (refused.getAndSet(status) != status) {
        log.warn("engine at {} refuses this node's credentials (HTTP {}) on its completions, {}: "
            + "give the server's key with --engine-api-key-file FILE or env {} (logged once "
            + "until the server accepts the key again; meanwhile the node's requests fail, "
            + "502, unless a peer serves them)", engineUrl, status,
            keyGiven ? "with the API key given" : "without an API key",
            NodeOptions.ENGINE_API_KEY_ENV);
      }
    }
  }
}
