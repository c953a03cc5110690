package io.github.prefixrouter.internal.route;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The routing node's fixed bounds that docs/routing.md and docs/reliability.md state are the
 * code's: the forwards a request takes and the refusals of the node's own transport it passes
 * over, the slots a running count drains a queue through, the bound and weight of a learned
 * forward overhead, how long a peer from before scopes is skipped, the memory of early
 * CANCELs, and the prompt tokens an engine may add. A bound changed in the code, or mistyped in
 * a doc, fails here with the sentence the doc should hold.
 */
class DocumentedBoundsTest {

  private static String doc(String name) throws IOException {
    // sentences wrap anywhere: compare with single spaces
    return Files.readString(Path.of("docs", name)).replaceAll("\\s+", " ");
  }

  private static void says(String doc, String name, String stated) {
    assertTrue(doc.contains(stated), "docs/" + name + " should say: " + stated);
  }

  /** 4096 as the docs write it in prose: 4,096. */
  private static String grouped(long n) {
    return String.format("%,d", n);
  }

  @Test
  void routingMdStatesTheForwardsARequestTakes() throws IOException {
    String r = doc("routing.md");
    says(r, "routing.md", "At most " + RouterNode.MAX_FORWARDS
        + " forwards per request, then local.");
    says(r, "routing.md", "a request passes over at most " + RouterNode.MAX_UNSENT_FORWARDS
        + " such refusals (then they count as forwards)");
    says(r, "routing.md", "not one of the request's " + RouterNode.MAX_FORWARDS
        + " forwards (nothing was sent; up to " + RouterNode.MAX_UNSENT_FORWARDS
        + " such refusals a request, then they count as forwards)");
    says(r, "routing.md", "none served it within the " + RouterNode.MAX_FORWARDS + " forwards");
  }

  @Test
  void reliabilityMdStatesTheForwardsAnOriginSends() throws IOException {
    String r = doc("reliability.md");
    says(r, "reliability.md", "An origin sends a request to at most " + RouterNode.MAX_FORWARDS
        + " peers before running it itself.");
    says(r, "reliability.md", "is not one of the " + RouterNode.MAX_FORWARDS + ", up to "
        + RouterNode.MAX_UNSENT_FORWARDS + " such refusals a request");
    // the campaign's check: every forward sent, and one local run
    says(r, "reliability.md", "`attempts` is 1-" + (RouterNode.MAX_FORWARDS + 1));
    says(r, "reliability.md", "an origin sends at most " + RouterNode.MAX_FORWARDS
        + " for one request");
  }

  @Test
  void routingMdStatesTheSlotsARunningCountDrainsThrough() throws IOException {
    String r = doc("routing.md");
    int slots = CostModel.MAX_SLOTS;
    says(r, "routing.md", "queueDepth(c) × service / max(1, min(inFlight(c), " + slots + "))");
    says(r, "routing.md", "it counts for at most " + grouped(slots) + " slots");
    says(r, "routing.md", "the divisor is `S = max(1, min(inFlight, " + slots + "))`");
  }

  @Test
  void routingMdStatesTheBoundsOfALearnedOverhead() throws IOException {
    String r = doc("routing.md");
    says(r, "routing.md", "A sample counts at most "
        + TimeUnit.NANOSECONDS.toMillis(PeerHealth.MAX_OVERHEAD_NANOS)
        + " ms (or `forwardOverhead` if larger) either way");
    says(r, "routing.md", "then an EWMA of weight 1/" + Math.round(1 / PeerHealth.OVERHEAD_WEIGHT));
  }

  @Test
  void routingMdStatesHowLongAPeerFromBeforeScopesIsSkipped() throws IOException {
    String r = doc("routing.md");
    says(r, "routing.md", "until it restarts, leaves the live peers or "
        + TimeUnit.NANOSECONDS.toMinutes(PeerHealth.NO_SCOPES_MEMORY) + " minutes pass");
  }

  @Test
  void theDocsStateTheMemoryOfEarlyCancels() throws IOException {
    String r = doc("routing.md");
    String cap = grouped(EarlyCancels.CAPACITY);
    says(r, "routing.md", "at most " + cap + " CANCELs and " + cap + " answered keys");
    says(r, "routing.md", EarlyCancels.TTL_TIMEOUT_BOUNDS + " × `forwardTimeoutMax`, " + cap
        + " keys");
    String rel = doc("reliability.md");
    says(rel, "reliability.md", "(" + cap + " CANCELs and " + cap + " answered keys)");
    says(rel, "reliability.md", "remembers its peers' CANCELs for "
        + EarlyCancels.TTL_TIMEOUT_BOUNDS + " × `forwardTimeoutMax`, at most " + cap);
    says(rel, "reliability.md", "a flood of CANCELs takes at most " + cap + " entries");
  }

  @Test
  void routingMdStatesThePromptTokensAnEngineMayAdd() throws IOException {
    String r = doc("routing.md");
    says(r, "routing.md", "fewer prompt tokens than the prompt or more than "
        + RouterNode.PROMPT_TOKENS_SLACK + " more");
    says(r, "routing.md", "(an engine may count up to " + RouterNode.PROMPT_TOKENS_SLACK
        + " special tokens it adds)");
  }
}
