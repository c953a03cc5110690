package io.github.prefixrouter.internal.tree;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.CacheEventStats;
import io.github.prefixrouter.CacheScope;
import io.github.prefixrouter.spi.CacheEventListener;
import io.github.prefixrouter.testing.LoggedLines;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.RandomDistribution;
import net.jqwik.api.Tuple;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.lifecycle.AroundTryHook;
import net.jqwik.api.lifecycle.PropagationMode;
import net.jqwik.api.lifecycle.TryExecutionResult;
import net.jqwik.api.lifecycle.TryExecutor;
import net.jqwik.api.lifecycle.TryLifecycleContext;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.constraints.IntRange;

/**
 * Random engine event streams (including unknown parents, unknown hashes, malformed events,
 * duplicate stores of held blocks and their removals) fed to an engine-driven tree and to a
 * naive model of the engine's cache: a map from engine block hash to (parent hash, tokens) and a
 * multiset of the held hashes (how many copies of each block the engine holds), where removing
 * a copy only lowers the count and removing the last copy removes the block and everything
 * continuing it. Chains start in one of three scopes (the default, an adapter, a salt), whose
 * engine hashes differ as vLLM's do; the model keeps each block's scope, matches and leaves are
 * compared per scope, and the replayed block hashes are the scoped chains.
 *
 * <p>The engine also stores held blocks again under other hashes (aliases: hashes keyed by
 * something the events do not name), stores them again, continues them, and removes them and
 * the blocks they stand for in any order, so that aliases outlive their blocks
 * ({@link #mirrorsAnEngineStoringBlocksUnderSeveralHashes} mostly does that). The model keeps
 * the aliases, oldest first, each with the hash of its block and its copies, as the tree does
 * (docs/tree.md, "Engine-driven mode"), and the tree's alias count, every alias's copies and
 * the counters (duplicates, aliases, conflicts, unknown parents and blocks) must equal the
 * model's after every event.
 *
 * <p>With a mirror limit ({@link #staysWithinItsLimit}) the model also keeps each block's last
 * use (the last applied store whose chain ran through it) and, after every store, drops the
 * least recently used block that no held block continues until its distinct tokens fit the
 * limit: the tree must drop exactly those blocks (its cached prefixes, replayed events and
 * counters are compared after every event), and later events naming them must be harmless.
 *
 * <p>The streams store blocks of another size on purpose, which the tree logs at ERROR, and
 * each try builds a new tree, whose log is not limited by the last's: those lines are kept out
 * of the test's output ({@link QuietMisfits}); whatever else a try logs is passed on.
 */
@AddLifecycleHook(value = EngineDrivenTreePropertyTest.QuietMisfits.class,
    propagateTo = PropagationMode.ALL_DESCENDANTS)
class EngineDrivenTreePropertyTest {

  /**
   * Leaves out of each try's output the tree's ERROR lines for a store of another block size
   * (some 3,000 in a run of this class), which the streams provoke on purpose;
   * {@code EngineEventRobustnessTest} and {@code PrefixRouterNodeTest} check that line.
   */
  static final class QuietMisfits implements AroundTryHook {
    @Override
    public TryExecutionResult aroundTry(
        TryLifecycleContext context, TryExecutor aTry, List<Object> parameters) {
      return LoggedLines.without("the tree's block size", () -> aTry.execute(parameters));
    }
  }

  static final int B = 3;

  /** The scopes drawn: index 0 is the default. */
  static final CacheScope[] SCOPES = {
    CacheScope.DEFAULT, CacheScope.adapter("lora-a"), CacheScope.salt("tenant-1")
  };

  /** The engine's own root parents of the scopes' chains (the engine keys blocks by scope). */
  static final long[] ENGINE_ROOTS = {BlockHasher.ROOT_PARENT, 0x5151L, 0x7272L};

  sealed interface Op permits Store, Fork, Restore, Alias, Remove, Evict, Clear, Match {}

  /**
   * parentPick selects an existing block (mod count), -1 = prompt start, -2 = unknown, -3 = a
   * block the mirror dropped over its limit (if any; else an existing block), -4 = an alias,
   * perhaps of a block that has gone (if any; else an existing block); the scope is passed with
   * the event (it only matters for a prompt start).
   */
  record Store(int parentPick, int[] tokens, boolean malformed, int scope) implements Op {
    @Override
    public String toString() {
      return "store(" + parentPick + ", " + Arrays.toString(tokens) + (malformed ? ", bad" : "")
          + (scope == 0 ? "" : ", @" + scope) + ")";
    }
  }

  /**
   * Stores a chain that shares its first {@code shared} tokens (mod the chain's length) with
   * the held chain of up to {@code len} blocks ending at the block picked (mod count), from the
   * same parent, and then differs (a token flipped, the rest of the chain from {@code tail}):
   * the two branch deep, often after whole blocks, so that a removal later lets one absorb the
   * node they share.
   */
  record Fork(int pick, int len, int shared, int[] tail) implements Op {
    @Override
    public String toString() {
      return "fork(" + pick + ", " + len + ", " + shared + ", " + Arrays.toString(tail) + ")";
    }
  }

  /**
   * Stores held blocks again, as an engine does that computed them for two requests at once:
   * the block picked (mod count) and up to {@code len - 1} of its ancestors, in one event.
   */
  record Restore(int pick, int len) implements Op {}

  /**
   * Stores held blocks again under other hashes, as an engine does that keys its hashes by
   * something the events do not name (a LoRA adapter, say): the block picked (mod count) and
   * up to {@code len - 1} of its ancestors, hashed with the engine's variant hasher
   * {@code variant}, from their parent named by its hash or, if {@code viaAlias} and it has
   * one, by an alias (then continued by {@code tail}, a block not held, if not empty). With
   * {@code again}, it repeats such an earlier store instead (the pick, mod count), if any, as
   * the engine does that computes the blocks for another request: by then the blocks may have
   * gone, or be held under another hash.
   */
  record Alias(int pick, int len, int variant, boolean viaAlias, int[] tail, boolean again)
      implements Op {
    @Override
    public String toString() {
      return "alias(" + pick + ", " + len + ", v" + variant + (viaAlias ? ", via alias" : "")
          + (tail.length == 0 ? "" : ", " + Arrays.toString(tail)) + (again ? ", again" : "")
          + ")";
    }
  }

