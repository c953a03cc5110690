package io.github.prefixrouter.internal;

import io.github.prefixrouter.InferenceRequest;
import java.util.function.Function;

/**
 * The library's own read access to an {@link InferenceRequest}'s token array, without the copy
 * that {@link InferenceRequest#tokens()} makes.
 *
 * <p>The public API keeps requests immutable: a host sees copies only. The router, the codecs and
 * the shipped engines read the prompt on every request and never modify it, so they share the
 * request's own array through this class, which {@link InferenceRequest} hands its accessor to
 * when it is initialized (the pattern of the JDK's shared secrets: a package that is not
 * exported reaching another package's private state). Callers must not write to the array.
 */
public final class PromptArrays {

  private static volatile Function<InferenceRequest, int[]> access;

  private PromptArrays() {}

  /**
   * Called once, by {@link InferenceRequest}'s static initializer.
   *
   * @param accessor returns a request's own token array
   * @throws IllegalStateException if an accessor was given before
   */
  public static synchronized void register(Function<InferenceRequest, int[]> accessor) {
    if (access != null) {
      throw new IllegalStateException("the prompt accessor is registered already");
    }
    access = accessor;
  }

  /**
   * The request's own token array, not a copy: read it, never write to it.
   *
   * @param request the request (its class is initialized, so the accessor is registered)
   * @return the array the request holds
   */
  public static int[] shared(InferenceRequest request) {
    return access.apply(request);
  }
}
