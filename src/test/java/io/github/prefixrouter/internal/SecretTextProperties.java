package io.github.prefixrouter.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.Chars;
import net.jqwik.api.constraints.StringLength;
import org.junit.jupiter.api.Test;

/**
 * {@link SecretText#without} over a small alphabet of the chars JSON escapes, where secrets
 * overlap the text and each other often.
 */
class SecretTextProperties {

  /** The forms a secret takes in JSON text: {@code "} and {@code \} escaped, {@code /} too or not. */
  private static String[] forms(String secret) {
    String escaped = secret.replace("\\", "\\\\").replace("\"", "\\\"");
    return new String[] {secret, escaped, escaped.replace("/", "\\/")};
  }

  /** No form of the secret is left, wherever one stood and whatever stood around it. */
  @Property
  void noFormOfTheSecretIsLeft(
      @ForAll @StringLength(max = 12) @Chars({'"', '\\', '/', 'a', ']'}) String before,
      @ForAll @StringLength(min = 1, max = 4) @Chars({'"', '\\', '/', 'a', ']'}) String secret,
      @ForAll @StringLength(max = 12) @Chars({'"', '\\', '/', 'a', ']'}) String after,
      @ForAll("formIndex") int form) {
    String out = SecretText.without(before + forms(secret)[form] + after, secret);
    for (String f : forms(secret)) {
      assertFalse(out.contains(f), () -> "'" + out + "' holds '" + f + "'");
    }
  }

  @net.jqwik.api.Provide
  net.jqwik.api.Arbitrary<Integer> formIndex() {
    return net.jqwik.api.Arbitraries.integers().between(0, 2);
  }

  /** A text that holds no form of the secret is given back as it is. */
  @Property
  void aTextWithoutTheSecretIsKept(
      @ForAll @StringLength(max = 16) @Chars({'"', '\\', '/', 'a'}) String text,
      @ForAll @StringLength(min = 1, max = 3) @Chars({'"', '\\', '/', 'a'}) String secret) {
    for (String f : forms(secret)) {
      if (text.contains(f)) {
        return;
      }
    }
    assertEquals(text, SecretText.without(text, secret));
  }

  /** The forms masked, and a secret the mask makes anew with the text around it. */
  @Test
  void examples() {
    assertEquals("a " + SecretText.MASK + " b", SecretText.without("a sk-1 b", "sk-1"));
    assertEquals("\"" + SecretText.MASK + "\"", SecretText.without("\"k\\\"1\"", "k\"1"));
    assertEquals(SecretText.MASK, SecretText.without("k\\/1", "k/1"));
    assertEquals(SecretText.WITHHELD, SecretText.without("]xxxx", "]x"));
    assertEquals("no key", SecretText.without("no key", null));
  }
}
