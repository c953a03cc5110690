package io.github.prefixrouter.sim;

import java.awt.BasicStroke;
import java.awt.Color;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.BitmapEncoder.BitmapFormat;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.markers.SeriesMarkers;

/** The report's charts, as PNG files (XChart). */
final class Plots {

  private Plots() {}

  /** Writes every chart into {@code dir}; returns the files written. */
  static List<Path> write(Path dir, SimConfig cfg, List<RunResult> results) throws IOException {
    System.setProperty("java.awt.headless", "true");
    Files.createDirectories(dir);
    List<Path> out = new ArrayList<>();
    for (Distribution d : cfg.distributions()) {
      if (cfg.delaysMs().size() > 1) {
        out.add(save(latencyVsDelay(cfg, results, d), dir, "latency-vs-delay-" + d.label()));
      }
    }
    if (cfg.distributions().contains(Distribution.SKEWED)) {
      int delay = cfg.delaysMs().stream().mapToInt(Integer::intValue).min().orElse(2);
      out.add(save(hitRateOverTime(cfg, results, delay), dir, "hit-rate-over-time-skewed"));
      for (Policy p : List.of(Policy.PAPER, Policy.COST_AWARE, Policy.ORACLE)) {
        RunResult r = PaperRunner.find(results, p, delay, Distribution.SKEWED);
        if (r != null) {
          out.add(save(shareOverTime(cfg, r, true), dir, "topic-share-over-time-" + p.label()));
          out.add(save(shareOverTime(cfg, r, false), dir, "node-share-over-time-" + p.label()));
        }
      }
    }
    return out;
  }

  /** A fixed, distinct color per policy; the library's policies draw solid, baselines dashed. */
  private static void style(XYSeries s, Policy p) {
    Color color =
        switch (p) {
          case NO_ROUTING -> new Color(0x33, 0x33, 0x33);
          case RANDOM -> new Color(0x99, 0x99, 0x99);
          case LEAST_LOADED -> new Color(0x1f, 0x77, 0xb4);
          case CHWBL -> new Color(0x2c, 0xa0, 0x2c);
          case ORACLE -> new Color(0x94, 0x67, 0xbd);
          case EARLIEST_COMPLETION -> new Color(0x17, 0xbe, 0xcf);
          case PAPER -> new Color(0xff, 0x7f, 0x0e);
          case COST_AWARE -> new Color(0xd6, 0x27, 0x28);
          case COST_AWARE_GREEDY -> new Color(0x8c, 0x56, 0x4b);
        };
    s.setLineColor(color);
    s.setMarkerColor(color);
    boolean library = p.library();
    s.setLineStyle(
        library
            ? new BasicStroke(2.5f)
            : new BasicStroke(
                1.5f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f, 4f}, 0f));
  }

  private static Path save(XYChart chart, Path dir, String name) throws IOException {
    Path file = dir.resolve(name + ".png");
    BitmapEncoder.saveBitmap(chart, file.toString(), BitmapFormat.PNG);
    return file;
  }

  /**
   * Mean latency against the network delay, both on log scales. A delay of 0 has no place on a
   * log scale: with a 0 among the delays every delay is drawn at delay + 1 ms, and the axis says
   * so. A run without a positive, finite mean latency (every measured request failed) is left
   * out: the log scale has no place for it either.
   */
  static XYChart latencyVsDelay(SimConfig cfg, List<RunResult> results, Distribution d) {
    int shift = cfg.delaysMs().contains(0) ? 1 : 0;
    XYChart c =
        new XYChartBuilder()
            .width(900)
            .height(560)
            .title("Mean latency vs one-way network delay (" + d.label() + ", "
                + cfg.nodes() + " nodes)")
            .xAxisTitle(shift == 0 ? "network delay (ms, log scale)"
                : "network delay + 1 ms (ms, log scale)")
            .yAxisTitle("mean latency (s, log scale)")
            .build();
    c.getStyler().setXAxisLogarithmic(true);
    c.getStyler().setYAxisLogarithmic(true);
    c.getStyler().setLegendPosition(org.knowm.xchart.style.Styler.LegendPosition.InsideNW);
    for (Policy p : cfg.policies()) {
      List<Double> xs = new ArrayList<>();
      List<Double> ys = new ArrayList<>();
      for (int delay : cfg.delaysMs()) {
        RunResult r = PaperRunner.find(results, p, delay, d);
        double mean = r == null ? Double.NaN : r.meanLatencySeconds();
        if (mean > 0 && Double.isFinite(mean)) {
          xs.add((double) delay + shift);
          ys.add(mean);
        }
      }
      if (!xs.isEmpty()) {
        XYSeries s = c.addSeries(p.label(), xs, ys);
        s.setMarker(SeriesMarkers.CIRCLE);
        style(s, p);
      }
    }
    return c;
  }

  static XYChart hitRateOverTime(SimConfig cfg, List<RunResult> results, int delay) {
    XYChart c =
        new XYChartBuilder()
            .width(900)
            .height(560)
            .title("Cache hit rate over time (skewed, " + delay + " ms, "
                + cfg.timelineWindowSeconds() + " s windows)")
            .xAxisTitle("simulated time (s)")
            .yAxisTitle("hit rate (cached / prompt tokens)")
            .build();
    c.getStyler().setYAxisDecimalPattern("0.00");
    for (Policy p : cfg.policies()) {
      RunResult r = PaperRunner.find(results, p, delay, Distribution.SKEWED);
      if (r == null) {
        continue;
      }
      List<Double> xs = new ArrayList<>();
      List<Double> ys = new ArrayList<>();
      for (RunResult.Window w : r.timeline()) {
        if (w.requests() > 0) {
          xs.add(w.startSeconds());
          ys.add(w.hitRate());
        }
      }
      if (!xs.isEmpty()) {
        XYSeries s = c.addSeries(p.label(), xs, ys);
        s.setMarker(SeriesMarkers.NONE);
        style(s, p);
      }
    }
    return c;
  }

  static XYChart shareOverTime(SimConfig cfg, RunResult r, boolean topic) {
    String what =
        topic
            ? "Share of the top subject's requests served by each node"
            : "Share of all requests served by each node";
    XYChart c =
        new XYChartBuilder()
            .width(900)
            .height(560)
            .title(what + " (" + r.scenario() + ")")
            .xAxisTitle("simulated time (s)")
            .yAxisTitle("share")
            .build();
    c.getStyler().setYAxisMin(0.0);
    c.getStyler().setYAxisMax(1.0);
    c.getStyler().setYAxisDecimalPattern("0.0");
    for (int n = 0; n < cfg.nodes(); n++) {
      List<Double> xs = new ArrayList<>();
      List<Double> ys = new ArrayList<>();
      for (RunResult.Window w : r.timeline()) {
        double[] s = topic ? w.topSubjectNodeShares() : w.nodeShares();
        double sum = 0;
        for (double v : s) {
          sum += v;
        }
        if (sum > 0) {
          xs.add(w.startSeconds());
          ys.add(s[n]);
        }
      }
      if (!xs.isEmpty()) {
        c.addSeries("node " + n, xs, ys).setMarker(SeriesMarkers.NONE);
      }
    }
    return c;
  }
}
