package io.github.prefixrouter.internal.json;

import java.util.Map;
import java.util.regex.Pattern;

/**
 * What a model server's error answer says, in OpenAI's error shape: {@code {"error": {"message",
 * "type", "param", "code"}}}, or vLLM's older {@code {"object": "error", "message", ...}}.
 */
public final class OpenAiErrors {

  /** The word "model" in an error's message. */
  private static final Pattern MODEL_WORD = Pattern.compile("(?i)\\bmodel\\b");

  private OpenAiErrors() {}

  /**
   * Whether a parsed error answer is in OpenAI's shape and is about the model the request
   * named: its {@code code} is {@code model_not_found}, its {@code param} {@code model}, or its
   * message names a model (vLLM's {@code "The model `x` does not exist."}). A 404 so is the
   * server's word on the request; any other 404 (a framework's {@code {"detail":"Not Found"}}, a
   * proxy's page or its {@code {"message": "no Route matched"}}, OpenAI's own
   * {@code "Invalid URL (POST /v1/...)"}) says there is no such endpoint.
   *
   * @param answer the parsed body, or null when it is not JSON
   * @return whether it refuses the request's model
   */
  public static boolean namesModel(Object answer) {
    Object error = Json.path(answer, "error");
    if (!(error instanceof Map<?, ?>)) {
      error = "error".equals(Json.path(answer, "object")) ? answer : null;
    }
    if (!(Json.path(error, "message") instanceof String m)) {
      return false;
    }
    return "model_not_found".equals(Json.path(error, "code"))
        || "model".equals(Json.path(error, "param"))
        || MODEL_WORD.matcher(m).find();
  }
}
