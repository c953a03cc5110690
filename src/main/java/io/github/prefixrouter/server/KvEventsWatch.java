package io.github.prefixrouter.server;

import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * Tells the operator when a node that subscribes to its engine's KV events has served requests
 * but received no event: its engine-driven tree then stays empty, the node advertises no cached
 * prefix, and peers never route to it for one, with nothing failing. The usual causes are a
 * server started without {@code "enable_kv_cache_events": true}, another endpoint, or a topic
 * other than the node's {@code --kv-events-topic}.
 *
 * <p>{@link #check()} is called periodically; it says so once, when the node has served
 * {@link #REQUESTS} requests since it started and no event message has arrived, naming whether
 * the subscriber ever connected and how many messages of other topics it dropped. Not
 * thread-safe: one scheduler calls it.
 */
final class KvEventsWatch {

  /** Requests served before silence counts as a misconfiguration. */
  static final long REQUESTS = 20;

  private final String endpoint;
  private final Supplier<VllmKvEventSubscriber.Stats> events;
  private final LongSupplier served;
  private boolean told;

  /**
   * A watch.
   *
   * @param endpoint the publisher's endpoint, for the message
   * @param events the subscriber's counters
   * @param served requests the node's engine has answered so far (local and for peers)
   */
  KvEventsWatch(String endpoint, Supplier<VllmKvEventSubscriber.Stats> events,
      LongSupplier served) {
    this.endpoint = endpoint;
    this.events = events;
    this.served = served;
  }

  /**
   * The warning to log now, if any.
   *
   * @return the warning, or null (nothing to say, or said already)
   */
  String check() {
    if (told) {
      return null;
    }
    VllmKvEventSubscriber.Stats s = events.get();
    long n = served.getAsLong();
    if (s.messages() + s.replayedMessages() > 0 || n < REQUESTS) {
      return null;
    }
    told = true;
    StringBuilder why = new StringBuilder("the engine answered ").append(n)
        .append(" requests but no KV-event message has arrived from ").append(endpoint)
        .append(", so this node's tree is empty and peers are never sent its cached prefixes: ");
    if (s.connects() == 0) {
      why.append("the subscriber never connected (").append(s.connectFailures())
          .append(" failed attempts); check the address and that the server binds it");
    } else if (s.otherTopicMessages() > 0) {
      why.append(s.otherTopicMessages()).append(" messages of other topics were dropped; check ")
          .append("--kv-events-topic against the server's \"topic\"");
    } else {
      why.append("the subscriber is connected");
      if (s.silenceReconnects() > 0) {
        why.append(" (dropped and made again ").append(s.silenceReconnects())
            .append(" times for silence, --kv-events-silence: the connection works, the server ")
            .append("publishes nothing on it)");
      }
      why.append("; check that the server runs with ")
          .append("\"enable_kv_cache_events\": true and \"publisher\": \"zmq\" in its ")
          .append("--kv-events-config, and the topic");
    }
    return why.toString();
  }
}
