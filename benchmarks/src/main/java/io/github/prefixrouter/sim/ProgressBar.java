package io.github.prefixrouter.sim;

import java.io.PrintStream;
import java.util.Locale;

/** A one-line progress bar on a stream (stderr), redrawn in place. Thread-safe. */
final class ProgressBar {

  private final PrintStream out;
  private final long total;
  private final long startNanos = System.nanoTime();
  private final String label;
  private long done;
  private int lastPercent = -1;
  private long lastDrawNanos;
  private int runsDone;
  private final int runs;
  /** What the last draw showed: its percentage and runs done (-1 before the first draw). */
  private long drawnPercent = -1;
  private int drawnRuns = -1;
  /** The line was ended ({@link #finish}, {@link #abandon}): nothing more is drawn. */
  private boolean ended;

  ProgressBar(PrintStream out, String label, long total, int runs) {
    this.out = out;
    this.label = label;
    this.total = Math.max(1, total);
    this.runs = runs;
  }

  synchronized void advance(long n) {
    done = Math.min(total, done + n);
    int percent = (int) (done * 100 / total);
    long now = System.nanoTime();
    if (percent != lastPercent && now - lastDrawNanos >= 200_000_000L) {
      lastPercent = percent;
      lastDrawNanos = now;
      draw();
    }
  }

  synchronized void runFinished() {
    runsDone++;
    draw();
  }

  /** Ends the line, drawing the full bar first unless the last draw showed it already. */
  synchronized void finish() {
    if (ended) {
      return;
    }
    done = total;
    if (drawnPercent != 100 || drawnRuns != runsDone) {
      draw(); // drawn again, it showed 100% twice in a file, where each redraw stays
    }
    out.println();
    out.flush();
    ended = true;
  }

  /**
   * Ends the line as it stands, if a draw began it (a run failed): what is written next starts
   * on a line of its own rather than after the bar, and runs still going draw nothing more.
   */
  synchronized void abandon() {
    if (!ended && drawnPercent >= 0) {
      out.println();
      out.flush();
    }
    ended = true;
  }

  private void draw() {
    if (ended) {
      return;
    }
    int width = 30;
    int filled = (int) (done * width / total);
    long secs = (System.nanoTime() - startNanos) / 1_000_000_000L;
    StringBuilder sb = new StringBuilder("\r").append(label).append(" [");
    for (int i = 0; i < width; i++) {
      sb.append(i < filled ? '#' : '.');
    }
    drawnPercent = done * 100 / total;
    drawnRuns = runsDone;
    sb.append(String.format(Locale.ROOT,
        "] %3d%%  runs %d/%d  %d:%02d", drawnPercent, runsDone, runs, secs / 60, secs % 60));
    out.print(sb);
    out.flush();
  }
}
