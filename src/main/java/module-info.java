/**
 * prefix-router: decentralized, prefix-cache-aware routing of LLM inference requests.
 *
 * <p>Exported: the node API ({@code io.github.prefixrouter}), the SPIs host applications
 * implement ({@code io.github.prefixrouter.spi}) and the in-process test support
 * ({@code io.github.prefixrouter.testing}). Everything under {@code io.github.prefixrouter.internal}
 * is implementation and not exported.
 */
module io.github.prefixrouter {
  requires com.google.common;
  requires org.slf4j;

  exports io.github.prefixrouter;
  exports io.github.prefixrouter.spi;
  exports io.github.prefixrouter.testing;
}
