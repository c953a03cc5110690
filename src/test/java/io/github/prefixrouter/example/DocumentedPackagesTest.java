package io.github.prefixrouter.example;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * docs/design.md's package table says which packages the module exports: it must name every
 * package {@code module-info.java} exports as exported, and none other; and every package it
 * names must exist.
 *
 * <p>A row's first cell names one or more packages in backticks; a name starting with
 * {@code .} is relative to {@code io.github.prefixrouter}, and {@code internal.*} stands for
 * the packages under it. The second cell is {@code yes} or {@code no}.
 */
class DocumentedPackagesTest {

  private static final String BASE = "io.github.prefixrouter";
  private static final Path SOURCES = Path.of("src/main/java");

  @Test
  void designMdPackageTableShowsTheModulesExports() throws IOException {
    Set<String> exported = new TreeSet<>();
    Matcher m = Pattern.compile("(?m)^\\s*exports\\s+([\\w.]+)\\s*;")
        .matcher(Files.readString(SOURCES.resolve("module-info.java")));
    while (m.find()) {
      exported.add(m.group(1));
    }
    assertTrue(exported.size() >= 5, "module-info.java exports " + exported);

    Set<String> documentedYes = new TreeSet<>();
    Set<String> documentedNo = new TreeSet<>();
    List<String> lines = Files.readAllLines(Path.of("docs/design.md"));
    int i = lines.indexOf("## Packages");
    assertTrue(i >= 0, "docs/design.md has a Packages section");
    while (!lines.get(i).startsWith("| package |")) {
      i++;
    }
    Pattern name = Pattern.compile("`([\\w.*]+)`");
    for (i += 2; i < lines.size() && lines.get(i).startsWith("|"); i++) {
      String[] cells = lines.get(i).split("\\|");
      String exportedCell = cells[2].trim();
      assertTrue(exportedCell.equals("yes") || exportedCell.equals("no"), lines.get(i));
      Matcher n = name.matcher(cells[1]);
      while (n.find()) {
        String p = n.group(1).startsWith(".") ? BASE + n.group(1) : n.group(1);
        (exportedCell.equals("yes") ? documentedYes : documentedNo).add(p);
        String dir = p.endsWith(".*") ? p.substring(0, p.length() - 2) : p;
        assertTrue(Files.isDirectory(SOURCES.resolve(dir.replace('.', '/'))),
            "docs/design.md names package " + p + ", which does not exist");
      }
    }
    assertEquals(exported, documentedYes,
        "docs/design.md's package table must mark exactly module-info.java's exports 'yes'");
    for (String p : documentedNo) {
      assertTrue(exported.stream().noneMatch(e -> p.endsWith(".*")
              ? e.startsWith(p.substring(0, p.length() - 1)) : e.equals(p)),
          "docs/design.md says " + p + " is not exported, but module-info.java exports it");
    }
  }
}
