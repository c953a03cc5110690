package io.github.prefixrouter.server;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.function.Consumer;

/**
 * The cluster keys of a {@link NodeMain} process: read from its key file or environment variable,
 * and re-read from the file while it runs, so that the key can be rotated without a restart.
 *
 * <p><b>Key file.</b> One key per line in hex, the first signs and every one is accepted;
 * blank lines and lines starting with {@code #} are ignored. Text is ASCII (or UTF-8, which it is
 * the same as): text saved as UTF-16 is an error saying to save it as UTF-8 or ASCII. A file
 * holding anything else but printable text (a raw key, for example 32 bytes from
 * {@code /dev/urandom}) is one key, all of its bytes; so is printable text of a single line
 * that is not hex. Several lines of which one is
 * not hex, or one line of an odd number of hex digits, are an error, never a raw key, so that a
 * typo does not give a node a key no peer has. A UTF-8 byte order mark before printable text is
 * skipped (a passphrase after it is still a raw key of all the file's bytes). A file above
 * {@link #MAX_FILE_BYTES} is an error, never a key, and is not read further. The environment
 * variable holds the hex keys separated by commas.
 *
 * <p><b>Watching.</b> {@link #check()} re-reads the file and hands the keys on when they differ
 * from the last ones handed on and the read before it found the same keys: editing comments or
 * blank lines does nothing, while reordering the keys changes the signing key and is handed on.
 * A file edited in place (not written aside and moved) can be read half-written; a read that no
 * second one confirms is not put in use, so a partial key list never is unless the file stays
 * so, and the keys in use stay until two reads agree ({@link NodeMain} makes the second read
 * {@link #CONFIRM} after the first). A file that cannot be read or parsed leaves the keys as
 * they were, counted and logged once per distinct problem; so do keys read twice alike that
 * cannot be put in use, whether the transport refuses them (a key too short, too many keys) or
 * fails to set them up (the host's JCA provider throws, or anything else is thrown), and they
 * are tried again at every check that reads them, until they are put in use.
 */
final class ClusterKeys {

  /** The largest key file read: far above 4 hex keys and their comments, or a raw key. */
  static final int MAX_FILE_BYTES = 64 << 10;

  /** The shortest cluster key, in bytes, that the peer transport takes. */
  static final int MIN_KEY_BYTES = 16;

  /**
   * How soon after a read that found changed keys the file is read again to confirm them (or
   * at the next check, if that is sooner).
   */
  static final java.time.Duration CONFIRM = java.time.Duration.ofSeconds(1);

  private final Path file;
  private final Consumer<List<byte[]>> apply;
  private List<byte[]> current;
  /** Changed keys the last read found, not yet confirmed by a second; null for none. */
  private List<byte[]> pending;
  private final ReloadOutcomes outcomes = new ReloadOutcomes("cluster keys");

  /**
   * Watches {@code file}, whose keys are {@code current} now, handing changed keys to
   * {@code apply}, which may throw {@link IllegalArgumentException} to refuse them; anything
   * else it throws (an {@link IllegalStateException} of a JCA provider that fails, an
   * {@link Error}) is a failed check too, and leaves the keys in use as they were.
   */
  ClusterKeys(Path file, List<byte[]> current, Consumer<List<byte[]>> apply) {
    this.file = file;
    this.current = List.copyOf(current);
    this.apply = apply;
  }

  /** Counters of the watch: key changes applied, and checks that failed. */
  record Stats(long reloads, long reloadFailures) {}

  synchronized Stats stats() {
    return new Stats(outcomes.reloads(), outcomes.failures());
  }

