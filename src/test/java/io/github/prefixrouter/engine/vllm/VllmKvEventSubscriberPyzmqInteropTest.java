package io.github.prefixrouter.engine.vllm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.engine.vllm.RecordingSink.Call;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The subscriber against libzmq (the library vLLM's pyzmq wraps), through a Python publisher
 * shaped like vLLM's: a PUB sending {@code [topic, seq, payload]} and a ROUTER answering replay
 * requests. Every fifth message is kept for replay only, so the stream has gaps to fill.
 * Skipped where {@code /usr/bin/python3} cannot import {@code zmq} (Debian: python3-zmq).
 */
class VllmKvEventSubscriberPyzmqInteropTest {

  private static final String PYTHON = "/usr/bin/python3";

  /**
   * The publisher: messages of {@code topic}, and with {@code otherTopic} also a message of
   * topic {@code other} before each (which a subscriber of the topic never receives).
   */
  private static String publisher(String topic, boolean otherTopic) {
    return PUBLISHER.replace("b'kv-events'", "b'" + topic + "'")
        .replace("        pub.send_multipart([b'other', b'x', b'y'])\n",
            otherTopic ? "        pub.send_multipart([b'other', b'x', b'y'])\n" : "");
  }

  private static final String PUBLISHER = String.join("\n",
      "import time, zmq",
      "ctx = zmq.Context()",
      "pub = ctx.socket(zmq.PUB); pub.bind('tcp://127.0.0.1:*')",
      "rep = ctx.socket(zmq.ROUTER); rep.bind('tcp://127.0.0.1:*')",
      "print(pub.last_endpoint.decode(), rep.last_endpoint.decode(), flush=True)",
      "buf, seq, end = {}, 0, time.time() + 60",
      "while time.time() < end:",
      "    buf[seq] = bytes([seq % 251]) * (70000 if seq % 4 == 3 else 10)",
      "    if seq % 5 != 4:",
      "        pub.send_multipart([b'other', b'x', b'y'])",
      "        pub.send_multipart([b'kv-events', seq.to_bytes(8, 'big'), buf[seq]])",
      "    seq += 1",
      "    if rep.poll(10):",
      "        ident, _, start = rep.recv_multipart()",
      "        for s in range(int.from_bytes(start, 'big'), seq):",
      "            rep.send_multipart([ident, b'', s.to_bytes(8, 'big'), buf[s]])",
      "        rep.send_multipart([ident, b'', (-1).to_bytes(8, 'big', signed=True), b''])",
      "");

  private static boolean pyzmqAvailable() {
    try {
      Process p = new ProcessBuilder(PYTHON, "-c", "import zmq").redirectErrorStream(true).start();
      p.getInputStream().transferTo(java.io.OutputStream.nullOutputStream());
      return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
    } catch (Exception e) {
      return false;
    }
  }

  private static byte[] payload(long seq) {
    byte[] b = new byte[seq % 4 == 3 ? 70_000 : 10];
    Arrays.fill(b, (byte) (seq % 251));
    return b;
  }

  @Test
  void aLibzmqPublisherIsReadAndItsGapsReplayed() throws Exception {
    readAndReplay(publisher("kv-events", true), "kv-events");
  }

  /** vLLM's and SGLang's default: an empty topic, read by a subscriber left at its default. */
  @Test
  void aLibzmqPublisherWithTheDefaultEmptyTopicIsRead() throws Exception {
    readAndReplay(publisher("", false), null);
  }

  private void readAndReplay(String script, String topic) throws Exception {
    Assumptions.assumeTrue(pyzmqAvailable(), "python3 with pyzmq is not installed");
    Process py = new ProcessBuilder(PYTHON, "-c", script)
        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    RecordingSink sink = new RecordingSink();
    VllmKvEventSubscriber s = null;
    try {
      BufferedReader out = new BufferedReader(
          new InputStreamReader(py.getInputStream(), StandardCharsets.US_ASCII));
      String[] endpoints =
          CompletableFuture.supplyAsync(() -> {
            try {
              return out.readLine().split(" ");
            } catch (java.io.IOException e) {
              throw new java.io.UncheckedIOException(e);
            }
          }).get(30, TimeUnit.SECONDS);
      VllmKvEventSubscriber.Builder b = VllmKvEventSubscriber.builder()
          .endpoint(endpoints[0])
          .replayEndpoint(endpoints[1])
          .sink(sink);
      if (topic != null) {
        b.topic(topic);
      }
      s = b.build();
      s.start();
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (sink.size() < 30) {
        assertTrue(System.nanoTime() < deadline, "30 messages within 30 s: " + sink.calls());
        Thread.sleep(5);
      }
      s.close();
      List<Call> calls = sink.calls();
      long first = calls.get(0).seq();
      for (int i = 0; i < calls.size(); i++) {
        Call c = calls.get(i);
        assertEquals(first + i, c.seq(), "consecutive: " + calls);
        if (i > 0) {
          assertEquals(c.seq() % 5 == 4, c.replayed(), "lost messages come by replay: " + c);
        }
        assertArrayEquals(payload(c.seq()), c.payload(), c.toString());
      }
      VllmKvEventSubscriber.Stats st = s.stats();
      assertTrue(st.replaysRequested() >= 5, st.toString());
      assertEquals(0, st.replayFailures(), st.toString());
      assertEquals(0, st.malformedMessages(), st.toString());
      assertEquals(0, st.otherTopicMessages(), "libzmq filters by topic: " + st);
      assertFalse(sink.overlapped());
    } finally {
      if (s != null) {
        s.close();
      }
      py.destroy();
      if (!py.waitFor(10, TimeUnit.SECONDS)) {
        py.destroyForcibly();
      }
    }
  }
}
