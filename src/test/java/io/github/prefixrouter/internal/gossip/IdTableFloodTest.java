package io.github.prefixrouter.internal.gossip;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

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
 * them like any other ids, so a lookup reads a few slots, not one per id held.
 */
class IdTableFloodTest {

  /**
   * The most slots a lookup may read in a table of random homes at its highest load (one half).
   * Over 10,000 seeds, 4,096 colliding ids in 8,192 slots gave a longest lookup of 27 slots on
   * average and 75 at most (4,096 ids {@code node-0}, {@code node-1}, ...: 76 at most), 512
   * ids 63 at most, 64 ids 33.
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

  /** Whatever the seed, 4,096 colliding ids (a table at its highest load) spread out. */
  @Property(tries = 200)
  void collidingIdsSpreadOutWhateverTheSeed(@ForAll long seed) {
    IdTable t = new IdTable(colliding(4_096), seed);
    assertTrue(t.longestLookup() <= MAX_LOOKUP, "4096 colliding ids, seed " + seed
        + ": a lookup reads up to " + t.longestLookup() + " slots, want at most " + MAX_LOOKUP);
  }
}
