package io.github.prefixrouter.internal.collect;

import java.util.Arrays;

/**
 * An open-addressing set of {@code long} values (linear probing, backward-shift deletion, no
 * boxing). Key 0 marks an empty slot, so a real 0 is kept in a separate flag. The table doubles
 * above 3/4 load and halves below 1/8 load, so memory follows the content both ways.
 *
 * <p>Not thread-safe.
 */
public final class LongHashSet {

  private static final int MIN_CAPACITY = 16;

  private long[] table;
  private int mask;
  private int size; // keys in table, excluding the zero key
  private boolean hasZero;

  public LongHashSet() {
    table = new long[MIN_CAPACITY];
    mask = MIN_CAPACITY - 1;
  }

  /**
   * The home of {@code key} before masking: the 64-bit finalizer of MurmurHash3 ({@code fmix64}:
   * xor-shift by 33, multiply, xor-shift, multiply, xor-shift), so that every bit of the key
   * affects every bit of the result, the low ones a table masks with included. (A single
   * multiply folded to 32 bits left the low bits of the home independent of the key's high
   * bits: keys {@code i << 44} all went to slot 0 of a table of up to 4,096 slots.)
   */
  public static int mix(long key) {
    long h = key;
    h ^= h >>> 33;
    h *= 0xFF51AFD7ED558CCDL;
    h ^= h >>> 33;
    h *= 0xC4CEB9FE1A85EC53L;
    h ^= h >>> 33;
    return (int) h;
  }

  public int size() {
    return size + (hasZero ? 1 : 0);
  }

  public boolean contains(long key) {
    if (key == 0) {
      return hasZero;
    }
    for (int i = mix(key) & mask; ; i = (i + 1) & mask) {
      long k = table[i];
      if (k == key) {
        return true;
      }
      if (k == 0) {
        return false;
      }
    }
  }

  /** Adds {@code key}; returns false if it was already present. */
  public boolean add(long key) {
    if (key == 0) {
      if (hasZero) {
        return false;
      }
      hasZero = true;
      return true;
    }
    int i = mix(key) & mask;
    for (; ; i = (i + 1) & mask) {
      long k = table[i];
      if (k == key) {
        return false;
      }
      if (k == 0) {
        break;
      }
    }
    table[i] = key;
    if (++size > (table.length >>> 2) * 3) {
      rehash(table.length << 1);
    }
    return true;
  }

  /** Removes {@code key}; returns false if it was absent. */
  public boolean remove(long key) {
    if (key == 0) {
      boolean had = hasZero;
      hasZero = false;
      return had;
    }
    for (int i = mix(key) & mask; ; i = (i + 1) & mask) {
      long k = table[i];
      if (k == 0) {
        return false;
      }
      if (k == key) {
        shiftBack(i);
        size--;
        if (table.length > MIN_CAPACITY && size < (table.length >>> 3)) {
          rehash(table.length >>> 1);
        }
        return true;
      }
    }
  }

  public void clear() {
    table = new long[MIN_CAPACITY];
    mask = MIN_CAPACITY - 1;
    size = 0;
    hasZero = false;
  }

  public long[] toArray() {
    long[] out = new long[size()];
    int n = 0;
    if (hasZero) {
      out[n++] = 0;
    }
    for (long k : table) {
      if (k != 0) {
        out[n++] = k;
      }
    }
    return out;
  }

  /** The longest distance of a key from its home slot (tests bound it). */
  public int maxDisplacement() {
    return maxDisplacement(table, mask);
  }

  /**
   * The longest distance of a key of {@code keys} (an open-addressing table of this scheme, 0
   * marking an empty slot) from its home slot.
   */
  static int maxDisplacement(long[] keys, int mask) {
    int max = 0;
    for (int i = 0; i < keys.length; i++) {
      if (keys[i] != 0) {
        max = Math.max(max, (i - mix(keys[i])) & mask);
      }
    }
    return max;
  }

  /** Bytes held by the table array (for memory accounting). */
  public long retainedBytes() {
    return 16L + 8L * table.length;
  }

  private void shiftBack(int hole) {
    int i = hole;
    while (true) {
      i = (i + 1) & mask;
      long k = table[i];
      if (k == 0) {
        break;
      }
      int home = mix(k) & mask;
      // move k into the hole if its home is not cyclically within (hole, i]
      if (((i - home) & mask) >= ((i - hole) & mask)) {
        table[hole] = k;
        hole = i;
      }
    }
    table[hole] = 0;
  }

  private void rehash(int newCapacity) {
    long[] old = table;
    table = new long[newCapacity];
    mask = newCapacity - 1;
    for (long k : old) {
      if (k != 0) {
        int i = mix(k) & mask;
        while (table[i] != 0) {
          i = (i + 1) & mask;
        }
        table[i] = k;
      }
    }
  }

  @Override
  public String toString() {
    long[] a = toArray();
    Arrays.sort(a);
    return Arrays.toString(a);
  }
}
