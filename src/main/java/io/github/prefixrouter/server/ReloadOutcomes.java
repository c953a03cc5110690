package io.github.prefixrouter.server;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What the re-reads of a file a {@link NodeMain} process watches came to (the cluster key file,
 * the TLS files): changes put in use, and re-reads that failed, each distinct problem logged at
 * error once (a file left broken is checked again every interval and would otherwise fill the
 * log), and the first good re-read after a failure logged at info, so that the log shows the
 * error cleared. Not thread-safe: its owner calls it under its own lock.
 */
final class ReloadOutcomes {

  private static final Logger log = LoggerFactory.getLogger(ReloadOutcomes.class);

  private final String what;
  private String lastProblem;
  private long reloads;
  private long failures;

  /** @param what what is left in use when a re-read fails, for the log ("cluster keys") */
  ReloadOutcomes(String what) {
    this.what = what;
  }

  /** A re-read found nothing changed. */
  void unchanged() {
    resolved("unchanged in use");
  }

  /** A re-read put a change in use. */
  void reloaded() {
    resolved("the change is in use");
    reloads++;
  }

  /** A re-read succeeded: the end of the last problem, if any, is logged once. */
  private void resolved(String outcome) {
    if (lastProblem != null) {
      log.info("{} read again without error ({}); the earlier problem is cleared: {}", what,
          outcome, lastProblem);
      lastProblem = null;
    }
  }

  /** A re-read failed with {@code problem}; what was in use stays. */
  void failed(String problem) {
    failures++;
    if (!problem.equals(lastProblem)) {
      log.error("{} unchanged in use: {}", what, problem);
      lastProblem = problem;
    }
  }

  long reloads() {
    return reloads;
  }

  long failures() {
    return failures;
  }
}
