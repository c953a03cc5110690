package io.github.prefixrouter.server;

import io.github.prefixrouter.FallbackCause;
import io.github.prefixrouter.GossipStats;
import io.github.prefixrouter.NodeStats;
import io.github.prefixrouter.PrefixRouterNode;
import java.lang.reflect.RecordComponent;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Stats records whose every number is different from every other, so that a field shown under
 * the wrong name, or not shown at all, is visible in what is written from them.
 */
final class StatsFixtures {

  private StatsFixtures() {}

  /** The base of the {@link GossipStats} that {@link #distinct} gives a record holding one. */
  static final long GOSSIP_BASE = 1_400_000;

  /** The value {@link #distinct} gives the component at {@code index}: {@code base + 1009 × (index + 1)}. */
  static long valueAt(long base, int index) {
    return base + 1009L * (index + 1);
  }

  /** The fallback count {@link #nodeStats} gives a cause. */
  static long fallbackValue(FallbackCause c) {
    return 7_000_003L + 101L * c.ordinal();
  }

  /**
   * A record of {@code type} whose numeric components are {@link #valueAt}{@code (base, i)},
   * booleans true, strings {@code "node-7"}, enums {@code RUNNING} (or the first constant), maps
   * of fallback causes {@link #fallbackValue}, maps from texts (key ids) two entries of 1 and 0,
   * and {@link GossipStats} the distinct record from {@link #GOSSIP_BASE}.
   */
  static <R extends Record> R distinct(Class<R> type, long base) {
    RecordComponent[] rc = type.getRecordComponents();
    Class<?>[] types = new Class<?>[rc.length];
    Object[] args = new Object[rc.length];
    for (int i = 0; i < rc.length; i++) {
      Class<?> t = rc[i].getType();
      types[i] = t;
      if (t == long.class) {
        args[i] = valueAt(base, i);
      } else if (t == int.class) {
        args[i] = (int) valueAt(base, i);
      } else if (t == boolean.class) {
        args[i] = true;
      } else if (t == GossipStats.class) {
        args[i] = distinct(GossipStats.class, GOSSIP_BASE);
      } else if (t == String.class) {
        args[i] = "node-7";
      } else if (t == PrefixRouterNode.State.class) {
        args[i] = PrefixRouterNode.State.RUNNING;
      } else if (t == Map.class && rc[i].getGenericType().getTypeName().contains("String")) {
        Map<String, Integer> ids = new LinkedHashMap<>(); // key ids: the first signs
        ids.put("0a1b2c3d", 1);
        ids.put("4e5f6a7b", 0);
        args[i] = ids;
      } else if (t == Map.class) {
        Map<FallbackCause, Long> fb = new EnumMap<>(FallbackCause.class);
        for (FallbackCause c : FallbackCause.values()) {
          if (c != FallbackCause.NONE) {
            fb.put(c, fallbackValue(c));
          }
        }
        args[i] = fb;
      } else {
        throw new AssertionError("no distinct value for " + t + " " + rc[i].getName());
      }
    }
    try {
      return type.getDeclaredConstructor(types).newInstance(args);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }

  static NodeStats nodeStats() {
    return distinct(NodeStats.class, 0);
  }

  /** {@code gossipBytesIn} → {@code gossip_bytes_in}. */
  static String snake(String camel) {
    return camel.replaceAll("([A-Z])", "_$1").toLowerCase(java.util.Locale.ROOT);
  }
}
