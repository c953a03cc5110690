package io.github.prefixrouter.bench.route;

import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RouteDecision.Reason;
import io.github.prefixrouter.RouteDecision.SkipReason;
import io.github.prefixrouter.RouterConfig;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.internal.gossip.GossipView;
import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import io.github.prefixrouter.spi.Clock;
import io.github.prefixrouter.spi.EngineLoad;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Supplier;

/**
 * The benchmark's baseline: a frozen copy of the routing decision as it was before the bitmap
 * replica index (the library's planner and replica index of that version, reduced to what a
 * fresh node with healthy peers needs): hash 8 blocks, query, then hash the rest of the prompt
 * (or 4x more with a single holder) and query again from the first block; the replica index maps
 * a block hash to its single holder inline or a linked list of holder cells, walked per block
 * under a read lock; costs computed per peer into fresh arrays. Same inputs, same decisions as
 * the library (checked by {@link RouteFixture#checkSameDecisions}); so its queue term follows
 * the library's (a queue drains through the running slots), which costs the same either way.
 */
final class PreviousPlanner {

  private final RouterConfig config;
  private final String localId;
  private final long localIdHash;
  private final ConcurrentPrefixTree local;
  private final BlockHasher hasher;
  private final Clock clock;
  private final Supplier<EngineLoad> localLoad;
  private final int blockSize;
  private final double halfLifeNanos;
  private final long overheadNanos;
  private final long marginMinNanos;
  private final double prefill;
  private final double service;
  private final HolderListIndex index;
  private final ReentrantReadWriteLock lock = new ReentrantReadWriteLock();

  // the peer snapshot (as the library's PeerSet)
  private final int p;
  private final String[] ids;
  private final long[] idHashes;
  private final int[] slots;
  private final int[] queueDepth;
  private final int[] inFlight;
  private final boolean[] overloaded;
  private final boolean[] suspect;
  private final long[] rttNanos;
  private final long[] lastSyncNanos;
  private final PeerState[] states;

  /** As the library's per-peer health record: volatile fields read on every decision. */
  static final class PeerState {
    volatile long busyUntil = Long.MIN_VALUE;
    volatile long failedUntil = Long.MIN_VALUE;
    volatile int outstanding;
    volatile double accuracy = 1.0;
    volatile long forwardRttNanos = -1;
  }

  private static final ThreadLocal<long[][]> CHAIN = ThreadLocal.withInitial(() -> new long[1][256]);
  private static final ThreadLocal<int[][]> LEAD = ThreadLocal.withInitial(() -> new int[2][64]);

  PreviousPlanner(RouterConfig config, String localId, ConcurrentPrefixTree local, GossipView view,
      List<long[]> replicaBySlot, int maxSlots, Clock clock, Supplier<EngineLoad> localLoad) {
    this.config = config;
    this.localId = localId;
    this.localIdHash = nodeHash(localId);
    this.local = local;
    this.hasher = local.hasher();
    this.clock = clock;
    this.localLoad = localLoad;
    this.blockSize = config.blockSize();
    this.halfLifeNanos = config.stalenessHalfLife().toNanos();
    this.overheadNanos = config.forwardOverhead().toNanos();
    this.marginMinNanos = config.forwardMarginMin().toNanos();
    this.prefill = config.initialPrefillNanosPerToken();
    this.service = 256.0 * config.initialPrefillNanosPerToken();
    var peers = view.peers();
    this.p = peers.size();
    ids = new String[p];
    idHashes = new long[p];
    slots = new int[p];
    queueDepth = new int[p];
    inFlight = new int[p];
    overloaded = new boolean[p];
    suspect = new boolean[p];
    rttNanos = new long[p];
    lastSyncNanos = new long[p];
    states = new PeerState[p];
    for (int i = 0; i < p; i++) {
      var v = peers.get(i);
      ids[i] = v.address().nodeId();
      idHashes[i] = nodeHash(ids[i]);
      slots[i] = v.slot();
      queueDepth[i] = v.queueDepth();
      inFlight[i] = v.inFlight();
      overloaded[i] = v.overloaded();
      suspect[i] = v.suspect();
      rttNanos[i] = v.rttNanos();
      lastSyncNanos[i] = v.lastSyncNanos();
      states[i] = new PeerState();
    }
    index = new HolderListIndex();
    for (int s = 0; s < replicaBySlot.size(); s++) {
      long[] held = replicaBySlot.get(s);
      if (held != null) {
        for (long h : held) {
          index.add(s, h);
        }
      }
    }
    this.slotLimit = maxSlots;
  }

  private final int slotLimit;

