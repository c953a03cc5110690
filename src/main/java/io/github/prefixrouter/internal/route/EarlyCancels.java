package io.github.prefixrouter.internal.route;

import io.github.prefixrouter.InferenceRequest;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What a node serving its peers' forwards remembers of their CANCELs, so that a CANCEL the
 * network delivered before its FORWARD still stops the request, and a FORWARD of a cancelled
 * request delivered again (a duplicate, a replay) does not run it once more.
 *
 * <p>Keys are what a CANCEL matches a FORWARD by: the sender's node id, the request's origin
 * and the request id (both messages carry the origin; ids are unique per origin only, so a
 * relay's requests of several origins have keys of their own). Every CANCEL is remembered under
 * its key, and stands for one request: the one it ended here (a running execution), else the
 * one of its key answered here lately (the CANCEL crossed that answer), else the first FORWARD
 * of its key that arrives and joins no running execution (the network reordered them). It stops
 * FORWARDs of that request only (the same prompt, parameters and scope, compared by hash);
 * another request of the same key runs (an origin that reused an id), so a CANCEL for a request
 * that ended must not stop a later, different one.
 *
 * <p>Bounded in time and memory: an entry expires {@code ttlNanos} after its latest CANCEL, or
 * for an answer after it was given, on the node's injected clock (checked lazily when the memory
 * is used: no timer, no thread); each of the two maps holds at most {@code capacity} entries, the
 * oldest dropped first. Thread-safe; the node also holds this object's lock while it looks up or
 * registers the executions of its peers' requests, so that a CANCEL and its FORWARD arriving at
 * once on two threads find each other.
 */
final class EarlyCancels {

  /** Entries per map at most. */
  static final int CAPACITY = 4096;
  /** How long an entry is kept, in forwarding timeout bounds ({@code forwardTimeoutMax}). */
  static final int TTL_TIMEOUT_BOUNDS = 3;

  /** A remembered CANCEL. */
  private static final class Cancel {
    long at;
    /** Whether it stands for a known request yet (else: the next FORWARD of its key). */
    boolean bound;
    /** The hash of the request it stands for, once bound. */
    int request;
  }

  /** A forward answered here; {@code refused}: answered BUSY (push-back). */
  private record Answer(long at, int request, boolean refused) {}

  private final long ttlNanos;
  private final int capacity;
  /** CANCELs by key, in order of their latest CANCEL. */
  private final LinkedHashMap<String, Cancel> cancels = new LinkedHashMap<>();
  /** The forward of each key answered last here, in order of time. */
  private final LinkedHashMap<String, Answer> answered = new LinkedHashMap<>();

  EarlyCancels(long ttlNanos, int capacity) {
    if (ttlNanos <= 0 || capacity <= 0) {
      throw new IllegalArgumentException("ttl and capacity must be positive");
    }
    this.ttlNanos = ttlNanos;
    this.capacity = capacity;
  }

  /** The memory of a node whose forwarding timeouts are at most {@code forwardTimeoutMaxNanos}. */
  static EarlyCancels forTimeoutBound(long forwardTimeoutMaxNanos) {
    long ttl = forwardTimeoutMaxNanos > Long.MAX_VALUE / TTL_TIMEOUT_BOUNDS
        ? Long.MAX_VALUE : forwardTimeoutMaxNanos * TTL_TIMEOUT_BOUNDS;
    return new EarlyCancels(ttl, CAPACITY);
  }

  /** How long an entry is kept, in nanoseconds. */
  long ttlNanos() {
    return ttlNanos;
  }

  /**
   * A CANCEL of {@code key} arrived; {@code ended} is the request whose running execution it
   * ends here, or null if none runs.
   *
   * @return whether it stands for a request not known yet (it will stop the next FORWARD of
   *     its key)
   */
  synchronized boolean onCancel(String key, InferenceRequest ended, long now) {
    expire(now);
    Cancel c = cancels.remove(key); // re-inserted last: the map stays in order of time
    if (c == null) {
      c = new Cancel();
      Answer a = answered.get(key);
      if (a != null) {
        c.bound = true;
        c.request = a.request();
      }
    }
    if (ended != null) {
      c.bound = true;
      c.request = ended.hashCode();
    }
    c.at = now;
    cancels.put(key, c);
    trim(cancels);
    return !c.bound;
  }

  /**
   * Whether a remembered CANCEL stops {@code request}, a FORWARD of {@code key} that joins no
   * running execution: the request the CANCEL stands for, or, if it stands for none yet, this
   * one (which it then stands for).
   */
  synchronized boolean stops(String key, InferenceRequest request, long now) {
    if (cancels.isEmpty()) {
      return false;
    }
    expire(now);
    Cancel c = cancels.get(key);
    if (c == null) {
      return false;
    }
    int hash = request.hashCode();
    if (!c.bound) {
      c.bound = true;
      c.request = hash;
      return true;
    }
    return c.request == hash;
  }

  /** {@code request}, a forward of {@code key}, was answered here (however). */
  synchronized void answered(String key, InferenceRequest request, long now) {
    answered(key, request, now, false);
  }

  /**
   * {@code request}, a forward of {@code key}, was answered here; {@code refused}: with BUSY.
   *
   * @return whether it was refused and is a refusal of that request again: the latest answer
   *     of its key remembered here (within the memory's bounds) was a refusal of the same
   *     request (compared by hash), so a node counting its refusals per request does not count
   *     this one (a duplicate or a replay of a refused FORWARD, or a duplicate that joined it)
   */
  synchronized boolean answered(String key, InferenceRequest request, long now,
      boolean refused) {
    expire(now);
    int hash = request.hashCode();
    Answer before = answered.remove(key); // re-inserted last: the map stays in order of time
    answered.put(key, new Answer(now, hash, refused));
    trim(answered);
    return refused && before != null && before.refused() && before.request() == hash;
  }

  /** CANCELs remembered now (expired ones not yet dropped included). */
  synchronized int cancelsRemembered() {
    return cancels.size();
  }

  /** Answers remembered now (expired ones not yet dropped included). */
  synchronized int answersRemembered() {
    return answered.size();
  }

  private void expire(long now) {
    for (Iterator<Cancel> it = cancels.values().iterator(); it.hasNext(); ) {
      if (now - it.next().at < ttlNanos) {
        break;
      }
      it.remove();
    }
    for (Iterator<Answer> it = answered.values().iterator(); it.hasNext(); ) {
      if (now - it.next().at() < ttlNanos) {
        break;
      }
      it.remove();
    }
  }

  private void trim(LinkedHashMap<String, ?> map) {
    Iterator<? extends Map.Entry<String, ?>> it = map.entrySet().iterator();
    while (map.size() > capacity && it.hasNext()) {
      it.next();
      it.remove();
    }
  }
}
