package io.github.prefixrouter.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;

/**
 * The command line of a benchmark main: {@code --name value} flags and {@code --name} switches,
 * each known and given at most once. Every problem is an {@link IllegalArgumentException} that
 * names the flag; the mains print it as {@code error: ...} and exit with code 2 ({@link
 * #refuse}), so that a misspelt, repeated or valueless flag, or a count that would run nothing,
 * never runs the defaults or ends in a stack trace.
 *
 * <p>{@code --help} or {@code -h} (unless the main takes it as one of its own flags) makes
 * {@link #parseOrExit} print the main's usage line and every flag it accepts with its default,
 * one a line, to standard output, and exit with code 0.
 */
public final class Flags {

  /**
   * The most requests a simulating main ({@code scope}, {@code slots}, {@code stream}) takes: far
   * above any sensible run, and the workload of a much larger one does not fit the heap.
   */
  public static final int MAX_REQUESTS = 1_000_000;

  /**
   * The lowest {@code --rate} of a simulating main, requests per simulated second: the arrivals
   * of {@link #MAX_REQUESTS} requests then end well within a long's nanoseconds (a lower rate
   * overflowed them).
   */
  public static final double MIN_RATE = 0.001;

  /**
   * The highest {@code --rate} of a simulating main ({@code scope}, {@code slots},
   * {@code stream}), requests per simulated second: far above any sensible run.
   */
  public static final double MAX_RATE = 100_000;

  /** The flags of the command line being read for its help, flag to default; else none. */
  private static final ThreadLocal<Map<String, String>> HELP = new ThreadLocal<>();

  private final Map<String, String> given;
  private final Map<String, String> help;

  private Flags(Map<String, String> given, Map<String, String> help) {
    this.given = given;
    this.help = help;
  }

  /** Thrown by {@link #parse} for {@code --help} or {@code -h}. */
  static final class HelpAsked extends RuntimeException {
    HelpAsked() {
      super("--help", null, false, false);
    }
  }

  private static boolean isHelp(String a) {
    return a.equals("--help") || a.equals("-h");
  }

  /**
   * Throws {@link HelpAsked} if {@code args}, a command line of operands only, asks for help.
   *
   * @param args the command line
   */
  public static void helpIfAsked(String[] args) {
    for (String a : args) {
      if (isHelp(a)) {
        throw new HelpAsked();
      }
    }
  }

  /**
   * Reads {@code args}.
   *
   * @param args the command line
   * @param switches the flags that take no value ({@code --full})
   * @param valued the flags that take a value ({@code --seeds})
   * @return the flags given
   * @throws IllegalArgumentException for an argument that is not one of the flags, a flag given
   *     twice, or one without its value
   */
  public static Flags parse(String[] args, Set<String> switches, Set<String> valued) {
    return parse(args, switches, valued, null);
  }

