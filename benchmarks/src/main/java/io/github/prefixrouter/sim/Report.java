package io.github.prefixrouter.sim;

import static io.github.prefixrouter.bench.SimFleet.figure;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/** The text table and the JSON file of a comparison (field names in docs/simulator.md). */
final class Report {

  private Report() {}

  /**
   * Width of the policy column: the longest policy label, so that every row of every table
   * lines up, whichever policies it shows.
   */
  private static final int POLICY_WIDTH = java.util.Arrays.stream(Policy.values())
      .mapToInt(p -> p.label().length()).reduce("policy".length(), Math::max);

  /** The table: one block per (distribution, delay), one row per policy. */
  static String table(SimConfig cfg, List<RunResult> results) {
    StringBuilder sb = new StringBuilder();
    String policy = "| %-" + POLICY_WIDTH + "s";
    for (Distribution d : cfg.distributions()) {
      for (int delay : cfg.delaysMs()) {
        sb.append(String.format(Locale.ROOT, "%n%s, network delay %d ms%n", d.label(), delay));
        sb.append(String.format(Locale.ROOT,
            policy + " | %7s | %7s | %7s | %9s | %8s | %9s | %8s | %12s |%n",
            "policy", "mean s", "p50 s", "p99 s", "vs no-rt", "hit rate", "forwarded",
            "max node", "gossip B/n/s"));
        sb.append("|").append("-".repeat(POLICY_WIDTH + 2))
            .append("|---------|---------|---------|-----------|----------|"
                + "-----------|----------|--------------|\n");
        RunResult base = PaperRunner.find(results, Policy.NO_ROUTING, delay, d);
        for (Policy p : cfg.policies()) {
          RunResult r = PaperRunner.find(results, p, delay, d);
          if (r == null) {
            continue;
          }
          // a run whose every measured request failed has no latency (NaN): "-", as its ratio
          String ratio = base == null ? "-"
              : figure(r.meanLatencySeconds() / base.meanLatencySeconds(), "%.3fx");
          sb.append(String.format(Locale.ROOT,
              policy + " | %7s | %7s | %7s | %9s | %7.1f%% | %8.1f%% | %7.1f%% | %12.0f |%s%n",
              p.label(), figure(r.meanLatencySeconds(), "%.3f"),
              figure(r.p50LatencySeconds(), "%.3f"), figure(r.p99LatencySeconds(), "%.3f"),
              ratio, 100 * r.hitRate(), 100 * r.forwardedShare(), 100 * r.maxNodeShare(),
              r.gossipBytesPerNodePerSecond(),
              r.failedRequests() > 0 ? " failed=" + r.failedRequests() : ""));
        }
      }
    }
    return sb.toString();
  }

  static void writeJson(Path file, SimConfig cfg, String workload, List<RunResult> results)
      throws IOException {
    Files.createDirectories(file.toAbsolutePath().getParent());
    Files.writeString(file, json(cfg, workload, results), StandardCharsets.UTF_8);
  }

