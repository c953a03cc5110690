package io.github.prefixrouter.internal.zmq;

import java.util.Objects;

/**
 * A ZMQ endpoint to connect to: {@code tcp://host:port}, the host a name, an IPv4 address or an
 * IPv6 address in brackets ({@code tcp://[::1]:5557}). Other transports ({@code ipc://},
 * {@code inproc://}, {@code pgm://}) and bind-only forms ({@code tcp://*:5557}) are refused.
 *
 * @param host the host name or address (IPv6 without brackets)
 * @param port the TCP port, 1..65535
 */
public record ZmtpEndpoint(String host, int port) {

  public ZmtpEndpoint {
    Objects.requireNonNull(host, "host");
    if (host.isEmpty()) {
      throw new IllegalArgumentException("empty host");
    }
    if (port < 1 || port > 65535) {
      throw new IllegalArgumentException("port must be 1..65535, was " + port);
    }
  }

  /**
   * Parses {@code tcp://host:port}.
   *
   * @throws IllegalArgumentException naming what is wrong with {@code endpoint}
   */
  public static ZmtpEndpoint parse(String endpoint) {
    Objects.requireNonNull(endpoint, "endpoint");
    int scheme = endpoint.indexOf("://");
    if (scheme < 0) {
      throw new IllegalArgumentException(
          "endpoint '" + endpoint + "' is not of the form tcp://host:port");
    }
    String transport = endpoint.substring(0, scheme);
    if (!transport.equals("tcp")) {
      throw new IllegalArgumentException(
          "endpoint '" + endpoint + "': only tcp:// endpoints are supported, not " + transport
              + "://");
    }
    String rest = endpoint.substring(scheme + 3);
    String host;
    String port;
    if (rest.startsWith("[")) {
      int close = rest.indexOf(']');
      if (close < 0 || close + 1 >= rest.length() || rest.charAt(close + 1) != ':') {
        throw new IllegalArgumentException(
            "endpoint '" + endpoint + "' is not of the form tcp://[ipv6]:port");
      }
      host = rest.substring(1, close);
      port = rest.substring(close + 2);
    } else {
      int colon = rest.lastIndexOf(':');
      if (colon < 0) {
        throw new IllegalArgumentException(
            "endpoint '" + endpoint + "' has no port (tcp://host:port)");
      }
      host = rest.substring(0, colon);
      port = rest.substring(colon + 1);
      if (host.indexOf(':') >= 0) {
        throw new IllegalArgumentException(
            "endpoint '" + endpoint + "': an IPv6 address must be in brackets, tcp://[::1]:port");
      }
    }
    if (host.isEmpty()) {
      throw new IllegalArgumentException("endpoint '" + endpoint + "' has no host");
    }
    if (host.equals("*")) {
      throw new IllegalArgumentException(
          "endpoint '" + endpoint + "': '*' is a bind address; give the publisher's host name"
              + " or address");
    }
    if (host.indexOf(';') >= 0 || host.indexOf('/') >= 0) {
      throw new IllegalArgumentException(
          "endpoint '" + endpoint + "': source addresses and paths are not supported");
    }
    int p;
    try {
      p = Integer.parseInt(port);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("endpoint '" + endpoint + "': bad port '" + port + "'");
    }
    if (p < 1 || p > 65535) {
      throw new IllegalArgumentException(
          "endpoint '" + endpoint + "': port must be 1..65535, was " + p);
    }
    return new ZmtpEndpoint(host, p);
  }

  @Override
  public String toString() {
    return host.indexOf(':') >= 0 ? "tcp://[" + host + "]:" + port : "tcp://" + host + ":" + port;
  }
}
