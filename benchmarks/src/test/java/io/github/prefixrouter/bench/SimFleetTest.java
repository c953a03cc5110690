package io.github.prefixrouter.bench;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class SimFleetTest {

  /** The default rates print as before; a fraction keeps its digits. */
  @Test
  void aSettingPrintsAsGivenWithoutTrailingZeros() {
    assertEquals("120", SimFleet.setting(120));
    assertEquals("4250", SimFleet.setting(4_250));
    assertEquals("0.2", SimFleet.setting(0.2));
    assertEquals("0.5", SimFleet.setting(0.5));
    assertEquals("1234.5", SimFleet.setting(1_234.5));
    assertEquals("1e-09", SimFleet.setting(1e-9));
    assertEquals("1e+06", SimFleet.setting(1e6));
  }

  @Test
  void aFigureThatDoesNotExistIsADash() {
    assertEquals("1.500x", SimFleet.figure(1.5, "%.3fx"));
    assertEquals("-", SimFleet.figure(0.0 / 0.0, "%.3fx"));
    assertEquals("-", SimFleet.figure(1.0 / 0.0, "%.3fx"));
  }
}
