package io.github.prefixrouter.server;

import static io.github.prefixrouter.testing.LoggedLines.logged;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ClusterKeysTest {

  private static final String A = "00112233445566778899aabbccddeeff";
  private static final String B = "ffeeddccbbaa99887766554433221100";
  private static final String C = "0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f";

  @TempDir Path dir;

  private static List<String> hex(List<byte[]> keys) {
    return keys.stream().map(k -> HexFormat.of().formatHex(k)).toList();
  }

  private int files;

  /** A new file holding {@code text}. */
  private Path file(String text) throws Exception {
    Path f = dir.resolve("cluster-" + files++ + ".key");
    Files.writeString(f, text, StandardCharsets.US_ASCII);
    return f;
  }

  @Test
  void aKeyFileHoldsHexKeysOnePerLineTheFirstSigning() throws Exception {
    assertEquals(List.of(A), hex(ClusterKeys.read(file(A + "\n"))));
    assertEquals(List.of(A, B), hex(ClusterKeys.read(file(
        "# rotation to B, step 1\r\n" + A + "\r\n\r\n  " + B.toUpperCase() + "  \r\n"))));
  }

  @Test
  void aRawKeyIsStillOneKeyOfAllItsBytes() throws Exception {
    byte[] raw = new byte[32];
    for (int i = 0; i < raw.length; i++) {
      raw[i] = (byte) (i * 37 + 1); // not printable text
    }
    Path f = dir.resolve("raw.key");
    Files.write(f, raw);
    List<byte[]> keys = ClusterKeys.read(f);
    assertEquals(1, keys.size());
    assertArrayEquals(raw, keys.get(0));
    // a passphrase of one line is a raw key too, its newline included, as it always was read
    List<byte[]> pass = ClusterKeys.read(file("correct horse battery staple\n"));
    assertArrayEquals("correct horse battery staple\n".getBytes(StandardCharsets.US_ASCII), pass.get(0));
  }

  @Test
  void aTypoInAFileOfSeveralKeysIsAnErrorNamingTheLine() throws Exception {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> ClusterKeys.read(file(A + "\n# next\n" + B.substring(1) + "\n")));
    assertTrue(e.getMessage().contains("line 3 of --cluster-key-file"), e.getMessage());
    // a key too short was refused by the transport, which named it "accepted cluster key 1":
    // the second key, on line 4 here
    IllegalArgumentException shortKey = assertThrows(IllegalArgumentException.class,
        () -> ClusterKeys.read(file(A + "\n\n# next\n" + B.substring(2) + "\n")));
    assertTrue(shortKey.getMessage().startsWith("line 4 of --cluster-key-file "),
        shortKey.getMessage());
    assertTrue(shortKey.getMessage().endsWith(" is a key of 15 bytes: a cluster key has at least"
        + " 16 (32 hex digits)"), shortKey.getMessage());
    IllegalArgumentException odd = assertThrows(IllegalArgumentException.class,
        () -> ClusterKeys.read(file(A.substring(1) + "\n")));
    assertTrue(odd.getMessage().contains("odd number of hex digits (31)"), odd.getMessage());
    IllegalArgumentException empty = assertThrows(IllegalArgumentException.class,
        () -> ClusterKeys.read(file("# nothing yet\n\n")));
    assertTrue(empty.getMessage().contains("holds no key"), empty.getMessage());
    IllegalArgumentException missing = assertThrows(IllegalArgumentException.class,
        () -> ClusterKeys.read(dir.resolve("absent.key")));
    assertTrue(missing.getMessage().contains("cannot read --cluster-key-file"), missing.getMessage());
  }

  /**
   * Another file named by mistake, or written over the key file (a keystore, a log), is refused
   * rather than read whole and taken for one raw key no peer has; the watch keeps the keys.
   */
  @Test
  void aFileLargerThanAnyKeyFileIsRefusedAndTheWatchKeepsItsKeys() throws Exception {
    byte[] big = new byte[ClusterKeys.MAX_FILE_BYTES + 1];
    new java.util.Random(1).nextBytes(big);
    Path f = dir.resolve("big.key");
    Files.write(f, big);
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ClusterKeys.read(f));
    assertTrue(e.getMessage().contains("is larger than 65536 bytes: not a key file"),
        e.getMessage());
    // the largest accepted: a key file with a long comment
    String commented = "#" + "c".repeat(ClusterKeys.MAX_FILE_BYTES - A.length() - 2) + "\n" + A;
    assertEquals(ClusterKeys.MAX_FILE_BYTES, commented.length());
    assertEquals(List.of(A), hex(ClusterKeys.read(file(commented))));

    Path watched = file(A + "\n");
    List<List<String>> applied = new ArrayList<>();
    ClusterKeys watch = new ClusterKeys(watched, ClusterKeys.read(watched),
        keys -> applied.add(hex(keys)));
    Files.write(watched, big);
    watch.check();
    assertEquals(List.of(), applied, "the keys in use stay");
    assertEquals(new ClusterKeys.Stats(0, 1), watch.stats());
  }

  /**
   * A key file an editor saved with a UTF-8 byte order mark holds the same hex keys: it was
   * taken for one raw key of all its bytes, put in use by the watch in place of the working
   * keys, and every peer was refused.
   */
  @Test
  void aByteOrderMarkBeforeHexKeysIsSkipped() throws Exception {
    byte[] bom = {(byte) 0xef, (byte) 0xbb, (byte) 0xbf};
    Path f = dir.resolve("bom.key");
    Files.write(f, concat(bom, (B + "\r\n" + A + "\r\n").getBytes(StandardCharsets.US_ASCII)));
    assertEquals(List.of(B, A), hex(ClusterKeys.read(f)));

    Path watched = file(A + "\n");
    List<List<String>> applied = new ArrayList<>();
    ClusterKeys watch = new ClusterKeys(watched, ClusterKeys.read(watched),
        keys -> applied.add(hex(keys)));
    Files.write(watched, concat(bom, (A + "\n" + B + "\n").getBytes(StandardCharsets.US_ASCII)));
    watch.check();
    watch.check(); // a second read confirms it
    assertEquals(List.of(List.of(A, B)), applied);
    // a passphrase after the mark stays a raw key of every byte, as it was always read
    byte[] pass =
        concat(bom, "correct horse battery staple\n".getBytes(StandardCharsets.US_ASCII));
    Path p = dir.resolve("pass.key");
    Files.write(p, pass);
    assertArrayEquals(pass, ClusterKeys.read(p).get(0));
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] out = java.util.Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  @Test
  void theEnvironmentVariableHoldsHexKeysSeparatedByCommas() {
    assertEquals(List.of(A, B), hex(ClusterKeys.parse(A + ", " + B, "ENV")));
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ClusterKeys.parse(A + ",", "ENV"));
    assertTrue(e.getMessage().contains("ENV must be hex, separated by commas"), e.getMessage());
  }

  @Test
  void theWatchAppliesChangedKeysOnlyAndKeepsTheKeysWhenTheFileIsBad() throws Exception {
    Path f = file(A + "\n");
    List<List<String>> applied = new ArrayList<>();
    ClusterKeys watch = new ClusterKeys(f, ClusterKeys.read(f), keys -> {
      if (keys.stream().anyMatch(k -> k.length < 16)) {
        throw new IllegalArgumentException("a key is too short");
      }
      applied.add(hex(keys));
    });
    watch.check();
    assertEquals(List.of(), applied, "unchanged");
    Files.writeString(f, "# step 1\n" + A + "\n" + B + "\n");
    watch.check();
    watch.check(); // a second read confirms it
    Files.writeString(f, "# step 1, comment edited\n\n" + A + "\n" + B + "\n");
    watch.check();
    assertEquals(List.of(List.of(A, B)), applied);
    Files.writeString(f, B + "\n" + A + "\n"); // step 2: the order names the signing key
    watch.check();
    watch.check();
    Files.writeString(f, B + "\nzz\n"); // a typo: keys stay, counted
    watch.check();
    watch.check();
    Files.writeString(f, B + "\n" + "00ff\n"); // a key too short: keys stay, counted
    watch.check();
    Files.delete(f);
    watch.check();
    assertEquals(List.of(List.of(A, B), List.of(B, A)), applied);
    assertEquals(new ClusterKeys.Stats(2, 4), watch.stats());
    Files.writeString(f, B + "\n" + C + "\n");
    watch.check();
    watch.check();
    assertEquals(List.of(B, C), applied.get(2));
    assertEquals(new ClusterKeys.Stats(3, 4), watch.stats());
  }

  /**
   * A key file edited in place can be read half-written: its keys are put in use only once two
   * reads in a row agree, and the keys in use stay until then. One read used to put them in
   * use, so that a read between an editor's writes could leave a partial key list in use (a
   * signing key without the others during a rotation) until the next check.
   */
  @Test
  void aChangedKeyFileIsPutInUseOnlyOnceTwoReadsAgree() throws Exception {
    Path f = file(A + "\n");
    List<List<String>> applied = new ArrayList<>();
    ClusterKeys watch = new ClusterKeys(f, ClusterKeys.read(f), keys -> applied.add(hex(keys)));
    Files.writeString(f, B + "\n"); // step 2 of a rotation, written in place: "B" so far
    assertTrue(watch.check(), "a second read is due");
    assertEquals(List.of(), applied, "a read that no second read confirms is not put in use");
    Files.writeString(f, B + "\n" + A + "\n"); // the editor's write completes
    assertTrue(watch.check());
    assertEquals(List.of(), applied, "this read differs from the last");
    assertFalse(watch.check());
    assertEquals(List.of(List.of(B, A)), applied, "two reads agree");
    assertFalse(watch.check(), "nothing changed since");
    assertEquals(new ClusterKeys.Stats(1, 0), watch.stats());
    // a change undone before a second read agreed is never put in use
    Files.writeString(f, C + "\n");
    watch.check();
    Files.writeString(f, B + "\n" + A + "\n");
    watch.check();
    watch.check();
    assertEquals(List.of(List.of(B, A)), applied);
    // a read that fails in between makes the next one start over
    Files.writeString(f, C + "\n");
    watch.check();
    Files.writeString(f, C + "\nzz\n");
    watch.check();
    Files.writeString(f, C + "\n");
    watch.check();
    assertEquals(List.of(List.of(B, A)), applied, "no two reads in a row agreed");
    watch.check();
    assertEquals(List.of(List.of(B, A), List.of(C)), applied);
    assertEquals(new ClusterKeys.Stats(2, 1), watch.stats());
    // keys read twice alike that the transport refuses: every such check counts a failure
    ClusterKeys refusing = new ClusterKeys(f, List.of(ClusterKeys.read(file(A)).get(0)), keys -> {
      throw new IllegalArgumentException("refused");
    });
    assertTrue(refusing.check());
    assertFalse(refusing.check());
    assertFalse(refusing.check());
    assertEquals(new ClusterKeys.Stats(0, 2), refusing.stats());
  }

  /** The node reads a changed file again {@link ClusterKeys#CONFIRM} later, until it is stable. */
  @Test
  void theNodeConfirmsAChangedFileSoonAfter() throws Exception {
    Path f = file(A + "\n");
    List<List<String>> applied = new ArrayList<>();
    ClusterKeys watch = new ClusterKeys(f, ClusterKeys.read(f), keys -> applied.add(hex(keys)));
    List<Long> delays = new ArrayList<>();
    List<Runnable> tasks = new ArrayList<>();
    io.github.prefixrouter.spi.Scheduler scheduler = (delay, task) -> {
      delays.add(delay);
      tasks.add(task);
      return () -> false;
    };
    NodeMain.checkKeys(scheduler, watch, 7);
    assertEquals(List.of(), tasks, "unchanged: nothing to confirm");
    Files.writeString(f, B + "\n");
    NodeMain.checkKeys(scheduler, watch, 7);
    assertEquals(List.of(7L), delays);
    Files.writeString(f, B + "\n" + A + "\n");
    tasks.remove(0).run();
    assertEquals(List.of(7L, 7L), delays, "changed again: read again");
    tasks.remove(0).run();
    assertEquals(List.of(List.of(B, A)), applied);
    assertEquals(List.of(), tasks, "confirmed: the reads stop");
  }

  /**
   * Keys the transport cannot put in use for a failure of this node's own, not of the file, are
   * a failed reload like keys it refuses: counted, logged once per distinct problem, the keys in
   * use kept, and tried again at the next check, so that they are put in use once they can be.
   * Such a failure is the host's JCA provider throwing as the keys' HmacSHA256 or their ids'
   * SHA-256 is set up (which {@code updateClusterKeys} throws as an
   * {@link IllegalStateException}), an {@link Error}, or a checked exception thrown undeclared.
   * Only an {@link IllegalArgumentException} was caught: anything else escaped the check into
   * the file watch's task, whose executor kept it in the task's future, counted and logged
   * nowhere.
   */
  @Test
  void keysThatCannotBeSetUpAreAFailedReloadCountedAndLoggedOnce() throws Exception {
    Path f = file(A + "\n");
    java.security.ProviderException token = new java.security.ProviderException("token removed");
    IllegalStateException provider = new IllegalStateException("HmacSHA256 cannot be set up with"
        + " cluster key 4ba68aa8 by the host's JCA providers: " + token, token);
    java.util.Deque<Throwable> toThrow = new java.util.ArrayDeque<>(List.of(provider, provider,
        new InternalError("token driver"), new java.io.IOException("token unreachable")));
    List<List<String>> applied = new ArrayList<>();
    ClusterKeys watch = new ClusterKeys(f, ClusterKeys.read(f), keys -> {
      Throwable t = toThrow.poll();
      if (t != null) {
        throw io.github.prefixrouter.contract.ThrowingCacheEventListener.<RuntimeException>undeclared(t);
      }
      applied.add(hex(keys));
    });
    Files.writeString(f, B + "\n" + A + "\n");
    List<String> escaped = new ArrayList<>();
    List<String> lines = logged("cluster keys", () -> {
      // the first read finds the change; each later one confirms it and tries to put it in use
      for (int i = 1; i <= 6; i++) {
        try {
          watch.check();
        } catch (Throwable e) {
          escaped.add("check " + i + " threw " + e);
        }
      }
    });
    assertEquals(List.of(), escaped, "what the checks threw instead of counting a failed reload");
    assertEquals(new ClusterKeys.Stats(1, 4), watch.stats(), "reloads and failed reloads");
    assertEquals(List.of(List.of(B, A)), applied, "the keys put in use, once they could be");
    String[][] expected = {{"ERROR", "HmacSHA256 cannot be set up", "token removed"},
        {"ERROR", "InternalError: token driver"}, {"ERROR", "IOException: token unreachable"},
        {"INFO", "read again without error"}};
    assertEquals(expected.length, lines.size(), "lines logged:\n" + String.join("\n", lines));
    for (int i = 0; i < expected.length; i++) {
      for (String part : expected[i]) {
        assertTrue(lines.get(i).contains(part), "line " + (i + 1) + " lacks " + part + ": "
            + lines.get(i));
      }
    }
  }

  @Test
  void theKeyFlagsAreChecked() throws Exception {
    Map<String, String> noEnv = Map.of();
    Path f = file(A + "\n" + B + "\n");
    NodeOptions o = NodeOptions.parse(new String[] {"--id", "a", "--listen", "127.0.0.1:1",
        "--cluster-key-file", f.toString(), "--cluster-key-check-ms", "250"}, noEnv);
    assertEquals(List.of(A, B), hex(o.clusterKeys));
    assertEquals(f, o.clusterKeyFile);
    assertEquals(250, o.clusterKeyCheck.toMillis());
    NodeOptions env = NodeOptions.parse(new String[] {"--id", "a", "--listen", "127.0.0.1:1"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", B + "," + A));
    assertEquals(List.of(B, A), hex(env.clusterKeys));
    assertEquals(null, env.clusterKeyFile);
    assertMessage("cluster key 2 of 2 must have at least 16 bytes, had 2",
        () -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "127.0.0.1:1"},
            Map.of("PREFIX_ROUTER_CLUSTER_KEY", A + ",00ff")));
    // a key listed twice counts once
    assertEquals(5, NodeOptions.parse(new String[] {"--id", "a", "--listen", "127.0.0.1:1",
        "--cluster-key-file", file(A + "\n" + B + "\n" + C + "\n" + A + "\n" + B + "\n").toString()},
        noEnv).clusterKeys.size());
    assertMessage("at most 4 distinct cluster keys", () -> NodeOptions.parse(new String[] {"--id",
        "a", "--listen", "127.0.0.1:1", "--cluster-key-file", file(A + "\n" + B + "\n" + C + "\n"
            + "1111111111111111111111111111111111\n2222222222222222222222222222222222\n").toString()},
        noEnv));
    assertMessage("--cluster-key-check-ms needs --cluster-key-file",
        () -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "127.0.0.1:1",
            "--cluster-key-check-ms", "100"}, Map.of("PREFIX_ROUTER_CLUSTER_KEY", A)));
    assertMessage("--cluster-key-check-ms must be 0 to a day", () -> NodeOptions.parse(new String[] {
        "--id", "a", "--listen", "127.0.0.1:1", "--cluster-key-file", f.toString(),
        "--cluster-key-check-ms", "-1"}, noEnv));
  }

  /**
   * A key file an editor saved as UTF-16 (with or without a byte order mark) is refused, saying
   * how to save it: it used to be one raw key of all its bytes, a key no peer had. (A UTF-8 byte
   * order mark is skipped: {@code aByteOrderMarkBeforeHexKeysIsSkipped}.)
   */
  @Test
  void aKeyFileSavedAsUtf16IsRefusedNotTakenForARawKey() throws Exception {
    Map<String, String> noEnv = Map.of();
    String text = "# cluster key\r\n" + A + "\r\n";
    byte[] le = text.getBytes(StandardCharsets.UTF_16LE);
    byte[] be = text.getBytes(StandardCharsets.UTF_16BE);
    Map<String, byte[]> files = new java.util.LinkedHashMap<>();
    files.put("UTF-16 (little-endian)", concat(new byte[] {(byte) 0xff, (byte) 0xfe}, le));
    files.put("UTF-16 (big-endian)", concat(new byte[] {(byte) 0xfe, (byte) 0xff}, be));
    files.put("UTF-16 (little-endian) ", le); // no byte order mark: a zero byte after each
    files.put("UTF-16 (big-endian) ", be);
    int n = 0;
    for (var e : files.entrySet()) {
      Path f = dir.resolve("text-" + n++ + ".key");
      Files.write(f, e.getValue());
      IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
          () -> NodeOptions.parse(new String[] {"--id", "a", "--listen", "127.0.0.1:1",
              "--cluster-key-file", f.toString()}, noEnv), e.getKey());
      assertTrue(x.getMessage().contains("--cluster-key-file " + f + " is text saved as "
          + e.getKey().strip()), x.getMessage());
      assertTrue(x.getMessage().contains("save it as UTF-8 or ASCII"),
          x.getMessage());
    }
    // a raw key that starts with the bytes of a byte order mark, or holds zero bytes, is still
    // a raw key: its other bytes are no text
    byte[] raw = new byte[32];
    for (int i = 0; i < raw.length; i++) {
      raw[i] = (byte) (i * 37 + 1);
    }
    raw[0] = (byte) 0xff;
    raw[1] = (byte) 0xfe;
    raw[5] = 0;
    Path f = dir.resolve("raw-bom.key");
    Files.write(f, raw);
    assertArrayEquals(raw, ClusterKeys.read(f).get(0));
  }


  private static void assertMessage(String fragment, org.junit.jupiter.api.function.Executable e) {
    IllegalArgumentException x = assertThrows(IllegalArgumentException.class, e);
    assertTrue(x.getMessage().contains(fragment), x.getMessage());
  }
}
