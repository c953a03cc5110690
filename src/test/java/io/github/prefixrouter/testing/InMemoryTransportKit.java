package io.github.prefixrouter.testing;

import io.github.prefixrouter.contract.TransportContractTest;
import io.github.prefixrouter.spi.PeerAddress;
import io.github.prefixrouter.spi.Transport;
import java.time.Duration;
import java.util.function.BooleanSupplier;

/**
 * The transport contract over an {@link InMemoryNetwork} on simulated time: each node's
 * transport is the network's (as {@link #wrap} leaves it), the unreachable address is a node
 * that never joined, and waiting runs the simulation.
 */
abstract class InMemoryTransportKit extends TransportContractTest {
  final SimulatedScheduler sim = new SimulatedScheduler();
  final InMemoryNetwork net;

  InMemoryTransportKit(long seed) {
    this.net = new InMemoryNetwork(sim, seed);
  }

  /** What a node's transport is made of the network's: by default, that one. */
  Transport wrap(Transport transport) {
    return transport;
  }

  @Override
  protected Transport createTransport(String nodeId) {
    return wrap(net.transport(nodeId));
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
