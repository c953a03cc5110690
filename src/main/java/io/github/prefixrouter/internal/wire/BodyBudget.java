package io.github.prefixrouter.internal.wire;

import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The heap that the request bodies being read on a port may hold at once, in bytes, shared by
 * all its reader threads: each request takes its {@link Share} in steps as it needs it (on the
 * client port its body as it arrives, its text, its parse as it goes, then, {@linkplain
 * Share#resize resized}, what its request still holds until it ends; on the peer port its body
 * as it arrives, until it is authenticated; in a budget of their own, the answers to the node's
 * own requests, read by {@link CappedBody}, until they are authenticated) and gives all of it
 * back once it is done with it.
 * A body is read by {@link Share#read} (or {@link CappedBody}), which takes its buffer's heap as
 * its bytes arrive, not what its {@code Content-Length} declares: a sender that declares a large
 * body and sends nothing holds the first step alone.
 *
 * <p>A request whose step the budget cannot give at once waits while other requests give
 * theirs back, and is refused once none has given any back for {@code maxWait} (counted from
 * the later of its asking and the last give-back), or when its thread is interrupted (its I/O
 * deadline passed; the interrupt stays set); a step larger than the whole budget is refused at
 * once. This is the wait of the reader slots per address
 * ({@link InboundReaders#awaitWhileReleasing}): a budget whose requests keep finishing moves,
 * and what queues behind requests that stall holding the budget is refused after
 * {@code maxWait}. A refused share gives back all it holds at once and is ended, so the waiters
 * its room fits take their steps at once (they used to wait on until its owner closed it, and
 * could all be refused together); what a refusal or a close that held nothing gives back does
 * not count as given back for the others' waits, so those its room does not fit are refused in
 * the same moment rather than one {@code maxWait} after another. Waiters are not served in order: a
 * large step may wait while small ones pass, up to its I/O deadline.
 *
 * <p>Thread-safe; a share takes on one thread at a time, and may be closed from any.
 */
public final class BodyBudget {

  private final long capacity;
  /** Under lock ({@link #maxWait(Duration)} changes it for tests). */
  private long maxWaitNanos;
  private final Runnable onRefused;
  private final ReentrantLock lock = new ReentrantLock();
  /** Signalled whenever bytes are given back. */
  private final Condition released = lock.newCondition();
  /** Under lock. */
  private long available;
  /** When bytes were last given back ({@link System#nanoTime}). Under lock. */
  private long lastReleased;

  /**
   * @param capacity the bytes the requests being read may hold at once
   * @param maxWait how long a step waits with nothing given back before it is refused
   * @param onRefused called for every refused step (counters)
   */
  public BodyBudget(long capacity, Duration maxWait, Runnable onRefused) {
    if (capacity < 1 || maxWait.isNegative()) {
      throw new IllegalArgumentException("capacity must be positive and maxWait not negative, "
          + "were " + capacity + ", " + maxWait);
    }
    this.capacity = capacity;
    this.available = capacity;
    this.maxWaitNanos = maxWait.toNanos();
    this.onRefused = onRefused;
    this.lastReleased = System.nanoTime();
  }

  /** The bytes the requests being read may hold at once. */
  public long capacity() {
    return capacity;
  }

  /** The bytes not held now. */
  public long available() {
    lock.lock();
    try {
      return available;
    } finally {
      lock.unlock();
    }
  }

  /**
   * Steps waiting now for bytes to be given back (for tests: to wait until a request waits).
   *
   * @return the number of waiting steps
   */
  public int waiting() {
    lock.lock();
    try {
      return lock.getWaitQueueLength(released);
    } finally {
      lock.unlock();
    }
  }

  /**
   * Sets how long a step waits with nothing given back, for the steps that start waiting from
   * now on (for tests: a wait no stall of a busy machine outlasts, where a test asserts that a
   * waiting request is served).
   *
   * @param maxWait the wait, not negative
   */
  public void maxWait(Duration maxWait) {
    if (maxWait.isNegative()) {
      throw new IllegalArgumentException("maxWait must not be negative, was " + maxWait);
    }
    lock.lock();
    try {
      maxWaitNanos = maxWait.toNanos();
    } finally {
      lock.unlock();
    }
  }

  /** A new, empty share for one request. */
  public Share share() {
    return new Share();
  }

  /**
   * Takes {@code bytes} for {@code share}, counting them in what it holds; refused at once, and
   * not counted as refused, for a share that is closed or is closed while it waits. A refused
   * share gives back all it holds at once, under the lock, and is ended (its owner fails its
   * request): the others waiting whose steps its room fits take them now, not once its owner has
   * handled the refusal and closed it (until then their waits ran on, and all of them could be
   * refused together). What a refusal gives back is not progress: it does not restart the
   * others' waits, so those its room does not fit are refused in the same moment, not one a
   * wait after another.
   *
   * @throws Refused if the budget cannot give them
   */
  private void take(Share share, long bytes) {
    boolean taken = false;
    boolean closed = false;
    long held;
    lock.lock();
    try {
      taken = bytes <= capacity && InboundReaders.awaitWhileReleasing(released, () -> {
        if (share.closed) {
          return true;
        }
        if (available < bytes) {
          return false;
        }
        available -= bytes;
        share.held += bytes;
        return true;
      }, () -> lastReleased, maxWaitNanos);
      closed = share.closed;
      held = share.held;
      if (!taken && !closed) {
        available += held;
        share.held = 0;
        share.closed = true;
        if (held > 0) {
          released.signalAll();
        }
      }
    } finally {
      lock.unlock();
    }
    if (!taken && !closed) {
      onRefused.run();
    }
    if (!taken || closed) {
      throw new Refused(bytes, held, capacity);
    }
  }

  /** Gives back {@code bytes} of what {@code share} holds (at most all of it). */
  private void give(Share share, long bytes, boolean close) {
    lock.lock();
    try {
      long b = Math.min(bytes, share.held);
      share.held -= b;
      available += b;
      if (close) {
        share.closed = true;
      }
      if (b > 0) {
        lastReleased = System.nanoTime(); // progress: the others' waits start again
      }
      if (b > 0 || close) {
        released.signalAll(); // a closed share's own wait ends too
      }
    } finally {
      lock.unlock();
    }
  }

  /**
   * What one request holds of the budget; {@link #close} gives it all back. Taken by one thread
   * at a time; {@link #close} may be called from any, also while a step waits: the step is then
   * refused at once, and a closed share takes nothing more.
   */
  public final class Share implements AutoCloseable {
    /** Under the budget's lock. */
    private long held;
    /** Under the budget's lock. */
    private boolean closed;

    private Share() {}

    /**
     * Takes {@code bytes} more, waiting for them as the budget says. Refused, the share gives
     * back all it holds at once and is ended, as {@link #close} ends it: its request fails.
     *
     * @throws Refused if the budget cannot give them
     */
    public void take(long bytes) {
      if (bytes <= 0) {
        return;
      }
      BodyBudget.this.take(this, bytes);
    }

    /** Gives back {@code bytes} of what this share holds (at most all of it). */
    public void give(long bytes) {
      if (bytes > 0) {
        BodyBudget.this.give(this, bytes, false);
      }
    }

    /**
     * Makes this share hold {@code bytes}: gives back what it holds beyond them, or takes what
     * it lacks as {@link #take} does (waiting for it, and refused as a step is).
     *
     * @param bytes what the share is to hold, not negative
     * @throws Refused if the budget cannot give what it lacks in time, or the share is closed
     *     and lacks some
     */
    public void resize(long bytes) {
      if (bytes < 0) {
        throw new IllegalArgumentException("bytes must not be negative, was " + bytes);
      }
      long now = held(); // only this share's one taking thread changes it upwards
      if (bytes > now) {
        take(bytes - now);
      } else {
        give(now - bytes);
      }
    }

    /**
     * Reads a body of at most {@code cap} bytes, taking the heap of its buffer from this share as
     * the bytes arrive: in steps from {@code firstStep} up, each twice the last, up to its
     * Content-Length if it has one (the last step is the exact length) or {@code cap}, so that a
     * sender holds about what it has sent, not what it declared. While a step is copied to, the
     * share holds the last one as well, less than twice {@code cap} in all; the buffer returned
     * stays held until the share gives it back.
     *
     * @param in the body
     * @param declared the Content-Length, or negative for none
     * @param cap the largest body, in bytes
     * @param firstStep the first step, in bytes (the Content-Length if that is smaller)
     * @return the body, or null if it holds more than {@code cap} bytes
     * @throws Refused if the budget cannot give a step in time
     * @throws IOException if the body cannot be read, a body the server's stream fails with an
     *     unchecked exception included ({@link #readInto})
     */
    public Body read(InputStream in, long declared, int cap, int firstStep) throws IOException {
      int limit = declared >= 0 ? (int) Math.min(declared, cap) : cap;
      int first = Math.min(limit, firstStep);
      take(first);
      byte[] buf = new byte[first];
      int n = 0;
      while (true) {
        if (n == buf.length) {
          if (buf.length == limit) {
            // with a length, the server's stream ends there; without one, a byte more is too many
            return readByte(in) < 0 ? new Body(buf, n) : null;
          }
          buf = grow(buf, (int) Math.min(limit, 2L * buf.length));
        }
        int r = readInto(in, buf, n, buf.length - n);
        if (r < 0) {
          return new Body(buf, n);
        }
        n += r;
      }
    }

    /**
     * {@code buf}, whose bytes this share holds, copied into a buffer of {@code length} bytes:
     * the new buffer's heap is taken before the copy and the old one's given back after it, so
     * that while it is copied the share holds both.
     *
     * @throws Refused if the budget cannot give the new buffer in time
     */
    public byte[] grow(byte[] buf, int length) {
      take(length);
      byte[] grown = Arrays.copyOf(buf, length);
      give(buf.length);
      return grown;
    }

    /**
     * {@code in.read(b, off, len)}, with an unchecked failure of the stream made an
     * {@link IOException} after closing the stream. The JDK server's stream of a chunked body
     * parses a chunk size into an int without checking for overflow: a size of 2^31 or more (such
     * as {@code 80000000}, which anyone can send before any authentication) becomes negative,
     * and every read of the body throws {@link IndexOutOfBoundsException}, the server's own
     * draining of it when the answer is written included, which then never finishes the exchange
     * and leaves the connection open until the server stops. Closed here first, the stream marks
     * itself closed before it drains (which fails again, quietly): the answer does not drain it,
     * and the server closes the connection after the answer, the body being unfinished.
     */
    private static int readInto(InputStream in, byte[] b, int off, int len) throws IOException {
      try {
        return in.read(b, off, len);
      } catch (RuntimeException e) {
        throw malformed(in, e);
      }
    }

    /** {@code in.read()}, as {@link #readInto}. */
    private static int readByte(InputStream in) throws IOException {
      try {
        return in.read();
      } catch (RuntimeException e) {
        throw malformed(in, e);
      }
    }

    private static IOException malformed(InputStream in, RuntimeException e) {
      try {
        in.close();
      } catch (IOException | RuntimeException again) {
        e.addSuppressed(again);
      }
      return new IOException("malformed body: " + e, e);
    }

    /** The bytes this share holds. */
    public long held() {
      lock.lock();
      try {
        return held;
      } finally {
        lock.unlock();
      }
    }

    /**
     * Gives back all this share holds and ends it: a step it waits for, or asks for later, is
     * refused. A share closed again gives nothing.
     */
    @Override
    public void close() {
      BodyBudget.this.give(this, Long.MAX_VALUE, true);
    }
  }

  /**
   * A body read whole ({@link Share#read}): the first {@code length} bytes of {@code bytes}, a
   * buffer whose heap its share holds.
   */
  public record Body(byte[] bytes, int length) {}

  /** The budget could not give a request the next step of its share: answered 503. */
  public static final class Refused extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Refused(long bytes, long held, long capacity) {
      super("the memory this node gives request bodies being read (" + capacity + " bytes) is "
          + "held by other requests: " + bytes + " bytes more for this one (holding " + held
          + ") did not come free in time; try again", null, false, false);
    }
  }
}
