package io.github.prefixrouter.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.bench.gossip.GossipBenchmarkMain;
import io.github.prefixrouter.bench.kvevents.EngineTreeHeapMain;
import io.github.prefixrouter.bench.kvevents.KvEventBenchmarkMain;
import io.github.prefixrouter.bench.netdelay.DelayRelayMain;
import io.github.prefixrouter.bench.route.RouteBenchmarkMain;
import io.github.prefixrouter.bench.route.RouteLatencyLoopMain;
import io.github.prefixrouter.bench.route.RouteStagesMain;
import io.github.prefixrouter.bench.scope.ScopeSimMain;
import io.github.prefixrouter.bench.slots.SlotSimMain;
import io.github.prefixrouter.bench.stall.StallSimMain;
import io.github.prefixrouter.bench.stream.StreamSimMain;
import io.github.prefixrouter.bench.transport.ForwardOverheadMain;
import io.github.prefixrouter.bench.transport.LoopbackLatencyMain;
import io.github.prefixrouter.bench.tree.TreeAbMain;
import io.github.prefixrouter.bench.tree.TreeBenchmarkMain;
import io.github.prefixrouter.sim.PaperMain;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Every main of the benchmarks answers {@code --help} and {@code -h} with its usage, naming each
 * flag it accepts, and exit code 0, in a JVM of its own (it exits). They used to stop with
 * {@code error: unknown flag --help} and exit code 2 (all but paper and tree).
 */
class MainsHelpTest {

  /** Each main and the flags it accepts, written out here rather than read from the mains. */
  private static final Map<Class<?>, List<String>> FLAGS = new LinkedHashMap<>();

  static {
    FLAGS.put(PaperMain.class, List.of("--mmlu", "--seed", "--nodes", "--rate", "--requests",
        "--warmup", "--zipf", "--delays", "--jitter", "--loss", "--output-tokens", "--capacity",
        "--slots", "--block-size", "--prefill-overhead-ms", "--prefill-ms-per-token",
        "--decode-ms-per-token", "--policies", "--distributions", "--window", "--threads",
        "--out", "--no-plots"));
    FLAGS.put(TreeBenchmarkMain.class, List.of("--mmlu", "--full", "--out"));
    FLAGS.put(TreeAbMain.class, List.of("--mmlu", "--rounds", "--workload"));
    FLAGS.put(GossipBenchmarkMain.class, List.of("--mmlu", "--nodes", "--rate",
        "--capacity-tokens", "--fresh-capacity-tokens", "--snapshot-mode-measure-s",
        "--warmup-s", "--measure-s", "--fanout", "--seed", "--delay-ms", "--out", "--sizes",
        "--quick", "--skip-dissemination", "--message-bytes",
        "--message-size-nodes"));
    FLAGS.put(RouteBenchmarkMain.class, List.of("--full", "--gc", "--out", "--peers", "--tokens",
        "--workload"));
    FLAGS.put(RouteLatencyLoopMain.class, List.of());
    FLAGS.put(RouteStagesMain.class, List.of());
    FLAGS.put(EngineTreeHeapMain.class, List.of());
    FLAGS.put(ScopeSimMain.class, List.of("--seeds", "--requests", "--adapters", "--prompts",
        "--rate"));
    FLAGS.put(SlotSimMain.class, List.of("--seeds", "--slots", "--requests", "--prompts",
        "--zipf", "--rate", "--capacity", "--modes"));
    FLAGS.put(LoopbackLatencyMain.class, List.of("--rounds", "--n"));
    FLAGS.put(ForwardOverheadMain.class, List.of("--n"));
    FLAGS.put(StreamSimMain.class, List.of("--requests", "--rounds", "--seed", "--rate",
        "--warmup"));
    FLAGS.put(StallSimMain.class, List.of("--seeds", "--rate", "--scenario", "--hang-seconds",
        "--stall-timeouts", "--fail-seconds", "--failure-limits", "--fail-ms"));
    FLAGS.put(DelayRelayMain.class, List.of("--listen", "--target", "--delay-ms"));
  }

