package io.github.prefixrouter.testing;

import io.github.prefixrouter.contract.TransportContractTest;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.time.Duration;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Nested;

/** The in-memory transport keeps the transport contract, on a perfect and on a delayed network. */
class InMemoryTransportContractTest {

  @Nested
  class PerfectLinks extends TransportContractTest {
    final SimulatedScheduler sim = new SimulatedScheduler();
    final InMemoryNetwork net = new InMemoryNetwork(sim, 1);

    @Override
    protected Transport createTransport(String nodeId) {
      return net.transport(nodeId);
    }

    @Override
    protected PeerAddress unreachableAddress() {
      return InMemoryNetwork.addressOf("ghost");
    }

    @Override
    protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
      return SimulatedTime.await(sim, condition, max);
    }
  }

  @Nested
  class DelayedJitteryLinks extends TransportContractTest {
    final SimulatedScheduler sim = new SimulatedScheduler();
    final InMemoryNetwork net = new InMemoryNetwork(sim, 2);

    DelayedJitteryLinks() {
      net.setDefaultLink(InMemoryNetwork.Link.delay(Duration.ofMillis(20))
          .withJitter(Duration.ofMillis(10)).withReorder(0.3));
    }

    @Override
    protected Transport createTransport(String nodeId) {
      return net.transport(nodeId);
    }

    @Override
    protected PeerAddress unreachableAddress() {
      return InMemoryNetwork.addressOf("ghost");
    }

    @Override
    protected boolean awaitCondition(BooleanSupplier condition, Duration max) {
      return SimulatedTime.await(sim, condition, max);
    }
  }
}
