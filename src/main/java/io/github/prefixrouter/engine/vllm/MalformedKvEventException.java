package io.github.prefixrouter.engine.vllm;

/**
 * A KV-event batch could not be decoded: bad or truncated msgpack, a value of the wrong type,
 * a length larger than the bytes left, nesting deeper than the decoder allows, bytes after the
 * batch, or an event missing a field it needs. The batch is dropped as a whole; nothing of it
 * is applied.
 *
 * <p>Checked on purpose: the one caller, {@link VllmKvEventReceiver}, must count and drop the
 * batch. The message names what was expected and the byte offset where decoding stopped.
 */
final class MalformedKvEventException extends Exception {

  private final int offset;

  MalformedKvEventException(String what, int offset) {
    super(what + " at offset " + offset, null, false, false);
    this.offset = offset;
  }

  /** The byte offset in the payload where the problem was found. */
  int offset() {
    return offset;
  }
}
