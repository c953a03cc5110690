package io.github.prefixrouter.internal;

import java.nio.charset.StandardCharsets;

/** The rule a model id ({@code RouterConfig.modelId()}) follows, shared with the FORWARD codec. */
public final class ModelIds {

  /** Longest model id, in UTF-8 bytes. */
  public static final int MAX_BYTES = 256;

  private ModelIds() {}

  /**
   * Why {@code id} cannot be a model id, or null if it can: at most {@link #MAX_BYTES} UTF-8
   * bytes, no control characters, no surrogate that is not part of a pair.
   */
  public static String problem(String id) {
    byte[] utf8 = id.getBytes(StandardCharsets.UTF_8);
    if (utf8.length > MAX_BYTES) {
      return "modelId must be at most " + MAX_BYTES + " UTF-8 bytes, was " + utf8.length;
    }
    for (int i = 0; i < id.length(); i++) {
      char c = id.charAt(i);
      boolean pair = Character.isHighSurrogate(c) && i + 1 < id.length()
          && Character.isLowSurrogate(id.charAt(i + 1));
      if (pair) {
        i++;
      } else if (Character.isISOControl(c) || Character.isSurrogate(c)) {
        return "modelId must be text without control characters, had U+"
            + String.format("%04X", (int) c) + " at index " + i;
      }
    }
    return null;
  }
}
