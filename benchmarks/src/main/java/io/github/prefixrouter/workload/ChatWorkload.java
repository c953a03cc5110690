package io.github.prefixrouter.workload;

import io.github.prefixrouter.server.LoadDriver;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.apache.commons.csv.CSVRecord;

/**
 * Chat conversations that share system prompts: a few "subjects", each a long system prompt and
 * a set of user messages, so that requests of one subject share the rendered chat's prefix.
 *
 * <p>Two sources: MMLU ({@link #mmlu}: each subject's header and 5-shot examples as the system
 * prompt, trimmed to a number of characters by dropping shots from the end, and its test
 * questions as the user messages), or generated text ({@link #synthetic}: words drawn from a
 * fixed list, deterministic in the seed).
 *
 * <p>Sizes are in characters: the reference engine's tokenizer gives one token per character,
 * so a 2,000-character conversation is a 2,000-token prompt there (a BPE tokenizer gives about
 * a quarter of that).
 *
 * <p>Immutable and thread-safe.
 */
public final class ChatWorkload {

  private static final String[] WORDS = ("the of and to in is that for it as with was on be by "
      + "at this from or an are which but not have has had one all were their there been if more "
      + "when will would who so no out up into than them can only other new some could time these "
      + "two may then do first any my now such like our over man me even most made after also "
      + "did many before must through back years where much your way well down should because "
      + "each just those people how too little state good very make world still own see men work "
      + "long get here between both life being under never day same another know while last might "
      + "us great old year off come since against go came right used take three").split(" ");

  private final String description;
  private final List<String> systems;
  private final List<List<String>> users;

  private ChatWorkload(String description, List<String> systems, List<List<String>> users) {
    this.description = description;
    this.systems = List.copyOf(systems);
    this.users = users.stream().map(List::copyOf).toList();
  }

  /**
   * Generated conversations: {@code subjects} system prompts of 800 to 1,600 characters, each
   * with {@code questions} user messages of 60 to 240 characters.
   */
  public static ChatWorkload synthetic(long seed, int subjects, int questions) {
    if (subjects < 1 || questions < 1) {
      throw new IllegalArgumentException("subjects and questions must be at least 1");
    }
    SplittableRandom rnd = new SplittableRandom(seed);
    List<String> systems = new ArrayList<>();
    List<List<String>> users = new ArrayList<>();
    for (int s = 0; s < subjects; s++) {
      String head = "You are assistant " + s + ". ";
      systems.add(head + words(rnd, 800 + rnd.nextInt(801) - head.length()));
      List<String> q = new ArrayList<>();
      for (int i = 0; i < questions; i++) {
        q.add(words(rnd, 60 + rnd.nextInt(181)) + "?");
      }
      users.add(q);
    }
    return new ChatWorkload("generated chats (" + subjects + " system prompts of 800-1600 "
        + "characters, user messages of 60-240)", systems, users);
  }

  /**
   * English-looking text of exactly {@code chars} characters: common words drawn from
   * {@code rnd}, separated by spaces (the last one cut to fit).
   */
  public static String words(SplittableRandom rnd, int chars) {
    StringBuilder b = new StringBuilder();
    while (b.length() < chars) {
      if (b.length() > 0) {
        b.append(' ');
      }
      b.append(WORDS[rnd.nextInt(WORDS.length)]);
    }
    b.setLength(chars);
    return b.toString();
  }

  /**
   * MMLU conversations: per subject, the system prompt is the 5-shot header with as many shots
   * (from the first) as keep it within {@code maxSystemChars} characters (the header alone, never
   * cut, where even it is longer: the description counts those subjects), and the user messages
   * are the first {@code maxQuestions} test questions (in the shots' layout, ending with
   * "Answer:") of at most {@code maxUserChars} characters.
   *
   * @throws IllegalArgumentException if the directory does not look like MMLU, has no
   *     {@code dev/*_dev.csv} file, or a subject's file (dev or test) is missing or a directory,
   *     is not valid UTF-8 or not valid CSV or has a row without six columns (the message names
   *     the file), or no question is short enough
   * @throws UncheckedIOException if a file cannot be read; the message names it
   */
  public static ChatWorkload mmlu(Path dir, int maxSystemChars, int maxUserChars, int maxQuestions) {
    Path devDir = dir.resolve("dev");
    Path testDir = dir.resolve("test");
    List<String> subjects = MmluPrompts.subjects(dir);
    List<String> systems = new ArrayList<>();
    List<List<String>> users = new ArrayList<>();
    int shotsDropped = 0;
    int headerOnly = 0;
    for (String subject : subjects) {
      List<CSVRecord> shots = MmluPrompts.read(devDir.resolve(subject + "_dev.csv"));
      // sent without the layout's trailing blank line, so measured without it
      String system = MmluPrompts.prefixText(subject, shots).strip();
      int kept = shots.size();
      while (system.length() > maxSystemChars && kept > 0) {
        kept--;
        system = MmluPrompts.prefixText(subject, shots.subList(0, kept)).strip();
      }
      shotsDropped += shots.size() - kept;
      List<String> q = new ArrayList<>();
      for (CSVRecord r : MmluPrompts.read(testDir.resolve(subject + "_test.csv"))) {
        String text = MmluPrompts.questionText(r);
        if (text.length() <= maxUserChars) {
          q.add(text);
        }
        if (q.size() == maxQuestions) {
          break;
        }
      }
      if (!q.isEmpty()) {
        systems.add(system);
        users.add(q);
        if (system.length() > maxSystemChars) {
          headerOnly++; // the header is never cut: without shots, it is still longer
        }
      }
    }
    if (systems.isEmpty()) {
      throw new IllegalArgumentException("no MMLU question within " + maxUserChars + " characters");
    }
    return new ChatWorkload("MMLU chats from " + dir + " (" + systems.size() + " subjects; system "
        + "prompt: header and shots within " + maxSystemChars + " characters, "
        + (headerOnly == 0 ? "" : "except " + headerOnly + (headerOnly == 1 ? " subject whose"
            : " subjects whose") + " header alone is longer (sent without shots), ")
        + shotsDropped + " shots dropped; questions within " + maxUserChars + " characters)",
        systems, users);
  }

  /** What it is, for the report. */
  public String description() {
    return description;
  }

  /** Number of subjects (system prompts). */
  public int subjectCount() {
    return systems.size();
  }

  /** The subject's system prompt. */
  public String system(int subject) {
    return systems.get(subject);
  }

  /**
   * {@code n} conversations (a system and a user message), subjects drawn uniformly or from a
   * Zipf law with exponent {@code zipf} over a seeded random ranking, the user message uniformly
   * within the subject; request {@code i} is sent with the seed {@code seed * 1_000_003 + i}, so
   * that a run is reproducible whatever the sampling temperature.
   */
  public List<LoadDriver.Prompt> requests(int n, double zipf, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    SubjectPopularity popularity = SubjectPopularity.of(systems.size(), zipf, rnd.nextLong());
    List<LoadDriver.Prompt> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      int s = popularity.sample(rnd.nextDouble());
      List<String> q = users.get(s);
      out.add(LoadDriver.Prompt.ofChat(List.of(new LoadDriver.Message("system", systems.get(s)),
          new LoadDriver.Message("user", q.get(rnd.nextInt(q.size())))))
          .withSeed(seed * 1_000_003L + i));
    }
    return out;
  }
}
