package io.github.prefixrouter.bench.route;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.RouteDecision;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The benchmark's premise: the library (with and without its prefix hash cache) and the
 * previous planner (its baseline) take the same decisions on the benchmark's replicas, and those
 * decisions route to the peers the naive scan finds longest.
 */
class RouteFixtureTest {

  @ParameterizedTest
  @CsvSource({"4, 512, FIXED", "64, 512, FIXED", "64, 4096, FIXED", "64, 4096, SHARED"})
  void libraryAndPreviousPlannerDecideAlike(int peers, int tokens, RouteFixture.Workload w) {
    RouteFixture f = new RouteFixture(peers, tokens, 42, w);
    // 8 queries (a sample of the shared workload's), each whole and 40 truncations, twice
    assertEquals(2 * 8 * 41, f.checkSameDecisions(40, 11));
    int routed = 0;
    for (int[] q : f.queries) {
      RouteDecision d = f.decide.apply(q);
      f.naiveBest(q);
      int longest = 0;
      for (int p = 0; p < peers; p++) {
        longest = Math.max(longest, f.naiveOut[p]);
      }
      int libraryLongest = 0;
      for (int k = 1; k < d.candidates().size(); k++) {
        libraryLongest = Math.max(libraryLongest, d.candidates().get(k).matchedTokens());
      }
      assertEquals(Math.min(longest * 16, q.length), libraryLongest, "longest peer match");
      routed += d.target().local() ? 0 : 1;
    }
    assertTrue(routed > 0, "the fixture should route some queries to peers");
  }
}