  /** A store made by an {@link Alias}, to repeat. */
  record AliasStore(long parent, long[] hashes, int[] tokens, int scope) {}

  /**
   * kind 0: a held block, 1: an unknown hash, 2: a block held in several copies if any, 3: a
   * block that no held block continues, 4: a block the mirror dropped over its limit if any, 5:
   * an alias, perhaps of a block that has gone, or for an odd pick the hash an alias stands for
   * (perhaps gone too), if any.
   */
  record Remove(int pick, int kind) implements Op {}

  /**
   * Removes a held block that no held block continues (the pick, mod count) and then up to
   * {@code len - 1} of its ancestors, one event per block, as vLLM frees a request's blocks:
   * the last block first; it stops before a block that another held block continues.
   */
  record Evict(int pick, int len) implements Op {}

  record Clear() implements Op {}

  record Match(int scope, int[] tokens) implements Op {
    @Override
    public String toString() {
      return "match" + (scope == 0 ? "" : "@" + scope) + Arrays.toString(tokens);
    }
  }

  /** What a store can meet of aliases, for the statistics. */
  static final String[] ALIAS_CASES = {
    "a store continued an alias",
    "a store continued an alias of a gone block",
    "an alias of a gone block was stored where none was held",
    "a block came back under a hash that has aliases",
    "an alias of a gone block was stored for another block",
  };

  /** A block: its parent (or NO_PARENT), tokens and the scope of its chain. */
  record Block(long parent, int[] tokens, int scope) {}

  /**
   * The engine: hashes derive from content (like vLLM's), with its own salt; the variant
   * hashers hash the same blocks otherwise (as keyed by an adapter the events do not name).
   */
  static final class EngineModel {
    final BlockHasher engineHasher = new BlockHasher(B, 0xE0E0L);
    final BlockHasher[] variantHashers = {new BlockHasher(B, 0xA1A1L), new BlockHasher(B, 0xA2A2L)};
    /** The held blocks by the hash that names them (the first stored while none was held). */
    final Map<Long, Block> blocks = new HashMap<>();
    /**
     * Copies of each hash stored and not removed since (a key for every block and every alias):
     * a block stays while its own hash has copies; an alias's last copy only forgets the alias.
     */
    final Map<Long, Integer> copies = new HashMap<>();
    /**
     * Other hashes stored for a held block, to the hash of the block they were stored for,
     * oldest first. One stays when that block goes (a removal under its own hash, or of a block
     * it continues, or the limit): a removal of it then passes silently, a store continuing it
     * is of an unknown parent, a store of it where no block is held names that block. Over
     * {@code limit / B} aliases the oldest is forgotten; once there are more than
     * {@link #aliasSweepAt}, those of blocks that went are.
     */
    final Map<Long, Long> aliases = new LinkedHashMap<>();
    int aliasSweepAt = 64;
    long unknownParents;
    long unknownBlocks;
    long duplicates;
    long aliased;
    long conflicting;
    /** Aliases forgotten as the oldest over the limit. */
    long forgotten;
    /** The ways of storing under an alias seen (see {@link #ALIAS_CASES}). */
    final Set<String> aliasCases = new HashSet<>();
    /** Each held block's last use: the number of the last applied store through it. */
    final Map<Long, Long> lastUse = new HashMap<>();
    long stores;
    /** Blocks dropped over the limit, in the order dropped. */
    final List<Long> dropped = new ArrayList<>();

    /** An applied store whose chain ends at block h: h and its ancestors are used now. */
    void use(long h) {
      stores++;
      for (long x = h; x != CacheEventListener.NO_PARENT; x = blocks.get(x).parent()) {
        lastUse.put(x, stores);
      }
    }

    /**
     * Drops the least recently used block that no held block continues until the distinct
     * tokens fit the limit (the oldest is unique: one store uses one chain); true if it
     * dropped the first block of a chain (all of it).
     */
    boolean overflow(long limit) {
      boolean chainStart = false;
      while (sizeTokens() > limit) {
        Set<Long> continued = new HashSet<>();
        for (Block b : blocks.values()) {
          continued.add(b.parent());
        }
        long victim = 0;
        long oldest = Long.MAX_VALUE;
        int ties = 0;
        for (long h : blocks.keySet()) {
          if (continued.contains(h)) {
            continue;
          }
          long t = lastUse.get(h);
          if (t < oldest) {
            oldest = t;
            victim = h;
            ties = 1;
          } else if (t == oldest) {
            ties++;
          }
        }
        assertEquals(1, ties, "the least recently used leaf block is not unique");
        long parent = blocks.get(victim).parent();
        remove(victim);
        dropped.add(victim);
        chainStart |= parent == CacheEventListener.NO_PARENT;
      }
      return chainStart;
    }

    /** Distinct tokens held: the (scope, prefix) pairs of the held blocks' paths. */
    long sizeTokens() {
      Set<List<Integer>> prefixes = new HashSet<>();
      for (long h : blocks.keySet()) {
        int[] p = path(h);
        for (int len = Math.max(1, p.length - B + 1); len <= p.length; len++) {
          List<Integer> key = new ArrayList<>(len + 1);
          key.add(-1 - blocks.get(h).scope());
          for (int i = 0; i < len; i++) {
            key.add(p[i]);
          }
          prefixes.add(key);
        }
      }
      return prefixes.size();
    }

    /** The held block that {@code h} names, by its own hash or as an alias; null if none. */
    Long resolve(long h) {
      long named = aliases.getOrDefault(h, h);
      return blocks.containsKey(named) ? named : null;
    }

    /** The held block at the place of the block {@code tokens} continuing {@code parent}. */
    Long heldAt(long parent, int scope, int[] tokens) {
      for (Map.Entry<Long, Block> e : blocks.entrySet()) {
        Block b = e.getValue();
        if (b.parent() == parent && Arrays.equals(b.tokens(), tokens)
            && (parent != CacheEventListener.NO_PARENT || b.scope() == scope)) {
          return e.getKey();
        }
      }
      return null;
    }

