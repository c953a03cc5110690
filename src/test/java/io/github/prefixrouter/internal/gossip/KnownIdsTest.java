package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.gossip.GossipMessage.Ack;
import io.github.prefixrouter.internal.gossip.GossipMessage.Ack2;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import io.github.prefixrouter.internal.gossip.GossipMessage.Update;
import io.github.prefixrouter.internal.wire.MalformedMessageException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/**
 * The decoder takes the node ids an engine knows from its {@link IdTable} instead of building a
 * string per id, and engines keep their members sorted between digests: neither changes what is
 * decoded, what fails to decode, or what a digest lists.
 */
class KnownIdsTest {

  final GossipCodec codec = new GossipCodec(GossipCodecFuzzTest.CAP, 64);

  private static byte[] ascii(String s) {
    return s.getBytes(StandardCharsets.US_ASCII);
  }

  static final long SEED = 0x243F_6A88_85A3_08D3L;

  /** The table's keyed hash state after {@code chars[0..length)}, character by character. */
  static long hashOf(IdTable t, byte[] chars, int length) {
    long state = t.start();
    for (int i = 0; i < length; i++) {
      state = IdTable.next(state, chars[i] & 0xFF);
    }
    return state;
  }

  private static String find(IdTable t, String s) {
    byte[] b = ascii(s);
    return t.find(java.util.Arrays.copyOf(b, 64), b.length, hashOf(t, b, b.length));
  }

