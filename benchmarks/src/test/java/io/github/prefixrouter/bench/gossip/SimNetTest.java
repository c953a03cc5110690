package io.github.prefixrouter.bench.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.github.prefixrouter.spi.PeerAddress;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The simulated network's bound on messages outstanding to a peer, as HttpTransport's. */
class SimNetTest {

  private static final PeerAddress A = new PeerAddress("a", "sim:a");
  private static final PeerAddress B = new PeerAddress("b", "sim:b");
  private static final PeerAddress C = new PeerAddress("c", "sim:c");

  @Test
  void messagesBeyondTheOutstandingBoundToAPeerAreDroppedUntilAnswersComeBack() {
    // 2 ms one way, no jitter: a message is outstanding for 4 ms
    SimNet net = new SimNet(1, 2_000_000, 0, 0, 64);
    List<Integer> atB = new ArrayList<>();
    List<Integer> atC = new ArrayList<>();
    net.register(B, (from, p) -> atB.add(p.length));
    net.register(C, (from, p) -> atC.add(p.length));
    for (int i = 0; i < 70; i++) {
      net.send(A, B, new byte[i + 1]);
    }
    net.send(A, C, new byte[3]); // another peer has slots of its own
    net.time.advanceBy(3_000_000);
    assertEquals(64, atB.size(), "messages delivered of 70 sent at once to one peer");
    assertEquals(List.of(3), atC, "a message to another peer");
    assertEquals(6, net.droppedInFlight, "messages dropped at the bound");
    assertEquals(70, net.largest, "the largest payload sent, a dropped one included");
    net.send(A, B, new byte[1]);
    net.time.advanceBy(3_000_000);
    assertEquals(64, atB.size(), "a message sent before the answers came back is dropped");
    net.time.advanceBy(3_000_000);
    net.send(A, B, new byte[1]);
    net.time.advanceBy(3_000_000);
    assertEquals(65, atB.size(), "a message sent once the answers came back");
  }

  @Test
  void withoutABoundEveryMessageArrives() {
    SimNet net = new SimNet(1, 2_000_000, 1_000_000, 0);
    List<Integer> atB = new ArrayList<>();
    net.register(B, (from, p) -> atB.add(p.length));
    for (int i = 0; i < 1_000; i++) {
      net.send(A, B, new byte[1]);
    }
    net.time.advanceBy(4_000_000);
    assertEquals(1_000, atB.size());
    assertEquals(0, net.droppedInFlight);
  }
}