    /**
     * A well-formed store of the blocks {@code hashes} continuing the block named
     * {@code parent} (or starting a chain of {@code eventScope}); the mirror's limit
     * {@code limit} bounds the aliases kept. Returns the held block it ended at, or null if it
     * was dropped (an unknown parent, or a hash that names another block).
     */
    Long store(long parent, long[] hashes, int[] tokens, int eventScope, long limit) {
      Long up = parent == CacheEventListener.NO_PARENT ? (Long) parent : resolve(parent);
      if (aliases.containsKey(parent)) {
        aliasCases.add(up == null ? ALIAS_CASES[1] : ALIAS_CASES[0]);
      }
      if (up == null) {
        unknownParents++;
        return null;
      }
      // a continued chain stays in its parent's scope, whatever the event says
      int scope = up == CacheEventListener.NO_PARENT ? eventScope : blocks.get(up).scope();
      int n = hashes.length;
      Long[] held = new Long[n];
      long[] names = new long[n + 1]; // the hash each block is held under, its parent's first
      names[0] = up;
      for (int i = 0; i < n; i++) {
        held[i] = heldAt(names[i], scope, Arrays.copyOfRange(tokens, i * B, (i + 1) * B));
        names[i + 1] = held[i] != null ? held[i] : hashes[i];
      }
      Set<Long> inEvent = new HashSet<>();
      for (int i = 0; i < n; i++) {
        Long named = resolve(hashes[i]);
        if (!inEvent.add(hashes[i]) || (named != null && !named.equals(held[i]))) {
          conflicting++;
          return null;
        }
      }
      for (int i = n - 1; i >= 0; i--) { // deepest first, as the tree records them
        long h = hashes[i];
        if (held[i] == null) {
          if (aliases.containsKey(h)) {
            aliasCases.add(ALIAS_CASES[2]);
          }
          if (aliases.containsValue(h)) {
            aliasCases.add(ALIAS_CASES[3]);
          }
          blocks.put(h, new Block(names[i], Arrays.copyOfRange(tokens, i * B, (i + 1) * B),
              scope));
          aliases.remove(h);
          copies.put(h, 1);
        } else if (held[i] == h || held[i].equals(aliases.get(h))) {
          duplicates++;
          copies.merge(h, 1, Integer::sum);
        } else {
          if (aliases.remove(h) != null) { // of a block that has gone: a new alias, the newest
            aliasCases.add(ALIAS_CASES[4]);
          }
          aliased++;
          aliases.put(h, held[i]);
          copies.put(h, 1);
          for (var oldest = aliases.keySet().iterator(); aliases.size() > limit / B; ) {
            copies.remove(oldest.next());
            oldest.remove();
            forgotten++;
          }
        }
      }
      use(names[n]);
      return names[n];
    }

    /**
     * Removes one copy of h; true if the block stays because another copy of its own hash is
     * held.
     */
    boolean removeCopy(long h) {
      Integer c = copies.get(h);
      if (c != null && c > 1) {
        copies.put(h, c - 1);
        return blocks.containsKey(h);
      }
      if (aliases.remove(h) != null) {
        copies.remove(h);
        return false;
      }
      if (!blocks.containsKey(h)) {
        unknownBlocks++;
      }
      remove(h);
      return false;
    }

    /** After an applied store or a removal: forgets the aliases of gone blocks now and then. */
    void sweepAliases() {
      if (aliases.size() > aliasSweepAt) {
        aliases.values().removeIf(named -> !blocks.containsKey(named));
        copies.keySet().removeIf(h -> !blocks.containsKey(h) && !aliases.containsKey(h));
        aliasSweepAt = Math.max(64, 2 * aliases.size());
      }
    }

    void clear() {
      blocks.clear();
      copies.clear();
      aliases.clear();
      lastUse.clear();
    }

    int[] path(long h) {
      List<int[]> parts = new ArrayList<>();
      for (long x = h; x != CacheEventListener.NO_PARENT; x = blocks.get(x).parent()) {
        parts.add(0, blocks.get(x).tokens());
      }
      int[] out = new int[parts.size() * B];
      for (int i = 0; i < parts.size(); i++) {
        System.arraycopy(parts.get(i), 0, out, i * B, B);
      }
      return out;
    }

    void remove(long h) {
      blocks.remove(h);
      boolean changed = true;
      while (changed) {
        changed = blocks.values().removeIf(
            b -> b.parent() != CacheEventListener.NO_PARENT && !blocks.containsKey(b.parent()));
      }
      copies.keySet().removeIf(x -> !blocks.containsKey(x) && !aliases.containsKey(x));
      lastUse.keySet().retainAll(blocks.keySet());
    }

    int match(int scope, int[] q) {
      int best = 0;
      for (long h : blocks.keySet()) {
        if (blocks.get(h).scope() != scope) {
          continue;
        }
        int[] p = path(h);
        if (p.length > best && p.length <= q.length
            && Arrays.equals(p, 0, p.length, q, 0, p.length)) {
          best = p.length;
        }
      }
      return best;
    }

    Set<Long> treeHashes(BlockHasher h) {
      Set<Long> out = new HashSet<>();
      for (long e : blocks.keySet()) {
        long root = BlockHasher.scopeRoot(SCOPES[blocks.get(e).scope()]);
        long[] chain = h.chain(root, path(e));
        out.add(chain[chain.length - 1]);
      }
      return out;
    }

    /** The scopes other than the default that hold a block. */
    long scopesHeld() {
      return blocks.values().stream().mapToInt(Block::scope).filter(x -> x != 0).distinct()
          .count();
    }

    Set<List<Integer>> leaves(int scope) {
      Set<Long> parents = new HashSet<>();
      for (Block b : blocks.values()) {
        parents.add(b.parent());
      }
      Set<List<Integer>> out = new HashSet<>();
      for (long h : blocks.keySet()) {
        if (!parents.contains(h) && blocks.get(h).scope() == scope) {
          out.add(Arrays.stream(path(h)).boxed().toList());
        }
      }
      return out;
    }
  }

  @Provide
  Arbitrary<List<Op>> ops() {
    return ops(10, 5, 2, 1, 6, 2, 4, 50);
  }

  /**
   * Mostly blocks stored again under other hashes, and removals of those hashes and of the
   * blocks they stand for.
   */
  @Provide
  Arbitrary<List<Op>> aliasing() {
    // a fifth of the stores start a chain, so that most tries hold blocks to alias early on
    Arbitrary<Integer> parent = Arbitraries.frequencyOf(
        Tuple.of(1, Arbitraries.just(-1)), Tuple.of(4, Arbitraries.integers().between(-4, 30)));
    return ops(8, 2, 2, 8, 8, 2, 2, 80, parent);
  }

