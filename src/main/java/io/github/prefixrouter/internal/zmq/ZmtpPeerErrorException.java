package io.github.prefixrouter.internal.zmq;

/**
 * The peer sent an ERROR command (it refused the handshake, or gave up on the connection). The
 * reason text it gave is {@link #peerReason()}.
 */
public final class ZmtpPeerErrorException extends ZmtpProtocolException {

  private final String peerReason;

  public ZmtpPeerErrorException(String peerReason) {
    super(Reason.PEER_ERROR, "the peer sent ERROR \"" + peerReason + "\"");
    this.peerReason = peerReason;
  }

  /** The reason the peer gave, as printable ASCII (other bytes replaced by '?'). */
  public String peerReason() {
    return peerReason;
  }
}
