package io.github.prefixrouter.internal.gossip;

import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.wire.WireTypes;
import java.util.List;

/**
 * Test access to the package-private gossip codec, for tests of whole nodes that forge gossip
 * messages.
 */
public final class GossipFrames {

  private GossipFrames() {}

  private static final GossipCodec CODEC =
      new GossipCodec(GossipConfig.builder().build().messageByteCap(),
          GossipConfig.MAX_PEERS_LIMIT + 1);

  /**
   * A SYN whose digest lists {@code nodeId} at {@code generation} alone, as a peer that knows it
   * by that generation sends it.
   */
  public static byte[] synClaiming(String nodeId, long generation) {
    return CODEC.encode(new Syn(1, 1, List.of(
        new DigestEntry(nodeId, generation, 0, 1, 0, 0, false))));
  }

  /** A payload of a gossip type that does not decode: the first gossip type byte alone. */
  public static byte[] malformed() {
    return new byte[] {(byte) WireTypes.GOSSIP_FIRST};
  }
}