  RouteDecision decide(int[] tokens) {
    RoutingPolicy policy = config.policy();
    int n = tokens.length;
    int c = p + 1;
    int maxBlocks = n / blockSize;
    long[][] chainHolder = CHAIN.get();
    if (chainHolder[0].length < maxBlocks) {
      chainHolder[0] = new long[Math.max(maxBlocks, chainHolder[0].length * 2)];
    }
    long[] chain = chainHolder[0];
    int[][] leadHolder = LEAD.get();
    if (leadHolder[0].length < Math.max(c, slotLimit)) {
      leadHolder[0] = new int[Math.max(c, slotLimit)];
      leadHolder[1] = new int[Math.max(c, slotLimit)];
    }
    int[] lead = leadHolder[0];
    int[] perSlot = leadHolder[1];
    int[] matchedA = new int[c];
    int[] effective = new int[c];
    int[] load = new int[c];
    long[] rtts = new long[c];
    long[] costs = new long[c];
    SkipReason[] skipped = new SkipReason[c];

    int localMatch = Math.min(local.match(tokens), n);
    EngineLoad ll = localLoad.get();
    matchedA[0] = localMatch;
    effective[0] = localMatch;
    load[0] = ll.total();
    skipped[0] = SkipReason.NONE;
    long localCost = (long) (ll.queueDepth() * service / Math.max(1, ll.inFlight())
        + prefill * (n - localMatch));
    costs[0] = localCost;

    boolean routing = policy != RoutingPolicy.LOCAL_ONLY && 0 < config.hopLimit() && p > 0;
    int blocks = 0;
    if (routing && maxBlocks > 0) {
      blocks = extend(tokens, 0, Math.min(maxBlocks, 8) * blockSize, chain);
      while (true) {
        query(chain, blocks, perSlot, lead);
        if (blocks == maxBlocks) {
          break;
        }
        int holders = 0;
        for (int i = 0; i < p; i++) {
          if (lead[i] == blocks) {
            holders++;
          }
        }
        if (holders == 0) {
          break;
        }
        int more = holders > 1 ? maxBlocks : Math.min(maxBlocks, blocks * 4);
        blocks = extend(tokens, blocks, more * blockSize, chain);
      }
    } else {
      Arrays.fill(lead, 0, p, 0);
    }

    long now = clock.nanoTime();
    int eligible = 0;
    int anyMatch = localMatch > 0 ? 1 : 0;
    for (int i = 0; i < p; i++) {
      int k = i + 1;
      PeerState st = states[i];
      int outstanding = st.outstanding;
      int matched = Math.min(lead[i] * blockSize, n);
      long rtt = rttNanos[i] >= 0 ? rttNanos[i] : st.forwardRttNanos;
      if (rtt < 0) {
        rtt = 0;
      }
      int eff = 0;
      if (matched > 0) {
        double trust = st.accuracy;
        long age = now - lastSyncNanos[i];
        if (age > 0) {
          trust *= Math.pow(0.5, age / halfLifeNanos);
        }
        eff = (int) (matched * trust);
      }
      int queue = queueDepth[i] + outstanding;
      matchedA[k] = matched;
      effective[k] = eff;
      load[k] = queueDepth[i] + inFlight[i] + outstanding;
      rtts[k] = rtt;
      SkipReason skip;
      if (suspect[i]) {
        skip = SkipReason.SUSPECT;
      } else if (overloaded[i]) {
        skip = SkipReason.OVERLOADED;
      } else if (st.busyUntil > now) {
        skip = SkipReason.BUSY_COOLDOWN;
      } else if (st.failedUntil > now) {
        skip = SkipReason.FAILED_COOLDOWN;
      } else {
        skip = SkipReason.NONE;
      }
      skipped[k] = skip;
      if (skip == SkipReason.NONE) {
        eligible++;
        if (matched > 0) {
          anyMatch = 1;
        }
        costs[k] = rtt + overheadNanos
            + (long) (queue * service / Math.max(1, inFlight[i]) + prefill * (n - eff));
      } else {
        costs[k] = Long.MAX_VALUE;
      }
    }

    int chosen = 0;
    Reason reason;
    if (policy == RoutingPolicy.LOCAL_ONLY) {
      reason = Reason.LOCAL_ONLY_POLICY;
    } else if (0 >= config.hopLimit()) {
      reason = Reason.HOP_LIMIT;
    } else if (p == 0) {
      reason = Reason.NO_PEERS;
    } else if (eligible == 0) {
      reason = Reason.ALL_PEERS_SKIPPED;
    } else if (policy == RoutingPolicy.LONGEST_PREFIX) {
      int best = -1;
      for (int k = 1; k < c; k++) {
        if (skipped[k] != SkipReason.NONE) {
          continue;
        }
        if (best < 0 || matchedA[k] > matchedA[best]
            || (matchedA[k] == matchedA[best] && load[k] < load[best])) {
          best = k;
        }
      }
      if (matchedA[best] > localMatch) {
        chosen = best;
        reason = Reason.PEER_LONGEST;
      } else {
        reason = Reason.LOCAL_LONGEST_OR_TIE;
      }
    } else if (anyMatch == 0 && config.coldPlacement() && blocks > 0) {
      int target = coldTarget(skipped, load, c, chain[0]);
      reason = Reason.COLD_PLACEMENT;
      if (target != 0 && costs[target] <= localCost * (1.0 + config.coldPlacementSlack())) {
        chosen = target;
      } else if (target != 0) {
        reason = Reason.LOCAL_CHEAPEST;
      }
    } else {
      int best = -1;
      for (int k = 1; k < c; k++) {
        if (skipped[k] == SkipReason.NONE && (best < 0 || costs[k] < costs[best])) {
          best = k;
        }
      }
      long margin = Math.max((long) (config.forwardMarginRatio() * localCost), marginMinNanos);
      if (costs[best] < localCost - margin) {
        chosen = best;
        reason = Reason.PEER_CHEAPER;
      } else if (costs[best] < localCost) {
        reason = Reason.MARGIN_NOT_MET;
      } else {
        reason = Reason.LOCAL_CHEAPEST;
      }
    }
    String[] allIds = new String[c];
    allIds[0] = localId;
    System.arraycopy(ids, 0, allIds, 1, p);
    return new RouteDecision(policy, n, allIds, matchedA, effective, load, rtts, costs, skipped,
        chosen, reason);
  }

