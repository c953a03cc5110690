package io.github.prefixrouter.transport.http;

import static io.github.prefixrouter.transport.http.HttpTransportTest.KEY;
import static io.github.prefixrouter.transport.http.HttpTransportTest.OTHER_KEY;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.spi.TransportException;
import io.github.prefixrouter.transport.http.HttpTransportTest.Recorder;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Rotating the cluster key from {@code KEY} to {@code OTHER_KEY} while the transports run, one
 * node at a time, in the three steps {@link HttpTransport#updateClusterKeys} describes: every
 * node keeps authenticating every other at every moment, and a node that skips a step is
 * refused.
 */
class ClusterKeyRotationTest extends HttpTransportFixture {

  private static final byte[] THIRD_KEY =
      "0011223344556677001122334455667700".getBytes(StandardCharsets.US_ASCII);

  private final List<HttpTransport> nodes = new ArrayList<>();
  private final List<Recorder> inboxes = new ArrayList<>();

  private void startThree() {
    for (String id : List.of("a", "b", "c")) {
      Recorder r = new Recorder();
      inboxes.add(r);
      nodes.add(start(node(id), r));
    }
  }

  /** Every node sends every other a request and a message; all must arrive. */
  private void everyPairTalks(String round) throws Exception {
    for (int i = 0; i < nodes.size(); i++) {
      for (int j = 0; j < nodes.size(); j++) {
        if (i == j) {
          continue;
        }
        HttpTransport from = nodes.get(i);
        HttpTransport to = nodes.get(j);
        String what = round + " " + from.localAddress().nodeId() + "->" + to.localAddress().nodeId();
        byte[] answer = from.request(to.localAddress(), what.getBytes(StandardCharsets.UTF_8),
            Duration.ofSeconds(5)).get(10, TimeUnit.SECONDS);
        assertEquals("echo " + from.localAddress().nodeId() + " " + what,
            new String(answer, StandardCharsets.UTF_8), what);
        from.send(to.localAddress(), what.getBytes(StandardCharsets.UTF_8));
        String got = inboxes.get(j).messages.poll(10, TimeUnit.SECONDS);
        assertTrue(got != null && got.endsWith(":" + what), what + ": got " + got);
      }
    }
  }

  private long total(java.util.function.ToLongFunction<HttpTransport.Stats> counter) {
    return nodes.stream().mapToLong(n -> counter.applyAsLong(n.stats())).sum();
  }

  @Test
  void aRotationInThreeStepsNeverStopsTwoNodesTalking() throws Exception {
    startThree();
    everyPairTalks("before");
    assertEquals(0, total(HttpTransport.Stats::otherKeyAuthentications));
    // 1: every node accepts the new key, still signing with the old
    for (HttpTransport n : nodes) {
      n.updateClusterKeys(KEY, OTHER_KEY);
      everyPairTalks("accept new at " + n.localAddress().nodeId());
    }
    assertEquals(0, total(HttpTransport.Stats::otherKeyAuthentications), "nobody signs with it yet");
    // 2: every node signs with the new key, still accepting the old
    for (HttpTransport n : nodes) {
      n.updateClusterKeys(OTHER_KEY, KEY);
      everyPairTalks("sign new at " + n.localAddress().nodeId());
    }
    // while some signed with the new key and others with the old, each saw the other key
    for (HttpTransport n : nodes) {
      assertTrue(n.stats().otherKeyAuthentications() > 0, n.localAddress() + " " + n.stats());
    }
    // now nobody signs with the old key: the counter stands still
    long settled = total(HttpTransport.Stats::otherKeyAuthentications);
    everyPairTalks("all sign new");
    assertEquals(settled, total(HttpTransport.Stats::otherKeyAuthentications));
    // 3: the old key is dropped
    for (HttpTransport n : nodes) {
      n.updateClusterKeys(OTHER_KEY);
      everyPairTalks("drop old at " + n.localAddress().nodeId());
    }
    assertEquals(0, total(HttpTransport.Stats::authFailures));
    assertEquals(9, total(HttpTransport.Stats::keyUpdates));
    String newId = MessageAuthenticator.keyId(OTHER_KEY);
    for (HttpTransport n : nodes) {
      assertEquals(Map.of(newId, 1), n.stats().clusterKeys());
    }
  }

  @Test
  void aNodeThatSignsWithAKeyItsPeersDoNotAcceptYetIsRefused() throws Exception {
    startThree();
    HttpTransport a = nodes.get(0);
    HttpTransport b = nodes.get(1);
    a.updateClusterKeys(OTHER_KEY, KEY); // step 2 on a before step 1 on b
    CompletableFuture<byte[]> f = a.request(b.localAddress(), new byte[] {1}, Duration.ofSeconds(5));
    ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.PROTOCOL, ((TransportException) e.getCause()).kind());
    assertEquals(1, b.stats().authFailures());
    // a takes b's request (it accepts b's key) but signs its answer with the new key, which b
    // does not accept
    CompletableFuture<byte[]> back = b.request(a.localAddress(), new byte[] {2}, Duration.ofSeconds(5));
    ExecutionException e2 = assertThrows(ExecutionException.class, () -> back.get(10, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.PROTOCOL, ((TransportException) e2.getCause()).kind());
    assertEquals(1, a.stats().requestsReceived(), "a took b's request, whose answer b dropped");
    assertEquals(2, b.stats().authFailures());
    // b warned, once each, that a's messages and a's answers come signed with a key it lacks
    String newId = MessageAuthenticator.keyId(OTHER_KEY);
    assertEquals(java.util.Set.of(
        "the messages of the node calling itself a at " + a.localAddress().address() + " " + newId,
        "the answers of " + a.localAddress() + " " + newId), b.foreignKeysSeen());
    assertEquals(java.util.Set.of(), a.foreignKeysSeen(), "a accepts both keys");
    // once b accepts the new key, both directions pass
    b.updateClusterKeys(KEY, OTHER_KEY);
    assertEquals("echo a x", new String(a.request(b.localAddress(), "x".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(5)).get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8));
    assertEquals("echo b y", new String(b.request(a.localAddress(), "y".getBytes(StandardCharsets.UTF_8),
        Duration.ofSeconds(5)).get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8));
  }

  /**
   * Strangers sending messages under made-up key ids can neither fill the log nor use up the
   * warnings: at most {@link HttpTransport#WARNINGS_PER_MINUTE} are logged a minute,
   * a peer's real key left out during a flood is warned of in the next minute, and what is
   * remembered stays bounded, the least recently seen pair forgotten first. The warnings stopped
   * for good once 1,024 pairs of sender and key had been warned of, whoever had sent them; and
   * without the per-minute bound each made-up key logged a line.
   */
  @Test
  void madeUpKeyIdsNeitherFillTheLogNorSilenceTheWarningOfARealOne() throws Exception {
    AtomicLong now = new AtomicLong(System.currentTimeMillis());
    HttpTransport a = start(node("a").wallClockMillis(now::get), new Recorder());
    HttpTransport b = start(node("b").clusterKey(OTHER_KEY), new Recorder());
    String real = "the messages of the node calling itself b at " + b.localAddress().address() + " "
        + MessageAuthenticator.keyId(OTHER_KEY);
    int perMinute = HttpTransport.WARNINGS_PER_MINUTE;
    HttpClient stranger = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    int forged = forge(stranger, a, 0, perMinute + 5, now.get());
    assertEquals(perMinute, a.foreignKeysSeen().size(), "warnings logged in one minute");
    // b's real key, in the flood's minute: left out
    refused(b, a);
    assertFalse(a.foreignKeysSeen().contains(real), "left out in the flood's minute");
    // b now holds a in its failure cool-down and sends nothing: its next messages are sent as
    // b's transport sends them (same sender, address and key id), the MAC being refused anyway
    now.addAndGet(60_000);
    sendAs(stranger, a, "b", b.localAddress().address(), MessageAuthenticator.keyId(OTHER_KEY),
        "b1", now.get());
    assertTrue(a.foreignKeysSeen().contains(real), "no warning of b's key");
    while (forged < HttpTransport.MAX_OTHER_NODES + 2 * perMinute) {
      now.addAndGet(60_000);
      forged += forge(stranger, a, forged, perMinute, now.get());
    }
    assertEquals(HttpTransport.MAX_OTHER_NODES, a.foreignKeysSeen().size());
    assertFalse(a.foreignKeysSeen().contains(real), "the least recently seen pair is forgotten");
    now.addAndGet(60_000);
    sendAs(stranger, a, "b", b.localAddress().address(), MessageAuthenticator.keyId(OTHER_KEY),
        "b2", now.get());
    assertTrue(a.foreignKeysSeen().contains(real), "a forgotten pair warns again");
    assertEquals(HttpTransport.MAX_OTHER_NODES, a.foreignKeysSeen().size());
  }

  /** Sends {@code count} messages to {@code to}, each under a made-up key id of its own. */
  private static int forge(HttpClient client, HttpTransport to, int first, int count, long ts)
      throws Exception {
    for (int i = first; i < first + count; i++) {
      sendAs(client, to, "s" + i, "10.0.0.9:7000", String.format("%08x", i), "n" + i, ts);
    }
    return count;
  }

  /** Sends a message to {@code to} under the key id {@code keyId}, with a MAC it refuses. */
  private static void sendAs(HttpClient client, HttpTransport to, String sender,
      String senderAddress, String keyId, String nonce, long ts) throws Exception {
    HttpRequest req = HttpRequest.newBuilder(
            URI.create("http://" + to.localAddress().address() + HttpTransport.MESSAGE_PATH))
        .header("PR-Sender", sender).header("PR-Sender-Address", senderAddress)
        .header("PR-Recipient", to.localAddress().nodeId())
        .header("PR-Timestamp", Long.toString(ts))
        .header("PR-Nonce", nonce).header("PR-Mac", "forged")
        .header("PR-Key", keyId)
        .POST(HttpRequest.BodyPublishers.ofByteArray(new byte[] {1}))
        .build();
    assertEquals(401, client.send(req, HttpResponse.BodyHandlers.discarding()).statusCode());
  }

  /** A request from {@code from}, whose key {@code to} does not accept: refused. */
  private static void refused(HttpTransport from, HttpTransport to) {
    CompletableFuture<byte[]> f =
        from.request(to.localAddress(), new byte[] {1}, Duration.ofSeconds(5));
    ExecutionException e =
        assertThrows(ExecutionException.class, () -> f.get(10, TimeUnit.SECONDS));
    assertEquals(TransportException.Kind.PROTOCOL, ((TransportException) e.getCause()).kind());
  }

  @Test
  void keysChangeUnderTrafficWithoutAFailedRequest() throws Exception {
    startThree();
    AtomicBoolean stop = new AtomicBoolean();
    AtomicLong answered = new AtomicLong();
    AtomicReference<Throwable> failure = new AtomicReference<>();
    List<Thread> senders = new ArrayList<>();
    for (int i = 0; i < nodes.size(); i++) {
      HttpTransport from = nodes.get(i);
      HttpTransport to = nodes.get((i + 1) % nodes.size());
      Thread t = new Thread(() -> {
        int k = 0;
        while (!stop.get() && failure.get() == null) {
          try {
            from.request(to.localAddress(), ("m" + k++).getBytes(StandardCharsets.UTF_8),
                Duration.ofSeconds(5)).get(10, TimeUnit.SECONDS);
            answered.incrementAndGet();
          } catch (Exception e) {
            failure.compareAndSet(null, e);
          }
        }
      }, "rotation-sender-" + i);
      t.setDaemon(true);
      senders.add(t);
      t.start();
    }
    List<byte[][]> steps = List.of(
        new byte[][] {KEY, OTHER_KEY}, new byte[][] {OTHER_KEY, KEY}, new byte[][] {OTHER_KEY});
    for (byte[][] step : steps) {
      for (HttpTransport n : nodes) {
        long before = answered.get();
        n.updateClusterKeys(step[0], java.util.Arrays.copyOfRange(step, 1, step.length));
        // let requests pass under the new keys before the next node changes
        for (int w = 0; w < 1000 && answered.get() < before + 20 && failure.get() == null; w++) {
          Thread.sleep(5);
        }
      }
    }
    stop.set(true);
    for (Thread t : senders) {
      t.join(20_000);
    }
    assertEquals(null, failure.get(), "a request failed during the rotation");
    assertTrue(answered.get() >= 9 * 20, "requests answered: " + answered.get());
    assertEquals(0, total(HttpTransport.Stats::authFailures));
  }

  @Test
  void theBuilderAndUpdateCheckTheKeys() {
    IllegalArgumentException shortKey = assertThrows(IllegalArgumentException.class,
        () -> node("a").acceptedClusterKeys(new byte[8]).build());
    assertTrue(shortKey.getMessage().contains("accepted cluster key 1 must have at least 16 bytes"),
        shortKey.getMessage());
    IllegalArgumentException tooMany = assertThrows(IllegalArgumentException.class,
        () -> node("a").acceptedClusterKeys(OTHER_KEY, THIRD_KEY, new byte[16], new byte[17]).build());
    assertTrue(tooMany.getMessage().contains("at most 4 distinct cluster keys"), tooMany.getMessage());
    IllegalArgumentException noSigner = assertThrows(IllegalArgumentException.class,
        () -> HttpTransport.builder().nodeId("a").listen("127.0.0.1", 0)
            .insecureWithoutAuthentication().acceptedClusterKeys(OTHER_KEY).build());
    assertTrue(noSigner.getMessage().contains("needs clusterKey"), noSigner.getMessage());
    // repeats are kept once: the signing key listed again is no fifth key
    HttpTransport t = node("a").acceptedClusterKeys(KEY, OTHER_KEY, THIRD_KEY, new byte[16]).build();
    toClose.add(t);
    Map<String, Integer> expected = new LinkedHashMap<>();
    expected.put(MessageAuthenticator.keyId(KEY), 1);
    expected.put(MessageAuthenticator.keyId(OTHER_KEY), 0);
    expected.put(MessageAuthenticator.keyId(THIRD_KEY), 0);
    expected.put(MessageAuthenticator.keyId(new byte[16]), 0);
    assertEquals(List.copyOf(expected.entrySet()), List.copyOf(t.stats().clusterKeys().entrySet()));
    // a refused update leaves the keys as they were
    assertThrows(IllegalArgumentException.class, () -> t.updateClusterKeys(new byte[15]));
    assertThrows(IllegalArgumentException.class, () -> t.updateClusterKeys(null));
    assertThrows(IllegalArgumentException.class, () -> t.updateClusterKeys(KEY, (byte[]) null));
    assertEquals(List.copyOf(expected.entrySet()), List.copyOf(t.stats().clusterKeys().entrySet()));
    assertEquals(0, t.stats().keyUpdates());
    HttpTransport open = HttpTransport.builder().nodeId("b").listen("127.0.0.1", 0)
        .insecureWithoutAuthentication().build();
    toClose.add(open);
    IllegalStateException insecure =
        assertThrows(IllegalStateException.class, () -> open.updateClusterKeys(KEY));
    assertTrue(insecure.getMessage().contains("without authentication"), insecure.getMessage());
    assertEquals(Map.of(), open.stats().clusterKeys());
  }
}
