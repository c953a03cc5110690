package io.github.prefixrouter.server;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The token ids a node running the reference engine gives a chat conversation on its OpenAI
 * chat route ({@link ReferenceTokenizer}'s chat template, one id per character, with the
 * reference engine's vocabulary as {@link NodeMain} builds it), so that the same prompts can be
 * sent as token ids to {@code /v1/route/completions} and compared with the chat route.
 */
public final class ReferenceChatTokens {

  private static final ReferenceTokenizer TOKENIZER = new ReferenceTokenizer(
      NodeMain.REFERENCE_VOCABULARY, NodeMain.REFERENCE_MAX_OUTPUT_TOKENS);

  private ReferenceChatTokens() {}

  /** The ids of the rendered conversation, ending with the assistant's generation prompt. */
  public static int[] tokens(List<LoadDriver.Message> messages) {
    List<Map<String, Object>> m = new ArrayList<>();
    for (LoadDriver.Message message : messages) {
      m.add(Map.of("role", message.role(), "content", message.content()));
    }
    return TOKENIZER.tokenizeChat("", m, Map.of()).join().tokens();
  }

  /** The text of output ids, as the chat route gives it. */
  public static String text(int[] outputTokens) {
    return TOKENIZER.outputText(outputTokens, "");
  }
}
