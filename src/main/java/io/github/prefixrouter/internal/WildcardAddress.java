package io.github.prefixrouter.internal;

import com.google.common.net.InetAddresses;

/**
 * The wildcard address, shared by the node's flags and the HTTP transport's builder: every
 * interface to listen on, and no address a peer can connect to.
 */
public final class WildcardAddress {

  private WildcardAddress() {}

  /**
   * Whether {@code host}, an IP literal with or without brackets, is the wildcard address in any
   * of its spellings ({@code 0.0.0.0}, {@code ::}, {@code [0::0]}, {@code 0:0:0:0:0:0:0:0}...).
   */
  public static boolean is(String host) {
    String h = host.startsWith("[") && host.endsWith("]")
        ? host.substring(1, host.length() - 1) : host;
    return InetAddresses.isInetAddress(h) && InetAddresses.forString(h).isAnyLocalAddress();
  }
}
