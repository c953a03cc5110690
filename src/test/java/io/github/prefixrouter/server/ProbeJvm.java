package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A probe's {@code main} run in a fresh JVM on the tests' class path, for settings a JVM reads
 * once (a system property, its processor count).
 */
final class ProbeJvm {

  private ProbeJvm() {}

  /**
   * Runs {@code probe} in a fresh JVM with {@code jvmOptions} and {@code args}, and returns what
   * it printed (its standard output and error). Fails the test if it does not end within
   * {@code seconds} or ends with a status other than 0.
   */
  static String run(List<String> jvmOptions, Class<?> probe, List<String> args, int seconds)
      throws Exception {
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    cmd.addAll(jvmOptions);
    cmd.addAll(List.of("-cp", classPath(), probe.getName()));
    cmd.addAll(args);
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    // read on another thread, so a probe that hangs fails the test after the deadline instead
    // of holding the build
    java.util.concurrent.CompletableFuture<String> output =
        java.util.concurrent.CompletableFuture.supplyAsync(() -> {
          try {
            return new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
          } catch (java.io.IOException e) {
            return "reading the probe's output failed: " + e;
          }
        });
    String text;
    try {
      assertTrue(p.waitFor(seconds, TimeUnit.SECONDS),
          "probe did not end within " + seconds + " s");
      text = output.get(10, TimeUnit.SECONDS);
    } finally {
      p.destroyForcibly();
    }
    assertEquals(0, p.exitValue(), text);
    return text;
  }

  private static String classPath() {
    String cp = System.getProperty("surefire.test.class.path");
    return cp != null && !cp.isEmpty() ? cp : System.getProperty("java.class.path");
  }
}
