package io.github.prefixrouter.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.OptionalInt;
import org.junit.jupiter.api.Test;

/**
 * The HTTP status an engine failure may carry: given by the constructors that take one, empty
 * from those that do not (every implementation written before it), refused when not three
 * digits.
 */
class EngineExceptionTest {

  @Test
  void theConstructorsWithoutAStatusReportNone() {
    IllegalStateException cause = new IllegalStateException("x");
    for (EngineException e : new EngineException[] {
        new EngineException("a", true),
        new EngineException("b", false, cause),
        new EngineBusyException("c"),
        new InvalidRequestException("d"),
        new EngineTimeoutException("e", cause)}) {
      assertEquals(OptionalInt.empty(), e.httpStatus(), e.toString());
    }
  }

  @Test
  void theStatusIsKeptWithTheRest() {
    IllegalStateException cause = new IllegalStateException("x");
    EngineException e = new EngineException("refused", true, 401, cause);
    assertEquals(OptionalInt.of(401), e.httpStatus());
    assertTrue(e.retryable());
    assertEquals("refused", e.getMessage());
    assertSame(cause, e.getCause());
    EngineBusyException busy = new EngineBusyException("busy", 503);
    assertEquals(OptionalInt.of(503), busy.httpStatus());
    assertTrue(busy.retryable());
    InvalidRequestException invalid = new InvalidRequestException("too long", 400);
    assertEquals(OptionalInt.of(400), invalid.httpStatus());
    assertFalse(invalid.retryable());
  }

  @Test
  void aStatusThatIsNotThreeDigitsIsRefused() {
    for (int s : new int[] {-1, 0, 99, 1000}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> new EngineException("m", true, s, null), "status " + s);
      assertTrue(e.getMessage().contains("httpStatus") && e.getMessage().contains(String.valueOf(s)),
          e.getMessage());
    }
    assertThrows(IllegalArgumentException.class, () -> new EngineBusyException("m", 0));
    assertThrows(IllegalArgumentException.class, () -> new InvalidRequestException("m", 1000));
  }
}
