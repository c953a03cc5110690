package io.github.prefixrouter.internal;

/**
 * Finding user information ({@code user:password@}) in a URL given as text, whether or not the
 * rest of it parses, and naming the URL without it: the JDK's HTTP client sends no credentials
 * from a URL, and a URL carrying them would show its password in every message naming it.
 */
public final class UrlUserInfo {

  private UrlUserInfo() {}

  /**
   * {@code url} without its user information, query and fragment, for a message refusing it:
   * {@code scheme://...@host:port/path}; null if its authority (between {@code ://} and the
   * first {@code /}, {@code ?} or {@code #} after it) has no {@code @}, or it has no
   * {@code ://}.
   *
   * @param url the URL as given
   * @return the URL with its user information replaced by {@code ...}, or null if it has none
   */
  public static String redacted(String url) {
    int scheme = url.indexOf("://");
    if (scheme < 0) {
      return null;
    }
    int from = scheme + 3;
    int to = from;
    while (to < url.length() && "/?#".indexOf(url.charAt(to)) < 0) {
      to++;
    }
    int at = url.lastIndexOf('@', to - 1);
    if (at < from) {
      return null;
    }
    String path = url.substring(to).replaceFirst("[?#].*", "");
    return url.substring(0, from) + "...@" + url.substring(at + 1, to) + path;
  }
}
