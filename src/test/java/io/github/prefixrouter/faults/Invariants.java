package io.github.prefixrouter.faults;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Invariants of one simulated run, checked as events happen (forwarded hops, watermarks) and
 * at the end (completion, answers, counters). Collects violations instead of throwing, so a run
 * reports everything that went wrong together with its seed.
 */
final class Invariants {

  private static final int MAX_REPORTED = 25;

  private final int hopLimit;
  private final Set<String> clusterIds;
  private final boolean checkWatermarks;
  private final List<String> violations = new ArrayList<>();
  private int suppressed;
  /** Request id -> the cache scope its client submitted it in. */
  final Map<String, io.github.prefixrouter.CacheScope> scopeOf = new HashMap<>();
  /** Request id -> node id it was submitted to. */
  final Map<String, String> originOf = new HashMap<>();
  /** Sender instance key -> FORWARD frames it sent. */
  final Map<String, Long> forwardsSentBy = new HashMap<>();
  /**
   * Request id -> peers a FORWARD of it was sent to, all senders (a FORWARD sent again to the
   * same peer, without streaming, after a peer from before streaming refused it, counts once).
   */
  final Map<String, Integer> forwardsFor = new HashMap<>();
  private final Map<String, Set<String>> forwardTargets = new HashMap<>();
  private final Set<String> sentForwards = new java.util.HashSet<>();
  long forwardFrames;
  /** Addresses a node listened at before a restart brought it back at a new one. */
  final Set<String> leftAddresses = new java.util.HashSet<>();
  /** FORWARD frames, and other frames, sent to one of {@link #leftAddresses}. */
  long forwardsToLeftAddresses;
  long othersToLeftAddresses;
  /** Sabotage only: called with (sender instance key, request id) of every FORWARD sent. */
  java.util.function.BiConsumer<String, String> onForward;

  /** How many FORWARD frames of {@code requestId} were sent so far, by any node. */
  int forwardFramesOf(String requestId) {
    return framesFor.getOrDefault(requestId, 0);
  }

  private final Map<String, Integer> framesFor = new HashMap<>();

  /** The peers a FORWARD of {@code requestId} was sent to so far, by any node. */
  Set<String> forwardTargetsOf(String requestId) {
    return forwardTargets.getOrDefault(requestId, Set.of());
  }

  Invariants(int hopLimit, Set<String> clusterIds, boolean checkWatermarks) {
    this.hopLimit = hopLimit;
    this.clusterIds = clusterIds;
    this.checkWatermarks = checkWatermarks;
  }

  boolean checkWatermarks() {
    return checkWatermarks;
  }

  void violation(String what) {
    if (violations.size() < MAX_REPORTED) {
      violations.add(what);
    } else {
      suppressed++;
    }
  }

  List<String> violations() {
    List<String> v = new ArrayList<>(violations);
    if (suppressed > 0) {
      v.add("... and " + suppressed + " more");
    }
    return v;
  }

  /**
   * A node sent a FORWARD frame. Hops must be within the limit, the first hop must come from
   * the node the client submitted to, later hops from elsewhere, and the target must be a node
   * of the cluster (never an address nobody announced).
   */
  void onForwardSent(String senderKey, String from, String to, String requestId, int hops) {
    forwardFrames++;
    framesFor.merge(requestId, 1, Integer::sum);
    if (onForward != null) {
      onForward.accept(senderKey, requestId);
    }
    // a FORWARD sent again to the same peer (without streaming, after a peer from before
    // streaming refused the streaming one) is the same forward
    if (sentForwards.add(senderKey + "\n" + requestId + "\n" + to)) {
      forwardsSentBy.merge(senderKey, 1L, Long::sum);
    }
    if (forwardTargets.computeIfAbsent(requestId, k -> new java.util.HashSet<>()).add(to)) {
      forwardsFor.merge(requestId, 1, Integer::sum);
    }
    if (!clusterIds.contains(to)) {
      violation("node " + from + " forwarded " + requestId + " to unknown node " + to);
    }
    if (to.equals(from)) {
      violation("node " + from + " forwarded " + requestId + " to itself");
    }
    if (hops < 1 || hops > hopLimit) {
      violation("node " + from + " forwarded " + requestId + " with hops=" + hops
          + " (hop limit " + hopLimit + ")");
    }
    String origin = originOf.get(requestId);
    if (origin == null) {
      violation("node " + from + " forwarded " + requestId + " that no client submitted");
    } else if (origin.equals(from) != (hops == 1)) {
      violation("node " + from + " forwarded " + requestId + " (submitted to " + origin
          + ") with hops=" + hops + ": only the origin may send the first hop");
    }
  }
}