  /** The exit code, standard output and standard error of {@code main} run with {@code args}. */
  private static String[] run(Class<?> main, String... args) throws Exception {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "-Djava.awt.headless=true", "-cp", System.getProperty("java.class.path"),
        main.getName()));
    cmd.addAll(List.of(args));
    Process p = new ProcessBuilder(cmd).start();
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), main.getSimpleName() + " did not stop");
    return new String[] {String.valueOf(p.exitValue()), out, err};
  }

  /**
   * A command line with an unknown flag is refused, with exit code 2, also when {@code --help}
   * follows it (the flag is reported, as common command-line tools do), and the refusal says
   * where the flags are listed: it said only {@code error: unknown flag --ful}.
   */
  @Test
  void aRefusalPointsToHelp() throws Exception {
    for (String[] args : new String[][] {{"--ful"}, {"--ful", "--help"}}) {
      String[] r = run(TreeBenchmarkMain.class, args);
      assertEquals("2", r[0], String.join(" ", args) + ": " + r[2]);
      assertTrue(r[2].contains("error: unknown flag --ful" + System.lineSeparator()), r[2]);
      assertTrue(r[2].contains("--help"), String.join(" ", args) + ": " + r[2]);
      assertEquals("", r[1]);
    }
  }

  @Test
  void everyMainAnswersHelpWithItsFlagsAndExitCode0() throws Exception {
    for (Map.Entry<Class<?>, List<String>> e : FLAGS.entrySet()) {
      String name = e.getKey().getSimpleName();
      for (String help : new String[] {"--help", "-h"}) {
        String[] r = run(e.getKey(), help);
        assertEquals("0", r[0], name + " " + help + ": " + r[2]);
        assertTrue(r[1].toLowerCase().startsWith("usage: "), name + " " + help + ": " + r[1]);
        for (String flag : e.getValue()) {
          assertTrue(r[1].contains("  " + flag + " ") || r[1].contains("  " + flag + "\n")
              || r[1].contains("[" + flag + " ") || r[1].contains("[" + flag + "]"),
              name + " " + help + " does not name " + flag + ":\n" + r[1]);
        }
      }
    }
  }

  /**
   * The JMH main's usage names the JMH flags it takes and where JMH's own help is: -h was
   * refused with exit code 2 (JMH's runner ignores it and would run every benchmark), and
   * --help was taken for a JMH flag it does not know.
   */
  @Test
  void theJmhMainAnswersHelpWithItsUsage() throws Exception {
    for (String help : new String[] {"--help", "-h"}) {
      String[] r = run(KvEventBenchmarkMain.class, help);
      assertEquals("0", r[0], help + ": " + r[2]);
      assertTrue(r[1].startsWith("usage: benchmarks/run kvevents [JMH flags]\n"), r[1]);
      assertTrue(r[1].contains("-bm avgt") && r[1].contains("benchmarks/run jmh -h"), r[1]);
    }
  }

  /** Stands for JMH's main in {@link #theJmhCommandGivesJmhMinusHForHelp}: prints its arguments. */
  public static final class PrintArgs {
    public static void main(String[] args) {
      System.out.print(String.join(" ", args));
    }
  }

  /**
   * {@code benchmarks/run jmh --help} prints JMH's help and exits 0, as {@code -h} does: JMH's
   * option parser knows only {@code -h}, and refused {@code --help} ("help is not a recognized
   * option", exit code 1). The script runs here against a jar of its own whose main prints the
   * arguments JMH's would get (the jar is newer than every source the script looks at, so it
   * builds nothing).
   */
  @Test
  void theJmhCommandGivesJmhMinusHForHelp(@org.junit.jupiter.api.io.TempDir Path dir)
      throws Exception {
    Path run = script(dir);
    for (String[] c : new String[][] {{"--help"}, {"-h"}, {".*Tree.*", "--help"},
        {".*Tree.*", "-f", "1"}}) {
      List<String> args = new ArrayList<>(List.of("jmh"));
      args.addAll(List.of(c));
      String[] r = runScript(run, args);
      assertEquals("0", r[0], List.of(c) + ": " + r[2]);
      String expected = List.of(c).contains("--help") ? "-h" : String.join(" ", c);
      assertEquals(expected, r[1], "what JMH's main got for jmh " + String.join(" ", c));
    }
  }

  /**
   * {@code benchmarks/run --help} (or {@code -h}) prints the script's commands to standard
   * output and exits 0, without building anything, as every command's {@code --help} does: it
   * was taken for an unknown command, the commands printed to standard error with exit code 2
   * (after building the core and the benchmarks if they were not up to date).
   */
  @Test
  void theScriptAnswersHelpWithItsCommands(@org.junit.jupiter.api.io.TempDir Path dir)
      throws Exception {
    Path run = script(dir);
    java.nio.file.Files.delete(run.resolveSibling("target").resolve("benchmarks.jar"));
    java.nio.file.Files.createDirectories(dir.resolve("src/main")); // no jar: "build" first
    for (String help : new String[] {"--help", "-h"}) {
      String[] r = runScript(run, List.of(help));
      assertEquals("0", r[0], help + ": " + r[2]);
      assertEquals("", r[2], help);
      assertTrue(r[1].contains("benchmarks/run paper") && r[1].contains("benchmarks/run jmh")
          && r[1].contains("benchmarks/run delay-relay")
          && r[1].contains("benchmarks/run COMMAND --help"), r[1]);
    }
  }

  /** A copy of benchmarks/run in {@code dir}, with a jar whose main prints its arguments. */
  private static Path script(Path dir) throws Exception {
    Path bench = java.nio.file.Files.createDirectories(dir.resolve("benchmarks"));
    java.nio.file.Files.copy(Path.of("run"), bench.resolve("run"));
    Path target = java.nio.file.Files.createDirectories(bench.resolve("target"));
    java.util.jar.Manifest m = new java.util.jar.Manifest();
    m.getMainAttributes().put(java.util.jar.Attributes.Name.MANIFEST_VERSION, "1.0");
    m.getMainAttributes().put(java.util.jar.Attributes.Name.MAIN_CLASS,
        PrintArgs.class.getName());
    m.getMainAttributes().put(java.util.jar.Attributes.Name.CLASS_PATH,
        PrintArgs.class.getProtectionDomain().getCodeSource().getLocation().toString());
    try (var jar = new java.util.jar.JarOutputStream(
        java.nio.file.Files.newOutputStream(target.resolve("benchmarks.jar")), m)) {
      // the manifest alone
    }
    return bench.resolve("run");
  }

  /**
   * The exit code, standard output and standard error of the script run with {@code args}; a
   * {@code mvn} that fails stands for the real one, so that a build is an error, never run.
   */
  private static String[] runScript(Path run, List<String> args) throws Exception {
    Path bin = java.nio.file.Files.createDirectories(run.getParent().resolve("bin"));
    Path mvn = bin.resolve("mvn");
    if (!java.nio.file.Files.exists(mvn)) {
      java.nio.file.Files.writeString(mvn, "#!/bin/sh\necho \"mvn $*\" >&2\nexit 3\n");
      mvn.toFile().setExecutable(true);
    }
    List<String> cmd = new ArrayList<>(List.of("bash", run.toString()));
    cmd.addAll(args);
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.environment().put("PATH", bin + ":" + Path.of(System.getProperty("java.home"), "bin")
        + ":" + System.getenv("PATH"));
    Process p = pb.start();
    p.getOutputStream().close();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(60, TimeUnit.SECONDS), "benchmarks/run did not stop");
    return new String[] {String.valueOf(p.exitValue()), out, err};
  }

  /** The defaults shown are those a run without the flag takes. */
  @Test
  void theDefaultsAreShownWithTheFlags() throws Exception {
    String out = run(SlotSimMain.class, "--help")[1];
    assertTrue(out.matches("(?s).*\\n  --seeds VALUE +\\(default 3\\)\\n.*"), out);
    assertTrue(out.matches("(?s).*\\n  --rate VALUE +\\(default 4250\\)\\n.*"), out);
    assertTrue(out.matches("(?s).*\\n  --modes VALUE\\n.*"), out);
    out = run(TreeAbMain.class, "--help")[1];
    assertTrue(out.matches("(?s).*\\n  --rounds VALUE +\\(default 400\\)\\n.*"), out);
    out = run(GossipBenchmarkMain.class, "-h")[1];
    assertTrue(out.matches("(?s).*\\n  --sizes VALUE +\\(default 4,16,64,256,1024\\)\\n.*"), out);
    assertTrue(out.matches("(?s).*\\n  --quick\\n.*"), out);
    assertTrue(out.matches("(?s).*\\n  --message-bytes VALUE +\\(default 64k\\)\\n.*"), out);
    // the stall timeouts a run without --stall-timeouts compares were not shown
    out = run(StallSimMain.class, "--help")[1];
    assertTrue(out.matches("(?s).*\\n  --stall-timeouts VALUE +\\(default 0,30,10\\)\\n.*"),
        out);
    assertTrue(out.matches("(?s).*\\n  --failure-limits VALUE +\\(default 0,3\\)\\n.*"), out);
  }
}
