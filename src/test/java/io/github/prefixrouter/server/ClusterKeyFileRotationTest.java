package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.transport.http.HttpTransport;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two {@link NodeMain} processes' nodes rotate their cluster key by editing their key files, in
 * the three steps of docs/deployment.md: each node re-reads its file and the two keep gossiping
 * with no message refused at any step.
 */
class ClusterKeyFileRotationTest {

  private static final String OLD = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  private static final String NEW = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf";

  @TempDir Path dir;

  private static String id(String hex) throws Exception {
    byte[] d = MessageDigest.getInstance("SHA-256").digest(HexFormat.of().parseHex(hex));
    return HexFormat.of().formatHex(d, 0, 4);
  }

  private static NodeMain.Running start(String id, Path keyFile, String seeds) throws Exception {
    return NodeMain.start(NodeOptions.parse(new String[] {"--id", id, "--listen", "127.0.0.1:0",
        "--client", "127.0.0.1:0", "--cluster-key-file", keyFile.toString(),
        "--cluster-key-check-ms", "50", "--gossip-interval-ms", "50", "--seeds", seeds}, Map.of()));
  }

  private static void await(String what, NodeMain.Running r, Predicate<HttpTransport.Stats> p)
      throws InterruptedException {
    for (int i = 0; i < 400 && !p.test(r.transport.stats()); i++) {
      Thread.sleep(25);
    }
    assertTrue(p.test(r.transport.stats()), what + ": " + r.transport.stats());
  }

  /** Both nodes receive further gossip from each other. */
  private static void bothHear(String step, NodeMain.Running a, NodeMain.Running b)
      throws InterruptedException {
    long ma = a.transport.stats().messagesReceived();
    long mb = b.transport.stats().messagesReceived();
    await(step + ": a hears b", a, s -> s.messagesReceived() >= ma + 3);
    await(step + ": b hears a", b, s -> s.messagesReceived() >= mb + 3);
  }

  @Test
  void nodesRotateTheirKeyByEditingTheirKeyFilesWithoutRefusingAMessage() throws Exception {
    Path ka = dir.resolve("a.key");
    Path kb = dir.resolve("b.key");
    Files.writeString(ka, OLD + "\n");
    Files.writeString(kb, OLD + "\n");
    try (NodeMain.Running a = start("a", ka, "");
        NodeMain.Running b = start("b", kb, "a@" + a.transport.localAddress().address())) {
      bothHear("before", a, b);
      List<NodeMain.Running> nodes = List.of(a, b);
      List<Path> files = List.of(ka, kb);
      String[][] steps = {{OLD, NEW}, {NEW, OLD}, {NEW}};
      for (String[] step : steps) {
        Map<String, Integer> expected = new java.util.LinkedHashMap<>();
        for (int k = 0; k < step.length; k++) {
          expected.put(id(step[k]), k == 0 ? 1 : 0);
        }
        for (int n = 0; n < nodes.size(); n++) {
          Files.writeString(files.get(n), "# rotation\n" + String.join("\n", step) + "\n");
          await("node " + n + " reloads " + expected, nodes.get(n),
              s -> List.copyOf(s.clusterKeys().entrySet()).equals(List.copyOf(expected.entrySet())));
          bothHear(String.join(",", step) + " at node " + n, a, b);
        }
      }
      for (NodeMain.Running r : nodes) {
        assertEquals(0, r.transport.stats().authFailures(), "no message refused");
        assertEquals(3, r.transport.stats().keyUpdates());
        assertTrue(r.transport.stats().otherKeyAuthentications() > 0);
      }
      // a typo leaves the keys in use, and the nodes talking
      Files.writeString(ka, NEW + "\nnot a key\n");
      Thread.sleep(300);
      bothHear("after a typo", a, b);
      assertEquals(Map.of(id(NEW), 1), a.transport.stats().clusterKeys());
    }
  }
}