  /**
   * Reads {@code args}, whose arguments other than flags and their values are operands (a
   * class path, a file).
   *
   * @param args the command line
   * @param switches the flags that take no value ({@code --full})
   * @param valued the flags that take a value ({@code --seeds})
   * @param operands where the arguments that do not start with {@code --} and are no flag's
   *     value go, in order; or null to refuse them
   * @return the flags given
   * @throws IllegalArgumentException for an argument that starts with {@code --} and is not one
   *     of the flags (or, without {@code operands}, any other argument), a flag given twice, or
   *     one without its value (at the end, or followed by another of the flags or
   *     {@code --help})
   */
  public static Flags parse(String[] args, Set<String> switches, Set<String> valued,
      List<String> operands) {
    Map<String, String> help = HELP.get();
    if (help != null) {
      for (String s : switches) {
        help.putIfAbsent(s, null);
      }
      for (String v : valued) {
        help.putIfAbsent(v + " VALUE", null);
      }
      return new Flags(Map.of(), help);
    }
    Map<String, String> given = new HashMap<>();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      boolean isValued = valued.contains(a);
      if (!isValued && !switches.contains(a)) {
        if (isHelp(a)) {
          throw new HelpAsked();
        }
        if (operands != null && !a.startsWith("--")) {
          operands.add(a);
          continue;
        }
        throw new IllegalArgumentException(
            a.startsWith("--") ? "unknown flag " + a : "bad argument '" + a + "'");
      }
      if (isValued && i + 1 >= args.length) {
        throw new IllegalArgumentException(a + " needs a value");
      }
      if (isValued && (valued.contains(args[i + 1]) || switches.contains(args[i + 1])
          || args[i + 1].equals("--help"))) {
        // a value left out (a script's unset variable): the next flag was taken for it, and
        // silently dropped (--out --quick wrote to a file named --quick, without --quick; --out
        // --help ran the whole benchmark into a file named --help)
        throw new IllegalArgumentException(a + " needs a value, but is followed by the flag "
            + args[i + 1]);
      }
      if (given.put(a, isValued ? args[++i] : "") != null) {
        throw new IllegalArgumentException(a + " is given twice");
      }
    }
    return new Flags(given, null);
  }

  /** While reading for help, notes {@code dflt} as the default of the valued {@code flag}. */
  private void noteDefault(String flag, Object dflt) {
    if (help != null && dflt != null && help.containsKey(flag + " VALUE")) {
      String text = dflt instanceof Double d && d == Math.rint(d) && Math.abs(d) < 1e15
          ? String.valueOf(d.longValue())
          : dflt instanceof List<?> l ? String.join(",", l.stream().map(String::valueOf).toList())
          : String.valueOf(dflt);
      help.put(flag + " VALUE", text.isEmpty() ? "none" : text);
    }
  }

  /**
   * Whether {@code flag} was given.
   *
   * @param flag the flag, with its {@code --}
   * @return true if it was
   */
  public boolean has(String flag) {
    return given.containsKey(flag);
  }

  /**
   * The value of {@code flag}.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the value if it was not given
   * @return its value
   */
  public String string(String flag, String dflt) {
    noteDefault(flag, dflt);
    return given.getOrDefault(flag, dflt);
  }

  /**
   * The whole number {@code flag} gives, at least {@code min}.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the value if it was not given
   * @param min the least value accepted
   * @return its value
   * @throws IllegalArgumentException if the value is not a whole number or is below {@code min}
   */
  public int atLeast(String flag, int dflt, int min) {
    return atLeast(flag, dflt, min, Integer.MAX_VALUE);
  }

  /**
   * The whole number {@code flag} gives, from {@code min} to {@code max}.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the value if it was not given
   * @param min the least value accepted
   * @param max the largest value accepted
   * @return its value
   * @throws IllegalArgumentException if the value is not a whole number or is below {@code min}
   *     or above {@code max}
   */
  public int atLeast(String flag, int dflt, int min, int max) {
    long v = whole(flag, dflt);
    if (v < min || v > max) {
      throw new IllegalArgumentException(flag + " must be " + (min == 0 ? "0 or more" : "at "
          + "least " + min) + " (and at most " + max + "), not " + v);
    }
    return (int) v;
  }

  /**
   * The whole number {@code flag} gives.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the value if it was not given
   * @return its value
   * @throws IllegalArgumentException if the value is not a whole number
   */
  public long whole(String flag, long dflt) {
    noteDefault(flag, dflt);
    String v = given.get(flag);
    if (v == null) {
      return dflt;
    }
    try {
      return Long.parseLong(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(flag + ": not a whole number: '" + v + "'");
    }
  }

  /**
   * The finite number {@code flag} gives, more than 0.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the value if it was not given
   * @return its value
   * @throws IllegalArgumentException if the value is not a number, not finite or not above 0
   */
  public double positive(String flag, double dflt) {
    double v = number(flag, dflt);
    if (!(v > 0)) {
      throw new IllegalArgumentException(flag + " must be more than 0, not " + given.get(flag));
    }
    return v;
  }

  /**
   * The finite number {@code flag} gives, from {@code min} to {@code max}.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the value if it was not given
   * @param min the least value accepted
   * @param max the largest value accepted
   * @return its value
   * @throws IllegalArgumentException if the value is not a finite number or is below
   *     {@code min} or above {@code max}
   */
  public double between(String flag, double dflt, double min, double max) {
    double v = number(flag, dflt);
    if (!(v >= min && v <= max)) {
      throw new IllegalArgumentException(flag + " must be from " + plain(min) + " to "
          + plain(max) + ", not " + given.get(flag));
    }
    return v;
  }

  private static String plain(double d) {
    return java.math.BigDecimal.valueOf(d).stripTrailingZeros().toPlainString();
  }

  /**
   * The finite number {@code flag} gives.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the value if it was not given
   * @return its value
   * @throws IllegalArgumentException if the value is not a finite number
   */
  public double number(String flag, double dflt) {
    noteDefault(flag, dflt);
    String v = given.get(flag);
    if (v == null) {
      return dflt;
    }
    double d;
    try {
      d = Double.parseDouble(v.trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(flag + ": not a number: '" + v + "'");
    }
    if (!Double.isFinite(d)) {
      throw new IllegalArgumentException(flag + ": not a finite number: '" + v + "'");
    }
    return d;
  }

  /**
   * The comma-separated whole numbers {@code flag} gives (or {@code dflt} gives, if it was not
   * given), each from {@code min} to {@code max}, with {@code why} saying what {@code min} is; an
   * empty value is no numbers.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the values if it was not given, comma-separated
   * @param min the least value accepted
   * @param why what {@code min} stands for, shown after it in the message ({@code "one block"}),
   *     or null
   * @param max the largest value accepted
   * @return the values, in the order given
   * @throws IllegalArgumentException for a value that is not a whole number, or is below
   *     {@code min} or above {@code max}
   */
  public long[] wholes(String flag, String dflt, long min, String why, long max) {
    noteDefault(flag, dflt);
    String csv = given.getOrDefault(flag, dflt);
    if (csv.isBlank()) {
      return new long[0];
    }
    String[] parts = csv.split(",", -1);
    long[] values = new long[parts.length];
    for (int i = 0; i < parts.length; i++) {
      long v;
      try {
        v = Long.parseLong(parts[i].trim());
      } catch (NumberFormatException e) {
        throw new IllegalArgumentException(flag + ": not a whole number: '" + parts[i] + "'");
      }
      if (v < min || v > max) {
        throw new IllegalArgumentException(flag + " must be at least " + min
            + (why == null ? "" : " (" + why + ")") + (v > max ? " and at most " + max : "")
            + ", not " + v);
      }
      values[i] = v;
    }
    return values;
  }

  /**
   * The comma-separated sizes {@code flag} gives (or {@code dflt} gives, if it was not given),
   * each a number of bytes, or a number followed by {@code k} or {@code m} (either case) for KiB
   * or MiB, from {@code min} to {@code max} bytes, none twice.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the sizes if it was not given, comma-separated ({@code "64k"})
   * @param min the fewest bytes accepted
   * @param max the most bytes accepted
   * @return the sizes in bytes, in the order given
   * @throws IllegalArgumentException for an empty list, a value that is not a size, one below
   *     {@code min} or above {@code max}, or one given twice
   */
  public int[] sizes(String flag, String dflt, int min, int max) {
    noteDefault(flag, dflt);
    String csv = given.getOrDefault(flag, dflt);
    String[] parts = csv.split(",", -1);
    int[] values = new int[parts.length];
    for (int i = 0; i < parts.length; i++) {
      String s = parts[i].trim();
      int shift = s.isEmpty() ? 0 : switch (Character.toLowerCase(s.charAt(s.length() - 1))) {
        case 'k' -> 10;
        case 'm' -> 20;
        default -> 0;
      };
      String digits = shift == 0 ? s : s.substring(0, s.length() - 1);
      if (digits.isEmpty() || digits.length() > 12
          || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
        throw new IllegalArgumentException(flag + ": not a size: '" + parts[i]
            + "' (a number of bytes, or a number with k or m: 64k)");
      }
      long v = Long.parseLong(digits) << shift;
      if (v < min || v > max) {
        throw new IllegalArgumentException(flag + " must be from " + min + " to " + max
            + " bytes, not " + parts[i].trim());
      }
      for (int j = 0; j < i; j++) {
        if (values[j] == v) {
          throw new IllegalArgumentException(flag + ": " + v + " bytes is given twice");
        }
      }
      values[i] = (int) v;
    }
    return values;
  }

  /**
   * The comma-separated values {@code flag} gives, each one of {@code allowed} and none twice.
   *
   * @param flag the flag, with its {@code --}
   * @param dflt the values if it was not given
   * @param allowed the values accepted
   * @return the values, in the order given
   * @throws IllegalArgumentException for a value not allowed or given twice
   */
  public List<String> oneOfEach(String flag, List<String> dflt, Set<String> allowed) {
    noteDefault(flag, dflt);
    if (!given.containsKey(flag)) {
      return dflt;
    }
    List<String> values = new ArrayList<>();
    for (String v : given.get(flag).split(",", -1)) {
      if (!allowed.contains(v)) {
        throw new IllegalArgumentException(flag + ": unknown value '" + v + "'");
      }
      if (values.contains(v)) {
        throw new IllegalArgumentException(flag + ": " + v + " is given twice");
      }
      values.add(v);
    }
    return values;
  }

  /**
   * Refuses an output path that could not be written once the work is done, so that it stops
   * the command before anything runs (the results are written only at the end, and were lost
   * with a stack trace): a directory's path that is a file, a file's path that is a directory,
   * or a path whose nearest existing parent is a file (no directory can be made under it).
   *
   * @param flag the flag that gave the path, with its {@code --}
   * @param path the path given
   * @param directory true if the path is a directory to make, false if a file to write
   * @return {@code path}
   * @throws IllegalArgumentException saying which, naming the flag and the path
   */
  public static Path output(String flag, Path path, boolean directory) {
    if (directory && Files.exists(path) && !Files.isDirectory(path)) {
      throw new IllegalArgumentException(flag + " " + path + " exists and is not a directory");
    }
    if (!directory && Files.isDirectory(path)) {
      throw new IllegalArgumentException(flag + " " + path + " is a directory, not a file");
    }
    for (Path p = path.toAbsolutePath().getParent(); p != null; p = p.getParent()) {
      if (Files.exists(p)) {
        // the nearest existing parent: a file there leaves no way to make the directories
        if (!Files.isDirectory(p)) {
          throw new IllegalArgumentException(
              flag + " " + path + ": " + p + " exists and is not a directory");
        }
        break;
      }
    }
    return path;
  }

  /**
   * Reads a main's command line with {@code parser}, or refuses it ({@link #refuse}) if the
   * parser throws {@link IllegalArgumentException}.
   *
   * @param args the command line
   * @param parser reads the options, throwing {@link IllegalArgumentException} for bad ones
   * @param <T> the options
   * @return the options read
   */
  public static <T> T parseOrExit(String[] args, Function<String[], T> parser) {
    return parseOrExit(args, parser, null);
  }

  /**
   * The same, printing {@code usage} (if not null) before the error. For {@code --help} or
   * {@code -h}, prints {@code usage} and the flags {@code parser} reads, each with its default
   * (what it reads when the flag is not given), to standard output and exits with code 0.
   *
   * @param args the command line
   * @param parser reads the options, throwing {@link IllegalArgumentException} for bad ones
   * @param usage the main's usage text, or null
   * @param <T> the options
   * @return the options read
   */
  public static <T> T parseOrExit(String[] args, Function<String[], T> parser, String usage) {
    return parseOrExit(args, parser, usage, usage);
  }

  /**
   * The same, printing {@code about} only for {@code --help} or {@code -h}, above the flags.
   *
   * @param about the main's usage line: the command and what it does
   * @param args the command line
   * @param parser reads the options, throwing {@link IllegalArgumentException} for bad ones
   * @param <T> the options
   * @return the options read
   */
  public static <T> T parseOrExit(String about, String[] args, Function<String[], T> parser) {
    return parseOrExit(args, parser, null, about);
  }

  private static <T> T parseOrExit(String[] args, Function<String[], T> parser, String usage,
      String about) {
    try {
      return parser.apply(args);
    } catch (HelpAsked h) {
      System.out.print(help(parser, about));
      System.exit(0);
      throw h; // not reached: exits
    } catch (IllegalArgumentException e) {
      if (usage != null) {
        System.err.println(usage);
      }
      refuse(e);
      throw e; // not reached: refuse exits
    }
  }

  /**
   * The help text of a main: {@code usage}, then the flags {@code parser} reads, one a line in
   * the order of their names, each with its default where it reads one.
   *
   * @param parser reads the options
   * @param usage the main's usage text, or null
   * @return the text, ending in a line break
   */
  static String help(Function<String[], ?> parser, String usage) {
    Map<String, String> flags = new TreeMap<>();
    HELP.set(flags);
    try {
      parser.apply(new String[0]);
    } catch (IllegalArgumentException e) {
      // a required operand or flag: the flags read so far are the ones to show
    } finally {
      HELP.remove();
    }
    StringBuilder b = new StringBuilder(usage == null ? "" : usage + "\n");
    if (flags.isEmpty()) {
      b.append("no flags\n");
    }
    int width = flags.keySet().stream().mapToInt(String::length).max().orElse(0);
    flags.forEach((flag, dflt) -> b.append(dflt == null ? "  " + flag
        : String.format(Locale.ROOT, "  %-" + width + "s  (default %s)", flag, dflt))
        .append('\n'));
    return b.toString();
  }

  /**
   * Prints {@code error: } and the message of {@code e} to standard error, then a line pointing
   * to {@code --help}, and exits with code 2.
   *
   * @param e the problem with the command line
   */
  public static void refuse(IllegalArgumentException e) {
    System.err.println("error: " + e.getMessage());
    // as common command-line tools do: a --help after the flag refused was not read
    System.err.println("(--help lists the flags)");
    System.exit(2);
  }
}
