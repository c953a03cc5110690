/**
 * prefix-router: decentralized, prefix-cache-aware routing of LLM inference requests.
 *
 * <p>Exported: the node API ({@code io.github.prefixrouter}), the SPIs host applications
 * implement ({@code io.github.prefixrouter.spi}), the in-process test support
 * ({@code io.github.prefixrouter.testing}), the HTTP transport
 * ({@code io.github.prefixrouter.transport.http}), the engine adapters
 * ({@code io.github.prefixrouter.engine.openai}, {@code io.github.prefixrouter.engine.reference},
 * and {@code io.github.prefixrouter.engine.vllm}, which feeds vLLM's KV-cache events to the
 * node's engine-driven tree).
 * The runnable node ({@code io.github.prefixrouter.server.NodeMain}) is a main class, not API.
 * Everything under
 * {@code io.github.prefixrouter.internal} is implementation and not exported.
 */
module io.github.prefixrouter {
  requires com.google.common;
  requires org.slf4j;
  requires java.net.http;
  requires jdk.httpserver;

  exports io.github.prefixrouter;
  exports io.github.prefixrouter.spi;
  exports io.github.prefixrouter.testing;
  exports io.github.prefixrouter.transport.http;
  exports io.github.prefixrouter.engine.openai;
  exports io.github.prefixrouter.engine.reference;
  exports io.github.prefixrouter.engine.vllm;
}
