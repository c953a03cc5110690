package io.github.prefixrouter.engine.openai;

import io.github.prefixrouter.engine.vllm.Batches;
import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.spi.InferenceEngine;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;

/**
 * The OpenAI-compatible adapter with {@code kvEvents} against the InferenceEngine contract, its
 * cache-event check included: the fake vLLM server publishes its reference backend's cache
 * events the way vLLM does (msgpack batches with sequence numbers on a ZeroMQ socket, here
 * JeroMQ's XPUB), and the adapter's subscriber delivers them to the contract's listener.
 */
class OpenAiCompatibleEngineKvEventsContractTest extends OpenAiCompatibleEngineContractTest {

  /** vLLM's KV events name a chain's LoRA adapter but not its cache salt. */
  @Override
  protected boolean cacheEventsNameTheScope() {
    return false;
  }

  /** The backend's cache, whose removals the fake server publishes as vLLM does. */
  @Override
  protected long cacheCapacityTokens() {
    return BACKEND_CACHE_TOKENS;
  }

  private static final byte[] TOPIC = "kv-events".getBytes(StandardCharsets.US_ASCII);

  private ZContext zmq;
  private ZMQ.Socket xpub;
  private String endpoint;
  private final CountDownLatch subscribed = new CountDownLatch(1);
  private volatile boolean stopping;
  private Thread watcher;
  private final List<OpenAiCompatibleEngine> engines = new CopyOnWriteArrayList<>();
  private long seq;

  @BeforeEach
  void startPublisher() {
    zmq = new ZContext();
    xpub = zmq.createSocket(SocketType.XPUB);
    xpub.setLinger(0);
    xpub.setReceiveTimeOut(50);
    endpoint = "tcp://127.0.0.1:" + xpub.bindToRandomPort("tcp://127.0.0.1");
    // until the first subscription arrives this thread alone uses the socket; after it, only
    // the publishing backend does (the latch orders the two)
    watcher = new Thread(() -> {
      while (subscribed.getCount() > 0 && !stopping) {
        byte[] m;
        try {
          m = xpub.recv();
        } catch (RuntimeException e) {
          return; // the context was closed
        }
        if (m != null && m.length > 0 && m[0] == 1) {
          subscribed.countDown();
        }
      }
    }, "fake-vllm-xpub");
    watcher.setDaemon(true);
    watcher.start();
    backend.setCacheEventListener(new CacheEventListener() {
      @Override
      public void onBlocksStored(long parent, long[] hashes, int[] tokenIds) {
        publish(Batches.stored(parent == NO_PARENT ? null : parent, hashes, tokenIds,
            backend.blockSize()));
      }

      @Override
      public void onBlocksRemoved(long[] hashes) {
        publish(Batches.removed(hashes));
      }

      @Override
      public void onAllCleared() {
        publish(Batches.cleared());
      }
    });
  }

  /**
   * Publishes one event as a batch, like vLLM: once an adapter subscribed, after its
   * subscription reached the socket (a PUB drops what it sends before that); without one,
   * nobody is listening and the event goes nowhere.
   */
  private synchronized void publish(byte[] event) {
    if (engines.stream().noneMatch(e -> e.kvEventSubscriber() != null)) {
      return;
    }
    try {
      if (!subscribed.await(10, TimeUnit.SECONDS)) {
        throw new AssertionError("the adapter never subscribed");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    xpub.sendMore(TOPIC);
    xpub.sendMore(ByteBuffer.allocate(8).putLong(seq++).array());
    xpub.send(Batches.batch(event));
  }

  @AfterEach
  void stopPublisher() throws InterruptedException {
    engines.forEach(OpenAiCompatibleEngine::close);
    // a JeroMQ socket is not thread-safe: the watcher leaves it (within its 50 ms receive
    // timeout) before this thread closes it with the context
    stopping = true;
    watcher.join(10_000);
    zmq.close();
  }

  @Override
  protected InferenceEngine createEngine() {
    OpenAiCompatibleEngine e = engineBuilder()
        .kvEvents(VllmKvEventSubscriber.builder().endpoint(endpoint).blockSize(backend.blockSize()))
        .build();
    engines.add(e);
    return e;
  }
}
