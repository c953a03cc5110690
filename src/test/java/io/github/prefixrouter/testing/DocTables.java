package io.github.prefixrouter.testing;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Test support: the tables of a page under docs/, for tests that hold a page to the code. */
public final class DocTables {

  private DocTables() {}

  /**
   * The rows of the first table after the line {@code heading} exactly: the first column (its
   * backquotes removed) to the second, in the page's order.
   *
   * @param doc the page's file name under docs/
   * @param heading the heading line the table follows
   * @return first column to second
   * @throws IOException if the page cannot be read
   */
  public static Map<String, String> firstTwoColumns(String doc, String heading)
      throws IOException {
    List<String> lines = Files.readAllLines(Path.of("docs", doc));
    int i = lines.indexOf(heading);
    assertTrue(i >= 0, doc + " has no " + heading);
    while (!lines.get(i).startsWith("|")) {
      i++;
    }
    i += 2; // the header and its rule
    Map<String, String> rows = new LinkedHashMap<>();
    for (; i < lines.size() && lines.get(i).startsWith("|"); i++) {
      String[] cells = lines.get(i).split(" \\| ");
      rows.put(cells[0].substring(1).trim().replace("`", ""), cells[1].trim());
    }
    return rows;
  }
}
