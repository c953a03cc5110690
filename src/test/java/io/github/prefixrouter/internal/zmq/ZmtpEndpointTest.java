package io.github.prefixrouter.internal.zmq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ZmtpEndpointTest {

  @Test
  void parsesHostNamesIpv4AndBracketedIpv6() {
    assertEquals(new ZmtpEndpoint("vllm-0.internal", 5557),
        ZmtpEndpoint.parse("tcp://vllm-0.internal:5557"));
    assertEquals(new ZmtpEndpoint("10.0.0.7", 1), ZmtpEndpoint.parse("tcp://10.0.0.7:1"));
    ZmtpEndpoint v6 = ZmtpEndpoint.parse("tcp://[::1]:65535");
    assertEquals(new ZmtpEndpoint("::1", 65535), v6);
    assertEquals("tcp://[::1]:65535", v6.toString());
  }

  @ParameterizedTest
  @ValueSource(strings = {
      "ipc:///tmp/kv", "inproc://kv", "pgm://eth0;239.0.0.1:5555", "udp://h:1", "h:5557",
      "tcp://*:5557", "tcp://h", "tcp://:5557", "tcp://h:0", "tcp://h:65536", "tcp://h:x",
      "tcp://::1:5557", "tcp://[::1]5557", "tcp://h:5557/x", "tcp://a;b:5557"})
  void refusesWhatIsNotTcpHostPort(String endpoint) {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> ZmtpEndpoint.parse(endpoint));
    assertTrue(e.getMessage().contains(endpoint), e.getMessage());
  }
}
