package io.github.prefixrouter.internal.wire;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * The byte-by-byte examples of docs/wire-format.md, read from the page, so that the golden tests
 * compare the encoders with what the page shows rather than with a copy of it.
 */
public final class WireFormatPage {

  private static final Pattern BYTE = Pattern.compile("[0-9a-f]{2}");

  private WireFormatPage() {}

  /**
   * Every example of the page, each the hex bytes of one fenced block joined by single spaces. A
   * line of a block contributes the bytes it starts with, up to its comment (the first word that
   * is not a byte, or a gap of two spaces); blocks without bytes (the layouts) are left out.
   */
  public static List<String> examples() {
    List<String> lines;
    try {
      lines = Files.readAllLines(Path.of("docs", "wire-format.md"));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<String> out = new ArrayList<>();
    StringBuilder block = null;
    for (String line : lines) {
      if (line.startsWith("```")) {
        if (block != null && block.length() > 0) {
          out.add(block.toString());
        }
        block = block == null ? new StringBuilder() : null;
        continue;
      }
      if (block == null) {
        continue;
      }
      String head = line.split(" {2}", 2)[0];
      for (String word : head.split(" ")) {
        if (!BYTE.matcher(word).matches()) {
          break;
        }
        block.append(block.length() == 0 ? "" : " ").append(word);
      }
    }
    return out;
  }

  /** The example of the page that starts with {@code start} (its type and version bytes). */
  public static String example(String start) {
    List<String> found = examples().stream().filter(e -> e.startsWith(start + " ")).toList();
    if (found.size() != 1) {
      throw new AssertionError("docs/wire-format.md has " + found.size() + " examples starting "
          + start + ": " + found);
    }
    return found.get(0);
  }
}
