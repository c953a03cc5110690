package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.collect.LongHashSet;
import io.github.prefixrouter.internal.gossip.GossipMessage.DigestEntry;
import io.github.prefixrouter.internal.gossip.GossipMessage.Syn;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import org.junit.jupiter.api.Test;

/**
 * Node ids chosen by a hostile peer to share their {@link String#hashCode}: the table places
 * them like any other ids, so a lookup reads a few slots, not one per id held. Ids aimed at one
 * slot by a peer that knew the table's secret: a lookup reads at most {@link IdTable#MAX_PROBES}
 * slots.
 */
class IdTableFloodTest {

  /**
   * The most slots a lookup may read in a table of random homes at its highest load (one half).
   * Over 10,000 seeds, 4,096 colliding ids in 8,192 slots gave a longest lookup of 27 slots on
   * average and 75 at most (4,096 ids {@code node-0}, {@code node-1}, ...: 76 at most), 512
   * ids 63 at most, 64 ids 33. A table within it leaves out no id: each lies less than {@link
   * IdTable#MAX_PROBES} slots from its home.
   */
  static final int MAX_LOOKUP = 128;

  /**
   * The first {@code n} (at most 4,096) of the 24-character ids made of 12 pairs "Aa" or "BB",
   * in id order: {@code "Aa".hashCode() == "BB".hashCode()}, so all of them share one hash.
   */
  static List<String> colliding(int n) {
    List<String> ids = new ArrayList<>(n);
    for (int i = 0; i < n; i++) {
      StringBuilder b = new StringBuilder(24);
      for (int bit = 11; bit >= 0; bit--) {
        b.append((i >> bit & 1) == 0 ? "Aa" : "BB");
      }
      ids.add(b.toString());
    }
    return ids;
  }

  static String find(IdTable t, String s) {
    byte[] b = s.getBytes(StandardCharsets.US_ASCII);
    return t.find(b, b.length, KnownIdsTest.hashOf(t, b, b.length));
  }

  /**
   * A table of 64, 512 and 4,096 colliding ids (beside an ordinary one): every id is found as
   * the table's own string, a colliding id it does not hold is not found, and no lookup reads
   * more than {@link #MAX_LOOKUP} slots. Placed by {@code String.hashCode}, the ids formed one
   * run of slots and a lookup read up to one slot per id held.
   */
  @Test
  void collidingIdsDoNotMakeLookupsReadOneSlotPerId() {
    Map<Integer, Integer> longest = new LinkedHashMap<>();
    for (int n : new int[] {64, 512, 4_096}) {
      List<String> ids = new ArrayList<>(colliding(n));
      ids.add(0, "node-0");
      IdTable t = new IdTable(ids, 0x9E37_79B9_7F4A_7C15L);
      for (String id : ids) {
        assertSame(id, find(t, id));
      }
      assertNull(find(t, "AaAaAaAaAaAaAaAaAaAaAaC#")); // hashes as the others, not held
      longest.put(n, t.longestLookup());
    }
    assertTrue(longest.values().stream().allMatch(l -> l <= MAX_LOOKUP),
        "colliding ids: a lookup reads up to " + longest + " slots (ids held = slots read), "
            + "want at most " + MAX_LOOKUP);
  }

  /**
   * The first {@code n} of the ids {@code aimed-0}, {@code aimed-1}, ... whose keyed hash under
   * {@code seed} has home slot 0 in a table of {@code capacity} slots: what a peer that knew a
   * node's secret could announce.
   */
  static List<String> aimed(long seed, int capacity, int n) {
    List<String> ids = new ArrayList<>(n);
    for (int i = 0; ids.size() < n; i++) {
      String id = "aimed-" + i;
      long state = seed;
      for (int k = 0; k < id.length(); k++) {
        state = IdTable.next(state, id.charAt(k));
      }
      if ((LongHashSet.mix(state) & (capacity - 1)) == 0) {
        ids.add(id);
      }
    }
    return ids;
  }

  /**
   * 512 ids aimed at one home slot (a table of 1,024 slots, at its highest load): no lookup
   * reads more than {@link IdTable#MAX_PROBES} slots, the first {@code MAX_PROBES} ids are held,
   * and every id is still decoded as itself, the table's own string where it holds it. Held
   * without a bound, the ids formed one run of slots and a lookup read up to one slot per id.
   */
  @Test
  void idsAimedAtOneSlotAreReadAtMostMaxProbesSlots() throws Exception {
    long seed = 0x243F_6A88_85A3_08D3L;
    List<String> ids = aimed(seed, 1_024, 512);
    IdTable t = new IdTable(ids, seed);
    int most = 0;
    List<String> held = new ArrayList<>();
    List<String> all = new ArrayList<>(ids);
    all.add("aimed-x"); // not held
    for (String id : all) {
      byte[] b = id.getBytes(StandardCharsets.US_ASCII);
      long state = KnownIdsTest.hashOf(t, b, b.length);
      most = Math.max(most, t.slotsRead(b, b.length, state));
      String own = t.find(b, b.length, state);
      if (own != null) {
        assertSame(id, own, "a held id is found as the table's own string");
        held.add(own);
      }
    }
    assertTrue(most <= IdTable.MAX_PROBES, ids.size() + " ids aimed at one home slot: a lookup "
        + "reads up to " + most + " slots, want at most " + IdTable.MAX_PROBES);
    assertEquals(ids.subList(0, IdTable.MAX_PROBES), held,
        "the ids held: those within " + IdTable.MAX_PROBES + " slots of their home");
    List<DigestEntry> digest = new ArrayList<>();
    for (String id : ids) {
      digest.add(new DigestEntry(id, 1, 0, 1, 0, 0, false));
    }
    GossipCodec codec = new GossipCodec(GossipConfig.MAX_MESSAGE_BYTE_CAP, ids.size());
    Syn syn = (Syn) codec.decode(codec.encode(new Syn(1, 1, digest)), t);
    for (int i = 0; i < ids.size(); i++) {
      String decoded = syn.digest().get(i).nodeId();
      assertEquals(ids.get(i), decoded, "entry " + i + " decoded as its id");
      if (i < IdTable.MAX_PROBES) {
        assertSame(ids.get(i), decoded, "entry " + i + " decoded as the table's own string");
      }
    }
  }

  /** Whatever the seed, 4,096 colliding ids (a table at its highest load) spread out. */
  @Property(tries = 200)
  void collidingIdsSpreadOutWhateverTheSeed(@ForAll long seed) {
    IdTable t = new IdTable(colliding(4_096), seed);
    assertTrue(t.longestLookup() <= MAX_LOOKUP, "4096 colliding ids, seed " + seed
        + ": a lookup reads up to " + t.longestLookup() + " slots, want at most " + MAX_LOOKUP);
  }
}
