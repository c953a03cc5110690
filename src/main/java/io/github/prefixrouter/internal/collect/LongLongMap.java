package io.github.prefixrouter.internal.collect;

/**
 * An open-addressing map from {@code long} to {@code long} (linear probing, backward-shift
 * deletion, no boxing), the same scheme and mix as {@link LongHashSet}: key 0 marks an empty
 * slot, so a real key 0 is kept aside. The table doubles above 3/4 load and halves below 1/8
 * load.
 *
 * <p>Not thread-safe.
 */
public final class LongLongMap {

  /** Returned by {@link #get} and {@link #remove} for an absent key. */
  public static final long ABSENT = Long.MIN_VALUE;

  private static final int MIN_CAPACITY = 16;

  private long[] keys;
  private long[] values;
  private int mask;
  private int size; // keys in the table, excluding the zero key
  private boolean hasZero;
  private long zeroValue;

  public LongLongMap() {
    clear();
  }

  public int size() {
    return size + (hasZero ? 1 : 0);
  }

  /** The value of {@code key}, or {@link #ABSENT}. */
  public long get(long key) {
    if (key == 0) {
      return hasZero ? zeroValue : ABSENT;
    }
    for (int i = LongHashSet.mix(key) & mask; ; i = (i + 1) & mask) {
      long k = keys[i];
      if (k == key) {
        return values[i];
      }
      if (k == 0) {
        return ABSENT;
      }
    }
  }

  /** Maps {@code key} to {@code value} (which must not be {@link #ABSENT}). */
  public void put(long key, long value) {
    if (value == ABSENT) {
      throw new IllegalArgumentException("value must not be ABSENT");
    }
    if (key == 0) {
      hasZero = true;
      zeroValue = value;
      return;
    }
    int i = LongHashSet.mix(key) & mask;
    for (; ; i = (i + 1) & mask) {
      long k = keys[i];
      if (k == key) {
        values[i] = value;
        return;
      }
      if (k == 0) {
        break;
      }
    }
    keys[i] = key;
    values[i] = value;
    if (++size > (keys.length >>> 2) * 3) {
      rehash(keys.length << 1);
    }
  }

  /** Removes {@code key}; returns its value, or {@link #ABSENT} if it was absent. */
  public long remove(long key) {
    if (key == 0) {
      long v = hasZero ? zeroValue : ABSENT;
      hasZero = false;
      return v;
    }
    for (int i = LongHashSet.mix(key) & mask; ; i = (i + 1) & mask) {
      long k = keys[i];
      if (k == 0) {
        return ABSENT;
      }
      if (k == key) {
        long v = values[i];
        shiftBack(i);
        size--;
        if (keys.length > MIN_CAPACITY && size < (keys.length >>> 3)) {
          rehash(keys.length >>> 1);
        }
        return v;
      }
    }
  }

  public void clear() {
    keys = new long[MIN_CAPACITY];
    values = new long[MIN_CAPACITY];
    mask = MIN_CAPACITY - 1;
    size = 0;
    hasZero = false;
  }

  /** Calls {@code action} for every entry, in no particular order. */
  public void forEach(Entry action) {
    if (hasZero) {
      action.accept(0, zeroValue);
    }
    for (int i = 0; i < keys.length; i++) {
      if (keys[i] != 0) {
        action.accept(keys[i], values[i]);
      }
    }
  }

  @FunctionalInterface
  public interface Entry {
    void accept(long key, long value);
  }

  /** The longest distance of a key from its home slot (tests bound it). */
  public int maxDisplacement() {
    return LongHashSet.maxDisplacement(keys, mask);
  }

  public long retainedBytes() {
    return 32L + 16L * keys.length;
  }

  private void shiftBack(int hole) {
    int i = hole;
    while (true) {
      i = (i + 1) & mask;
      long k = keys[i];
      if (k == 0) {
        break;
      }
      int home = LongHashSet.mix(k) & mask;
      if (((i - home) & mask) >= ((i - hole) & mask)) {
        keys[hole] = k;
        values[hole] = values[i];
        hole = i;
      }
    }
    keys[hole] = 0;
  }

  private void rehash(int newCapacity) {
    long[] oldKeys = keys;
    long[] oldValues = values;
    keys = new long[newCapacity];
    values = new long[newCapacity];
    mask = newCapacity - 1;
    for (int j = 0; j < oldKeys.length; j++) {
      long k = oldKeys[j];
      if (k != 0) {
        int i = LongHashSet.mix(k) & mask;
        while (keys[i] != 0) {
          i = (i + 1) & mask;
        }
        keys[i] = k;
        values[i] = oldValues[j];
      }
    }
  }
}
