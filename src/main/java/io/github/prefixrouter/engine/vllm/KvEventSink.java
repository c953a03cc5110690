package io.github.prefixrouter.engine.vllm;

/**
 * Where a subscriber delivers the messages of a KV-event stream, in order. Implemented by
 * {@link VllmKvEventReceiver}; tests substitute their own.
 */
interface KvEventSink {

  /**
   * The sequence number expected next: one past the last message applied, or {@code -1}
   * before the first message.
   */
  long nextSeq();

  /**
   * A message received live from the publisher. A sequence number above {@link #nextSeq()}
   * means messages were lost (the caller should try a replay first, see
   * {@link #onReplayed}); one below it means the publisher restarted. One outside
   * {@code 0..}{@link VllmKvEventReceiver#MAX_SEQ} is malformed, for the sink to drop (the
   * caller asks no replay for it).
   */
  void onMessage(long seq, byte[] payload);

  /**
   * A message received from the publisher's replay endpoint. Messages already applied
   * ({@code seq < nextSeq()}) are ignored.
   */
  void onReplayed(long seq, byte[] payload);

  /**
   * The connection to the publisher broke: what is published until it is made again is lost,
   * and anything may happen meanwhile, including a restart that sequence numbers alone cannot
   * show, so the stream starts over (the next message counts as the first).
   */
  void reset();
}
