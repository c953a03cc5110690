package io.github.prefixrouter.server;

import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.HttpURLConnection;
import java.net.ServerSocket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ForkJoinPool;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Run in a JVM of its own by {@link CommonPoolTest} (the common fork-join pool takes its size
 * once per JVM): starts two nodes through {@link NodeMain#main}, each the other's seed, waits
 * until they see each other, then counts the threads the JVM started while they gossiped for
 * two seconds, and the gossip messages they sent meanwhile:
 *
 * <pre>
 * parallelism 2
 * messages 58
 * threads 0
 * </pre>
 *
 * It reads the nodes' {@code /v1/stats} with {@link HttpURLConnection}, which starts no thread
 * per call, and touches nothing of {@code java.util.concurrent} before the nodes start.
 */
public final class CommonPoolProbe {

  private static final Pattern SENT = Pattern.compile("\"messages_sent\"\\s*:\\s*(\\d+)");
  private static final Pattern LIVE = Pattern.compile("\"peers_live\"\\s*:\\s*(\\d+)");

  private CommonPoolProbe() {}

  public static void main(String[] args) throws Exception {
    int[] ports = new int[4];
    for (int i = 0; i < ports.length; i++) {
      try (ServerSocket s = new ServerSocket(0)) {
        ports[i] = s.getLocalPort();
      }
    }
    String seeds = "n0@127.0.0.1:" + ports[0] + ",n1@127.0.0.1:" + ports[1];
    for (int i = 0; i < 2; i++) {
      String[] node = {"--id", "n" + i, "--listen", "127.0.0.1:" + ports[i],
          "--client", "127.0.0.1:" + ports[2 + i], "--seeds", seeds, "--insecure",
          "--engine", "reference", "--engine-cache-tokens", "1024"};
      Thread t = new Thread(() -> {
        try {
          NodeMain.main(node);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }, "probe-node-" + i);
      t.setDaemon(true);
      t.start();
    }
    long deadline = System.nanoTime() + 30_000_000_000L;
    while (stat(ports[2], LIVE) < 1 || stat(ports[3], LIVE) < 1) {
      if (System.nanoTime() > deadline) {
        System.out.println("error the nodes did not see each other within 30 s");
        System.exit(1);
      }
      Thread.sleep(100);
    }
    Thread.sleep(1000); // the first exchanges' one-time work (connections, threads) done
    ThreadMXBean threads = ManagementFactory.getThreadMXBean();
    long sent0 = stat(ports[2], SENT) + stat(ports[3], SENT);
    long started0 = threads.getTotalStartedThreadCount();
    Thread.sleep(2000);
    long started = threads.getTotalStartedThreadCount() - started0;
    long sent = stat(ports[2], SENT) + stat(ports[3], SENT) - sent0;
    System.out.println("parallelism " + ForkJoinPool.getCommonPoolParallelism());
    System.out.println("messages " + sent);
    System.out.println("threads " + started);
    System.out.flush();
    Runtime.getRuntime().halt(0); // the nodes' shutdown hooks and grace are not what is probed
  }

  /** A figure of a node's {@code /v1/stats}, -1 while the node does not answer. */
  private static long stat(int clientPort, Pattern figure) {
    try {
      HttpURLConnection c =
          (HttpURLConnection) new URL("http://127.0.0.1:" + clientPort + "/v1/stats").openConnection();
      c.setConnectTimeout(1000);
      c.setReadTimeout(5000);
      try (InputStream in = c.getInputStream()) {
        Matcher m = figure.matcher(new String(in.readAllBytes(), StandardCharsets.UTF_8));
        return m.find() ? Long.parseLong(m.group(1)) : -1;
      } finally {
        c.disconnect();
      }
    } catch (IOException e) {
      return -1;
    }
  }
}
