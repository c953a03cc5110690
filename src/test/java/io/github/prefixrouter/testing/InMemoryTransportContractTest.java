package io.github.prefixrouter.testing;

import java.time.Duration;
import org.junit.jupiter.api.Nested;

/** The in-memory transport keeps the transport contract, on a perfect and on a delayed network. */
class InMemoryTransportContractTest {

  @Nested
  class PerfectLinks extends InMemoryTransportKit {
    PerfectLinks() {
      super(1);
    }
  }

  @Nested
  class DelayedJitteryLinks extends InMemoryTransportKit {
    DelayedJitteryLinks() {
      super(2);
      net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(20))
          .withJitter(Duration.ofMillis(10)).withReorder(0.3));
    }
  }
}
