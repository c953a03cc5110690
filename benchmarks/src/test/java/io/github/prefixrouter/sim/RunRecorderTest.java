package io.github.prefixrouter.sim;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class RunRecorderTest {

  @Test
  void onlyTheIdsOfSubmittedRequestsAreKnown() {
    RunRecorder rec = new RunRecorder(20);
    for (int i : new int[] {0, 7, 19}) {
      rec.submitted(new Trace.Arrival(i, 0, 0, 0, 0), 10);
    }
    assertEquals(0, rec.indexOf(RunRecorder.requestId(0)));
    assertEquals(7, rec.indexOf("r7"));
    assertEquals(19, rec.indexOf("r19"));
    // not submitted, out of range, or not the id of an index
    for (String id : new String[] {"r1", "r20", "r4294967303", "r00", "r07", "r+7", "r-7", "7",
        "x7", "r", "", "r7 ", "r１"}) {
      assertEquals(-1, rec.indexOf(id), "'" + id + "'");
    }
  }
}
