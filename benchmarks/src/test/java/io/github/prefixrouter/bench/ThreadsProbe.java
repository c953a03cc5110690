package io.github.prefixrouter.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.TimeUnit;

/**
 * The threads a benchmark main starts, counted in a JVM of its own (the common fork-join pool
 * takes its size once per JVM). Its {@link #main} runs the main named by its first argument
 * with the rest, touching nothing before it, then prints the common pool's size and the threads
 * the JVM started since it started, the JVM's own and the main thread included:
 *
 * <pre>
 * parallelism 2
 * threads 17
 * </pre>
 */
public final class ThreadsProbe {

  private ThreadsProbe() {}

  public static void main(String[] args) throws Exception {
    Class.forName(args[0]).getMethod("main", String[].class)
        .invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
    System.out.println("parallelism " + ForkJoinPool.getCommonPoolParallelism());
    System.out.println("threads " + ManagementFactory.getThreadMXBean().getTotalStartedThreadCount());
    System.out.flush();
  }

  /**
   * Runs {@code main} with {@code args} through the probe in a fresh JVM told it has 2
   * processors ({@code -XX:ActiveProcessorCount=2}), with {@code jvmFlags} too, and returns what
   * the probe printed: {@code parallelism} and {@code threads}. Fails the test if the JVM does
   * not end within {@code seconds} or ends with a status other than 0.
   */
  public static Map<String, Long> onTwoProcessors(List<String> jvmFlags, Class<?> main,
      List<String> args, int seconds) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-XX:ActiveProcessorCount=2"));
    cmd.addAll(jvmFlags);
    cmd.addAll(List.of("-cp", System.getProperty("java.class.path"),
        ThreadsProbe.class.getName(), main.getName()));
    cmd.addAll(args);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String text;
    try {
      // read on another thread, so a main that hangs fails the test after the deadline
      java.util.concurrent.CompletableFuture<String> output =
          java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
              return new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            } catch (java.io.IOException e) {
              return "reading the probe's output failed: " + e;
            }
          });
      assertTrue(p.waitFor(seconds, TimeUnit.SECONDS),
          main.getSimpleName() + " did not end within " + seconds + " s");
      text = output.get(10, TimeUnit.SECONDS);
    } finally {
      p.destroyForcibly();
    }
    assertEquals(0, p.exitValue(), text);
    Map<String, Long> out = new HashMap<>();
    for (String line : text.split("\n")) {
      String[] kv = line.trim().split(" ");
      if (kv.length == 2 && List.of("parallelism", "threads").contains(kv[0])) {
        out.put(kv[0], Long.parseLong(kv[1]));
      }
    }
    assertEquals(2, out.size(), text);
    return out;
  }
}
