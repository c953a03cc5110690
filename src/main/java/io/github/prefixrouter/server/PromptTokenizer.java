package io.github.prefixrouter.server;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * Turns what an OpenAI-style client sends (a text prompt, or a chat conversation) into the model's
 * token ids, which is what the node routes on and what its engines run.
 *
 * <p>Routing matches token prefixes, so the ids must be the ones the engine's own tokenizer
 * gives: the node asks the model server it runs next to ({@code /tokenize}, which also applies
 * the model's chat template), or, for the demo engine, a fixed character-level tokenizer. Every
 * node of a cluster serves the same model, so the ids one node computes are valid at every peer.
 *
 * <p>Implementations are thread-safe and never block the caller: the futures complete on a
 * thread of their own (or at once). A future fails with {@link TokenizeException}.
 */
interface PromptTokenizer {

  /**
   * The token ids of a completion prompt, with the special tokens (a BOS, say) the server adds
   * to a completion prompt.
   *
   * @param model the model (or LoRA adapter) the client named, or the base model's name
   * @param prompt the prompt's text
   */
  CompletableFuture<Tokenized> tokenize(String model, String prompt);

  /**
   * The token ids of a chat conversation rendered by the model's chat template, ending with the
   * prompt of the assistant's turn (the generation prompt).
   *
   * @param model as in {@link #tokenize}
   * @param messages the conversation as the client sent it: parsed JSON objects, each with at
   *     least a {@code role} and a {@code content} (a string, or a list of text parts)
   * @param chatTemplateKwargs extra arguments of the chat template (for example
   *     {@code enable_thinking}); empty for none
   */
  CompletableFuture<Tokenized> tokenizeChat(String model, List<Map<String, Object>> messages,
      Map<String, Object> chatTemplateKwargs);

  /**
   * As {@link #tokenize(String, String)}, taking from {@code heap} the heap of the copies of the
   * prompt that the tokenization holds until its future completes (the request it sends, say),
   * as it makes them. {@code heap} may block, and may throw (a request the client port's body
   * budget cannot give the heap): the call then ends, and what it threw is thrown on, nothing
   * sent. By default nothing is taken: a tokenizer that holds no copy of a size to count.
   *
   * @param heap takes bytes of heap for the tokenization, on the caller's thread
   */
  default CompletableFuture<Tokenized> tokenize(String model, String prompt, Heap heap) {
    return tokenize(model, prompt);
  }

  /**
   * As {@link #tokenizeChat(String, List, Map)}, taking the heap of its copies of the
   * conversation from {@code heap} as {@link #tokenize(String, String, Heap)} does.
   *
   * @param heap takes bytes of heap for the tokenization, on the caller's thread
   */
  default CompletableFuture<Tokenized> tokenizeChat(String model,
      List<Map<String, Object>> messages, Map<String, Object> chatTemplateKwargs, Heap heap) {
    return tokenizeChat(model, messages, chatTemplateKwargs);
  }

  /** Where a tokenization takes the heap of its copies of the prompt. */
  @FunctionalInterface
  interface Heap {
    /** Nothing taken: the tokenization's copies are not counted. */
    Heap UNCOUNTED = bytes -> {};

    /**
     * Takes {@code bytes} of heap, waiting for them if it must.
     *
     * @throws RuntimeException if they cannot be had: the tokenization ends
     */
    void take(long bytes);
  }

  /**
   * The text of output tokens, for answers whose engine gave tokens but no text (the demo
   * engine, which has no tokenizer of its own). By default the engine's text, unchanged: engines
   * next to a model server give the server's text.
   *
   * @param tokens output token ids, in order (one piece of a stream, or the whole output)
   * @param engineText the text the engine gave with them
   */
  default String outputText(int[] tokens, String engineText) {
    return engineText;
  }

  /**
   * Whether {@link #outputText} is a function of the tokens alone, token by token: the text of
   * a sequence of tokens is the concatenation of the texts of each (given with an empty engine
   * text). Then the node knows which token a stop string was completed in, and cuts the output
   * tokens there too; otherwise it cuts the engine's text only. By default false.
   */
  default boolean textPerToken() {
    return false;
  }

  /**
   * Ends the threads the tokenizer holds, if any; called once the node stopped taking requests.
   * By default nothing to do.
   */
  default void close() {}

  /**
   * A tokenized prompt.
   *
   * @param tokens the token ids, at least one
   * @param maxModelLen the model's context length in tokens as the server reports it (prompt and
   *     output together), or -1 when unknown
   */
  record Tokenized(int[] tokens, int maxModelLen) {}

  /**
   * Why a prompt could not be tokenized.
   *
   * <p>{@link #invalidRequest()} says whether the fault is the request's (the server refused it:
   * a malformed conversation, an unknown model; the client gets a 400 with the server's message)
   * or the tokenizer's (unreachable, failing, a malformed answer: the client gets a 502; no
   * answer in time, {@link #timedOut()}: a 504). {@link #budgetRefused()} marks a failure that is
   * neither: this node had no heap to read the answer (the client gets a 503 with
   * {@code Retry-After}).
   */
  final class TokenizeException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final boolean invalidRequest;
    private final boolean timedOut;
    private final boolean budgetRefused;

    TokenizeException(String message, boolean invalidRequest, Throwable cause) {
      this(message, invalidRequest, false, cause);
    }

    /** @param timedOut whether the tokenizer gave up waiting for its answer (answered 504) */
    TokenizeException(String message, boolean invalidRequest, boolean timedOut, Throwable cause) {
      this(message, invalidRequest, timedOut, false, cause);
    }

    /**
     * @param timedOut whether the tokenizer gave up waiting for its answer (answered 504)
     * @param budgetRefused whether the answer could not get its share of the heap the tokenizer
     *     gives its answers (answered 503 with {@code Retry-After})
     */
    TokenizeException(String message, boolean invalidRequest, boolean timedOut,
        boolean budgetRefused, Throwable cause) {
      super(message, cause);
      this.invalidRequest = invalidRequest;
      this.timedOut = timedOut;
      this.budgetRefused = budgetRefused;
    }

    /** True if the request is at fault (answered 400), false if the tokenizer is (502). */
    boolean invalidRequest() {
      return invalidRequest;
    }

    /**
     * True if the tokenizer had no answer in time (answered 504, as the endpoint's own bound on
     * a tokenization is).
     */
    boolean timedOut() {
      return timedOut;
    }

    /**
     * True if the answer could not get its share of the heap the tokenizer gives the answers
     * being read and parsed, held by other answers ({@code EngineTokenizer}'s answer budget):
     * this node's own shortage of heap for a while, not a fault of the tokenizer nor of the
     * request, answered 503 with {@code Retry-After} (OpenAI's {@code busy}), as a request body
     * the body budget refuses is.
     */
    boolean budgetRefused() {
      return budgetRefused;
    }
  }
}
