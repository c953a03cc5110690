package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import io.github.prefixrouter.testing.ForwardingTransport;
import java.util.concurrent.CompletableFuture;
import java.util.function.BiConsumer;

/**
 * A transport that tells {@code onAnswer} of every answer its node's handler gives a peer's
 * request, as the transport's own handling of the answer would see it (the answer's bytes, or
 * the failure); messages and everything else pass through. Tests override the rest.
 */
class AnswerWatchingTransport extends ForwardingTransport {

  private final BiConsumer<byte[], Throwable> onAnswer;

  AnswerWatchingTransport(Transport delegate, BiConsumer<byte[], Throwable> onAnswer) {
    super(delegate);
    this.onAnswer = onAnswer;
  }

  @Override
  public void start(InboundHandler handler) {
    super.start(new InboundHandler() {
      @Override
      public void onMessage(PeerAddress from, byte[] payload) {
        handler.onMessage(from, payload);
      }

      @Override
      public CompletableFuture<byte[]> onRequest(PeerAddress from, byte[] payload) {
        CompletableFuture<byte[]> answer = handler.onRequest(from, payload);
        answer.whenComplete(onAnswer);
        return answer;
      }
    });
  }
}
