package io.github.prefixrouter.spi;

import java.util.Objects;

/**
 * Where a peer can be reached: its node id and a transport-specific address (for example
 * {@code "127.0.0.1:7070"} for the HTTP transport, or any unique string for the in-memory one).
 *
 * @param nodeId the peer's node id: 1 to 64 characters, printable ASCII, no spaces
 * @param address the transport address: 1 to 255 characters, printable ASCII, no spaces
 *
 * <p>Immutable; neither component is ever null.
 */
public record PeerAddress(String nodeId, String address) {

  /** Longest node id accepted, in characters. */
  public static final int MAX_NODE_ID_LENGTH = 64;

  /** Longest address accepted, in characters. */
  public static final int MAX_ADDRESS_LENGTH = 255;

  /**
   * Checks both components.
   *
   * @param nodeId the peer's node id
   * @param address the transport address
   * @throws NullPointerException if either is null
   * @throws IllegalArgumentException if either is empty, too long or has a character outside
   *     printable ASCII or a space
   */
  public PeerAddress {
    checkToken("nodeId", nodeId, MAX_NODE_ID_LENGTH);
    checkToken("address", address, MAX_ADDRESS_LENGTH);
  }

  /**
   * Validates a node id.
   *
   * @param nodeId the node id to check
   * @return {@code nodeId}
   * @throws NullPointerException if {@code nodeId} is null
   * @throws IllegalArgumentException naming the problem, if it is not a valid node id
   */
  public static String checkNodeId(String nodeId) {
    checkToken("nodeId", nodeId, MAX_NODE_ID_LENGTH);
    return nodeId;
  }

  private static void checkToken(String what, String value, int max) {
    Objects.requireNonNull(value, what);
    if (value.isEmpty() || value.length() > max) {
      throw new IllegalArgumentException(
          what + " must have 1 to " + max + " characters, was " + value.length());
    }
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if (c <= ' ' || c > '~') {
        throw new IllegalArgumentException(
            what + " must be printable ASCII without spaces; bad character at index " + i);
      }
    }
  }

  @Override
  public String toString() {
    return nodeId + "@" + address;
  }
}
