package io.github.prefixrouter.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.stall.StallSimMain;
import io.github.prefixrouter.server.NodeMain;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What the benchmarks' SLF4J binding prints, in JVMs of their own (its level is read once per
 * JVM, when the first logger is made), on the class path the benchmarks jar bundles: a routing
 * node ({@code benchmarks/run node}) logs to standard error, with a timestamp and the logger's
 * name; a simulator, whose in-process nodes log as real ones do, prints no log line. The jar
 * bound SLF4J to slf4j-nop, and a node's warnings and errors went nowhere.
 */
class LogOutputTest {

  /** A line as slf4j-simple writes one, at any level, whatever comes before the level. */
  private static final Pattern LOG_LINE =
      Pattern.compile("(?m)^.*\\b(TRACE|DEBUG|INFO|WARN|ERROR) [\\w.$]+ - .*$");

  private static List<String> java(Class<?> main, String... args) {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
        "-cp", System.getProperty("java.class.path"), main.getName()));
    cmd.addAll(List.of(args));
    return cmd;
  }

  /**
   * A node whose engine URL has nothing listening logs the start's warning that the engine does
   * not answer, on standard error with a timestamp and the logger's name, and the lines it logs
   * as it starts and stops; standard output keeps its banner and stats alone.
   */
  @Test
  void aNodeLogsItsEngineNotAnsweringOnStandardError(@TempDir Path dir) throws Exception {
    int port;
    try (ServerSocket s = new ServerSocket(0)) {
      port = s.getLocalPort(); // closed: nothing listens there
    }
    Path ready = dir.resolve("ready");
    Path out = dir.resolve("out");
    Path err = dir.resolve("err");
    ProcessBuilder pb = new ProcessBuilder(java(NodeMain.class, "--id", "n0",
        "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0", "--insecure",
        "--engine", "http://127.0.0.1:" + port, "--model", "m",
        "--ready-file", ready.toString()))
        .redirectOutput(out.toFile()).redirectError(err.toFile());
    pb.environment().remove("PREFIX_ROUTER_CLUSTER_KEY"); // --insecure refuses a key there
    pb.environment().remove("PREFIX_ROUTER_ENGINE_API_KEY");
    Process p = pb.start();
    try {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
      while (!Files.exists(ready) || Files.readString(ready).isBlank()) {
        assertTrue(p.isAlive(), "the node ended: " + Files.readString(err));
        assertTrue(System.nanoTime() < deadline, "the node did not start within 90 s");
        Thread.sleep(50);
      }
      p.destroy(); // SIGTERM: the node stops and logs so
      assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the node did not stop within 60 s");
    } finally {
      p.destroyForcibly();
    }
    String errText = Files.readString(err, StandardCharsets.UTF_8);
    String outText = Files.readString(out, StandardCharsets.UTF_8);
    String time = "\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}\\.\\d{3}(Z|[+-]\\d{2}:\\d{2})";
    assertTrue(Pattern.compile("(?m)^" + time + " \\[main\\] WARN "
            + "io\\.github\\.prefixrouter\\.server\\.NodeMain - engine at http://127\\.0\\.0\\.1:"
            + port + " does not answer its health check yet$").matcher(errText).find(),
        "no warning on standard error, with a timestamp and the logger's name, that the engine"
            + " does not answer; standard error was:\n" + errText);
    for (String line : new String[] {"node n0 started: ", "node n0 stopped"}) {
      assertTrue(Pattern.compile("(?m)^" + time + " \\[[^\\]]+\\] INFO "
              + "io\\.github\\.prefixrouter\\.internal\\.route\\.RouterNode - "
              + Pattern.quote(line)).matcher(errText).find(),
          "no '" + line + "' logged on standard error; standard error was:\n" + errText);
    }
    assertTrue(outText.startsWith("node n0 serving: "), outText);
    assertTrue(outText.contains("node n0 stopped: requests=0 "), outText);
    assertTrue(!LOG_LINE.matcher(outText).find(), "log lines on standard output:\n" + outText);
  }

  /**
   * A simulated cluster whose engine fails for a while, which its in-process nodes log as real
   * ones do (each node's start, the engine failing and succeeding again), prints its table and
   * no log line, on standard output or standard error.
   */
  @Test
  void aSimulatorPrintsNoLogLines(@TempDir Path dir) throws Exception {
    Path out = dir.resolve("out");
    Path err = dir.resolve("err");
    Process p = new ProcessBuilder(java(StallSimMain.class, "--scenario", "fail", "--seeds", "1",
        "--rate", "5", "--fail-seconds", "30", "--failure-limits", "3"))
        .redirectOutput(out.toFile()).redirectError(err.toFile()).start();
    try {
      assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the simulator did not end within 120 s");
    } finally {
      p.destroyForcibly();
    }
    String outText = Files.readString(out, StandardCharsets.UTF_8);
    String errText = Files.readString(err, StandardCharsets.UTF_8);
    assertEquals(0, p.exitValue(), errText);
    // the run has something to log: with the limit, n0 took its engine for failing (a spell)
    String row = outText.lines().filter(l -> l.startsWith("   1      3 ")).findFirst()
        .orElseThrow(() -> new AssertionError("no row of limit 3:\n" + outText));
    String[] cells = row.trim().split("\\s+");
    assertTrue(Integer.parseInt(cells[cells.length - 2]) > 0, "no failing spell:\n" + outText);
    assertTrue(!LOG_LINE.matcher(outText).find(),
        "log lines on the simulator's standard output:\n" + outText);
    assertEquals("", errText, "the simulator wrote on standard error");
  }
}
