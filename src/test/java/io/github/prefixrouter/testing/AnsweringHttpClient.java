package io.github.prefixrouter.testing;

import java.net.http.HttpClient;
import java.net.http.HttpHeaders;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.mockito.ArgumentMatchers;
import org.mockito.MockedStatic;
import org.mockito.Mockito;

/**
 * A JDK {@link HttpClient} that answers every request at once, on the caller's thread: the body
 * handler is given the answer's status and headers, its subscriber the whole body in one piece,
 * and the future {@code sendAsync} returns is already complete. What the owner does with the
 * answer (its callbacks on that future) so runs on the thread that sent the request, where a
 * thread-local static mock (of the JSON parse, say) applies; with the real client it runs on a
 * thread of the client's.
 */
public final class AnsweringHttpClient {

  private AnsweringHttpClient() {}

  /**
   * Builds {@code owner} (an engine adapter, a tokenizer) with this client in place of the one
   * it builds with {@link HttpClient#newBuilder()}.
   *
   * @param status the status of every answer
   * @param contentType its {@code Content-Type}
   * @param body its body
   * @param owner builds the owner; its client is built from {@link HttpClient#newBuilder()}
   * @return the owner
   */
  public static <T> T building(int status, String contentType, String body, Supplier<T> owner) {
    HttpClient http = answering(status, contentType, body.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    HttpClient.Builder builder = Mockito.mock(HttpClient.Builder.class, Mockito.RETURNS_SELF);
    Mockito.when(builder.build()).thenReturn(http);
    // thread-local: only this thread's calls of newBuilder are answered so
    try (MockedStatic<HttpClient> clients = Mockito.mockStatic(HttpClient.class)) {
      clients.when(HttpClient::newBuilder).thenReturn(builder);
      return owner.get();
    }
  }

  /**
   * What a body handler is given of an HTTP/1.1 answer: its status and headers.
   *
   * @param status the answer's status
   * @param headers its headers
   * @return the answer's info
   */
  public static HttpResponse.ResponseInfo responseInfo(int status, HttpHeaders headers) {
    return new HttpResponse.ResponseInfo() {
      @Override
      public int statusCode() {
        return status;
      }

      @Override
      public HttpHeaders headers() {
        return headers;
      }

      @Override
      public HttpClient.Version version() {
        return HttpClient.Version.HTTP_1_1;
      }
    };
  }

  @SuppressWarnings("unchecked")
  private static HttpClient answering(int status, String contentType, byte[] body) {
    HttpClient http = Mockito.mock(HttpClient.class);
    Mockito.when(http.sendAsync(ArgumentMatchers.any(), ArgumentMatchers.any())).thenAnswer(inv -> {
      HttpRequest request = inv.getArgument(0);
      HttpResponse.BodyHandler<Object> handler = inv.getArgument(1);
      HttpHeaders headers = HttpHeaders.of(Map.of("Content-Type", List.of(contentType),
          "Content-Length", List.of(Integer.toString(body.length))), (k, v) -> true);
      HttpResponse.BodySubscriber<Object> subscriber = handler.apply(responseInfo(status, headers));
      subscriber.onSubscribe(new Flow.Subscription() {
        @Override
        public void request(long n) {}

        @Override
        public void cancel() {}
      });
      subscriber.onNext(List.of(ByteBuffer.wrap(body)));
      subscriber.onComplete();
      Object read = subscriber.getBody().toCompletableFuture().get(5, TimeUnit.SECONDS);
      HttpResponse<Object> response = Mockito.mock(HttpResponse.class);
      Mockito.when(response.statusCode()).thenReturn(status);
      Mockito.when(response.headers()).thenReturn(headers);
      Mockito.when(response.body()).thenReturn(read);
      Mockito.when(response.request()).thenReturn(request);
      return CompletableFuture.completedFuture(response);
    });
    return http;
  }
}
