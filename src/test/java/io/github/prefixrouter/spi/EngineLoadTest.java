package io.github.prefixrouter.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class EngineLoadTest {

  @Test
  void theTotalIsTheSumAndSaturatesInsteadOfWrapping() {
    assertEquals(0, EngineLoad.IDLE.total());
    assertEquals(7, new EngineLoad(3, 4).total());
    assertEquals(Integer.MAX_VALUE, new EngineLoad(Integer.MAX_VALUE, 0).total());
    // an engine reporting absurd figures must not look idle: the sum used to wrap to -2
    assertEquals(Integer.MAX_VALUE, new EngineLoad(Integer.MAX_VALUE, Integer.MAX_VALUE).total());
  }

  @Test
  void negativeFiguresAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> new EngineLoad(-1, 0));
    assertThrows(IllegalArgumentException.class, () -> new EngineLoad(0, -1));
  }
}
