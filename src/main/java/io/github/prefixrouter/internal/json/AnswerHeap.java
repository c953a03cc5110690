package io.github.prefixrouter.internal.json;

/**
 * The bound on the heap a model server's JSON answer of text and token ids (a completion, a
 * stream's chunk, a {@code /tokenize} answer) may take once parsed ({@link Json}'s estimate):
 * 16 MiB plus 6 bytes per character. Text takes 2 bytes a character, and a token id 12 bytes
 * for at least two characters (a digit and a comma): no such answer, however long, takes more,
 * and the base leaves an answer's objects (its envelope, its usage) room. One of tiny values is
 * refused as it is parsed: {@code [{},{},...]} is charged about 47 bytes a character, so 8 MiB
 * of it would hold about 260 MB, and 64 MiB about 2 GB.
 */
public final class AnswerHeap {

  /** The heap any answer may take, however short. */
  public static final long BASE_BYTES = 16L << 20;
  /** The heap an answer may take per character of it, over {@link #BASE_BYTES}. */
  public static final int PER_CHAR = 6;

  private AnswerHeap() {}

  /**
   * The most heap the parsed JSON of an answer of {@code chars} characters may take.
   *
   * @param chars the answer's length in characters
   * @return {@link #BASE_BYTES} plus {@link #PER_CHAR} per character
   */
  public static long maxParsedBytes(int chars) {
    return BASE_BYTES + (long) PER_CHAR * chars;
  }

  /**
   * The message of an answer refused by {@link #maxParsedBytes}.
   *
   * @param what the answer, as the message names it
   * @param e the parse's refusal
   * @param notWhat what an answer within the bound holds, e.g. {@code "text and token ids"}
   * @return "{@code what} would take more than N bytes of heap once parsed (...): not an answer
   *     of {@code notWhat}"
   */
  public static String tooLarge(String what, Json.ParsedSizeException e, String notWhat) {
    return what + " would take more than " + e.maxParsedBytes() + " bytes of heap once parsed ("
        + (BASE_BYTES >> 20) + " MiB and " + PER_CHAR + " bytes a character; at offset "
        + e.offset() + "): not an answer of " + notWhat;
  }
}
