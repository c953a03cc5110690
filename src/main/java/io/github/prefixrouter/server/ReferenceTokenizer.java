package io.github.prefixrouter.server;

import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.internal.json.Json;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The tokenizer of the demo engine ({@link ReferenceEngine}), which has none of its own: one
 * token per Unicode code point, so that a node running the demo engine takes text prompts and
 * chat conversations like a node next to a model server, and its answers have text.
 *
 * <p>The code is a bijection between code points and non-negative ids, chosen so that the
 * engine's output ids (which lie in {@code [0, vocabulary)}) are printable characters:
 *
 * <ul>
 *   <li>the {@code vocabulary} code points from {@code U+0100} on, skipping the surrogates
 *       ({@code U+D800} to {@code U+DFFF}, which are no characters), are ids {@code 0} to
 *       {@code vocabulary - 1} (with the default 1,024: {@code U+0100} to {@code U+04FF}, Latin
 *       Extended, IPA, Greek and Cyrillic letters, and some combining marks);
 *   <li>code points below {@code U+0100} (ASCII and Latin-1) are ids {@code vocabulary} to
 *       {@code vocabulary + 255};
 *   <li>every other code point is its own id (a lone surrogate, which no valid text holds, is
 *       taken as U+FFFD).
 * </ul>
 *
 * {@link #outputText} inverts it, so the text of an answer tokenizes back to its ids. The answers
 * are meaningless (the engine's weights are random), but deterministic.
 *
 * <p>Chat conversations are rendered with a fixed template, each message as
 * {@code <|role|>\n} + its text + {@code \n}, then {@code <|assistant|>\n} (the generation
 * prompt); a content given as text parts is their texts joined, a null content is empty. Chat
 * template arguments are ignored. There is no context length; {@link Tokenized#maxModelLen()}
 * is the prompt's length plus the engine's output limit, so a chat request without
 * {@code max_tokens} may generate up to that limit.
 *
 * <p>Immutable and thread-safe; futures are completed at once.
 */
final class ReferenceTokenizer implements PromptTokenizer {

  /** The first code point of the range the engine's output ids map to. */
  static final int OUTPUT_BASE = 0x100;

  private final int vocabulary;
  private final int maxOutputTokens;

  /**
   * @param vocabulary the engine's vocabulary: its output ids lie in {@code [0, vocabulary)}
   *     ({@code ReferenceEngine.Builder.vocabBuckets}, 1,024 by default); 1 to 2^20
   * @param maxOutputTokens the engine's output limit ({@code maxOutputTokens}), at least 1
   * @throws IllegalArgumentException if a value is out of range
   */
  ReferenceTokenizer(int vocabulary, int maxOutputTokens) {
    if (vocabulary < 1 || vocabulary > 1 << 20) {
      throw new IllegalArgumentException("vocabulary must be 1 to 2^20, was " + vocabulary);
    }
    if (maxOutputTokens < 1) {
      throw new IllegalArgumentException("maxOutputTokens must be at least 1, was " + maxOutputTokens);
    }
    this.vocabulary = vocabulary;
    this.maxOutputTokens = maxOutputTokens;
  }

  @Override
  public CompletableFuture<Tokenized> tokenize(String model, String prompt) {
    return done(prompt);
  }

  @Override
  public CompletableFuture<Tokenized> tokenizeChat(String model,
      List<Map<String, Object>> messages, Map<String, Object> chatTemplateKwargs) {
    StringBuilder text = new StringBuilder();
    for (Map<String, Object> m : messages) {
      Object role = m.get("role");
      if (!(role instanceof String r)) {
        return CompletableFuture.failedFuture(
            new TokenizeException("a message's role must be a string", true, null));
      }
      text.append("<|").append(r).append("|>\n");
      Object content = m.get("content");
      if (content instanceof String s) {
        text.append(s);
      } else if (content instanceof List<?> parts) {
        for (Object p : parts) {
          Object t = p instanceof Map<?, ?> pm ? pm.get("text") : null;
          if (!(t instanceof String s)) {
            return CompletableFuture.failedFuture(new TokenizeException(
                "a content part must be an object with a \"text\" string", true, null));
          }
          text.append(s);
        }
      } else if (content != null && content != Json.NULL) {
        return CompletableFuture.failedFuture(new TokenizeException(
            "a message's content must be a string, a list of text parts or null", true, null));
      }
      text.append('\n');
    }
    text.append("<|assistant|>\n");
    return done(text.toString());
  }

  private CompletableFuture<Tokenized> done(String text) {
    int[] ids = encode(text);
    if (ids.length == 0) {
      return CompletableFuture.failedFuture(
          new TokenizeException("the prompt is empty", true, null));
    }
    return CompletableFuture.completedFuture(
        new Tokenized(ids, (int) Math.min(Integer.MAX_VALUE, (long) ids.length + maxOutputTokens)));
  }

  /** The ids of {@code text}, one per code point. */
  int[] encode(String text) {
    return text.codePoints().map(this::id).toArray();
  }

  /** The code points skipped in the output range: the surrogates. */
  private static final int SURROGATES = Character.MAX_SURROGATE - Character.MIN_SURROGATE + 1;

  /** The code point of output id {@code id} ({@code 0 <= id < vocabulary}). */
  private static int outputCodePoint(int id) {
    int cp = OUTPUT_BASE + id;
    return cp < Character.MIN_SURROGATE ? cp : cp + SURROGATES;
  }

  private int id(int cp) {
    if (cp >= Character.MIN_SURROGATE && cp <= Character.MAX_SURROGATE) {
      cp = 0xFFFD; // a lone surrogate: no character
    }
    int end = outputCodePoint(vocabulary - 1) + 1;
    if (cp >= OUTPUT_BASE && cp < end) {
      return cp < Character.MIN_SURROGATE ? cp - OUTPUT_BASE : cp - SURROGATES - OUTPUT_BASE;
    }
    if (cp < OUTPUT_BASE) {
      return vocabulary + cp;
    }
    return cp; // >= end >= OUTPUT_BASE + vocabulary: above every id of the two ranges before
  }

  /** True: the text of output ids is one code point per id. */
  @Override
  public boolean textPerToken() {
    return true;
  }

  /**
   * The text of {@code tokens}: the inverse of {@link #encode}. An id that is no code point (or
   * a surrogate, which no valid text has) is U+FFFD. The engine's own text (empty) is ignored.
   */
  @Override
  public String outputText(int[] tokens, String engineText) {
    StringBuilder b = new StringBuilder(tokens.length);
    for (int id : tokens) {
      int cp;
      if (id < 0) {
        cp = 0xFFFD;
      } else if (id < vocabulary) {
        cp = outputCodePoint(id);
      } else if (id < vocabulary + OUTPUT_BASE) {
        cp = id - vocabulary;
      } else {
        cp = id;
      }
      if (cp > Character.MAX_CODE_POINT || (cp >= Character.MIN_SURROGATE && cp <= Character.MAX_SURROGATE)) {
        cp = 0xFFFD;
      }
      b.appendCodePoint(cp);
    }
    return b.toString();
  }
}