  /**
   * Re-reads the file and applies its keys if they changed and the last read found the same.
   *
   * @return true if this read found changed keys that wait for a second read to confirm them
   */
  synchronized boolean check() {
    List<byte[]> keys;
    try {
      keys = read(file);
    } catch (IllegalArgumentException e) {
      pending = null;
      outcomes.failed(e.getMessage());
      return false;
    }
    if (sameKeys(keys, current)) {
      pending = null;
      outcomes.unchanged();
      return false;
    }
    if (pending == null || !sameKeys(keys, pending)) {
      pending = keys; // perhaps read half-written: applied once a second read agrees
      return true;
    }
    try {
      apply.accept(keys);
    } catch (Throwable e) {
      // a stable read the transport refuses, or cannot put in use (its JCA provider threw, say):
      // pending stays, so each check that reads the same keys tries them again and counts the
      // failure. Nothing is rethrown: the file watch's executor would keep it in the task's
      // future, counted and logged nowhere
      outcomes.failed(e instanceof IllegalArgumentException && e.getMessage() != null
          ? e.getMessage() : "the keys read from --cluster-key-file " + file
              + " cannot be put in use: " + e);
      return false;
    }
    pending = null;
    current = keys;
    outcomes.reloaded();
    return false;
  }

  private static boolean sameKeys(List<byte[]> a, List<byte[]> b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      if (!Arrays.equals(a.get(i), b.get(i))) {
        return false;
      }
    }
    return true;
  }

  /**
   * The keys in a key file, signing key first.
   *
   * @throws IllegalArgumentException if it cannot be read, is larger than
   *     {@link #MAX_FILE_BYTES}, holds no key, or is text of several lines one of which is not
   *     hex or is a key shorter than {@link #MIN_KEY_BYTES} (the message names the line)
   */
  static List<byte[]> read(Path file) {
    byte[] raw = NodeMain.readAtMost(file, MAX_FILE_BYTES, "--cluster-key-file ");
    if (raw.length > MAX_FILE_BYTES) {
      // another file named by mistake (a keystore, a log, /dev/urandom): never a key, and not
      // to be read whole on every check
      throw new IllegalArgumentException("--cluster-key-file " + file + " is larger than "
          + MAX_FILE_BYTES + " bytes: not a key file");
    }
    String encoding = textEncoding(raw);
    if (encoding != null) {
      // a text editor's UTF-16: as a raw key it would be a key no peer has, from a file that
      // looks right in the editor
      throw new IllegalArgumentException("--cluster-key-file " + file + " is text saved as "
          + encoding + ": save it as UTF-8 or ASCII (the file holds one hex key per line, or is"
          + " one raw key)");
    }
    // a text editor's UTF-8 byte order mark makes no raw key of the hex keys after it: it was
    // taken for one, so an edit saved with it put a key no peer has in use
    int from = utf8ByteOrderMark(raw);
    for (int i = from; i < raw.length; i++) {
      if (!isText(raw[i] & 0xff)) {
        return List.of(raw); // a raw key
      }
    }
    String text = new String(raw, from, raw.length - from, StandardCharsets.US_ASCII);
    List<String> lines = new ArrayList<>();
    List<Integer> numbers = new ArrayList<>();
    String[] all = text.split("\r?\n", -1);
    for (int i = 0; i < all.length; i++) {
      String line = all[i].strip();
      if (!line.isEmpty() && !line.startsWith("#")) {
        lines.add(line);
        numbers.add(i + 1);
      }
    }
    if (lines.isEmpty()) {
      throw new IllegalArgumentException("--cluster-key-file " + file + " holds no key");
    }
    if (lines.size() == 1 && !isHex(lines.get(0))) {
      if (lines.get(0).chars().allMatch(ClusterKeys::isHexDigit)) {
        // hex digits only, an odd number of them: a hex key with a digit lost or added
        throw new IllegalArgumentException("--cluster-key-file " + file + " holds an odd number"
            + " of hex digits (" + lines.get(0).length() + "): a digit is missing or extra");
      }
      return List.of(raw); // a raw key of printable text, as the file has always been read
    }
    List<byte[]> keys = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      if (!isHex(lines.get(i))) {
        throw new IllegalArgumentException("line " + numbers.get(i) + " of --cluster-key-file " + file
            + " is not a key in hex (the file holds one hex key per line, the first signs)");
      }
      byte[] key = HexFormat.of().parseHex(lines.get(i));
      if (key.length < MIN_KEY_BYTES) {
        // named by its line: the transport's own check counts keys, not lines
        throw new IllegalArgumentException("line " + numbers.get(i) + " of --cluster-key-file "
            + file + " is a key of " + key.length + " bytes: a cluster key has at least "
            + MIN_KEY_BYTES + " (" + 2 * MIN_KEY_BYTES + " hex digits)");
      }
      keys.add(key);
    }
    return keys;
  }

  /**
   * The keys of the environment variable: hex, separated by commas, signing key first.
   *
   * @throws IllegalArgumentException naming {@code source} if one is not hex
   */
  static List<byte[]> parse(String hexList, String source) {
    List<byte[]> keys = new ArrayList<>();
    for (String part : hexList.split(",", -1)) {
      String hex = part.strip();
      if (!isHex(hex)) {
        throw new IllegalArgumentException(
            "the cluster keys in " + source + " must be hex, separated by commas");
      }
      keys.add(HexFormat.of().parseHex(hex));
    }
    return keys;
  }

  /** The length of the UTF-8 byte order mark {@code raw} begins with: 3, or 0 without one. */
  static int utf8ByteOrderMark(byte[] raw) {
    return raw.length >= 3 && (raw[0] & 0xff) == 0xef && (raw[1] & 0xff) == 0xbb
        && (raw[2] & 0xff) == 0xbf ? 3 : 0;
  }

  /** Printable ASCII, or a line break or tab: what a key file of text holds. */
  private static boolean isText(int c) {
    return (c >= 0x20 && c <= 0x7e) || c == '\n' || c == '\r' || c == '\t';
  }

  /**
   * The encoding of a file that is ASCII text saved as UTF-16 (a byte order mark FE FF or FF FE,
   * or a zero byte at every other position), whose characters are all printable ASCII, line
   * breaks and tabs; null for anything else. A raw key of random bytes is neither (its bytes
   * would all have to decode to printable ASCII). A UTF-8 byte order mark is not refused: it is
   * skipped before the text.
   */
  static String textEncoding(byte[] raw) {
    int n = raw.length;
    if (n < 4 || n % 2 != 0) {
      return null;
    }
    int b0 = raw[0] & 0xff;
    int b1 = raw[1] & 0xff;
    if (b0 == 0xfe && b1 == 0xff) {
      return allText(raw, 2, 2, 1) ? "UTF-16 (big-endian)" : null;
    }
    if (b0 == 0xff && b1 == 0xfe) {
      return allText(raw, 2, 2, 0) ? "UTF-16 (little-endian)" : null;
    }
    // no byte order mark: ASCII characters in UTF-16 put a zero byte before or after each
    return allText(raw, 0, 2, 1) ? "UTF-16 (big-endian)"
        : allText(raw, 0, 2, 0) ? "UTF-16 (little-endian)" : null;
  }

  /**
   * Whether the characters from {@code start} on, {@code width} bytes each, are text ({@link
   * #isText}) with the character's value at byte {@code low} of each and zero bytes elsewhere.
   */
  private static boolean allText(byte[] raw, int start, int width, int low) {
    if (raw.length - start < width || (raw.length - start) % width != 0) {
      return false;
    }
    for (int i = start; i < raw.length; i += width) {
      for (int k = 0; k < width; k++) {
        int b = raw[i + k] & 0xff;
        if (k == low ? !isText(b) : b != 0) {
          return false;
        }
      }
    }
    return true;
  }

  private static boolean isHex(String s) {
    return !s.isEmpty() && s.length() % 2 == 0 && s.chars().allMatch(ClusterKeys::isHexDigit);
  }

  private static boolean isHexDigit(int c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
  }
}