  /**
   * Mostly chains forked from held ones and evicted last block first: leaves trimmed one block
   * at a time, then split, extended or merged with what is left of their parent.
   */
  @Provide
  Arbitrary<List<Op>> evictions() {
    return ops(3, 4, 8, 1, 2, 8, 1, 100);
  }

  /** Event streams with the given weights of the kinds of event, of up to maxEvents events. */
  Arbitrary<List<Op>> ops(int store, int restore, int fork, int alias, int remove, int evict,
      int match, int maxEvents) {
    return ops(store, restore, fork, alias, remove, evict, match, maxEvents,
        Arbitraries.integers().between(-4, 30));
  }

  /** The same with the stores' parent picks drawn from {@code parent}. */
  Arbitrary<List<Op>> ops(int store, int restore, int fork, int alias, int remove, int evict,
      int match, int maxEvents, Arbitrary<Integer> parent) {
    // a binary alphabet makes blocks that share their first tokens and diverge mid-block; the
    // two ids share their low 16 bits
    Arbitrary<Integer> symbol = Arbitraries.of(65_537, 131_073);
    Arbitrary<Integer> scope = Arbitraries.frequencyOf(
        Tuple.of(2, Arbitraries.just(0)), Tuple.of(1, Arbitraries.just(1)),
        Tuple.of(1, Arbitraries.just(2)));
    Arbitrary<int[]> blocks =
        Arbitraries.integers().between(1, 4).flatMap(n ->
            symbol.array(int[].class).ofSize(n * B));
    Arbitrary<Op> op =
        Arbitraries.frequencyOf(
            Tuple.of(store, net.jqwik.api.Combinators.combine(parent, blocks,
                    Arbitraries.integers().between(0, 19).map(x -> x == 0), scope)
                .as(Store::new)),
            Tuple.of(restore, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(0, 30), Arbitraries.integers().between(1, 3))
                .as(Restore::new)),
            Tuple.of(alias, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(0, 30), Arbitraries.integers().between(1, 3),
                    Arbitraries.integers().between(0, 1), Arbitraries.of(false, true),
                    Arbitraries.frequencyOf(Tuple.of(2, Arbitraries.just(new int[0])),
                        Tuple.of(1, symbol.array(int[].class).ofSize(B))),
                    Arbitraries.of(false, false, true))
                .as(Alias::new)),
            Tuple.of(fork, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(0, 30), Arbitraries.integers().between(2, 4),
                    Arbitraries.integers().between(1, 11), symbol.array(int[].class).ofSize(4 * B))
                .as(Fork::new)),
            Tuple.of(remove, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(0, 30),
                    Arbitraries.integers().between(0, 17)
                        .map(x -> x == 0 ? 1 : x < 6 ? 2 : x < 10 ? 0 : x < 13 ? 3 : x < 16 ? 4
                            : 5))
                .as(Remove::new)),
            Tuple.of(evict, net.jqwik.api.Combinators.combine(
                    Arbitraries.integers().between(0, 30), Arbitraries.integers().between(1, 4))
                .as(Evict::new)),
            Tuple.of(match, net.jqwik.api.Combinators.combine(
                    scope, symbol.array(int[].class).ofMaxSize(14))
                .as(Match::new)),
            Tuple.of(1, Arbitraries.just(new Clear())));
    // uniform sizes: jqwik's default bias gives most tries fewer than ten events, too few to
    // store a block, store it again and remove a copy
    return op.list().ofMaxSize(maxEvents).withSizeDistribution(RandomDistribution.uniform());
  }

  @Property
  void mirrorsTheEngine(@ForAll("ops") List<Op> ops, @ForAll @IntRange(min = 0, max = 3) int salt,
      @ForAll @IntRange(min = 0, max = 3) int span) {
    boolean copyKeptABlock = mirror(ops, salt, Long.MAX_VALUE, 0, span);
    // the generator must exercise what this test is for: a removal that leaves another copy
    // (11% to 32% of tries had one in runs of 200 with random seeds, 20% on average, and 9% to
    // 16% in six runs since the streams store aliases too; the bound sits far below that
    // spread, so that only a generator that lost the case fails it)
    Statistics.label("a removed copy kept its block").collect(copyKeptABlock);
    Statistics.label("a removed copy kept its block")
        .coverage(c -> c.check(true).percentage(pct -> pct >= 4));
  }

  /**
   * The same with an engine that stores held blocks again under other hashes (its hashes keyed
   * by something the events do not name) and removes them under either: an alias's copies are
   * counted, its last removal leaves the block, the block's own last removal takes it (the
   * alias is then of a block that has gone: a removal of it passes silently, a store
   * continuing it has an unknown parent, a store of it where no block is held names that
   * block), and with a mirror limit only the newest {@code limit / B} aliases are kept. The
   * model tracks the aliases as the tree does, and their count and copies are compared after
   * every event.
   */
  @Property
  void mirrorsAnEngineStoringBlocksUnderSeveralHashes(@ForAll("aliasing") List<Op> ops,
      @ForAll @IntRange(min = 0, max = 3) int salt,
      @ForAll @IntRange(min = 0, max = 8 * B) int limit,
      @ForAll @IntRange(min = 0, max = 3) int span) {
    mirror(ops, salt, limit < B ? Long.MAX_VALUE : limit, 0, span);
    Map<String, Boolean> reached = new LinkedHashMap<>();
    reached.put("an alias was stored", aliasesStored > 0);
    reached.put("an alias removal kept its block", aliasRemovalKeptItsBlock);
    reached.put("an event named an alias of a gone block", namedAGoneAlias);
    reached.put("an alias was forgotten over the limit", aliasesForgotten > 0);
    for (String c : ALIAS_CASES) {
      reached.put(c, aliasCases.contains(c));
    }
    // the generator must reach each case; measured in seven runs of 200 tries, in the order of
    // the bounds: 39% to 53%, 4% to 12%, 11% to 25%, 8% to 24%, 13% to 22%, 5% to 13%, 9% to
    // 17% and 3% to 9%; an alias of a gone block stored for another block only in 0% to 1%
    // (unbounded: a run of 3,000 tries reached it often enough to fail at try 688 while the
    // tree kept such an alias in its first place among the aliases to forget)
    double[] atLeast = {20, 1, 4, 3, 5, 2, 3, 0.5, 0};
    int k = 0;
    for (Map.Entry<String, Boolean> e : reached.entrySet()) {
      double bound = atLeast[k++];
      Statistics.label(e.getKey()).collect(e.getValue());
      if (bound > 0) {
        Statistics.label(e.getKey()).coverage(c -> c.check(true).percentage(pct -> pct >= bound));
      }
    }
  }

  /**
   * The same with an engine freeing requests' chains last block first, while others fork from
   * them: the tree keeps the block hashes of a trimmed leaf, and must drop them when the leaf
   * is split, extended or absorbs its parent (the invariant check compares every kept hash with
   * the chain recomputed from the tokens, so a missed drop fails it).
   */
  @Property(tries = 2000)
  void mirrorsAnEngineEvictingChains(
      @ForAll("evictions") List<Op> ops, @ForAll @IntRange(min = 0, max = 3) int salt,
      @ForAll @IntRange(min = 0, max = 3) int span) {
    mirror(ops, salt, Long.MAX_VALUE, 0, span);
    // the generator must exercise each change that drops kept hashes. A merge needs the trimmed
    // leaf and its parent used last by the same store, since a recency boundary keeps them
    // apart; an extension comes mostly from the edge cases mixed in, whose share varies by
    // chance. In 17 runs of 400 tries, 11% to 15% split, 2.25% to 9% extended and 0.5% to 4%
    // merged, and one run in the default check merged none, failing it; in eleven runs of 2,000
    // tries, 7% to 8% split, 4% to 5% extended and 7 to 26 merges (0.35% to 1.3%). The bounds
    // ask for 100 splits, 20 extensions and 1 merge, so that chance does not fail the run
    Map<String, Double> atLeast = Map.of("split", 5.0, "extended", 1.0, "merged", 0.05);
    for (String what : List.of("split", "extended", "merged")) {
      Statistics.label("a trimmed leaf was " + what).collect(cacheChanges.contains(what));
      Statistics.label("a trimmed leaf was " + what)
          .coverage(c -> c.check(true).percentage(pct -> pct >= atLeast.get(what)));
    }
  }

  /**
   * The same with a mirror limit of a few blocks: the tree must drop exactly the blocks the
   * model drops (least recently used first, leaves before the blocks they continue), never hold
   * more than the limit after an event, report the drops as evictions (the replayed events
   * equal the held blocks) and count them; removals of dropped blocks count as unknown blocks
   * and stores continuing them as unknown parents.
   */
  @Property
  void staysWithinItsLimit(@ForAll("ops") List<Op> ops,
      @ForAll @IntRange(min = 0, max = 3) int salt,
      @ForAll @IntRange(min = B, max = 8 * B) int limit,
      @ForAll @IntRange(min = 0, max = 8) int stampLimit,
      @ForAll @IntRange(min = 0, max = 3) int span) {
    mirror(ops, salt, limit, stampLimit, span);
    // the generator must exercise what this test is for (measured: see the bounds' comment)
    // (29% to 39%, 14% to 30% and 17% to 29% of tries in eight runs of 200; 28% to 33%, 10% to
    // 12% and 14% to 23% in six runs since the streams store aliases too)
    Statistics.label("the limit dropped a block").collect(droppedOverLimit > 0);
    Statistics.label("the limit dropped a block")
        .coverage(c -> c.check(true).percentage(pct -> pct >= 20));
    Statistics.label("the limit dropped a chain's first block").collect(droppedAChainStart);
    Statistics.label("the limit dropped a chain's first block")
        .coverage(c -> c.check(true).percentage(pct -> pct >= 5));
    Statistics.label("an event named a dropped block").collect(namedADroppedBlock);
    Statistics.label("an event named a dropped block")
        .coverage(c -> c.check(true).percentage(pct -> pct >= 8));
  }

  /**
   * Events no engine should send, drawn from a small pool of hashes so that they collide: hashes
   * reused for other blocks, repeated within an event or equal to {@code NO_PARENT}, parents
   * unknown or not yet stored, token counts that do not fit, null arrays or scope, removals
   * repeating a hash, blocks of a chain removed in any order. Each is either applied or counted
   * and dropped: none may throw while it is applied, which would make the tree run its repair
   * (an invariant check linear in its size, under the write lock) and could clear it.
   */
  @Property(tries = 500)
  void noEventAnEngineCanSendMakesTheTreeRepairItself(
      @ForAll("hostileEvents") List<long[]> events, @ForAll @IntRange(min = 0, max = 2) int span,
      @ForAll @IntRange(min = 0, max = 1) int limited) {
    ConcurrentPrefixTree.Builder builder =
        ConcurrentPrefixTree.builder().mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(B);
    if (limited == 1) {
      builder.mirrorLimitTokens(4 * B);
    }
    ConcurrentPrefixTree tree = builder.build();
    if (span > 0) {
      tree.extensionSpanForTest(span);
    }
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    tree.addListener(replay);
    CacheEventListener engine = tree.engineEvents();
    for (long[] e : events) {
      // e[0]: the kind; e[1]: the parent (a store); e[2]: tokens minus blocks × B; e[3]: the
      // scope (3: null); e[4]: how the tokens are drawn; the rest: the hashes
      long[] hashes = Arrays.copyOfRange(e, 5, e.length);
      String what = Arrays.toString(e);
      if (e[0] == 0 || e[0] == 1) {
        int n = Math.max(0, (int) (hashes.length * B + e[2]));
        int[] tokens = new int[n];
        for (int i = 0; i < n; i++) { // mostly a block's tokens follow from its hash mod 4, so
          // that hashes are stored again with their tokens and stand for each other's blocks
          long from = e[4] < 192 && i / B < hashes.length ? hashes[i / B] % 4 : e[4] >> (i % 6);
          tokens[i] = (int) ((from >> (i % B)) & 1);
        }
        CacheScope scope = e[3] == 3 ? null : SCOPES[(int) e[3]];
        engine.onBlocksStored(scope, e[1], e[0] == 1 ? null : hashes, tokens);
      } else if (e[0] == 2) {
        engine.onBlocksStored(e[1], hashes, null);
      } else if (e[0] == 3) {
        engine.onBlocksRemoved(hashes);
      } else if (e[0] == 4) {
        engine.onBlocksRemoved(null);
      } else {
        engine.onAllCleared();
      }
      assertEquals(0, tree.engineEventFailures(), "events that threw, after " + what);
      assertEquals(0, tree.repairsForTest(), "repairs after " + what);
      tree.checkInvariants();
      replay.assertConsistent("after " + what);
      Set<Long> held = new HashSet<>();
      for (long h : tree.blockHashes()) {
        held.add(h);
      }
      assertEquals(held, replay.held, "replayed blocks after " + what);
    }
    CacheEventStats stats = tree.engineEventStats();
    Statistics.label("conflicting").collect(stats.conflictingEvents() > 0);
    Statistics.label("aliased").collect(stats.aliasedBlocks() > 0);
    Statistics.label("duplicate").collect(stats.duplicateBlocks() > 0);
    Statistics.label("conflicting").coverage(c -> c.check(true).percentage(pct -> pct >= 20));
    // the generator must reach each outcome (measured: 38%, 4% and 5% of tries in runs of 500)
    Statistics.label("aliased").coverage(c -> c.check(true).percentage(pct -> pct >= 1));
    Statistics.label("duplicate").coverage(c -> c.check(true).percentage(pct -> pct >= 1));
  }

  @Provide
  Arbitrary<List<long[]>> hostileEvents() {
    Arbitrary<Long> hash = Arbitraries.longs().between(0, 9); // 0 is NO_PARENT
    Arbitrary<long[]> event = net.jqwik.api.Combinators.combine(
            Arbitraries.frequencyOf(Tuple.of(12, Arbitraries.just(0L)),
                Tuple.of(1, Arbitraries.just(1L)), Tuple.of(1, Arbitraries.just(2L)),
                Tuple.of(6, Arbitraries.just(3L)),
                Tuple.of(1, Arbitraries.just(4L)), Tuple.of(1, Arbitraries.just(5L))),
            Arbitraries.frequencyOf(Tuple.of(3, Arbitraries.just(0L)), Tuple.of(4, hash)),
            Arbitraries.frequencyOf(Tuple.of(8, Arbitraries.just(0L)),
                Tuple.of(1, Arbitraries.longs().between(-B, B))),
            Arbitraries.frequencyOf(Tuple.of(6, Arbitraries.just(0L)),
                Tuple.of(2, Arbitraries.longs().between(1, 2)), Tuple.of(1, Arbitraries.just(3L))),
            Arbitraries.longs().between(0, 255),
            hash.list().ofMaxSize(4))
        .as((kind, parent, skew, scope, first, hashes) -> {
          long[] e = new long[5 + hashes.size()];
          e[0] = kind;
          e[1] = parent;
          e[2] = skew;
          e[3] = scope;
          e[4] = first;
          for (int i = 0; i < hashes.size(); i++) {
            e[5 + i] = hashes.get(i);
          }
          return e;
        });
    return event.list().ofMaxSize(60).withSizeDistribution(RandomDistribution.uniform());
  }

  /** The changes to trimmed leaves seen by the current try of {@link #mirror}. */
  private final Set<String> cacheChanges = new HashSet<>();
  /** Blocks the current try's limit dropped. */
  private long droppedOverLimit;
  /** Whether the current try's limit dropped the first block of a chain. */
  private boolean droppedAChainStart;
  /** Whether a removal or a store's parent in the current try named a dropped block. */
  private boolean namedADroppedBlock;
  /** Whether a removal or a store's parent in the current try named an alias of a gone block. */
  private boolean namedAGoneAlias;
  /** Whether the current try removed the last copy of an alias of a block that stayed. */
  private boolean aliasRemovalKeptItsBlock;
  /** Aliases the current try stored, and forgot over the limit. */
  private long aliasesStored;
  private long aliasesForgotten;
  private final Set<String> aliasCases = new HashSet<>();

  /**
   * Runs the events through the tree (mirror limit {@code limit} tokens) and the model; true if
   * a removed copy kept a block. A positive {@code stampLimit} makes the tree renumber its use
   * stamps whenever its counter reaches it (normally near 2^31), which must not change which
   * blocks the limit drops. A positive {@code span} makes leaf extensions stop every {@code span}
   * blocks (normally every 2,048 tokens, more than these events ever hold), which must not
   * change what the tree holds.
   */
  private boolean mirror(List<Op> ops, int salt, long limit, int stampLimit, int span) {
    cacheChanges.clear();
    droppedOverLimit = 0;
    droppedAChainStart = false;
    namedADroppedBlock = false;
    namedAGoneAlias = false;
    aliasRemovalKeptItsBlock = false;
    ConcurrentPrefixTree.Builder builder =
        ConcurrentPrefixTree.builder().mode(ConcurrentPrefixTree.Mode.ENGINE_DRIVEN).blockSize(B)
            .salt(salt);
    if (limit != Long.MAX_VALUE) {
      builder.mirrorLimitTokens(limit);
    }
    ConcurrentPrefixTree tree = builder.build();
    if (stampLimit > 0) {
      tree.stampLimitForTest(stampLimit);
    }
    if (span > 0) {
      tree.extensionSpanForTest(span);
    }
    ConcurrentPrefixTreeTest.Replay replay = new ConcurrentPrefixTreeTest.Replay();
    tree.addListener(replay);
    CacheEventListener engine = tree.engineEvents();
    EngineModel model = new EngineModel();
    long expectMalformed = 0;
    boolean copyKeptABlock = false;
    List<AliasStore> aliasStores = new ArrayList<>();
    for (Op op : ops) {
      boolean applied = false;
      Map<ConcurrentPrefixTree.Node, int[]> cached = cachedEdges(tree);
      List<Long> known = new ArrayList<>(model.blocks.keySet());
      known.sort(null);
      Long forkParent = null;
      if (op instanceof Fork f && !known.isEmpty()) {
        List<Long> chain = new ArrayList<>();
        for (long x = known.get(f.pick() % known.size());
            x != CacheEventListener.NO_PARENT && chain.size() < f.len();
            x = model.blocks.get(x).parent()) {
          chain.add(0, x);
        }
        int[] tokens = new int[chain.size() * B];
        for (int i = 0; i < chain.size(); i++) {
          System.arraycopy(model.blocks.get(chain.get(i)).tokens(), 0, tokens, i * B, B);
        }
        int shared = f.shared() % tokens.length;
        tokens[shared] = tokens[shared] == f.tail()[0] ? f.tail()[1] : f.tail()[0];
        System.arraycopy(f.tail(), shared + 1, tokens, shared + 1, tokens.length - shared - 1);
        forkParent = model.blocks.get(chain.get(0)).parent();
        op = new Store(0, tokens, false, model.blocks.get(chain.get(0)).scope());
      }
      if (op instanceof Fork) {
        // nothing held: nothing to fork from
      } else if (op instanceof Store s) {
        long parent;
        if (forkParent != null) {
          parent = forkParent;
        } else if (s.parentPick() == -3 && !model.dropped.isEmpty()) {
          parent = model.dropped.get(s.tokens()[0] % model.dropped.size());
          namedADroppedBlock |= !model.blocks.containsKey(parent);
        } else if (s.parentPick() == -4 && !model.aliases.isEmpty()) {
          List<Long> named = new ArrayList<>(model.aliases.keySet());
          parent = named.get(s.tokens()[0] % named.size());
          namedAGoneAlias |= model.resolve(parent) == null;
        } else if (s.parentPick() == -2 || (s.parentPick() < -1 && known.isEmpty())
            || (s.parentPick() >= 0 && known.isEmpty())) {
          parent = 12345; // not an engine hash in practice
        } else if (s.parentPick() == -1) {
          parent = CacheEventListener.NO_PARENT;
        } else {
          parent = known.get(Math.max(0, s.parentPick()) % known.size());
        }
        int n = s.tokens().length / B;
        long[] hashes = new long[n];
        long p = parent == CacheEventListener.NO_PARENT ? ENGINE_ROOTS[s.scope()] : parent;
        for (int i = 0; i < n; i++) {
          p = model.engineHasher.hashBlock(p, s.tokens(), i * B);
          hashes[i] = p;
        }
        if (s.malformed()) {
          engine.onBlocksStored(SCOPES[s.scope()], parent, hashes,
              Arrays.copyOf(s.tokens(), s.tokens().length - 1));
          expectMalformed++;
        } else {
          if (s.scope() == 0 && s.tokens().length % 2 == 0) {
            engine.onBlocksStored(parent, hashes, s.tokens()); // the unscoped form: the default
          } else {
            engine.onBlocksStored(SCOPES[s.scope()], parent, hashes, s.tokens());
          }
          applied = model.store(parent, hashes, s.tokens(), s.scope(), limit) != null;
        }
      } else if (op instanceof Restore r && !known.isEmpty()) {
        List<Long> chain = new ArrayList<>();
        for (long x = known.get(r.pick() % known.size());
            x != CacheEventListener.NO_PARENT && chain.size() < r.len();
            x = model.blocks.get(x).parent()) {
          chain.add(0, x);
        }
        long[] hashes = chain.stream().mapToLong(Long::longValue).toArray();
        int[] tokens = new int[hashes.length * B];
        for (int i = 0; i < hashes.length; i++) {
          System.arraycopy(model.blocks.get(hashes[i]).tokens(), 0, tokens, i * B, B);
        }
        Block first = model.blocks.get(hashes[0]);
        engine.onBlocksStored(SCOPES[first.scope()], first.parent(), hashes, tokens);
        applied = model.store(first.parent(), hashes, tokens, first.scope(), limit) != null;
      } else if (op instanceof Alias a && a.again() && !aliasStores.isEmpty()) {
        AliasStore as = aliasStores.get(a.pick() % aliasStores.size());
        engine.onBlocksStored(SCOPES[as.scope()], as.parent(), as.hashes(), as.tokens());
        applied = model.store(as.parent(), as.hashes(), as.tokens(), as.scope(), limit) != null;
      } else if (op instanceof Alias a && !known.isEmpty()) {
        List<Long> chain = new ArrayList<>();
        for (long x = known.get(a.pick() % known.size());
            x != CacheEventListener.NO_PARENT && chain.size() < a.len();
            x = model.blocks.get(x).parent()) {
          chain.add(0, x);
        }
        Block first = model.blocks.get(chain.get(0));
        long parent = first.parent();
        if (a.viaAlias()) {
          for (Map.Entry<Long, Long> e : model.aliases.entrySet()) {
            if (e.getValue() == parent) {
              parent = e.getKey();
              break;
            }
          }
        }
        int[] tokens = new int[chain.size() * B + a.tail().length];
        for (int i = 0; i < chain.size(); i++) {
          System.arraycopy(model.blocks.get(chain.get(i)).tokens(), 0, tokens, i * B, B);
        }
        System.arraycopy(a.tail(), 0, tokens, chain.size() * B, a.tail().length);
        long[] hashes = new long[tokens.length / B];
        BlockHasher variant = model.variantHashers[a.variant()];
        long p = parent == CacheEventListener.NO_PARENT ? ENGINE_ROOTS[first.scope()] : parent;
        for (int i = 0; i < hashes.length; i++) {
          p = variant.hashBlock(p, tokens, i * B);
          hashes[i] = p;
        }
        engine.onBlocksStored(SCOPES[first.scope()], parent, hashes, tokens);
        applied = model.store(parent, hashes, tokens, first.scope(), limit) != null;
        aliasStores.add(new AliasStore(parent, hashes, tokens, first.scope()));
      } else if (op instanceof Remove r) {
        List<Long> candidates = known;
        if (r.kind() == 3) {
          Set<Long> continued = new HashSet<>();
          for (Block b : model.blocks.values()) {
            continued.add(b.parent());
          }
          candidates = known.stream().filter(x -> !continued.contains(x)).toList();
        }
        if (r.kind() == 2) {
          List<Long> multi = known.stream().filter(h -> model.copies.get(h) > 1).toList();
          candidates = multi.isEmpty() ? known : multi;
        }
        if (r.kind() == 4 && !model.dropped.isEmpty()) {
          candidates = model.dropped;
        }
        if (r.kind() == 5 && !model.aliases.isEmpty()) {
          // an alias, or (an odd pick) the block an alias stands for, under its own hash
          candidates = new ArrayList<>(r.pick() % 2 == 0 ? model.aliases.keySet()
              : new HashSet<>(model.aliases.values()));
        }
        long h = r.kind() == 1 || candidates.isEmpty()
            ? 777 : candidates.get(r.pick() % candidates.size());
        if (!model.blocks.containsKey(h)) {
          namedADroppedBlock |= model.dropped.contains(h);
        }
        if (model.aliases.containsKey(h)) {
          boolean gone = model.resolve(h) == null;
          namedAGoneAlias |= gone;
          aliasRemovalKeptItsBlock |= !gone && model.copies.get(h) == 1;
        }
        engine.onBlocksRemoved(new long[] {h});
        copyKeptABlock |= model.removeCopy(h);
        model.sweepAliases();
      } else if (op instanceof Evict v) {
        Set<Long> continued = new HashSet<>();
        for (Block b : model.blocks.values()) {
          continued.add(b.parent());
        }
        List<Long> leaves = known.stream().filter(x -> !continued.contains(x)).toList();
        long h = leaves.isEmpty() ? CacheEventListener.NO_PARENT
            : leaves.get(v.pick() % leaves.size());
        for (int i = 0; i < v.len() && h != CacheEventListener.NO_PARENT; i++) {
          long parent = model.blocks.get(h).parent();
          engine.onBlocksRemoved(new long[] {h});
          copyKeptABlock |= model.removeCopy(h);
          model.sweepAliases();
          long removed = h;
          h = model.blocks.values().stream()
              .anyMatch(b -> b.parent() == parent || b.parent() == removed)
              ? CacheEventListener.NO_PARENT : parent; // the rest is shared, or a copy stays
        }
      } else if (op instanceof Restore || op instanceof Alias) {
        // nothing held: nothing to store again
      } else if (op instanceof Match m) {
        long root = BlockHasher.scopeRoot(SCOPES[m.scope()]);
        int expected = model.match(m.scope(), m.tokens());
        assertEquals(expected, tree.match(root, m.tokens()), "match");
        if (m.scope() == 0) {
          assertEquals(expected, tree.match(m.tokens()), "unscoped match");
        }
      } else {
        engine.onAllCleared();
        model.clear();
      }
      if (op instanceof Store || op instanceof Restore || op instanceof Alias) {
        droppedAChainStart |= model.overflow(limit);
      }
      if (applied) {
        model.sweepAliases();
      }
      tree.checkInvariants();
      if (limit != Long.MAX_VALUE) {
        assertTrue(tree.sizeTokens() <= limit, "size " + tree.sizeTokens() + " after " + op);
      }
      assertEquals(model.sizeTokens(), tree.sizeTokens(), "tokens held after " + op);
      if (!(op instanceof Clear)) {
        // the changes after which a trimmed edge's cached hashes must be dropped (the invariant
        // check compares any cached hash with the chain recomputed from the tokens)
        for (Map.Entry<ConcurrentPrefixTree.Node, int[]> e : cached.entrySet()) {
          ConcurrentPrefixTree.Node n = e.getKey();
          if (n.parent != null && n.start() > e.getValue()[0]) {
            cacheChanges.add("split");
          }
          if (n.parent != null && n.start() / B < e.getValue()[0] / B) {
            cacheChanges.add("merged"); // with a parent holding blocks
          }
          if (n.parent != null && n.end > e.getValue()[1]) {
            cacheChanges.add("extended");
          }
        }
      }
      for (int sc = 0; sc < SCOPES.length; sc++) {
        assertEquals(SelfManagedTreePropertyTest.sorted(model.leaves(sc)),
            SelfManagedTreePropertyTest.sorted(SelfManagedTreePropertyTest.asLists(
                tree.leafSequences(BlockHasher.scopeRoot(SCOPES[sc])))),
            "scope " + sc + " after " + op);
      }
      assertEquals(model.scopesHeld(), tree.scopeCount(), "scope roots after " + op);
      replay.assertConsistent("after " + op);
      assertEquals(model.treeHashes(tree.hasher()), replay.held, "replayed blocks after " + op);
      for (Map.Entry<Long, Integer> e : model.copies.entrySet()) {
        assertEquals((long) e.getValue(), tree.engineCopies(e.getKey()),
            "copies of " + e.getKey() + " after " + op);
      }
      assertEquals(model.aliases.size(), tree.aliasCountForTest(), "aliases after " + op);
      CacheEventStats stats = tree.engineEventStats();
      assertEquals(model.unknownParents, stats.unknownParents(), "unknown parents after " + op);
      assertEquals(model.unknownBlocks, stats.unknownBlocks(), "unknown blocks after " + op);
      assertEquals(expectMalformed, stats.malformedEvents(), "malformed");
      assertEquals(model.duplicates, stats.duplicateBlocks(), "duplicates after " + op);
      assertEquals(model.aliased, stats.aliasedBlocks(), "aliases stored after " + op);
      assertEquals(model.conflicting, stats.conflictingEvents(), "conflicting after " + op);
      assertEquals(model.dropped.size(), stats.overflowBlocks(), "blocks dropped over the limit");
    }
    droppedOverLimit = model.dropped.size();
    aliasesStored = model.aliased;
    aliasesForgotten = model.forgotten;
    aliasCases.clear();
    aliasCases.addAll(model.aliasCases);
    return copyKeptABlock;
  }

  /** The nodes holding cached block hashes, with their start and end depths. */
  static Map<ConcurrentPrefixTree.Node, int[]> cachedEdges(ConcurrentPrefixTree tree) {
    Map<ConcurrentPrefixTree.Node, int[]> out = new java.util.IdentityHashMap<>();
    java.util.ArrayDeque<ConcurrentPrefixTree.Node> stack = new java.util.ArrayDeque<>();
    tree.rootsForTest().forEach(stack::push);
    while (!stack.isEmpty()) {
      ConcurrentPrefixTree.Node n = stack.pop();
      if (n.blockHashCache() != null) {
        out.put(n, new int[] {n.start(), n.end});
      }
      for (ConcurrentPrefixTree.Node c : n.kids) {
        if (c != null) {
          stack.push(c);
        }
      }
    }
    return out;
  }
}
