package io.github.prefixrouter.load;

import io.github.prefixrouter.internal.json.Json;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * The CPU time that groups of processes on this machine (the node processes, the relays) spend
 * between two readings, as Linux's {@code /proc/PID/stat} gives it: the load generator reads it
 * before and after the measured requests and prints it per request.
 *
 * <p>A process's time is its {@code utime} plus {@code stime} (the 14th and 15th fields of
 * {@code /proc/PID/stat}, in clock ticks of 1/{@code getconf CLK_TCK} s, 10 ms on usual Linux):
 * user and system time of all its threads, those that have ended included, for everything the
 * process did in between (its requests, gossip, garbage collection, JIT compilation). Where it
 * cannot be read (no {@code /proc}, a process that is not there, {@code getconf} missing) the
 * group's figure is none, and {@link #unmeasured} says why.
 */
final class ProcessCpu {

  private final Path proc;
  private final Map<String, List<Long>> groups;
  private final Callable<Long> ticksPerSecond;
  private final Map<String, Long> before = new LinkedHashMap<>();
  private final Map<String, Long> spent = new LinkedHashMap<>();
  private long hz;
  private String unmeasured;

  /**
   * @param proc where {@code /proc} is ({@code Path.of("/proc")} but in tests)
   * @param groups the groups' names to their process ids, in the order they are reported
   * @param ticksPerSecond the clock ticks per second ({@link #clockTicksPerSecond})
   */
  ProcessCpu(Path proc, Map<String, List<Long>> groups, Callable<Long> ticksPerSecond) {
    this.proc = proc;
    this.groups = new LinkedHashMap<>(groups);
    this.ticksPerSecond = ticksPerSecond;
  }

  /** Reads every group's time at the start; a group that cannot be read is left unmeasured. */
  void start() {
    if (groups.isEmpty()) {
      return;
    }
    try {
      hz = ticksPerSecond.call();
      if (hz <= 0) {
        throw new IOException("clock ticks per second " + hz);
      }
    } catch (Exception e) {
      unmeasured = "the clock tick is unknown (getconf CLK_TCK: " + e.getMessage() + ")";
      return;
    }
    for (Map.Entry<String, List<Long>> g : groups.entrySet()) {
      try {
        before.put(g.getKey(), ticks(g.getValue()));
      } catch (IOException | IllegalArgumentException e) {
        unmeasured(e);
      }
    }
  }

  /** Reads the groups read at the start again: their time is the difference. */
  void stop() {
    for (Map.Entry<String, Long> g : before.entrySet()) {
      try {
        spent.put(g.getKey(), ticks(groups.get(g.getKey())) - g.getValue());
      } catch (IOException | IllegalArgumentException e) {
        unmeasured(e);
      }
    }
  }

  private void unmeasured(Exception e) {
    if (unmeasured == null) {
      unmeasured = e instanceof NoSuchFileException && !Files.isDirectory(proc)
          ? "no " + proc + " (the CPU time is read from Linux's /proc/PID/stat)"
          : e instanceof NoSuchFileException ? "no " + e.getMessage() + " (the process is not there)"
          : e.getMessage();
    }
  }

  /** The groups' time between {@link #start} and {@link #stop}, in seconds; NaN if unmeasured. */
  double seconds(String group) {
    Long t = spent.get(group);
    return t == null ? Double.NaN : t / (double) hz;
  }

  /**
   * Why a group has no figure (the first reason met), or null if every group has one (or none
   * was asked for).
   */
  String unmeasured() {
    return unmeasured;
  }

  /**
   * The line printed after the run: per group its processes, seconds and milliseconds per
   * request over {@code requests} ("-" for a group without a figure, and why, once); empty if
   * no group was asked for.
   */
  String report(int requests) {
    if (groups.isEmpty()) {
      return "";
    }
    StringBuilder sb = new StringBuilder("cpu during the measured requests:");
    String sep = " ";
    for (String g : groups.keySet()) {
      double s = seconds(g);
      int n = groups.get(g).size();
      sb.append(sep).append(g).append(" (").append(n).append(n == 1 ? " process) " : " processes) ")
          .append(Double.isNaN(s) ? "-"
              : String.format(Locale.ROOT, "%.2f s, %.2f ms/request", s, 1000 * s / requests));
      sep = "; ";
    }
    if (unmeasured != null) {
      sb.append(" (no figure: ").append(unmeasured).append(')');
    }
    return sb.append(System.lineSeparator()).toString();
  }