  // The previous version's chain hashing (BlockHasher v1 of that version, 16-token blocks): the
  // lanes of every block first, then the chain in a second serial pass.
  private static final long P1 = 0x9E3779B185EBCA87L;
  private static final long P2 = 0xC2B2AE3D27D4EB4FL;
  private static final long P3 = 0x165667B19E3779F9L;
  private static final long P5 = 0x27D4EB2F165667C5L;
  private static final long SALT_KEY = fmix(P3);
  private static final long LANE1 = SALT_KEY + P1 + P2;
  private static final long LANE2 = SALT_KEY + P2;
  private static final long LANE4 = SALT_KEY - P1;

  private int extend(int[] tokens, int done, int length, long[] out) {
    if (blockSize != 16 || hasher.salt() != 0) {
      return hasher.extend(tokens, done, length, out);
    }
    int blocks = length / 16;
    if (blocks <= done) {
      return done;
    }
    for (int b = done; b < blocks; b++) {
      out[b] = accumulate16(tokens, b * 16);
    }
    long parent = done == 0 ? BlockHasher.ROOT_PARENT : out[done - 1];
    for (int b = done; b < blocks; b++) {
      long h = fmix(out[b] + round(0, parent));
      parent = h == 0 ? P3 : h;
      out[b] = parent;
    }
    return blocks;
  }

  private static long accumulate16(int[] t, int i) {
    long v1 = round(LANE1, word(t, i));
    long v2 = round(LANE2, word(t, i + 2));
    long v3 = round(SALT_KEY, word(t, i + 4));
    long v4 = round(LANE4, word(t, i + 6));
    v1 = round(v1, word(t, i + 8));
    v2 = round(v2, word(t, i + 10));
    v3 = round(v3, word(t, i + 12));
    v4 = round(v4, word(t, i + 14));
    return Long.rotateLeft(v1, 1) + Long.rotateLeft(v2, 7) + Long.rotateLeft(v3, 12)
        + Long.rotateLeft(v4, 18) + 16 * P5;
  }

  private static long word(int[] t, int i) {
    return (t[i] & 0xFFFF_FFFFL) | ((long) t[i + 1] << 32);
  }

  private static long round(long v, long w) {
    return Long.rotateLeft(v + w * P2, 31) * P1;
  }

  private static long fmix(long x) {
    x ^= x >>> 33;
    x *= 0xFF51AFD7ED558CCDL;
    x ^= x >>> 33;
    x *= 0xC4CEB9FE1A85EC53L;
    x ^= x >>> 33;
    return x;
  }

  private void query(long[] chain, int blocks, int[] perSlot, int[] lead) {
    ReentrantReadWriteLock.ReadLock r = lock.readLock();
    r.lock();
    try {
      index.leadingBlocks(chain, blocks, perSlot, slotLimit);
    } finally {
      r.unlock();
    }
    for (int i = 0; i < p; i++) {
      lead[i] = perSlot[slots[i]];
    }
  }

