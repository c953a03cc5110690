package io.github.prefixrouter.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

class TransportExceptionTest {

  @Test
  void aFailureWithoutAKindIsRefusedWhenItIsMade() {
    NullPointerException e = assertThrows(NullPointerException.class,
        () -> new TransportException(null, "lost"));
    assertEquals("a TransportException needs a kind", e.getMessage());
    assertThrows(NullPointerException.class,
        () -> new TransportException(null, "lost", new RuntimeException()));
  }

  @Test
  void itsMessageStartsWithItsKind() {
    RuntimeException cause = new RuntimeException("reset");
    TransportException e =
        new TransportException(TransportException.Kind.BUSY, "over the limit", cause);
    assertEquals(TransportException.Kind.BUSY, e.kind());
    assertEquals("BUSY: over the limit", e.getMessage());
    assertSame(cause, e.getCause());
  }
}
