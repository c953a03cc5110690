package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.spi.EngineResult;
import java.lang.reflect.Field;
import org.junit.jupiter.api.Test;

/**
 * The cost model keeps learning for as long as a node runs: its counts of samples saturate
 * instead of wrapping to negative numbers that would switch learning off.
 */
class CostModelSamplesTest {

  @Test
  void thePrefillSlopeIsStillLearnedAfterTwoToThe31Samples() throws Exception {
    CostModel m = new CostModel(100_000);
    // as after 2^31 - 1 results reporting their prefill (25 days at 1,000 results a second):
    // set directly, counting them one by one would take minutes
    Field samples = CostModel.class.getDeclaredField("samples");
    samples.setAccessible(true);
    samples.setInt(m, Integer.MAX_VALUE);
    for (int i = 0; i < 200; i++) {
      int uncached = 100 + (i % 10) * 100;
      m.observe(new EngineResult(new int[] {1}, "", uncached, 0, 300_000L * uncached, 1_000));
    }
    assertEquals(300_000, m.prefillNanosPerToken(), 3_000);
  }
}