  private int coldTarget(SkipReason[] skipped, int[] load, int c, long key) {
    long total = 0;
    int count = 0;
    for (int k = 0; k < c; k++) {
      if (skipped[k] == SkipReason.NONE) {
        total += load[k];
        count++;
      }
    }
    long cap = (long) Math.ceil(config.coldPlacementLoadBound() * (total + 1) / count);
    int best = -1;
    long bestScore = 0;
    int fallback = 0;
    long fallbackScore = 0;
    for (int k = 0; k < c; k++) {
      if (skipped[k] != SkipReason.NONE) {
        continue;
      }
      long score = mix(key ^ (k == 0 ? localIdHash : idHashes[k - 1]) * 0x9E3779B97F4A7C15L);
      if (k == 0 || Long.compareUnsigned(score, fallbackScore) > 0) {
        fallback = k;
        fallbackScore = score;
      }
      if (load[k] + 1L <= cap && (best < 0 || Long.compareUnsigned(score, bestScore) > 0)) {
        best = k;
        bestScore = score;
      }
    }
    return best >= 0 ? best : fallback;
  }

  private static long nodeHash(String nodeId) {
    byte[] b = nodeId.getBytes(StandardCharsets.US_ASCII);
    long h = 0xcbf29ce484222325L;
    for (byte x : b) {
      h ^= (x & 0xFF);
      h *= 0x100000001b3L;
    }
    return mix(h);
  }

  private static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  /**
   * The previous replica index, reduced to insertion and the query: block hash -> single holder
   * slot inline ({@code >= 0}) or {@code -(cell + 1)}, the head of a linked list of holder cells.
   */
  static final class HolderListIndex {
    private long[] keys = new long[16];
    private int[] vals = new int[16];
    private int mask = 15;
    private int keyCount;
    private int[] cellSlot = new int[16];
    private int[] cellNext = new int[16];
    private int cells;

    void add(int slot, long hash) {
      if (hash == 0) {
        throw new IllegalArgumentException("the block hash is never 0");
      }
      int i = mix32(hash) & mask;
      for (; ; i = (i + 1) & mask) {
        if (keys[i] == hash) {
          int v = vals[i];
          if (v >= 0) {
            int second = cell(slot, -1);
            vals[i] = -cell(v, second) - 1;
          } else {
            vals[i] = -cell(slot, -v - 1) - 1;
          }
          return;
        }
        if (keys[i] == 0) {
          break;
        }
      }
      keys[i] = hash;
      vals[i] = slot;
      if (++keyCount > (keys.length >>> 2) * 3) {
        rehash();
      }
    }

    private int cell(int slot, int next) {
      if (cells == cellSlot.length) {
        cellSlot = Arrays.copyOf(cellSlot, cells * 2);
        cellNext = Arrays.copyOf(cellNext, cells * 2);
      }
      cellSlot[cells] = slot;
      cellNext[cells] = next;
      return cells++;
    }

    private void rehash() {
      long[] ok = keys;
      int[] ov = vals;
      keys = new long[ok.length * 2];
      vals = new int[ok.length * 2];
      mask = keys.length - 1;
      for (int j = 0; j < ok.length; j++) {
        if (ok[j] != 0) {
          int i = mix32(ok[j]) & mask;
          while (keys[i] != 0) {
            i = (i + 1) & mask;
          }
          keys[i] = ok[j];
          vals[i] = ov[j];
        }
      }
    }

    int leadingBlocks(long[] chain, int n, int[] outPerSlot, int slotLimit) {
      Arrays.fill(outPerSlot, 0, slotLimit, 0);
      int best = 0;
      for (int i = 0; i < n; i++) {
        int idx = find(chain[i]);
        if (idx < 0) {
          break;
        }
        int v = vals[idx];
        boolean advanced = false;
        if (v >= 0) {
          if (outPerSlot[v] == i) {
            outPerSlot[v] = i + 1;
            advanced = true;
          }
        } else {
          for (int c = -v - 1; c != -1; c = cellNext[c]) {
            int s = cellSlot[c];
            if (outPerSlot[s] == i) {
              outPerSlot[s] = i + 1;
              advanced = true;
            }
          }
        }
        if (!advanced) {
          break;
        }
        best = i + 1;
      }
      return best;
    }

    private int find(long hash) {
      for (int i = mix32(hash) & mask; ; i = (i + 1) & mask) {
        long k = keys[i];
        if (k == hash) {
          return i;
        }
        if (k == 0) {
          return -1;
        }
      }
    }

    private static int mix32(long key) {
      long h = key * 0x9E3779B97F4A7C15L;
      return (int) (h ^ (h >>> 32));
    }
  }
}
