package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.spi.EngineResult;
import io.github.prefixrouter.testing.SimulatedScheduler;
import io.github.prefixrouter.workload.PromptSource;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The simulated engines report each run's prefill and decode time, which the library's nodes
 * learn their prefill cost from; the library's adapter for OpenAI-compatible servers reports
 * none. {@code --no-engine-timings} runs the library's nodes as they run over that adapter.
 */
class EngineTimingsTest {

  private static final String[] SCENARIO = {
    "--requests", "400", "--delays", "2", "--distributions", "uniform",
    "--policies", "least-loaded,cost-aware", "--threads", "2", "--no-plots"
  };

  private static String[] with(String... more) {
    String[] all = Arrays.copyOf(SCENARIO, SCENARIO.length + more.length);
    System.arraycopy(more, 0, all, SCENARIO.length, more.length);
    return all;
  }

  @Test
  void withoutEngineTimingsOnlyTheLibrarysNodesRunDifferently() throws Exception {
    SimConfig reported = PaperMain.parse(SCENARIO).config();
    SimConfig none = PaperMain.parse(with("--no-engine-timings")).config();
    PromptSource prompts = Prompts.load(null, reported.seed());
    List<RunResult> a = PaperRunner.run(reported, prompts, Clusters::create, null);
    List<RunResult> b = PaperRunner.run(none, prompts, Clusters::create, null);

    // a baseline never reads an engine's timings: the very same run
    RunResult baseA = PaperRunner.find(a, Policy.LEAST_LOADED, 2, Distribution.UNIFORM);
    RunResult baseB = PaperRunner.find(b, Policy.LEAST_LOADED, 2, Distribution.UNIFORM);
    assertEquals(Report.json(reported, "w", List.of(baseA)),
        Report.json(reported, "w", List.of(baseB)));

    // the cost-aware nodes price prefill from the timings they are given
    RunResult costA = PaperRunner.find(a, Policy.COST_AWARE, 2, Distribution.UNIFORM);
    RunResult costB = PaperRunner.find(b, Policy.COST_AWARE, 2, Distribution.UNIFORM);
    assertNotEquals(costA.meanLatencySeconds(), costB.meanLatencySeconds());
    assertEquals(0, costB.failedRequests());

    assertTrue(Report.json(reported, "w", a).contains("\"engine_reports_timings\": true"));
    assertTrue(Report.json(none, "w", b).contains("\"engine_reports_timings\": false"));
  }

  @Test
  void anEngineWithoutTimingsGivesItsNodeTheRestOfTheResult() throws Exception {
    for (boolean reports : new boolean[] {true, false}) {
      SimulatedScheduler sim = new SimulatedScheduler();
      RunRecorder rec = new RunRecorder(2);
      EngineProfile profile = EngineProfile.DEFAULT.withTimings(reports);
      RecordingEngine engine = new RecordingEngine(0, profile.newEngine(sim, 1), rec, reports);
      int[] prompt = new int[100];
      Arrays.setAll(prompt, i -> i);
      for (int i = 0; i < 2; i++) {
        InferenceRequest req = InferenceRequest.of("r" + i, prompt);
        rec.submitted(new Trace.Arrival(i, 0, 0, 0, i), prompt.length);
        var f = engine.execute(req);
        sim.runUntilIdle(1000);
        EngineResult r = f.get();
        // the second run finds the first one's 6 full blocks cached
        assertEquals(i == 0 ? 0 : 96, r.cachedPromptTokens(), "reports " + reports);
        assertEquals(i == 0 ? 0 : 96, rec.cachedTokens[i]);
        assertEquals(100, r.promptTokens());
        if (reports) {
          assertEquals(10_000_000L + 2_500_000L * (i == 0 ? 100 : 4), r.prefillNanos());
          assertEquals(15_000_000L, r.decodeNanos());
        } else {
          assertEquals(-1, r.prefillNanos());
          assertEquals(-1, r.decodeNanos());
        }
      }
    }
  }
}
