package io.github.prefixrouter.bench.netdelay;

import io.github.prefixrouter.bench.Flags;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;

/**
 * Runs {@link DelayRelay}s until the process is stopped: one per pair of {@code --listen} and
 * {@code --target} addresses (comma-separated lists of the same length, paired in order), each
 * adding {@code --delay-ms} one way.
 *
 * <pre>
 * java -cp benchmarks.jar io.github.prefixrouter.bench.netdelay.DelayRelayMain \
 *     --listen 127.0.0.1:7100,127.0.0.1:7101 --target 127.0.0.1:7000,127.0.0.1:7001 --delay-ms 5
 * </pre>
 *
 * <p>It prints one line per relay once all are accepting ({@code relaying H:P -> H:P, N ms one
 * way}), then {@code ready}; a stop (SIGTERM, SIGINT) closes them.
 */
public final class DelayRelayMain {

  /** The longest one-way delay accepted, in milliseconds. */
  static final double MAX_DELAY_MS = 60_000;

  private DelayRelayMain() {}

  /** The relays to run: {@code listen.get(i)} relays to {@code target.get(i)}. */
  record Options(List<InetSocketAddress> listen, List<InetSocketAddress> target,
      Duration delay) {}

  /**
   * Parses the command line.
   *
   * @throws IllegalArgumentException for an unknown flag, one given twice or without its value,
   *     a missing {@code --listen} or {@code --target}, an address that is not {@code host:port},
   *     lists of different lengths, or a delay that is not from 0 to 60,000 ms
   */
  static Options options(String[] args) {
    Flags f = Flags.parse(args, Set.of(), Set.of("--listen", "--target", "--delay-ms"));
    double ms = f.between("--delay-ms", 0, 0, MAX_DELAY_MS);
    List<InetSocketAddress> listen = addresses(f, "--listen");
    List<InetSocketAddress> target = addresses(f, "--target");
    if (listen.size() != target.size()) {
      throw new IllegalArgumentException("--listen names " + listen.size() + " addresses and "
          + "--target " + target.size() + ": they pair in order, so they must be as many");
    }
    return new Options(listen, target, Duration.ofNanos(Math.round(ms * 1e6)));
  }

  private static List<InetSocketAddress> addresses(Flags f, String flag) {
    String csv = f.string(flag, null);
    if (csv == null) {
      throw new IllegalArgumentException(flag + " is required (HOST:PORT, comma-separated)");
    }
    List<InetSocketAddress> out = new ArrayList<>();
    for (String a : csv.split(",", -1)) {
      try {
        out.add(DelayRelay.parse(a.trim()));
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(flag + ": " + e.getMessage());
      }
    }
    return out;
  }

  public static void main(String[] args) throws Exception {
    Options o = Flags.parseOrExit("usage: benchmarks/run delay-relay --listen H:P[,H:P...] "
        + "--target H:P[,H:P...] [--delay-ms N]\n"
        + "  TCP relays adding a fixed one-way delay, each listen address to its target", args,
        DelayRelayMain::options);
    List<DelayRelay> relays = new ArrayList<>();
    CountDownLatch stopped = new CountDownLatch(1);
    try {
      for (int i = 0; i < o.listen().size(); i++) {
        relays.add(DelayRelay.start(o.listen().get(i), o.target().get(i), o.delay()));
      }
    } catch (IOException e) {
      System.err.println("error: cannot listen on " + o.listen().get(relays.size()) + ": "
          + e.getMessage());
      closeAll(relays);
      System.exit(1);
    }
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      closeAll(relays);
      stopped.countDown();
    }, "delay-relay-stop"));
    double ms = o.delay().toNanos() / 1e6;
    for (DelayRelay r : relays) {
      System.out.println("relaying " + hostPort(r.address()) + " -> " + hostPort(r.target())
          + ", " + (ms == Math.rint(ms) ? String.valueOf((long) ms) : String.valueOf(ms))
          + " ms one way");
    }
    System.out.println("ready");
    System.out.flush();
    stopped.await();
  }

  private static void closeAll(List<DelayRelay> relays) {
    for (DelayRelay r : relays) {
      try {
        r.close();
      } catch (IOException e) {
        System.err.println(e.getMessage());
      }
    }
  }

  private static String hostPort(InetSocketAddress a) {
    String h = a.getHostString();
    return (h.contains(":") ? "[" + h + "]" : h) + ":" + a.getPort();
  }
}
