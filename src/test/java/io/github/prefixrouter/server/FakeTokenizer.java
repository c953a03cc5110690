package io.github.prefixrouter.server;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * A {@link PromptTokenizer} for tests: one token per character (its UTF-16 code), a chat
 * rendered as {@code "<role>:<content>\n"} per message and {@code "assistant:"} last; output
 * tokens without engine text read back as characters. What it answers is set per test:
 * tokens, a refusal, a fault, a throw (an exception or an {@link Error}), or a future that never
 * completes. It records every call.
 */
final class FakeTokenizer implements PromptTokenizer {

  /** What the next calls answer. */
  enum Mode { TOKENS, INVALID, FAULT, NEVER, THROW, THROW_ERROR, BAD_IDS, BUDGET_REFUSED }

  /** One call: the model, the prompt or messages, the template's arguments. */
  record Call(String model, String prompt, List<Map<String, Object>> messages,
      Map<String, Object> kwargs, CompletableFuture<Tokenized> future) {}

  volatile Mode mode = Mode.TOKENS;
  volatile int maxModelLen = -1;
  final List<Call> calls = Collections.synchronizedList(new ArrayList<>());

  @Override
  public CompletableFuture<Tokenized> tokenize(String model, String prompt) {
    CompletableFuture<Tokenized> f = answer(prompt);
    calls.add(new Call(model, prompt, null, null, f));
    return f;
  }

  @Override
  public CompletableFuture<Tokenized> tokenizeChat(String model,
      List<Map<String, Object>> messages, Map<String, Object> chatTemplateKwargs) {
    CompletableFuture<Tokenized> f = answer(render(messages));
    calls.add(new Call(model, null, messages, chatTemplateKwargs, f));
    return f;
  }

  /** The text a conversation is tokenized as. */
  static String render(List<Map<String, Object>> messages) {
    StringBuilder b = new StringBuilder();
    for (Map<String, Object> m : messages) {
      b.append(m.get("role")).append(':');
      Object c = m.get("content");
      if (c instanceof String s) {
        b.append(s);
      } else if (c instanceof List<?> parts) {
        for (Object p : parts) {
          b.append(((Map<?, ?>) p).get("text"));
        }
      }
      b.append('\n');
    }
    return b.append("assistant:").toString();
  }

  /** The tokens of a text: one per character. */
  static int[] tokens(String text) {
    return text.chars().toArray();
  }

  private CompletableFuture<Tokenized> answer(String text) {
    return switch (mode) {
      case TOKENS -> CompletableFuture.completedFuture(new Tokenized(tokens(text), maxModelLen));
      case INVALID -> CompletableFuture.failedFuture(new TokenizeException(
          "the model server refused it: unknown role \"robot\"", true, null));
      case FAULT -> CompletableFuture.failedFuture(new TokenizeException(
          "the model server answered HTTP 500", false, null));
      case NEVER -> new CompletableFuture<>();
      case THROW -> throw new IllegalStateException("a tokenizer that throws");
      case THROW_ERROR -> throw new StackOverflowError("a tokenizer that overflows its stack");
      case BAD_IDS -> CompletableFuture.completedFuture(new Tokenized(new int[] {1, -5}, -1));
      case BUDGET_REFUSED -> CompletableFuture.failedFuture(new TokenizeException("the answer "
          + "could not get its share of the heap the tokenizer gives the answers being read and "
          + "parsed: other answers held it", false, false, true, null));
    };
  }

  /**
   * Whether the node may take the output's text as one char per token, ignoring the engine's
   * text (as the demo tokenizer's): false unless a test sets it.
   */
  volatile boolean textPerToken;

  @Override
  public boolean textPerToken() {
    return textPerToken;
  }

  @Override
  public String outputText(int[] tokens, String engineText) {
    if (!engineText.isEmpty()) {
      return engineText;
    }
    StringBuilder b = new StringBuilder();
    for (int t : tokens) {
      b.append((char) t);
    }
    return b.toString();
  }
}