  static String json(SimConfig cfg, String workload, List<RunResult> results) {
    StringBuilder sb = new StringBuilder();
    sb.append("{\n  \"config\": {");
    EngineProfile e = cfg.engine();
    field(sb, "seed", cfg.seed(), true);
    field(sb, "nodes", cfg.nodes(), false);
    field(sb, "rate_per_s", cfg.ratePerSecond(), false);
    field(sb, "requests", cfg.requests(), false);
    field(sb, "warmup_requests", cfg.warmupRequests(), false);
    field(sb, "zipf_exponent", cfg.zipfExponent(), false);
    field(sb, "jitter_fraction", cfg.jitterFraction(), false);
    field(sb, "loss_probability", cfg.lossProbability(), false);
    field(sb, "output_tokens", cfg.outputTokens(), false);
    field(sb, "block_size", e.blockSize(), false);
    field(sb, "kv_capacity_tokens", e.capacityTokens(), false);
    field(sb, "engine_slots", e.slots(), false);
    field(sb, "prefill_overhead_ms", e.prefillOverheadNanos() / 1e6, false);
    field(sb, "prefill_ms_per_token", e.prefillNanosPerToken() / 1e6, false);
    field(sb, "decode_ms_per_token", e.decodeNanosPerToken() / 1e6, false);
    sb.append(", \"engine_reports_timings\": ").append(e.reportsTimings());
    field(sb, "timeline_window_s", cfg.timelineWindowSeconds(), false);
    sb.append(",\n    \"workload\": ").append(quote(workload));
    sb.append("\n  },\n  \"results\": [");
    boolean first = true;
    for (RunResult r : results) {
      sb.append(first ? "\n" : ",\n");
      first = false;
      RunResult base =
          PaperRunner.find(
              results, Policy.NO_ROUTING, r.scenario().delayMs(), r.scenario().distribution());
      sb.append("    {");
      sb.append("\"policy\": ").append(quote(r.scenario().policy().label()));
      field(sb, "delay_ms", r.scenario().delayMs(), false);
      sb.append(", \"distribution\": ").append(quote(r.scenario().distribution().label()));
      field(sb, "requests", r.measuredRequests(), false);
      field(sb, "failed", r.failedRequests(), false);
      field(sb, "mean_latency_s", r.meanLatencySeconds(), false);
      field(sb, "p50_latency_s", r.p50LatencySeconds(), false);
      field(sb, "p99_latency_s", r.p99LatencySeconds(), false);
      field(sb, "mean_vs_no_routing",
          base == null ? Double.NaN : r.meanLatencySeconds() / base.meanLatencySeconds(), false);
      field(sb, "hit_rate", r.hitRate(), false);
      field(sb, "forwarded_share", r.forwardedShare(), false);
      field(sb, "max_node_share", r.maxNodeShare(), false);
      sb.append(", \"node_shares\": ").append(array(r.nodeShares()));
      field(sb, "gossip_bytes_per_node_per_s", r.gossipBytesPerNodePerSecond(), false);
      field(sb, "simulated_s", r.simulatedSeconds(), false);
      sb.append(", \"top_subject\": ").append(quote(r.topSubject()));
      sb.append(",\n      \"timeline\": [");
      boolean fw = true;
      for (RunResult.Window w : r.timeline()) {
        sb.append(fw ? "" : ", ");
        fw = false;
        sb.append("{");
        field(sb, "t_s", w.startSeconds(), true);
        field(sb, "requests", w.requests(), false);
        field(sb, "hit_rate", w.hitRate(), false);
        sb.append(", \"node_shares\": ").append(array(w.nodeShares()));
        sb.append(", \"top_subject_node_shares\": ").append(array(w.topSubjectNodeShares()));
        sb.append("}");
      }
      sb.append("]}");
    }
    sb.append("\n  ]\n}\n");
    return sb.toString();
  }

  private static void field(StringBuilder sb, String name, double v, boolean first) {
    sb.append(first ? "" : ", ").append('"').append(name).append("\": ").append(num(v));
  }

  private static void field(StringBuilder sb, String name, long v, boolean first) {
    sb.append(first ? "" : ", ").append('"').append(name).append("\": ").append(v);
  }

  private static String num(double v) {
    if (Double.isNaN(v) || Double.isInfinite(v)) {
      return "null";
    }
    return String.format(Locale.ROOT, "%.6g", v).replaceAll("(\\.\\d*?)0+(e|$)", "$1$2")
        .replaceAll("\\.(e|$)", "$1");
  }

  private static String array(double[] a) {
    StringBuilder sb = new StringBuilder("[");
    for (int i = 0; i < a.length; i++) {
      sb.append(i == 0 ? "" : ", ").append(num(a[i]));
    }
    return sb.append(']').toString();
  }

  static String quote(String s) {
    StringBuilder sb = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      switch (c) {
        case '"' -> sb.append("\\\"");
        case '\\' -> sb.append("\\\\");
        case '\n' -> sb.append("\\n");
        default -> {
          if (c < 0x20) {
            sb.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
          } else {
            sb.append(c);
          }
        }
      }
    }
    return sb.append('"').toString();
  }
}
