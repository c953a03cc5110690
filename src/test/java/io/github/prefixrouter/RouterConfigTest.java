package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class RouterConfigTest {

  @Test
  void defaultsAreValidAndDocumented() {
    RouterConfig c = RouterConfig.defaults();
    assertEquals(16, c.blockSize());
    assertEquals(RoutingPolicy.COST_AWARE, c.policy());
    assertEquals(1, c.hopLimit());
    assertEquals(1.25, c.coldPlacementLoadBound());
    assertEquals(RouterConfig.TreeMode.AUTO, c.treeMode());
    assertEquals(65_536, c.gossipMessageBytes());
    assertEquals(1_024, RouterConfig.builder().gossipMessageBytes(1_024).build()
        .gossipMessageBytes(), "the smallest gossip message size");
    assertEquals(16 << 20, RouterConfig.builder().gossipMessageBytes(16 << 20).build()
        .gossipMessageBytes(), "the largest gossip message size");
    assertEquals(c.toString(), c.toBuilder().build().toString());
    // the mirror limit follows the capacity unless set, and never falls below 2^24
    assertEquals(1L << 24, c.mirrorLimitTokens());
    assertEquals(1L << 27, c.toBuilder().treeCapacityTokens(1L << 25).build().mirrorLimitTokens());
    assertEquals(Long.MAX_VALUE,
        c.toBuilder().treeCapacityTokens(Long.MAX_VALUE / 2).build().mirrorLimitTokens());
    assertEquals(5000, c.toBuilder().treeCapacityTokens(5000).mirrorLimitTokens(5000).build()
        .mirrorLimitTokens());
  }

  /** Every setting away from its default, all valid together. */
  static RouterConfig everySettingChanged() {
    return RouterConfig.builder()
        .blockSize(32)
        .treeCapacityTokens(1L << 16)
        .mirrorLimitTokens(1L << 18)
        .treeMode(RouterConfig.TreeMode.SELF_MANAGED)
        .hashSalt(0x5eed)
        .policy(RoutingPolicy.LONGEST_PREFIX)
        .forwardMargin(0.2, Duration.ofMillis(3))
        .initialPrefillNanosPerToken(7_000)
        .forwardOverhead(Duration.ofMillis(1))
        .forwardTimeout(Duration.ofSeconds(2), Duration.ofSeconds(20))
        .engineTimeout(Duration.ofMinutes(3))
        .hopLimit(2)
        .watermarks(4, 9)
        .busyCooldown(Duration.ofSeconds(4))
        .streamInterval(Duration.ofMillis(5))
        .failureCooldown(Duration.ofSeconds(5))
        .coldPlacement(false)
        .coldPlacementLoadBound(2.0)
        .coldPlacementSlack(0.5)
        .localCaching(false)
        .stalenessHalfLife(Duration.ofSeconds(11))
        .distrustHalfLife(Duration.ofSeconds(17))
        .gossip(Duration.ofMillis(300), 5)
        .peerTimeouts(Duration.ofSeconds(3), Duration.ofSeconds(13))
        .maxPeers(77)
        .gossipMessageBytes(262_144)
        .gossipGeneration(12_345)
        .modelId("llama-3-8b@awq")
        .engineStallTimeout(Duration.ofSeconds(45))
        .engineFailureLimit(7)
        .build();
  }

  /** The public accessors of RouterConfig: every setting it exposes. */
  static List<Method> settings() throws Exception {
    List<Method> out = new ArrayList<>();
    for (Method m : RouterConfig.class.getDeclaredMethods()) {
      if (Modifier.isPublic(m.getModifiers()) && !Modifier.isStatic(m.getModifiers())
          && m.getParameterCount() == 0 && m.getReturnType() != void.class
          && !List.of("toBuilder", "validate", "toString", "hashCode").contains(m.getName())) {
        out.add(m);
      }
    }
    assertTrue(out.size() >= 28, "accessors found: " + out);
    return out;
  }

  @Test
  void everySettingIsKeptAndToBuilderCopiesEveryOne() throws Exception {
    RouterConfig d = RouterConfig.defaults();
    RouterConfig c = everySettingChanged();
    RouterConfig copy = c.toBuilder().build();
    for (Method m : settings()) {
      Object value = m.invoke(c);
      assertNotEquals(m.invoke(d), value, m.getName() + " was not changed from its default");
      assertEquals(value, m.invoke(copy), m.getName() + " lost by toBuilder()");
    }
    assertEquals(32, c.blockSize());
    assertEquals(RouterConfig.TreeMode.SELF_MANAGED, c.treeMode());
    assertEquals(0x5eed, c.hashSalt());
    assertEquals(0.2, c.forwardMarginRatio());
    assertEquals(Duration.ofMillis(3), c.forwardMarginMin());
    assertEquals(Duration.ofSeconds(2), c.forwardTimeoutMin());
    assertEquals(Duration.ofSeconds(20), c.forwardTimeoutMax());
    assertEquals(4, c.lowWatermark());
    assertEquals(9, c.highWatermark());
    assertEquals(Duration.ofMillis(300), c.gossipInterval());
    assertEquals(5, c.gossipFanout());
    assertEquals(Duration.ofSeconds(3), c.peerSuspectAfter());
    assertEquals(Duration.ofSeconds(13), c.peerDeadAfter());
    assertEquals(262_144, c.gossipMessageBytes());
    // a builder from toBuilder() is independent of the configuration it came from
    RouterConfig changed = c.toBuilder().hopLimit(0).build();
    assertEquals(0, changed.hopLimit());
    assertEquals(2, c.hopLimit());
  }

  static Stream<Arguments> invalid() {
    return Stream.of(
        bad("blockSize", b -> b.blockSize(0)),
        bad("blockSize", b -> b.blockSize(4096)),
        bad("treeCapacityTokens", b -> b.treeCapacityTokens(8)),
        bad("mirrorLimitTokens", b -> b.mirrorLimitTokens(-1)),
        bad("mirrorLimitTokens", b -> b.treeCapacityTokens(1000).mirrorLimitTokens(999)),
        bad("forwardMarginRatio", b -> b.forwardMargin(1.5, Duration.ZERO)),
        bad("forwardMarginRatio", b -> b.forwardMargin(Double.NaN, Duration.ZERO)),
        bad("forwardMarginMin", b -> b.forwardMargin(0.1, Duration.ofMillis(-1))),
        bad("initialPrefillNanosPerToken", b -> b.initialPrefillNanosPerToken(0)),
        bad("forwardOverhead", b -> b.forwardOverhead(Duration.ofNanos(-1))),
        bad("forwardTimeoutMin", b -> b.forwardTimeout(Duration.ofSeconds(5),
            Duration.ofSeconds(1))),
        bad("forwardTimeoutMin", b -> b.forwardTimeout(Duration.ZERO, Duration.ofSeconds(1))),
        bad("hopLimit", b -> b.hopLimit(-1)),
        bad("modelId", b -> b.modelId("m".repeat(257))),
        bad("modelId", b -> b.modelId("llama\n3")),
        bad("modelId", b -> b.modelId("lone \uD800 surrogate")),
        bad("hopLimit", b -> b.hopLimit(9)),
        bad("lowWatermark", b -> b.watermarks(8, 8)),
        bad("highWatermark", b -> b.watermarks(0, 0)),
        bad("busyCooldown", b -> b.busyCooldown(Duration.ZERO)),
        bad("streamInterval", b -> b.streamInterval(Duration.ofNanos(-1))),
        bad("streamInterval", b -> b.streamInterval(Duration.ofSeconds(10).plusNanos(1))),
        bad("failureCooldown", b -> b.failureCooldown(Duration.ofSeconds(-1))),
        bad("coldPlacementLoadBound", b -> b.coldPlacementLoadBound(0.9)),
        bad("coldPlacementSlack", b -> b.coldPlacementSlack(-0.1)),
        bad("stalenessHalfLife", b -> b.stalenessHalfLife(Duration.ZERO)),
        bad("distrustHalfLife", b -> b.distrustHalfLife(Duration.ZERO)),
        bad("distrustHalfLife", b -> b.distrustHalfLife(Duration.ofSeconds(-1))),
        bad("gossipFanout", b -> b.gossip(Duration.ofMillis(200), 0)),
        bad("peerSuspectAfter", b -> b.gossip(Duration.ofSeconds(5), 3)),
        // rounds are jittered by up to 10%: just above one interval, healthy peers flap
        bad("peerSuspectAfter", b -> b.gossip(Duration.ofMillis(200), 3)
            .peerTimeouts(Duration.ofMillis(201), Duration.ofSeconds(10))),
        bad("peerSuspectAfter", b -> b.gossip(Duration.ofMillis(200), 3)
            .peerTimeouts(Duration.ofMillis(399), Duration.ofSeconds(10))),
        bad("peerDeadAfter", b -> b.peerTimeouts(Duration.ofSeconds(3), Duration.ofSeconds(1))),
        // every knob, each way it can be wrong
        bad("treeCapacityTokens", b -> b.treeCapacityTokens(-1)),
        bad("initialPrefillNanosPerToken", b -> b.initialPrefillNanosPerToken(1_000_000_001L)),
        bad("forwardTimeoutMax", b -> b.forwardTimeout(Duration.ofSeconds(1), Duration.ZERO)),
        bad("forwardTimeoutMax", b -> b.forwardTimeout(Duration.ofSeconds(1),
            Duration.ofDays(366))),
        bad("engineTimeout", b -> b.engineTimeout(Duration.ZERO)),
        bad("engineTimeout", b -> b.engineTimeout(Duration.ofDays(366))),
        bad("engineStallTimeout", b -> b.engineStallTimeout(Duration.ofNanos(-1))),
        bad("engineStallTimeout", b -> b.engineStallTimeout(Duration.ofDays(366))),
        bad("engineFailureLimit", b -> b.engineFailureLimit(-1)),
        bad("engineFailureLimit",
            b -> b.engineFailureLimit(RouterConfig.MAX_ENGINE_FAILURE_LIMIT + 1)),
        bad("lowWatermark", b -> b.watermarks(-1, 4)),
        bad("busyCooldown", b -> b.busyCooldown(Duration.ofDays(366))),
        bad("failureCooldown", b -> b.failureCooldown(Duration.ofDays(366))),
        bad("forwardMarginMin", b -> b.forwardMargin(0.1, Duration.ofDays(366))),
        bad("forwardOverhead", b -> b.forwardOverhead(Duration.ofDays(366))),
        bad("coldPlacementLoadBound", b -> b.coldPlacementLoadBound(Double.NaN)),
        bad("coldPlacementLoadBound", b -> b.coldPlacementLoadBound(100.5)),
        bad("coldPlacementSlack", b -> b.coldPlacementSlack(Double.NaN)),
        bad("coldPlacementSlack", b -> b.coldPlacementSlack(10.5)),
        bad("forwardMarginRatio", b -> b.forwardMargin(-0.1, Duration.ZERO)),
        bad("stalenessHalfLife", b -> b.stalenessHalfLife(Duration.ofDays(366))),
        bad("distrustHalfLife", b -> b.distrustHalfLife(Duration.ofDays(366))),
        bad("gossipInterval", b -> b.gossip(Duration.ZERO, 3)),
        // rounds of a nanosecond kept a node's scheduler busy with nothing but rounds
        bad("gossipInterval", b -> b.gossip(Duration.ofNanos(1), 3)),
        bad("gossipInterval", b -> b.gossip(Duration.ofNanos(999_999), 3)),
        bad("gossipFanout", b -> b.gossip(Duration.ofMillis(200), 65)),
        bad("peerSuspectAfter", b -> b.peerTimeouts(Duration.ZERO, Duration.ofSeconds(10))),
        bad("peerDeadAfter", b -> b.peerTimeouts(Duration.ofSeconds(2), Duration.ofDays(366))),
        bad("maxPeers", b -> b.maxPeers(0)),
        bad("maxPeers", b -> b.maxPeers(65_537)),
        bad("gossipMessageBytes", b -> b.gossipMessageBytes(1_023)),
        bad("gossipMessageBytes", b -> b.gossipMessageBytes((16 << 20) + 1)),
        bad("gossipMessageBytes", b -> b.gossipMessageBytes(0)),
        bad("gossipGeneration", b -> b.gossipGeneration(-1)),
        bad("gossipGeneration", b -> b.gossipGeneration((1L << 62) + 1)));
  }

  /** Settings every value of which is valid. */
  static final List<String> ANY_VALUE_VALID =
      List.of("treeMode", "hashSalt", "policy", "coldPlacement", "localCaching");

  @Test
  void everySettingThatCanBeInvalidHasAnInvalidCase() throws Exception {
    // a setting added without a case in invalid() (or with no validation at all) fails here
    List<String> tested = invalid().map(a -> (String) a.get()[0]).distinct().toList();
    for (Method m : settings()) {
      String name = m.getName();
      assertTrue(ANY_VALUE_VALID.contains(name) || tested.contains(name),
          name + " has no invalid value in invalid(): add one, or list it as always valid");
    }
  }

  static Arguments bad(String setting, UnaryOperator<RouterConfig.Builder> change) {
    return Arguments.of(setting, change);
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("invalid")
  void invalidSettingIsRejectedWithAMessageNamingIt(
      String setting, UnaryOperator<RouterConfig.Builder> change) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> change.apply(RouterConfig.builder()).build());
    assertTrue(e.getMessage().contains(setting), e.getMessage());
    assertTrue(e.getMessage().startsWith("invalid RouterConfig: "), e.getMessage());
  }

  /** The shortest gossip interval accepted is 1 ms, as documented: that one is accepted. */
  @Test
  void theGossipIntervalMayBeOneMillisecond() {
    assertEquals(Duration.ofMillis(1),
        RouterConfig.builder().gossip(Duration.ofMillis(1), 3).build().gossipInterval());
  }

  /**
   * Rounds are jittered by up to 10%, so a peer's heartbeats come up to 1.1 intervals apart: a
   * suspicion time just above one interval, which was accepted, suspects healthy peers again
   * and again (MembershipTest). At least twice the interval is required, and the message names
   * both values.
   */
  @Test
  void peerSuspectAfterMustBeAtLeastTwiceTheGossipInterval() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> RouterConfig.builder().gossip(Duration.ofMillis(200), 3)
            .peerTimeouts(Duration.ofMillis(201), Duration.ofSeconds(10)).build());
    assertTrue(e.getMessage().contains("peerSuspectAfter (PT0.201S) must be at least twice "
        + "gossipInterval (PT0.2S)"), e.getMessage());
    RouterConfig c = RouterConfig.builder().gossip(Duration.ofMillis(200), 3)
        .peerTimeouts(Duration.ofMillis(400), Duration.ofSeconds(10)).build();
    assertEquals(Duration.ofMillis(400), c.peerSuspectAfter());
  }

  @Test
  void everyProblemIsListedAtOnce() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> RouterConfig.builder().blockSize(0).hopLimit(-3).watermarks(5, 2).build());
    String m = e.getMessage();
    assertTrue(m.contains("blockSize") && m.contains("hopLimit") && m.contains("lowWatermark"),
        m);
  }

  @Test
  void streamIntervalDefaultsTo20msAndAcceptsZeroToTenSeconds() {
    assertEquals(Duration.ofMillis(20), RouterConfig.defaults().streamInterval());
    assertEquals(Duration.ZERO,
        RouterConfig.builder().streamInterval(Duration.ZERO).build().streamInterval());
    RouterConfig c = RouterConfig.builder().streamInterval(Duration.ofSeconds(10)).build();
    assertEquals(Duration.ofSeconds(10), c.toBuilder().build().streamInterval());
    assertThrows(NullPointerException.class, () -> RouterConfig.builder().streamInterval(null));
  }

  @Test
  void nullsAreRejectedImmediately() {
    assertThrows(NullPointerException.class, () -> RouterConfig.builder().policy(null));
    assertThrows(NullPointerException.class, () -> RouterConfig.builder().treeMode(null));
  }
}
