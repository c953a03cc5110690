package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
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
    assertEquals(c.toString(), c.toBuilder().build().toString());
  }

  static Stream<Arguments> invalid() {
    return Stream.of(
        bad("blockSize", b -> b.blockSize(0)),
        bad("blockSize", b -> b.blockSize(4096)),
        bad("treeCapacityTokens", b -> b.treeCapacityTokens(8)),
        bad("forwardMarginRatio", b -> b.forwardMargin(1.5, Duration.ZERO)),
        bad("forwardMarginRatio", b -> b.forwardMargin(Double.NaN, Duration.ZERO)),
        bad("forwardMarginMin", b -> b.forwardMargin(0.1, Duration.ofMillis(-1))),
        bad("initialPrefillNanosPerToken", b -> b.initialPrefillNanosPerToken(0)),
        bad("forwardOverhead", b -> b.forwardOverhead(Duration.ofNanos(-1))),
        bad("forwardTimeoutMin", b -> b.forwardTimeout(Duration.ofSeconds(5),
            Duration.ofSeconds(1))),
        bad("forwardTimeoutMin", b -> b.forwardTimeout(Duration.ZERO, Duration.ofSeconds(1))),
        bad("hopLimit", b -> b.hopLimit(-1)),
        bad("hopLimit", b -> b.hopLimit(9)),
        bad("lowWatermark", b -> b.watermarks(8, 8)),
        bad("highWatermark", b -> b.watermarks(0, 0)),
        bad("busyCooldown", b -> b.busyCooldown(Duration.ZERO)),
        bad("failureCooldown", b -> b.failureCooldown(Duration.ofSeconds(-1))),
        bad("coldPlacementLoadBound", b -> b.coldPlacementLoadBound(0.9)),
        bad("coldPlacementSlack", b -> b.coldPlacementSlack(-0.1)),
        bad("stalenessHalfLife", b -> b.stalenessHalfLife(Duration.ZERO)),
        bad("gossipFanout", b -> b.gossip(Duration.ofMillis(200), 0)),
        bad("peerSuspectAfter", b -> b.gossip(Duration.ofSeconds(5), 3)),
        bad("peerDeadAfter", b -> b.peerTimeouts(Duration.ofSeconds(3), Duration.ofSeconds(1))));
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

  @Test
  void everyProblemIsListedAtOnce() {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> RouterConfig.builder().blockSize(0).hopLimit(-3).watermarks(5, 2).build());
    String m = e.getMessage();
    assertTrue(m.contains("blockSize") && m.contains("hopLimit") && m.contains("lowWatermark"),
        m);
  }

  @Test
  void nullsAreRejectedImmediately() {
    assertThrows(NullPointerException.class, () -> RouterConfig.builder().policy(null));
    assertThrows(NullPointerException.class, () -> RouterConfig.builder().treeMode(null));
  }
}
