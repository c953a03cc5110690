package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.route.NodeProbe;
import java.io.OutputStream;
import java.io.PrintStream;
import java.security.Provider;
import java.security.SecureRandomSpi;
import java.security.Security;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The node process's random source, from which its gossip draws the secret keying the replica
 * index's and the known ids' slots against hash flooding (docs/gossip.md), is seeded from the
 * JDK's secure random source: not a function of the node id and the clock, which a peer may
 * know or guess.
 */
class NodeMainRandomTest {

  /** The bytes every {@code SecureRandom} of {@link #provider} gives, while it is installed. */
  static volatile byte fill;

  /** A JCA provider whose {@code SecureRandom} gives {@link #fill} only, put first. */
  static Provider provider() {
    return new Provider("FixedSecureRandomTest", "1.0", "a SecureRandom of one repeated byte") {
      {
        putService(new Service(this, "SecureRandom", "FixedBytes", FixedBytes.class.getName(),
            null, null) {
          @Override
          public Object newInstance(Object parameter) {
            return new FixedBytes();
          }
        });
      }
    };
  }

  /** The {@code SecureRandomSpi} of {@link #provider}. */
  public static final class FixedBytes extends SecureRandomSpi {
    private static final long serialVersionUID = 1L;

    @Override
    protected void engineSetSeed(byte[] seed) {}

    @Override
    protected void engineNextBytes(byte[] bytes) {
      Arrays.fill(bytes, fill);
    }

    @Override
    protected byte[] engineGenerateSeed(int numBytes) {
      byte[] b = new byte[numBytes];
      Arrays.fill(b, fill);
      return b;
    }
  }

  /** The gossip secret of node "r" started while every {@code SecureRandom} gives {@code b}. */
  private static long secretOfANodeStartedOn(byte b) throws Exception {
    fill = b;
    Provider p = provider();
    assertTrue(Security.insertProviderAt(p, 1) > 0, "provider installed");
    try (NodeMain.Running r = NodeMain.start(NodeOptions.parse(
        new String[] {"--id", "r", "--listen", "127.0.0.1:0", "--client", "127.0.0.1:0"},
        Map.of("PREFIX_ROUTER_CLUSTER_KEY", NodeMainTest.KEY_HEX)),
        new PrintStream(OutputStream.nullOutputStream()))) {
      return NodeProbe.gossipOf(r.node).secret();
    } finally {
      Security.removeProvider(p.getName());
    }
  }

  /**
   * Two starts of one node id on one secure source, at two readings of the clock, draw one
   * secret; another secure source, another secret. The node was built without a random source,
   * so its default seeded one from the node id's hash and the clock's nanoseconds (since boot).
   */
  @Test
  void theGossipSecretFollowsTheSecureRandomSourceNotTheClock() throws Exception {
    long first = secretOfANodeStartedOn((byte) 0x5A);
    long again = secretOfANodeStartedOn((byte) 0x5A);
    long other = secretOfANodeStartedOn((byte) 0xA5);
    assertEquals(first, again, "node r started twice on one secure source drew two secrets: "
        + "its random source is seeded from its id and the clock, not the secure source");
    assertNotEquals(first, other, "node r drew one secret from two secure sources");
  }
}
