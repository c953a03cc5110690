package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The threads a node process starts as it gossips, on a host of 2 processors. The JDK's HTTP
 * client completes each {@code sendAsync} on {@code CompletableFuture}'s default executor: up to
 * JDK 24, the common fork-join pool if it has 2 threads or more, else a new thread for every
 * task, which the pool's default size (processors - 1) gives on 1 or 2 processors. Every gossip
 * message a node sent then started and ended a thread (about 30 a second per node of a
 * four-node cluster, 200 ms rounds). From JDK 25 the default executor is the common pool
 * whatever its size. Each case runs {@link CommonPoolProbe} in a fresh JVM told it has 2
 * processors.
 */
class CommonPoolTest {

  @Test
  void gossipStartsNoThreadPerMessageOnTwoProcessors() throws Exception {
    Map<String, Long> out = probe(List.of());
    assertTrue(out.get("messages") >= 10, "the nodes gossiped too little to tell: " + out);
    assertTrue(out.get("threads") * 10 < out.get("messages"), out.get("threads")
        + " threads started for " + out.get("messages") + " gossip messages sent (" + out
        + "): the HTTP client's completions each got a thread of their own");
    assertEquals(2, out.get("parallelism"),
        "NodeMain gives the common pool 2 threads when the command line does not size it: " + out);
  }

  /**
   * The host's own setting wins, and the probe sees a thread per message under it up to JDK 24
   * (from JDK 25, whose default executor is the common pool of any size, none).
   */
  @Test
  void aSizeSetOnTheCommandLineIsLeftAsItIs() throws Exception {
    Map<String, Long> out = probe(List.of("-Djava.util.concurrent.ForkJoinPool.common.parallelism=1"));
    assertEquals(1, out.get("parallelism"), out.toString());
    assertTrue(out.get("messages") >= 10, "the nodes gossiped too little to tell: " + out);
    if (Runtime.version().feature() < 25) {
      assertTrue(out.get("threads") >= out.get("messages") / 2, "with a common pool of 1 thread "
          + "the probe should see about a thread per message sent: " + out);
    } else {
      assertTrue(out.get("threads") * 10 < out.get("messages"), "from JDK 25 the common pool of 1 "
          + "thread takes the completions, and the probe should see no thread per message: " + out);
    }
  }

  private static Map<String, Long> probe(List<String> jvmFlags) throws Exception {
    List<String> options = new ArrayList<>(List.of("-Xmx256m", "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1", "-XX:ActiveProcessorCount=2"));
    options.addAll(jvmFlags);
    String text = ProbeJvm.run(options, CommonPoolProbe.class, List.of(), 90);
    Map<String, Long> out = new HashMap<>();
    for (String line : text.split("\n")) {
      String[] kv = line.trim().split(" ");
      if (kv.length == 2 && List.of("parallelism", "messages", "threads").contains(kv[0])) {
        out.put(kv[0], Long.parseLong(kv[1]));
      }
    }
    assertEquals(3, out.size(), text);
    return out;
  }
}
