package io.github.prefixrouter.transport.http;

import io.github.prefixrouter.spi.Transport;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;

/** What the HTTP transport's tests share: transports and sockets closed after each test. */
abstract class HttpTransportFixture {

  /** Closed, in order, after each test. */
  final List<AutoCloseable> toClose = new ArrayList<>();

  @AfterEach
  void closeAll() throws Exception {
    for (AutoCloseable c : toClose) {
      c.close();
    }
  }

  /** Builds, registers for closing and starts a transport. */
  HttpTransport start(HttpTransport.Builder b, Transport.InboundHandler h) {
    HttpTransport t = b.build();
    toClose.add(t);
    t.start(h);
    return t;
  }

  /** A transport on a free loopback port with the tests' cluster key. */
  static HttpTransport.Builder node(String id) {
    return HttpTransport.builder().nodeId(id).listen("127.0.0.1", 0)
        .clusterKey(HttpTransportTest.KEY);
  }
}