  @Test
  void aHeldIdIsFoundAsTheTablesOwnStringAndNothingElseIsFound() {
    String a = new String("node-1");
    String b = new String("node-10");
    // "Aa" and "BB" share their String.hashCode: both must be told apart by their characters
    String c = new String("Aa");
    String d = new String("BB");
    IdTable t = new IdTable(List.of(a, b, c, d), SEED);
    assertSame(a, find(t, "node-1"));
    assertSame(b, find(t, "node-10"));
    assertSame(c, find(t, "Aa"));
    assertSame(d, find(t, "BB"));
    assertNull(find(t, "node-"));
    assertNull(find(t, "node-100"));
    assertNull(find(t, "node-2"));
    assertNull(find(t, "C#")); // "C#" has the String.hashCode of "Aa" too
    assertNull(find(IdTable.EMPTY, "node-1"));
    IdTable twice = new IdTable(List.of(a, new String("node-1"), "node-\u00e9"), SEED);
    assertSame(a, find(twice, "node-1")); // an id given twice is held once, the first
    assertNull(find(twice, "node-?")); // an id that is not ASCII is never found
    for (int n = 0; n < 300; n++) { // every table size, full of ids sharing their prefix
      List<String> ids = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        ids.add("node-" + i);
      }
      IdTable big = new IdTable(ids, SEED);
      for (String id : ids) {
        assertSame(id, find(big, id));
      }
      assertNull(find(big, "node-" + n));
    }
  }

  @Provide
  Arbitrary<GossipMessage> messages() {
    return new GossipCodecFuzzTest().messages();
  }

  /** Every node id a message carries in its digest entries, update headers and requests. */
  static List<String> idsOf(GossipMessage m) {
    List<String> ids = new ArrayList<>();
    List<Update> updates = List.of();
    if (m instanceof Syn s) {
      s.digest().forEach(e -> ids.add(e.nodeId()));
    } else if (m instanceof Ack a) {
      updates = a.updates();
      a.requests().forEach(r -> ids.add(r.nodeId()));
    } else if (m instanceof Ack2 a) {
      updates = a.updates();
    }
    updates.forEach(u -> ids.add(u.header().nodeId()));
    return ids;
  }

  /**
   * A table holding some of a message's ids (copies: other instances) and others: the message
   * decodes to the same records and bytes, and every id the table holds comes back as the
   * table's own string.
   */
  @Property
  void decodingWithKnownIdsGivesTheSameMessage(@ForAll("messages") GossipMessage m,
      @ForAll @IntRange(min = 0, max = 3) int keepEvery) throws MalformedMessageException {
    byte[] bytes = codec.encode(m);
    List<String> held = new ArrayList<>(List.of("node-0", "node-10", "x", "Aa", "BB"));
    List<String> ids = idsOf(m);
    for (int i = 0; i < ids.size(); i++) {
      if (keepEvery > 0 && i % keepEvery == 0) {
        held.add(new String(ids.get(i)));
      }
    }
    IdTable table = new IdTable(new ArrayList<>(new java.util.LinkedHashSet<>(held)), SEED);
    GossipMessage plain = codec.decode(bytes);
    GossipMessage known = codec.decode(bytes, table);
    assertArrayEquals(bytes, codec.encode(known));
    assertEquals(idsOf(plain), idsOf(known));
    assertEquals(outcome(() -> plain), outcome(() -> known));
    for (String id : idsOf(known)) {
      String own = find(table, id);
      if (own != null) {
        assertSame(own, id);
      }
    }
  }

  /** Malformed input fails the same way, with the same message, whatever the table holds. */
  @Property
  void mutatedMessagesFailAlikeWithKnownIds(@ForAll("messages") GossipMessage m,
      @ForAll @IntRange(min = 0, max = 10_000) int where, @ForAll byte value,
      @ForAll boolean truncate) {
    byte[] bytes = codec.encode(m);
    int at = where % (bytes.length + 1);
    byte[] mutated = truncate ? java.util.Arrays.copyOf(bytes, at) : bytes.clone();
    if (!truncate && at < mutated.length) {
      mutated[at] ^= (byte) (value == 0 ? 1 : value);
    }
    Set<String> held = new HashSet<>(idsOf(m));
    held.add("node-1");
    IdTable table = new IdTable(new ArrayList<>(held), SEED);
    String plain = outcome(() -> codec.decode(mutated));
    String known = outcome(() -> codec.decode(mutated, table));
    assertEquals(plain, known);
  }

  interface Decode {
    GossipMessage run() throws MalformedMessageException;
  }

  /**
   * What decoding gave: the message's ids and its bytes encoded again (its content, arrays
   * included), or the failure's reason and message.
   */
  private String outcome(Decode d) {
    GossipMessage m;
    try {
      m = d.run();
    } catch (MalformedMessageException e) {
      return e.reason() + ": " + e.getMessage();
    }
    String bytes;
    try {
      bytes = java.util.Arrays.toString(codec.encode(m));
    } catch (RuntimeException e) {
      bytes = "not encodable: " + e.getMessage();
    }
    return m.getClass().getSimpleName() + " " + idsOf(m) + " " + bytes;
  }

  /**
   * Every SYN a node sends lists itself, then its live members in id order from a rotating
   * start, through joins, deaths, forgetting and a restart (the members are kept sorted between
   * digests and sorted again when the membership changes).
   */
  @Test
  void digestsListTheLiveMembersInIdOrderThroughMembershipChanges() {
    GossipConfig config = GossipConfig.builder().interval(Duration.ofMillis(100))
        .suspectAfter(Duration.ofMillis(500)).deadAfter(Duration.ofMillis(1_000))
        .forgetAfter(Duration.ofMillis(2_000)).build();
    SimCluster c = new SimCluster(5, config);
    c.delayNanos = 1_000_000;
    List<GossipEngine> engines = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      engines.add(c.add(i, 1, List.of(SimCluster.addressOf(0))));
      engines.get(i).start();
    }
    GossipEngine watched = engines.get(0);
    int[] checked = {0};
    Set<Integer> starts = new HashSet<>();
    // what the checks of a sent SYN found wrong: they run inside the engine's send, where a
    // failure is taken for a failed send, so they fail the test after each stretch instead
    List<AssertionError> broken = new ArrayList<>();
    c.taken = (from, payload) -> {
      if (!from.nodeId().equals("node-0") || payload[0] != GossipMessage.TYPE_SYN) {
        return;
      }
      try {
        checkDigest(payload, watched, starts);
      } catch (AssertionError e) {
        broken.add(e);
        throw e;
      }
      checked[0]++;
    };
    c.runFor(20 * c.interval());
    checkDigests(broken);
    c.crash(engines.get(3)); // dies at node 0, then is forgotten
    c.runFor(40 * c.interval());
    checkDigests(broken);
    assertNull(watched.statusOf("node-3"));
    c.add(7, 1, List.of(SimCluster.addressOf(0))).start(); // joins
    c.runFor(20 * c.interval());
    checkDigests(broken);
    c.add(3, 2, List.of(SimCluster.addressOf(0))).start(); // back, a new generation
    c.runFor(20 * c.interval());
    checkDigests(broken);
    assertEquals(Set.of("node-1", "node-2", "node-3", "node-4", "node-5", "node-7"),
        Set.copyOf(watched.view().peers().stream().map(p -> p.address().nodeId()).toList()));
    assertTrue(checked[0] >= 100, checked[0] + " SYNs checked");
    assertTrue(starts.size() > 1, "the start rotates");
  }

  /** Fails with the first thing the checks of a sent SYN found wrong, if any. */
  private static void checkDigests(List<AssertionError> broken) {
    if (!broken.isEmpty()) {
      throw broken.get(0);
    }
  }

  /** A SYN of node-0 lists itself, then its live members in id order from a rotating start. */
  private void checkDigest(byte[] payload, GossipEngine watched, Set<Integer> starts) {
    List<DigestEntry> digest;
    try {
      digest = ((Syn) codec.decode(payload)).digest();
    } catch (MalformedMessageException e) {
      throw new AssertionError(e);
    }
    assertEquals("node-0", digest.get(0).nodeId());
    List<String> live = new ArrayList<>(new TreeSet<>(
        watched.view().peers().stream().map(p -> p.address().nodeId()).toList()));
    List<String> listed = digest.subList(1, digest.size()).stream()
        .map(DigestEntry::nodeId).toList();
    assertEquals(live.size(), listed.size(), listed + " listed, live " + live);
    int start = live.isEmpty() ? 0 : live.indexOf(listed.get(0));
    for (int i = 0; i < live.size(); i++) {
      assertEquals(live.get((start + i) % live.size()), listed.get(i), listed.toString());
    }
    starts.add(start);
  }
}
