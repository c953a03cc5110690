package io.github.prefixrouter;

/**
 * The node does not accept requests in its current state (not started yet, stopping or
 * stopped). {@link PrefixRouterNode#submit} returns a future failed with this exception.
 */
public class NodeNotRunningException extends PrefixRouterException {

  private static final long serialVersionUID = 1L;

  private final PrefixRouterNode.State state;

  public NodeNotRunningException(String nodeId, PrefixRouterNode.State state) {
    super("node " + nodeId + " is " + state + ", not RUNNING");
    this.state = state;
  }

  /** The state the node was in. */
  public PrefixRouterNode.State state() {
    return state;
  }
}
