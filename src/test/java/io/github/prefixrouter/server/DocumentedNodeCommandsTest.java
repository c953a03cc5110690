package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every node command line the docs show (README.md and docs/*.md, in fenced code blocks) is
 * accepted by {@link NodeOptions#parse}, the check {@link NodeMain} runs first: a flag renamed
 * or tightened in the code, or mistyped in a doc, fails here with the file and line.
 *
 * <p>How a command is found and read: a shell-like block (no language, sh, bash, shell, zsh,
 * console) is split into words as a shell would (quotes, backslash escapes, a backslash at the
 * end of a line joining the next, comments, {@code ;} {@code &} {@code &&} {@code |} and new
 * lines ending a command, redirections dropped with their target). Assignments
 * ({@code seeds=...}, {@code export X=...}) set variables; {@code for NAME in WORDS; do ...
 * done} is expanded for every value of the loop. A command is a node command when, after
 * leading {@code NAME=value} words and {@code taskset}/{@code nohup}/{@code exec}/{@code env}
 * prefixes, it is {@code .../benchmarks/run node ARGS} (the launcher passes ARGS to NodeMain)
 * or {@code java ... io.github.prefixrouter.server.NodeMain ARGS}. A variable or
 * {@code $(...)} the block does not set is replaced by a plausible value of the flag it is the
 * value of ({@link #SAMPLES}). A word {@code ...} (flags elided) is dropped and the required
 * flags the command then lacks ({@code --id}, {@code --listen}) are supplied.
 *
 * <p>Files: {@code parse} reads the cluster key file, the two TLS password files, the engine's
 * API key file and the {@code --config} file at once, so those are replaced by temp files holding what the docs make
 * them hold (a key as {@code head -c 32 /dev/urandom | od ... | tr ...} writes it, a password;
 * a config file: the last config-file example before the command in the same doc). The
 * keystores, trust stores and the ready file are only named at parse time (read or written when
 * the node starts), so they are moved into the temp directory under the same name and not
 * created. The environment holds what the docs say may come from it: the cluster key and both
 * TLS passwords, plus the variables the block exports or sets on the command.
 *
 * <p>Config-file examples (blocks tagged properties, ini, conf or cfg) are parsed with
 * {@code --config FILE} (with {@code --id} and {@code --listen} given as flags when the file
 * leaves them out, as a file shared by nodes does). The docs have none at the time of writing.
 *
 * <p>A block whose text names more node commands than were read from it (a YAML or other
 * block the extractor does not interpret, a command in a quoted string) is reported as a
 * failure, not skipped.
 */
class DocumentedNodeCommandsTest {

  /**
   * The node command lines the docs showed when this test was written: README.md 1,
   * docs/deployment.md 5, docs/vllm-kv-events.md 1. Fewer found means the extractor no longer
   * reads the docs' format (or commands were removed: then lower this).
   */
  private static final int MIN_COMMAND_LINES = 7;

  /** What the environment holds for every command (the docs name these variables). */
  private static final Map<String, String> BASE_ENV = Map.of(
      "PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX,
      "PREFIX_ROUTER_TLS_PASSWORD", "changeit",
      "PREFIX_ROUTER_CLIENT_TLS_PASSWORD", "changeit");

  /** Flags a {@code ...} may stand for that the node requires, with a value. */
  private static final Map<String, String> REQUIRED = linked(
      "--id", "n0", "--listen", "127.0.0.1:7000");

  /** A plausible value of each flag, for a placeholder ({@code $VAR}, {@code $(...)}). */
  static final Map<String, String> SAMPLES = linked(
      "id", "n0", "listen", "127.0.0.1:7000", "advertise", "10.0.0.1:7000",
      "client", "127.0.0.1:8000", "seeds", "n0@127.0.0.1:7000,n1@127.0.0.1:7001",
      "cluster-key-file", "cluster.key", "cluster-key-check-ms", "10000",
      "tls-keystore", "node.p12", "tls-truststore", "trust.p12",
      "tls-password-file", "tls.password", "tls-check-ms", "60000",
      "client-tls-keystore", "client.p12", "client-tls-truststore", "client-trust.p12",
      "client-tls-password-file", "client-tls.password",
      "engine", "http://127.0.0.1:8000", "engine-api-key-file", "engine.key", "model", "Qwen/Qwen2.5-0.5B-Instruct",
      "model-id", "Qwen/Qwen2.5-0.5B-Instruct", "tokenizer", "auto",
      "kv-events", "tcp://127.0.0.1:5557", "kv-events-replay", "tcp://127.0.0.1:5558",
      "kv-events-topic", "kv", "engine-slots", "256", "engine-max-in-flight", "512",
      "block-size", "16", "policy", "cost-aware", "ready-file", "ready",
      "config", "node.properties", "engine-cache-tokens", "65536",
      "tree-capacity-tokens", "1048576", "shutdown-grace-ms", "25000");

  /** Flags naming a file parse reads at once, and what the test's file holds. */
  private static final Map<String, String> READ_AT_PARSE = linked(
      // what `head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'` writes
      "cluster-key-file", NodeMainTest.KEY_HEX,
      "tls-password-file", "changeit\n",
      "client-tls-password-file", "changeit\n",
      "engine-api-key-file", "sk-engine-key\n");

  /** Flags naming a file parse does not open: moved into the temp directory, not created. */
  private static final Set<String> NAMED_AT_PARSE = Set.of(
      "tls-keystore", "tls-truststore", "client-tls-keystore", "client-tls-truststore",
      "ready-file");

  private static final Set<String> SHELL_LANGS = Set.of("", "sh", "bash", "shell", "zsh",
      "console");

  /** Languages of config-file examples (the properties format NodeOptions reads). */
  private static final Set<String> CONFIG_LANGS = Set.of("properties", "ini", "conf", "cfg");

  /** Where a node command starts, for checking that every one in a block was read. */
  private static final Pattern NODE_COMMAND =
      Pattern.compile("benchmarks/run\\s+node\\b"
          + "|io\\.github\\.prefixrouter\\.server\\.NodeMain\\b");

  @TempDir Path dir;

  // ---------------------------------------------------------------------------------------------
  // the checks

  @Test
  void everyDocumentedNodeCommandParses() throws IOException {
    Extracted all = new Extracted();
    for (Path doc : docs()) {
      String name = Path.of("").toAbsolutePath().relativize(doc.toAbsolutePath()).toString()
          .replace('\\', '/');
      extract(name, Files.readAllLines(doc, StandardCharsets.UTF_8), all);
    }
    List<String> failures = new ArrayList<>(all.problems);
    for (Command c : all.commands) {
      String why = check(c);
      if (why != null) {
        failures.add(c + "\n    -> " + why);
      }
    }
    Map<String, Set<Integer>> linesPerFile = new TreeMap<>();
    for (Command c : all.commands) {
      linesPerFile.computeIfAbsent(c.file, f -> new java.util.TreeSet<>()).add(c.line);
    }
    int lines = linesPerFile.values().stream().mapToInt(Set::size).sum();
    String summary = "node command lines per file " + linesPerFile + ", " + all.commands.size()
        + " commands checked (loops expanded), " + all.configs + " config-file examples";
    assertTrue(failures.isEmpty(), "documented node commands that NodeOptions.parse refuses ("
        + summary + "):\n" + String.join("\n", failures));
    assertTrue(lines >= MIN_COMMAND_LINES, "found " + lines + " node command lines, expected at"
        + " least " + MIN_COMMAND_LINES + ": does the extractor still read the docs? " + summary);
  }

  /** The extractor reads a loop, continuations, prefixes and redirections as a shell would. */
  @Test
  void theExtractorReadsACommandAsTheShellWould() {
    List<String> doc = List.of(
        "Start two:",
        "",
        "  ```bash",
        "  seeds=n3@127.0.0.1:7003,n4@127.0.0.1:7004  # both",
        "  for n in 3 4; do",
        "    X=1 taskset -c 0 benchmarks/run node --id n$n --listen \"127.0.0.1:700${n}\" \\",
        "        --seeds $seeds --model 'a b' --cluster-key-file cluster.key > n$n.log 2>&1 &",
        "  done",
        "  ```",
        "```yaml",
        "command: benchmarks/run node --id n0",
        "```");
    Extracted e = new Extracted();
    extract("synthetic.md", doc, e);
    assertEquals(2, e.commands.size(), e.commands.toString());
    assertEquals(List.of("--id", "n3", "--listen", "127.0.0.1:7003", "--seeds",
        "n3@127.0.0.1:7003,n4@127.0.0.1:7004", "--model", "a b", "--cluster-key-file",
        "cluster.key"), e.commands.get(0).args);
    assertEquals("n4", e.commands.get(1).args.get(1));
    assertEquals(6, e.commands.get(0).line);
    // a node command in a block the extractor does not read is reported, not skipped
    assertEquals(1, e.problems.size(), e.problems.toString());
    assertTrue(e.problems.get(0).startsWith("synthetic.md:11"), e.problems.get(0));
  }

  /** A misspelled flag in a documented command fails the check, naming file and line. */
  @Test
  void aMisspelledFlagIsRefused() {
    List<String> doc = List.of(
        "```sh",
        "for i in 0 1; do",
        "  benchmarks/run node --id n$i --listen 127.0.0.1:700$i \\",
        "      --cluster-key-fil cluster.key &",
        "done",
        "java -cp x.jar io.github.prefixrouter.server.NodeMain --id n9 --listen h:1 --insecure",
        "benchmarks/run node ... --engine http://127.0.0.1:8000 --kv-event tcp://127.0.0.1:5557",
        "```");
    Extracted e = new Extracted();
    extract("synthetic.md", doc, e);
    assertEquals(4, e.commands.size(), e.commands.toString());
    assertEquals(List.of(), e.problems);
    List<String> failures = new ArrayList<>();
    for (Command c : e.commands) {
      String why = check(c);
      failures.add(c.file + ":" + c.line + " " + why);
    }
    assertTrue(failures.get(0).startsWith("synthetic.md:3 ")
        && failures.get(0).contains("--cluster-key-fil"), failures.toString());
    assertTrue(failures.get(1).contains("--cluster-key-fil"), failures.toString());
    assertEquals("synthetic.md:6 null", failures.get(2)); // the spelled-right one parses
    assertTrue(failures.get(3).startsWith("synthetic.md:7 ")
        && failures.get(3).contains("--kv-event"), failures.toString());

    // and each documented command, its --listen misspelled, is refused
    Extracted docs = new Extracted();
    for (Path d : docs()) {
      try {
        extract(d.toString(), Files.readAllLines(d, StandardCharsets.UTF_8), docs);
      } catch (IOException x) {
        throw new UncheckedIOException(x);
      }
    }
    assertTrue(docs.commands.size() >= MIN_COMMAND_LINES, docs.commands.toString());
    for (Command c : docs.commands) {
      List<String> typo = c.args.stream().map(a -> a.replaceFirst("^--listen\\b", "--lisen"))
          .collect(Collectors.toList());
      String why = check(new Command(c.file, c.line, c.loop, typo, c.elided, c.config));
      assertTrue(why != null && why.contains("--lisen"), c + " with --lisen: " + why);
    }
  }

  /** Commands the docs' shell blocks may call in {@code $(...)} without defining them. */
  private static final Set<String> COMMANDS = Set.of("python3", "head", "cat", "od", "tr",
      "date", "seq", "printf", "echo", "hostname", "nproc", "jq", "curl", "openssl");

  private static final Pattern SUBSTITUTION = Pattern.compile("\\$\\(([A-Za-z_][\\w-]*)");
  private static final Pattern FUNCTION = Pattern.compile("(?m)^\\s*([A-Za-z_]\\w*)\\s*\\(\\)\\s*\\{");

  /**
   * Every shell function a doc's shell blocks call in {@code $(...)} is defined in a shell block
   * of the same doc, so that its blocks run as they are copied: the stream example in
   * deployment.md called {@code prompt}, which README.md had defined until its walkthrough
   * became a chat, and sent {@code "prompt": ,} since.
   */
  @Test
  void everyShellFunctionADocCallsIsDefinedInIt() throws IOException {
    List<String> undefined = new ArrayList<>();
    for (Path d : docs()) {
      List<Block> shell = blocks(Files.readAllLines(d, StandardCharsets.UTF_8)).stream()
          .filter(b -> SHELL_LANGS.contains(b.lang())).toList();
      Set<String> defined = new java.util.HashSet<>();
      for (Block b : shell) {
        Matcher f = FUNCTION.matcher(String.join("\n", b.lines()));
        while (f.find()) {
          defined.add(f.group(1));
        }
      }
      for (Block b : shell) {
        for (int i = 0; i < b.lines().size(); i++) {
          Matcher m = SUBSTITUTION.matcher(b.lines().get(i));
          while (m.find()) {
            if (!COMMANDS.contains(m.group(1)) && !defined.contains(m.group(1))) {
              undefined.add(d + ":" + (b.firstLine() + i) + " $(" + m.group(1));
            }
          }
        }
      }
    }
    assertEquals(List.of(), undefined, "functions called but defined nowhere in their doc");
  }

  /** A documented config file is parsed, and a misspelled key in it is refused. */
  @Test
  void configFileExamplesAreParsed() {
    List<String> doc = List.of(
        "```properties",
        "# shared by every node",
        "engine=http://127.0.0.1:8000",
        "block-size=16",
        "```",
        "```sh",
        "benchmarks/run node --config node.properties --id n1 --listen 127.0.0.1:7001",
        "```",
        "```properties",
        "engine=http://127.0.0.1:8000",
        "blok-size=16",
        "```");
    Extracted e = new Extracted();
    extract("synthetic.md", doc, e);
    assertEquals(3, e.commands.size(), e.commands.toString());
    assertEquals(2, e.configs);
    assertEquals(null, check(e.commands.get(0)));
    assertEquals(null, check(e.commands.get(1)));
    String why = check(e.commands.get(2));
    assertTrue(why != null && why.contains("blok-size"), why);
  }

  // ---------------------------------------------------------------------------------------------
  // parsing one command

  /** Why {@code NodeOptions.parse} refuses the command, or null if it accepts it. */
  private String check(Command c) {
    List<String> args = new ArrayList<>();
    try {
      for (int k = 0; k < c.args.size(); k++) {
        String a = c.args.get(k);
        String key = a.startsWith("--") ? a.substring(2).split("=", 2)[0] : null;
        boolean inline = a.contains("=");
        if (key != null && (READ_AT_PARSE.containsKey(key) || NAMED_AT_PARSE.contains(key)
            || key.equals("config")) && (inline || k + 1 < c.args.size())) {
          String value = inline ? a.substring(a.indexOf('=') + 1) : c.args.get(++k);
          Path file = dir.resolve(c.file.replaceAll("[^A-Za-z0-9.-]", "_") + "-" + c.line)
              .resolve(key).resolve(fileName(value));
          Files.createDirectories(file.getParent());
          if (READ_AT_PARSE.containsKey(key)) {
            Files.writeString(file, READ_AT_PARSE.get(key));
          } else if (key.equals("config")) {
            if (c.config == null) {
              return "--config " + value + ": the doc shows no properties block before it";
            }
            Files.writeString(file, c.config);
          }
          args.add("--" + key);
          args.add(file.toString());
        } else {
          args.add(a);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    Map<String, String> env = new LinkedHashMap<>(BASE_ENV);
    if (args.contains("--insecure") || args.contains("--insecure=true")) {
      env.remove("PREFIX_ROUTER_CLUSTER_KEY"); // a node without authentication has no key
    }
    // a secret's file stands for its variable: the two are not given together
    Map.of("--cluster-key-file", "PREFIX_ROUTER_CLUSTER_KEY", "--tls-password-file",
        "PREFIX_ROUTER_TLS_PASSWORD", "--client-tls-password-file",
        "PREFIX_ROUTER_CLIENT_TLS_PASSWORD").forEach((flag, variable) -> {
          if (args.stream().anyMatch(a -> a.equals(flag) || a.startsWith(flag + "="))) {
            env.remove(variable);
          }
        });
    // a port's TLS password is in the environment only where the port has TLS
    Map.of("tls-keystore", "PREFIX_ROUTER_TLS_PASSWORD", "client-tls-keystore",
        "PREFIX_ROUTER_CLIENT_TLS_PASSWORD").forEach((key, variable) -> {
          if (!given(args, c.config, key)) {
            env.remove(variable);
          }
        });
    env.putAll(c.env);
    try {
      NodeOptions.parse(args.toArray(new String[0]), env);
      return null;
    } catch (IllegalArgumentException e) {
      return e.getMessage();
    }
  }

  /** The last name of a path, as the test's file is called. */
  private static String fileName(String value) {
    Path name = value.isEmpty() ? null : Path.of(value).getFileName();
    return name == null ? "unnamed" : name.toString();
  }

  // ---------------------------------------------------------------------------------------------
  // the extractor

  private static List<Path> docs() {
    try (Stream<Path> s = Files.list(Path.of("docs"))) {
      List<Path> out = new ArrayList<>(List.of(Path.of("README.md")));
      s.filter(p -> p.toString().endsWith(".md")).sorted().forEach(out::add);
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** One node command as NodeMain gets it, one per value of its loops. */
  static final class Command {
    final String file;
    final int line;
    final String loop;
    final List<String> args;
    final boolean elided;
    /** The last properties block before it in its doc, for {@code --config}; may be null. */
    final String config;
    final Map<String, String> env = new LinkedHashMap<>();

    Command(String file, int line, String loop, List<String> args, boolean elided,
        String config) {
      this.file = file;
      this.line = line;
      this.loop = loop;
      this.args = List.copyOf(args);
      this.elided = elided;
      this.config = config;
    }

    @Override
    public String toString() {
      return file + ":" + line + (loop.isEmpty() ? "" : " (" + loop + ")")
          + (elided ? " ('...' dropped, " + String.join(" ", REQUIRED.keySet())
              + " supplied where missing)" : "")
          + ": NodeMain " + args.stream().map(a -> a.matches("[\\w@%+=:,./-]+") ? a
              : "'" + a + "'").collect(Collectors.joining(" "));
    }
  }

  static final class Extracted {
    final List<Command> commands = new ArrayList<>();
    /** Node commands the extractor could not read, with their place. */
    final List<String> problems = new ArrayList<>();
    int configs;
  }

  /** A fenced code block: its info string's first word, first content line, content. */
  private record Block(String lang, int firstLine, List<String> lines) {}

  private static final Pattern FENCE = Pattern.compile("^(\\s*)(`{3,}|~{3,})\\s*([^\\s`]*).*$");

  private static List<Block> blocks(List<String> lines) {
    List<Block> out = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      Matcher m = FENCE.matcher(lines.get(i));
      if (!m.matches()) {
        continue;
      }
      int indent = m.group(1).length();
      String fence = m.group(2);
      List<String> body = new ArrayList<>();
      int j = i + 1;
      for (; j < lines.size(); j++) {
        String s = lines.get(j);
        if (s.strip().startsWith(fence) && s.strip().replace(fence.substring(0, 1), "").isEmpty()) {
          break;
        }
        int cut = 0;
        while (cut < indent && cut < s.length() && s.charAt(cut) == ' ') {
          cut++;
        }
        body.add(s.substring(cut));
      }
      out.add(new Block(m.group(3).toLowerCase(java.util.Locale.ROOT), i + 2, body));
      i = j;
    }
    return out;
  }

  static void extract(String file, List<String> lines, Extracted into) {
    String config = null;
    for (Block b : blocks(lines)) {
      String text = String.join("\n", b.lines);
      if (CONFIG_LANGS.contains(b.lang)) {
        config = text;
        into.configs++;
        into.commands.add(configCommand(file, b.firstLine, text));
        continue;
      }
      int before = into.commands.size();
      Set<Integer> seen = new java.util.HashSet<>();
      if (SHELL_LANGS.contains(b.lang)) {
        interpret(file, tokenize(text, b.firstLine), config, into);
      }
      for (int k = before; k < into.commands.size(); k++) {
        seen.add(into.commands.get(k).line);
      }
      int expected = 0;
      Matcher m = NODE_COMMAND.matcher(text);
      while (m.find()) {
        expected++;
      }
      if (seen.size() != expected) {
        into.problems.add(file + ":" + b.firstLine + ": a block with " + expected
            + " node command(s), of which the extractor read " + seen.size()
            + " (teach it this form)");
      }
    }
  }

  /** Whether {@code --key} is among {@code args}, or {@code key} in the properties {@code config}. */
  private static boolean given(List<String> args, String config, String key) {
    if (args.stream().anyMatch(a -> a.equals("--" + key) || a.startsWith("--" + key + "="))) {
      return true;
    }
    if (config == null) {
      return false;
    }
    java.util.Properties p = new java.util.Properties();
    try {
      p.load(new java.io.StringReader(config));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return p.containsKey(key);
  }

  /** A config-file example, checked as {@code --config FILE} (with the required flags). */
  private static Command configCommand(String file, int line, String text) {
    java.util.Properties p = new java.util.Properties();
    try {
      p.load(new java.io.StringReader(text));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    List<String> args = new ArrayList<>(List.of("--config", "example.properties"));
    REQUIRED.forEach((flag, value) -> {
      if (!p.containsKey(flag.substring(2))) {
        args.add(flag);
        args.add(value);
      }
    });
    return new Command(file, line, "", args, false, text);
  }

  // --- words

  private enum Kind { LITERAL, EXPAND, SUBST }

  private record Part(String text, Kind kind) {}

  /** A word, or (parts null) an operator: ; & && | || ( ) a new line, or "redir". */
  private record Tok(List<Part> parts, String op, int line) {
    String literal() {
      if (parts == null) {
        return null;
      }
      StringBuilder s = new StringBuilder();
      for (Part p : parts) {
        if (p.kind == Kind.SUBST || (p.kind == Kind.EXPAND && p.text.indexOf('$') >= 0)) {
          return null;
        }
        s.append(p.text);
      }
      return s.toString();
    }
  }

  /** Shell words and operators of a block (lenient: an unclosed quote ends with the block). */
  private static List<Tok> tokenize(String s, int firstLine) {
    List<Tok> out = new ArrayList<>();
    List<Part> parts = new ArrayList<>();
    boolean inWord = false;
    int wordLine = firstLine;
    int line = firstLine;
    int i = 0;
    int n = s.length();
    while (i < n) {
      char c = s.charAt(i);
      char next = i + 1 < n ? s.charAt(i + 1) : 0;
      if (c == '\\' && next == '\n') {
        i += 2;
        line++;
        continue;
      }
      boolean word = !(c == ' ' || c == '\t' || c == '\n' || ";&|()<>".indexOf(c) >= 0)
          || (c == '<' && next == '(');
      if (!word || (c == '#' && !inWord)) {
        String digits = inWord ? new Tok(parts, null, 0).literal() : null;
        boolean fd = (c == '>' || c == '<') && digits != null && digits.matches("\\d+");
        if (inWord && !fd) {
          out.add(new Tok(parts, null, wordLine));
        }
        parts = new ArrayList<>();
        inWord = false;
      }
      if (c == '#' && !inWord) {
        while (i < n && s.charAt(i) != '\n') {
          i++;
        }
        continue;
      }
      if (!word) {
        if (c == '\n') {
          out.add(new Tok(null, "\n", line++));
          i++;
        } else if (c == ' ' || c == '\t') {
          i++;
        } else if (c == '>' || c == '<' || (c == '&' && next == '>')) {
          i++; // > >> >& < &> : the target word that follows is dropped
          while (i < n && (s.charAt(i) == '>' || s.charAt(i) == '&')) {
            i++;
          }
          out.add(new Tok(null, "redir", line));
        } else if ((c == '&' || c == '|') && next == c) {
          out.add(new Tok(null, "" + c + c, line));
          i += 2;
        } else {
          out.add(new Tok(null, String.valueOf(c), line));
          i++;
        }
        continue;
      }
      if (!inWord) {
        inWord = true;
        wordLine = line;
      }
      if (c == '\'') {
        int end = s.indexOf('\'', i + 1);
        end = end < 0 ? n : end;
        String t = s.substring(i + 1, end);
        line += (int) t.chars().filter(ch -> ch == '\n').count();
        parts.add(new Part(t, Kind.LITERAL));
        i = end + 1;
      } else if (c == '"') {
        i++;
        StringBuilder t = new StringBuilder();
        while (i < n && s.charAt(i) != '"') {
          char d = s.charAt(i);
          if (d == '\\' && i + 1 < n && "\\\"$`\n".indexOf(s.charAt(i + 1)) >= 0) {
            if (s.charAt(i + 1) == '\n') {
              line++;
            } else {
              flush(parts, t);
              parts.add(new Part(String.valueOf(s.charAt(i + 1)), Kind.LITERAL));
            }
            i += 2;
          } else if (d == '$' && i + 1 < n && s.charAt(i + 1) == '(') {
            flush(parts, t);
            int end = closingParen(s, i + 1);
            parts.add(new Part(s.substring(i, end + 1), Kind.SUBST));
            line += (int) s.substring(i, end).chars().filter(ch -> ch == '\n').count();
            i = end + 1;
          } else {
            if (d == '\n') {
              line++;
            }
            t.append(d);
            i++;
          }
        }
        flush(parts, t);
        i++;
      } else if ((c == '$' || c == '<') && next == '(') {
        int end = closingParen(s, i + 1);
        parts.add(new Part(s.substring(i, Math.min(end + 1, n)), Kind.SUBST));
        line += (int) s.substring(i, Math.min(end, n)).chars().filter(ch -> ch == '\n').count();
        i = end + 1;
      } else if (c == '\\') {
        parts.add(new Part(i + 1 < n ? String.valueOf(next) : "", Kind.LITERAL));
        i += 2;
      } else {
        add(parts, new Part(String.valueOf(c), Kind.EXPAND));
        i++;
      }
    }
    if (inWord) {
      out.add(new Tok(parts, null, wordLine));
    }
    return out;
  }

  private static void flush(List<Part> parts, StringBuilder t) {
    if (t.length() > 0) {
      add(parts, new Part(t.toString(), Kind.EXPAND));
      t.setLength(0);
    }
  }

  /** Adds a part, joining expandable text to the expandable text before it ({@code $n}). */
  private static void add(List<Part> parts, Part p) {
    int last = parts.size() - 1;
    if (p.kind == Kind.EXPAND && last >= 0 && parts.get(last).kind == Kind.EXPAND) {
      parts.set(last, new Part(parts.get(last).text + p.text, Kind.EXPAND));
    } else {
      parts.add(p);
    }
  }

  /** The index of the parenthesis closing the one at {@code open} (quotes respected). */
  private static int closingParen(String s, int open) {
    int depth = 0;
    char quote = 0;
    for (int i = open; i < s.length(); i++) {
      char c = s.charAt(i);
      if (quote != 0) {
        if (c == quote) {
          quote = 0;
        } else if (c == '\\' && quote == '"') {
          i++;
        }
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (c == '(') {
        depth++;
      } else if (c == ')' && --depth == 0) {
        return i;
      }
    }
    return s.length();
  }

  // --- commands

  private record Loop(String name, List<String> values) {}

  private static final Pattern ASSIGNMENT = Pattern.compile("^([A-Za-z_][A-Za-z0-9_]*)=");
  /** Stands for a placeholder in an expanded word until it gets a flag's sample value. */
  private static final String UNSET = "\u0000";

  /** Walks the simple commands of a block: variables, loops, node commands. */
  private static void interpret(String file, List<Tok> toks, String config, Extracted into) {
    Map<String, String> vars = new LinkedHashMap<>();
    Map<String, String> exported = new LinkedHashMap<>();
    Deque<Loop> loops = new ArrayDeque<>();
    List<Tok> cmd = new ArrayList<>();
    for (int k = 0; k <= toks.size(); k++) {
      Tok t = k < toks.size() ? toks.get(k) : null;
      if (t != null && t.op == null) {
        cmd.add(t);
        continue;
      }
      if (t != null && t.op.equals("redir")) {
        if (k + 1 < toks.size() && toks.get(k + 1).op == null) {
          k++; // the redirection's target
        }
        continue;
      }
      List<Tok> words = cmd;
      cmd = new ArrayList<>();
      while (!words.isEmpty() && Set.of("do", "then", "else", "{", "!", "time")
          .contains(String.valueOf(words.get(0).literal()))) {
        words = words.subList(1, words.size());
      }
      if (words.isEmpty()) {
        continue;
      }
      String w0 = String.valueOf(words.get(0).literal());
      if (w0.equals("done")) {
        if (!loops.isEmpty()) {
          loops.pop();
        }
      } else if (w0.equals("for") && words.size() >= 3
          && "in".equals(words.get(2).literal())) {
        List<String> values = new ArrayList<>();
        for (Tok v : words.subList(3, words.size())) {
          String x = expand(v, vars);
          values.add(x.contains(UNSET) ? "0" : x);
        }
        loops.push(new Loop(words.get(1).literal(), values));
      } else if (w0.equals("while") || w0.equals("until")) {
        loops.push(new Loop(null, List.of()));
      } else if (w0.equals("export")
          || words.stream().allMatch(DocumentedNodeCommandsTest::isAssignment)) {
        for (Tok w : words) {
          if (isAssignment(w)) {
            String[] nv = assignment(w, vars);
            vars.put(nv[0], nv[1]);
            if (w0.equals("export")) {
              exported.put(nv[0], nv[1]);
            }
          }
        }
      } else {
        nodeCommand(file, words, vars, exported, loops, config, into);
      }
    }
  }

  private static boolean isAssignment(Tok w) {
    return !w.parts.isEmpty() && w.parts.get(0).kind == Kind.EXPAND
        && ASSIGNMENT.matcher(concatenatedHead(w)).find();
  }

  /** The word's leading unquoted text. */
  private static String concatenatedHead(Tok w) {
    StringBuilder s = new StringBuilder();
    for (Part p : w.parts) {
      if (p.kind != Kind.EXPAND) {
        break;
      }
      s.append(p.text);
    }
    return s.toString();
  }

  /** NAME and its value (with {@link #UNSET} for a placeholder). */
  private static String[] assignment(Tok w, Map<String, String> vars) {
    String head = concatenatedHead(w);
    Matcher m = ASSIGNMENT.matcher(head);
    m.find();
    String value = expand(w, vars).substring(m.end());
    return new String[] {m.group(1), value};
  }

  private static void nodeCommand(String file, List<Tok> words, Map<String, String> vars,
      Map<String, String> exported, Deque<Loop> loops, String config, Extracted into) {
    Map<String, String> env = new LinkedHashMap<>(exported);
    int k = 0;
    while (k < words.size()) {
      String w = String.valueOf(words.get(k).literal());
      if (isAssignment(words.get(k))) {
        String[] nv = assignment(words.get(k++), vars);
        env.put(nv[0], nv[1]);
      } else if (w.equals("taskset")) {
        k++;
        if (k < words.size() && String.valueOf(words.get(k).literal()).startsWith("-")) {
          k++; // -c LIST
        }
        k++; // the list or mask
      } else if (Set.of("nohup", "exec", "env", "sudo").contains(w)) {
        k++;
      } else {
        break;
      }
    }
    if (k >= words.size()) {
      return;
    }
    int argsFrom = -1;
    String w = String.valueOf(words.get(k).literal());
    if ((w.equals("benchmarks/run") || w.endsWith("/benchmarks/run")) && k + 1 < words.size()
        && "node".equals(words.get(k + 1).literal())) {
      argsFrom = k + 2;
    } else if (w.equals("java") || w.endsWith("/java")) {
      for (int j = k + 1; j < words.size(); j++) {
        if ("io.github.prefixrouter.server.NodeMain".equals(words.get(j).literal())) {
          argsFrom = j + 1;
          break;
        }
      }
    }
    if (argsFrom < 0) {
      return;
    }
    List<Tok> argWords = words.subList(argsFrom, words.size());
    int line = words.get(k).line;
    // one command per combination of the values of the loops around it
    List<Map<String, String>> bindings = new ArrayList<>(List.of(new LinkedHashMap<>()));
    List<Loop> outerFirst = new ArrayList<>(loops);
    java.util.Collections.reverse(outerFirst);
    for (Loop l : outerFirst) {
      if (l.name == null || l.values.isEmpty()) {
        continue;
      }
      List<Map<String, String>> more = new ArrayList<>();
      for (Map<String, String> b : bindings) {
        for (String v : l.values) {
          Map<String, String> c = new LinkedHashMap<>(b);
          c.put(l.name, v);
          more.add(c);
        }
      }
      bindings = more;
    }
    for (Map<String, String> b : bindings) {
      Map<String, String> scope = new LinkedHashMap<>(vars);
      scope.putAll(b);
      List<String> args = new ArrayList<>();
      boolean elided = false;
      for (Tok a : argWords) {
        String x = expand(a, scope);
        if (x.equals("...")) {
          elided = true;
        } else {
          args.add(x);
        }
      }
      String problem = samplePlaceholders(args);
      if (problem != null) {
        into.problems.add(file + ":" + line + ": " + problem);
        continue;
      }
      if (elided) {
        List<String> supplied = new ArrayList<>();
        REQUIRED.forEach((flag, value) -> {
          if (args.stream().noneMatch(a -> a.equals(flag) || a.startsWith(flag + "="))) {
            supplied.add(flag);
            supplied.add(value);
          }
        });
        args.addAll(0, supplied);
      }
      String loop = b.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
          .collect(Collectors.joining(", "));
      Command c = new Command(file, line, loop, args, elided, config);
      env.forEach((name, value) -> c.env.put(name, !value.contains(UNSET) ? value
          : BASE_ENV.getOrDefault(name, value.replace(UNSET, "placeholder"))));
      into.commands.add(c);
    }
  }

  /** Gives each placeholder the sample value of its flag; why not, or null. */
  private static String samplePlaceholders(List<String> args) {
    for (int k = 0; k < args.size(); k++) {
      String a = args.get(k);
      if (!a.contains(UNSET)) {
        continue;
      }
      String flag = a.startsWith("--") && a.indexOf('=') > 0 && a.indexOf('=') < a.indexOf(UNSET)
          ? a.substring(2, a.indexOf('=')) : k > 0 && args.get(k - 1).startsWith("--")
              ? args.get(k - 1).substring(2) : null;
      String sample = flag == null ? null : SAMPLES.get(flag);
      if (sample == null) {
        return "a placeholder in '" + a.replace(UNSET, "$?") + "' with no sample value"
            + (flag == null ? "" : " of --" + flag) + " (add one to SAMPLES)";
      }
      args.set(k, a.startsWith("--" + flag + "=") ? "--" + flag + "=" + sample : sample);
    }
    return null;
  }

  /** The word after parameter expansion; {@link #UNSET} where a value is not known. */
  private static String expand(Tok w, Map<String, String> vars) {
    StringBuilder out = new StringBuilder();
    for (Part p : w.parts) {
      if (p.kind == Kind.LITERAL) {
        out.append(p.text);
      } else if (p.kind == Kind.SUBST) {
        out.append(UNSET);
      } else {
        String t = p.text;
        for (int i = 0; i < t.length(); i++) {
          char c = t.charAt(i);
          if (c != '$' || i + 1 >= t.length()) {
            out.append(c);
            continue;
          }
          String name;
          int end;
          if (t.charAt(i + 1) == '{') {
            end = t.indexOf('}', i);
            end = end < 0 ? t.length() - 1 : end;
            name = t.substring(i + 2, end).replaceAll("[:#%/].*", "");
          } else {
            end = i + 1;
            if (Character.isDigit(t.charAt(end)) || "@*#?$!-".indexOf(t.charAt(end)) >= 0) {
              name = t.substring(end, end + 1);
            } else {
              while (end < t.length() && (Character.isLetterOrDigit(t.charAt(end))
                  || t.charAt(end) == '_')) {
                end++;
              }
              name = t.substring(i + 1, end);
              end--;
            }
          }
          if (name.isEmpty()) {
            out.append(c);
            continue;
          }
          String v = vars.get(name);
          out.append(v == null ? UNSET : v);
          i = end;
        }
      }
    }
    return out.toString();
  }

  private static Map<String, String> linked(String... kv) {
    Map<String, String> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) {
      m.put(kv[i], kv[i + 1]);
    }
    return java.util.Collections.unmodifiableMap(m);
  }
}
