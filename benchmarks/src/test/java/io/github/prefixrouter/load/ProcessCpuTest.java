package io.github.prefixrouter.load;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.github.prefixrouter.internal.json.Json;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ProcessCpuTest {

  /**
   * A /proc/PID/stat line of process {@code pid} named {@code comm}, with utime and stime
   * (fields 14 and 15) as given and the other fields as a running JVM has them.
   */
  private static String statLine(long pid, String comm, long utime, long stime) {
    return pid + " (" + comm + ") S 1 " + pid + " " + pid + " 0 -1 4194560 52311 0 3 0 "
        + utime + " " + stime + " 0 0 20 0 31 0 4171 3671498752 58843 18446744073709551615 1 1 0 0"
        + " 0 0 0 4096 16796879 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
  }

  /**
   * The command name may hold spaces and parentheses: the fields are counted from its closing
   * parenthesis, the last one of the line, not from the line's spaces or its first ')'.
   */
  @Test
  void theTimesAreCountedFromTheCommandNamesClosingParenthesis() {
    assertEquals(287, ProcessCpu.ticks(statLine(12345, "java", 250, 37)));
    assertEquals(287, ProcessCpu.ticks(statLine(12345, "my (od) d) 3 4", 250, 37)),
        "a command name with spaces and parentheses shifted the fields");
    assertEquals(7, ProcessCpu.ticks(statLine(7, ") 1 2 3 4 5 6 (", 3, 4)),
        "a command name that looks like fields shifted them");
  }

  @Property(tries = 300)
  void anyCommandNameLeavesTheTimesAsTheyWere(@ForAll("commandNames") String comm,
      @ForAll @LongRange(min = 0, max = Long.MAX_VALUE / 2) long utime,
      @ForAll @LongRange(min = 0, max = Long.MAX_VALUE / 2) long stime) {
    assertEquals(utime + stime, ProcessCpu.ticks(statLine(4321, comm, utime, stime)),
        "command name '" + comm + "'");
  }

  /** Names of up to 15 characters, as the kernel keeps them, of the ones that shift fields. */
  @Provide
  Arbitrary<String> commandNames() {
    return Arbitraries.strings().withChars("() 0123456789-Sjava.:").ofMinLength(0).ofMaxLength(15);
  }

  @Test
  void aLineThatIsNotOneIsRefusedSayingWhy() {
    assertTrue(assertThrows(IllegalArgumentException.class, () -> ProcessCpu.ticks(""))
        .getMessage().startsWith("not a /proc/PID/stat line"));
    assertTrue(assertThrows(IllegalArgumentException.class,
        () -> ProcessCpu.ticks("12 (java) S 1 2 3")).getMessage().contains("without utime and stime"));
    assertTrue(assertThrows(IllegalArgumentException.class,
        () -> ProcessCpu.ticks(statLine(1, "java", 5, 6).replace(" 5 6 ", " 5 x "))).getMessage()
        .contains("not tick counts"));
  }

  private static void writeStat(Path proc, long pid, long utime, long stime) throws Exception {
    Files.createDirectories(proc.resolve(Long.toString(pid)));
    Files.writeString(proc.resolve(pid + "/stat"), statLine(pid, "java", utime, stime));
  }

  private static Map<String, List<Long>> groups() {
    Map<String, List<Long>> g = new LinkedHashMap<>();
    g.put("nodes", List.of(11L, 12L));
    g.put("relays", List.of(21L));
    return g;
  }

  /**
   * Each group's time is the sum of its processes' utime and stime from the start to the stop,
   * in ticks of 1/100 s here, over the measured requests.
   */
  @Test
  void aGroupsTimeIsItsProcessesDifferenceOverTheRequests(@TempDir Path proc) throws Exception {
    writeStat(proc, 11, 1000, 200);
    writeStat(proc, 12, 3000, 400);
    writeStat(proc, 21, 50, 50);
    ProcessCpu cpu = new ProcessCpu(proc, groups(), () -> 100L);
    cpu.start();
    writeStat(proc, 11, 1100, 230);  // 130 ticks
    writeStat(proc, 12, 3200, 450);  // 250 ticks
    writeStat(proc, 21, 60, 55);     // 15 ticks
    cpu.stop();
    assertEquals(3.8, cpu.seconds("nodes"), 1e-12);
    assertEquals(0.15, cpu.seconds("relays"), 1e-12);
    assertEquals(null, cpu.unmeasured());
    assertEquals("cpu during the measured requests: nodes (2 processes) 3.80 s, 19.00 ms/request;"
        + " relays (1 process) 0.15 s, 0.75 ms/request" + System.lineSeparator(), cpu.report(200));
    Map<?, ?> back = (Map<?, ?>) Json.parse(Json.write(cpu.json(200)));
    Map<?, ?> perRequest = (Map<?, ?>) back.get("cpu_ms_per_request");
    assertEquals(19.0, ((Number) perRequest.get("nodes")).doubleValue(), 1e-9, back.toString());
    assertEquals(0.75, ((Number) perRequest.get("relays")).doubleValue(), 1e-9, back.toString());
    assertEquals(null, back.get("cpu_unmeasured"), back.toString());
  }

  /** Without /proc every group is "-", and why is said once. */
  @Test
  void withoutProcEveryGroupIsADashAndWhyIsSaidOnce(@TempDir Path tmp) {
    Path proc = tmp.resolve("proc");
    ProcessCpu cpu = new ProcessCpu(proc, groups(), () -> 100L);
    cpu.start();
    cpu.stop();
    String why = "no " + proc + " (the CPU time is read from Linux's /proc/PID/stat)";
    assertEquals("cpu during the measured requests: nodes (2 processes) -; relays (1 process) -"
        + " (no figure: " + why + ")" + System.lineSeparator(), cpu.report(10));
    Map<?, ?> back = (Map<?, ?>) Json.parse(Json.write(cpu.json(10)));
    assertEquals(Map.of("nodes", Json.NULL, "relays", Json.NULL), back.get("cpu_ms_per_request"));
    assertEquals(why, back.get("cpu_unmeasured"));
  }

  /**
   * A process that is gone by the end (a node that stopped) leaves its group without a figure,
   * saying which; the other group keeps its own. An unknown clock tick leaves every group
   * without one.
   */
  @Test
  void aProcessGoneOrAnUnknownTickLeavesItsGroupsWithoutAFigure(@TempDir Path proc)
      throws Exception {
    writeStat(proc, 11, 1, 1);
    writeStat(proc, 12, 1, 1);
    writeStat(proc, 21, 1, 1);
    ProcessCpu cpu = new ProcessCpu(proc, groups(), () -> 100L);
    cpu.start();
    Files.delete(proc.resolve("12/stat"));
    cpu.stop();
    assertTrue(Double.isNaN(cpu.seconds("nodes")), "nodes: " + cpu.seconds("nodes"));
    assertEquals(0.0, cpu.seconds("relays"));
    assertEquals("no " + proc.resolve("12/stat") + " (the process is not there)", cpu.unmeasured());

    ProcessCpu noTick = new ProcessCpu(proc, groups(), () -> {
      throw new java.io.IOException("exit status 1, printed ''");
    });
    noTick.start();
    noTick.stop();
    assertTrue(Double.isNaN(noTick.seconds("relays")));
    assertEquals("the clock tick is unknown (getconf CLK_TCK: exit status 1, printed '')",
        noTick.unmeasured());
  }

  /** No group asked for: nothing printed, nothing in the JSON. */
  @Test
  void noGroupPrintsNothing(@TempDir Path proc) {
    ProcessCpu cpu = new ProcessCpu(proc, Map.of(), () -> {
      throw new AssertionError("the clock tick was asked for");
    });
    cpu.start();
    cpu.stop();
    assertEquals("", cpu.report(5));
    assertEquals(Map.of(), cpu.json(5));
  }

  /**
   * This process's time read from /proc/self/stat with getconf's tick agrees with the JDK's own
   * figure for it (which converts with the C library's tick), within a tick.
   */
  @Test
  void theTimeReadAgreesWithTheJdksForThisProcess() throws Exception {
    assumeTrue(Files.isRegularFile(Path.of("/proc/self/stat")), "Linux's /proc only");
    long hz = ProcessCpu.clockTicksPerSecond();
    long pid = ProcessHandle.current().pid();
    ProcessCpu cpu = new ProcessCpu(Path.of("/proc"), Map.of("self", List.of(pid)), () -> hz);
    long t0 = ProcessCpu.ticks(Files.readString(Path.of("/proc/" + pid + "/stat")));
    Duration jdk = ProcessHandle.current().info().totalCpuDuration().orElseThrow();
    long t1 = ProcessCpu.ticks(Files.readString(Path.of("/proc/" + pid + "/stat")));
    double jdkSeconds = jdk.toNanos() / 1e9;
    assertTrue(jdkSeconds >= (t0 - 1) / (double) hz && jdkSeconds <= (t1 + 1) / (double) hz,
        "the JDK says " + jdkSeconds + " s, /proc " + t0 + " to " + t1 + " ticks at " + hz + "/s");
    cpu.start();
    cpu.stop();
    assertTrue(cpu.seconds("self") >= 0, "seconds " + cpu.seconds("self"));
  }
}
