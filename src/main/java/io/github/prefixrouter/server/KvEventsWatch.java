package io.github.prefixrouter.server;

import io.github.prefixrouter.engine.vllm.VllmKvEventSubscriber;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

/**
 * Tells the operator when a node that subscribes to its engine's KV events has served requests
 * but received no event: its engine-driven tree then stays empty, the node advertises no cached
 * prefix, and peers never route to it for one, with nothing failing.
 *
 * <p>{@link #check()} is called periodically; it says so once, when the node has served
 * {@link #REQUESTS} requests since it started and no event message has arrived, naming the
 * likely cause from what the subscriber saw. Never connected: another endpoint, or a server
 * started without {@code "enable_kv_cache_events": true} in its {@code --kv-events-config},
 * which then binds no publisher at all. Messages of other topics dropped: the server's {@code
 * topic} merely starts with the node's {@code --kv-events-topic}. Connected and silent: a
 * publisher runs there but sends this node nothing, because the server caches no prefix (vLLM
 * without prefix caching publishes no store) or, with a topic of the node's own, publishes on
 * another (a publisher sends a subscriber only the topics it subscribed to). Not thread-safe:
 * one scheduler calls it.
 */
final class KvEventsWatch {

  /** Requests served before silence counts as a misconfiguration. */
  static final long REQUESTS = 20;

  private final String endpoint;
  private final String topic;
  private final Supplier<VllmKvEventSubscriber.Stats> events;
  private final LongSupplier served;
  private boolean told;

  /**
   * A watch.
   *
   * @param endpoint the publisher's endpoint, for the message
   * @param topic the node's {@code --kv-events-topic}, or null or empty for every topic
   * @param events the subscriber's counters
   * @param served requests the node's engine has answered so far (local and for peers)
   */
  KvEventsWatch(String endpoint, String topic, Supplier<VllmKvEventSubscriber.Stats> events,
      LongSupplier served) {
    this.endpoint = endpoint;
    this.topic = topic == null ? "" : topic;
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
      // vLLM binds its publisher only with its events on: off, nothing listens there
      why.append("the subscriber never connected (").append(s.connectFailures())
          .append(" failed attempts); check the address, and that the server runs with ")
          .append("\"enable_kv_cache_events\": true and \"publisher\": \"zmq\" in its ")
          .append("--kv-events-config (without them it binds no publisher)");
    } else if (s.otherTopicMessages() > 0) {
      why.append(s.otherTopicMessages()).append(" messages of other topics were dropped; check ")
          .append("--kv-events-topic against the server's \"topic\"");
    } else {
      // a publisher is bound there, so the server's events are on: it publishes nothing this
      // node subscribed to
      why.append("the subscriber is connected");
      if (s.silenceReconnects() > 0) {
        why.append(" (dropped and made again ").append(s.silenceReconnects())
            .append(" times for silence, --kv-events-silence: the connection works, the server ")
            .append("publishes nothing on it)");
      }
      why.append("; check that the server caches prefixes (vLLM without prefix caching, ")
          .append("--no-enable-prefix-caching, publishes no store)");
      if (!topic.isEmpty()) {
        why.append(" and that its \"topic\" is this node's --kv-events-topic '").append(topic)
            .append("' (a publisher sends a subscriber only the topics it subscribed to)");
      }
    }
    return why.toString();
  }
}
