package io.github.prefixrouter.bench.tree;

import com.googlecode.concurrenttrees.radix.ConcurrentRadixTree;
import com.googlecode.concurrenttrees.radix.node.concrete.DefaultCharArrayNodeFactory;
import io.github.prefixrouter.internal.tree.ConcurrentPrefixTree;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.util.Map;
import org.apache.commons.collections4.trie.PatriciaTrie;

/**
 * The three structures compared, behind one interface. {@link #match} returns the implementation's
 * natural unit: tokens for the prefix tree, chars of the encoded key for the string tries
 * (convert with {@link TokenStrings#tokensIn}, outside the timed code).
 */
interface PrefixIndex {

  void insert(int[] tokens, String key);

  int match(int[] tokens, String key);

  /** Converts a {@link #match} result to tokens. */
  default int matchedTokens(int[] tokens, int result) {
    return result;
  }

  static PrefixIndex create(String name, long capacityTokens) {
    return switch (name) {
      case "prefix-tree" -> new PrefixTreeIndex(Long.MAX_VALUE);
      case "prefix-tree-lru" -> new PrefixTreeIndex(capacityTokens);
      case "concurrent-radix-tree" -> new RadixTreeIndex();
      case "patricia-trie" -> new PatriciaIndex();
      default -> throw new IllegalArgumentException("unknown implementation " + name);
    };
  }

  /** This library's tree, self-managed mode, block size 16. */
  final class PrefixTreeIndex implements PrefixIndex {
    final ConcurrentPrefixTree tree;

    PrefixTreeIndex(long capacity) {
      tree = ConcurrentPrefixTree.builder().capacityTokens(capacity).build();
    }

    @Override
    public void insert(int[] tokens, String key) {
      tree.insert(tokens);
    }

    @Override
    public int match(int[] tokens, String key) {
      return tree.match(tokens);
    }
  }

  /**
   * concurrent-trees' ConcurrentRadixTree with its compact char-array nodes. Longest common
   * prefix: the tree's own search (package-private {@code searchTree}, reached through a method
   * handle that the JIT inlines) reports how many chars of the key it matched, which is exactly
   * the longest common prefix with any stored key. Its public API only offers
   * {@code getClosestKeys}, which would also build the matching keys.
   */
  final class RadixTreeIndex implements PrefixIndex {
    private static final MethodHandle SEARCH;
    private static final MethodHandle CHARS_MATCHED;

    static {
      try {
        MethodHandles.Lookup l =
            MethodHandles.privateLookupIn(ConcurrentRadixTree.class, MethodHandles.lookup());
        Class<?> result = Class.forName(ConcurrentRadixTree.class.getName() + "$SearchResult");
        MethodHandle search = l.findVirtual(ConcurrentRadixTree.class, "searchTree",
            MethodType.methodType(result, CharSequence.class));
        SEARCH = search.asType(MethodType.methodType(Object.class, ConcurrentRadixTree.class,
            CharSequence.class));
        MethodHandles.Lookup rl = MethodHandles.privateLookupIn(result, MethodHandles.lookup());
        CHARS_MATCHED = rl.findGetter(result, "charsMatched", int.class)
            .asType(MethodType.methodType(int.class, Object.class));
      } catch (ReflectiveOperationException e) {
        throw new ExceptionInInitializerError(e);
      }
    }

    final ConcurrentRadixTree<Boolean> tree =
        new ConcurrentRadixTree<>(new DefaultCharArrayNodeFactory());

    @Override
    public void insert(int[] tokens, String key) {
      tree.put(key, Boolean.TRUE);
    }

    @Override
    public int match(int[] tokens, String key) {
      try {
        Object r = (Object) SEARCH.invokeExact(tree, (CharSequence) key);
        return (int) CHARS_MATCHED.invokeExact(r);
      } catch (Throwable t) {
        throw new IllegalStateException(t);
      }
    }

    @Override
    public int matchedTokens(int[] tokens, int result) {
      return TokenStrings.tokensIn(tokens, result);
    }
  }

  /**
   * Commons Collections' PatriciaTrie. Longest common prefix: {@code select(key)} returns the
   * stored entry closest to the key in the bitwise XOR metric, i.e. the one sharing the longest
   * bit prefix; the result is the common char prefix of the key and that entry's key.
   */
  final class PatriciaIndex implements PrefixIndex {
    final PatriciaTrie<Boolean> trie = new PatriciaTrie<>();

    @Override
    public void insert(int[] tokens, String key) {
      trie.put(key, Boolean.TRUE);
    }

    @Override
    public int match(int[] tokens, String key) {
      Map.Entry<String, Boolean> e = trie.select(key);
      if (e == null) {
        return 0;
      }
      String k = e.getKey();
      int n = Math.min(k.length(), key.length());
      int i = 0;
      while (i < n && k.charAt(i) == key.charAt(i)) {
        i++;
      }
      return i;
    }

    @Override
    public int matchedTokens(int[] tokens, int result) {
      return TokenStrings.tokensIn(tokens, result);
    }
  }
}
