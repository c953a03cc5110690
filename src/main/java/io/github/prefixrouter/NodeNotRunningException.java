package io.github.prefixrouter;

/**
 * The node does not accept requests in its current state (not started yet, stopping or
 * stopped). {@link PrefixRouterNode#submit} returns a future failed with this exception, and
 * completes an accepted request with it when a stop's grace period ended before its answer
 * ({@link PrefixRouterNode#stop(java.time.Duration)}; state {@code STOPPING}). Either way the
 * request can be sent again, to another node.
 */
public class NodeNotRunningException extends PrefixRouterException {

  private static final long serialVersionUID = 1L;

  /** The state the node was in. */
  private final PrefixRouterNode.State state;

  /**
   * Creates the exception.
   *
   * @param nodeId the node's id
   * @param state the state the node was in
   */
  public NodeNotRunningException(String nodeId, PrefixRouterNode.State state) {
    super("node " + nodeId + " is " + state + ", not RUNNING");
    this.state = state;
  }

  /**
   * The state the node was in.
   *
   * @return the state when the request was refused
   */
  public PrefixRouterNode.State state() {
    return state;
  }
}
