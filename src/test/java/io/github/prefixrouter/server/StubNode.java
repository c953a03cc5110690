package io.github.prefixrouter.server;

import static org.mockito.ArgumentMatchers.any;
import static org.mockito.Mockito.mock;
import static org.mockito.Mockito.when;

import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.InferenceResponse;
import io.github.prefixrouter.OutputListener;
import io.github.prefixrouter.PrefixRouterNode;
import io.github.prefixrouter.RouteDecision;
import io.github.prefixrouter.RoutingPolicy;
import io.github.prefixrouter.testing.Await;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A mocked running node {@code solo} for the client endpoint's tests: it records every request
 * submitted, with its output listener (null for a whole answer) and the future it returned,
 * and answers when the test completes that future.
 */
final class StubNode {

  /** The routing decision of a request run locally under the local-only policy. */
  static final RouteDecision LOCAL_DECISION = new RouteDecision(RoutingPolicy.COST_AWARE, 3,
      new String[] {"solo"}, new int[1], new int[1], new int[1], new long[1], new long[1],
      new RouteDecision.SkipReason[] {RouteDecision.SkipReason.NONE}, 0,
      RouteDecision.Reason.LOCAL_ONLY_POLICY);

  final PrefixRouterNode node = mock(PrefixRouterNode.class);
  final List<InferenceRequest> requests = Collections.synchronizedList(new ArrayList<>());
  final List<OutputListener> listeners = Collections.synchronizedList(new ArrayList<>());
  final List<CompletableFuture<InferenceResponse>> futures =
      Collections.synchronizedList(new ArrayList<>());

  /** Stubs the node: running, named {@code solo}, recording what is submitted. */
  StubNode() {
    when(node.state()).thenReturn(PrefixRouterNode.State.RUNNING);
    when(node.nodeId()).thenReturn("solo");
    when(node.submit(any(), any())).thenAnswer(inv -> record(inv.getArgument(0),
        inv.getArgument(1)));
    when(node.submit(any())).thenAnswer(inv -> record(inv.getArgument(0), null));
  }

  private CompletableFuture<InferenceResponse> record(InferenceRequest r, OutputListener l) {
    CompletableFuture<InferenceResponse> f = new CompletableFuture<>();
    requests.add(r);
    listeners.add(l);
    futures.add(f);
    return f;
  }

  /** Waits until at least {@code n} requests were submitted. */
  void awaitSubmitted(int n) throws InterruptedException {
    Await.until(() -> futures.size() >= n, n + " requests submitted");
  }
}
