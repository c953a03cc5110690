package io.github.prefixrouter.internal;

/**
 * Keeping a secret (the model server's API key) out of text a server wrote, before that text
 * goes into an error message, which reaches the client, the peer that forwarded the request and
 * the logs. A proxy's error page may echo the key it refused.
 */
public final class SecretText {

  /** What stands in a text for the secret taken out of it. */
  public static final String MASK = "[the API key]";

  /**
   * What {@link #without} returns for a text in which taking the secret out made it anew (a
   * secret such as {@code "]x"} meets the end of a mask): the text is withheld whole.
   */
  public static final String WITHHELD = "(text withheld: it held the API key)";

  private SecretText() {}

  /**
   * {@code text} with every occurrence of {@code secret} replaced by {@link #MASK}: as written,
   * and as JSON writes it ({@code "} and {@code \} escaped, {@code /} escaped or not), so that a
   * body shown unparsed loses it too; {@link #WITHHELD} if the text still holds it after that.
   * Cut a text only after this: a cut through the secret would leave a prefix of it that no
   * longer matches.
   *
   * @param text the text, or null
   * @param secret the secret, or null (nothing to take out)
   * @return the text without the secret; {@code text} itself when it holds none
   */
  public static String without(String text, String secret) {
    if (text == null || secret == null || secret.isEmpty()) {
      return text;
    }
    String[] forms = {secret, jsonEscaped(secret, false), jsonEscaped(secret, true)};
    String t = text;
    for (String form : forms) {
      t = t.replace(form, MASK);
    }
    for (String form : forms) {
      if (t.contains(form)) { // made anew where a mask met the text around it: say nothing
        return WITHHELD;
      }
    }
    return t;
  }

  /**
   * The most chars {@code secret} takes in a text in any of the forms {@link #without} takes
   * out: how far past a cut to read so that a secret the cut falls in is still found whole.
   *
   * @param secret the secret, or null
   * @return twice its length (every char escaped), 0 for none
   */
  public static int longestForm(String secret) {
    return secret == null ? 0 : 2 * secret.length();
  }

  private static String jsonEscaped(String s, boolean slash) {
    StringBuilder b = new StringBuilder(s.length() + 8);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c == '"' || c == '\\' || slash && c == '/') {
        b.append('\\');
      }
      b.append(c);
    }
    return b.toString();
  }
}