  /**
   * The figures for {@code --json}: {@code cpu_ms_per_request}, each group's milliseconds per
   * request over {@code requests} (null without a figure), and {@code cpu_unmeasured}, why a
   * group has none, if one has none; nothing if no group was asked for.
   */
  Map<String, Object> json(int requests) {
    Map<String, Object> j = new LinkedHashMap<>();
    if (groups.isEmpty()) {
      return j;
    }
    Map<String, Object> perRequest = new LinkedHashMap<>();
    for (String g : groups.keySet()) {
      double s = seconds(g);
      perRequest.put(g, Double.isNaN(s) ? Json.NULL
          : (Object) (1000 * s / requests));
    }
    j.put("cpu_ms_per_request", perRequest);
    if (unmeasured != null) {
      j.put("cpu_unmeasured", unmeasured);
    }
    return j;
  }

  /** The ticks of {@code pids} together, now. */
  private long ticks(List<Long> pids) throws IOException {
    long sum = 0;
    for (long pid : pids) {
      Path stat = proc.resolve(Long.toString(pid)).resolve("stat");
      sum += ticks(Files.readString(stat, StandardCharsets.UTF_8));
    }
    return sum;
  }

  /**
   * A process's user and system time in clock ticks, from its {@code /proc/PID/stat} line:
   * {@code PID (COMM) STATE ...}, whose command name may hold spaces and parentheses, so the
   * fields are counted from the last {@code )}; {@code utime} and {@code stime} are the 11th
   * and 12th after it.
   *
   * @throws IllegalArgumentException if the line is not one
   */
  static long ticks(String statLine) {
    int open = statLine.indexOf(" (");
    int close = statLine.lastIndexOf(')');
    if (open < 0 || close < open) {
      throw new IllegalArgumentException("not a /proc/PID/stat line: '" + statLine.strip() + "'");
    }
    String[] f = statLine.substring(close + 1).strip().split(" +");
    if (f.length < 13) {
      throw new IllegalArgumentException("a /proc/PID/stat line of " + (f.length + 2)
          + " fields, without utime and stime: '" + statLine.strip() + "'");
    }
    try {
      long utime = Long.parseLong(f[11]);
      long stime = Long.parseLong(f[12]);
      if (utime < 0 || stime < 0) {
        throw new NumberFormatException();
      }
      return utime + stime;
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException("a /proc/PID/stat line whose utime and stime are '"
          + f[11] + "' and '" + f[12] + "', not tick counts", e);
    }
  }

  /**
   * The clock ticks per second of {@code /proc/PID/stat}'s times, as {@code getconf CLK_TCK}
   * prints it (the JDK has no call for it).
   *
   * @throws IOException if getconf cannot be run or prints no number
   */
  static long clockTicksPerSecond() throws IOException, InterruptedException {
    Process p = new ProcessBuilder("getconf", "CLK_TCK").redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
    int status = p.waitFor();
    try {
      if (status == 0) {
        return Long.parseLong(out);
      }
    } catch (NumberFormatException e) {
      // said below
    }
    throw new IOException("exit status " + status + ", printed '" + out + "'");
  }

  /**
   * The process ids of a {@code --node-pids} or {@code --relay-pids} value: comma-separated
   * whole numbers above 0.
   *
   * @throws IllegalArgumentException if it has none, or an entry that is not one
   */
  static List<Long> pids(String value) {
    List<Long> pids = new ArrayList<>();
    for (String s : value.split(",", -1)) {
      long pid;
      try {
        pid = Long.parseLong(s.strip());
      } catch (NumberFormatException e) {
        pid = 0;
      }
      if (pid <= 0) {
        throw new IllegalArgumentException("needs process ids, comma-separated, was '" + value
            + "'");
      }
      pids.add(pid);
    }
    return pids;
  }
}
