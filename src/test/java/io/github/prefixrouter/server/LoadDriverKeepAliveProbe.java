package io.github.prefixrouter.server;

import java.util.List;

/**
 * Run in a JVM of its own by {@link ClientKeepAliveTest}: builds a {@link LoadDriver}, the first
 * JDK HTTP client of its JVM, and prints the client's idle time as it was then set.
 */
public final class LoadDriverKeepAliveProbe {

  private LoadDriverKeepAliveProbe() {}

  public static void main(String[] args) {
    LoadDriver.builder().endpoints(List.of("127.0.0.1:9")).build();
    System.out.println("property " + System.getProperty("jdk.httpclient.keepalive.timeout"));
  }
}
