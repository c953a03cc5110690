package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.internal.PromptArrays;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

class InferenceRequestTest {

  @Test
  void noPublicMethodHandsOutTheRequestsOwnArray() {
    int[] given = {1, 2, 3};
    InferenceRequest r = InferenceRequest.of("r", given);
    given[0] = 99;
    int[] read = r.tokens();
    read[1] = 99;
    assertArrayEquals(new int[] {1, 2, 3}, r.tokens());
    for (Method m : InferenceRequest.class.getMethods()) {
      if (m.getReturnType() == int[].class && Modifier.isPublic(m.getModifiers())) {
        int[] a = (int[]) invoke(m, r);
        int[] b = (int[]) invoke(m, r);
        assertTrue(a != b, m.getName() + " returns the same array twice");
      }
    }
  }

  @Test
  void theLibrarysAccessorSharesTheArrayWithoutCopying() {
    InferenceRequest r = InferenceRequest.of("r", new int[] {4, 5, 6});
    assertSame(PromptArrays.shared(r), PromptArrays.shared(r));
    assertArrayEquals(new int[] {4, 5, 6}, PromptArrays.shared(r));
    InferenceRequest scoped = r.withScope(CacheScope.adapter("a"));
    assertSame(PromptArrays.shared(r), PromptArrays.shared(scoped));
    IllegalStateException e = assertThrows(IllegalStateException.class,
        () -> PromptArrays.register(x -> new int[] {7}));
    assertTrue(e.getMessage().contains("registered already"), e.getMessage());
    assertArrayEquals(new int[] {4, 5, 6}, PromptArrays.shared(r));
  }

  @Test
  void invalidRequestsNameTheirProblem() {
    assertMessage("1 to 128 characters", () -> InferenceRequest.of("", new int[] {1}));
    assertMessage("1 to 128 characters", () -> InferenceRequest.of("x".repeat(129), new int[] {1}));
    assertMessage("lone surrogate at index 1", () -> InferenceRequest.of("a\uD800", new int[] {1}));
    assertMessage("at least one token", () -> InferenceRequest.of("r", new int[0]));
    assertMessage("token id -1 at index 1",
        () -> InferenceRequest.of("r", new int[] {0, -1}));
    assertMessage("token id 16777216 at index 0",
        () -> InferenceRequest.of("r", new int[] {InferenceRequest.MAX_TOKEN_ID}));
    assertMessage("limit 1048576",
        () -> InferenceRequest.of("r", new int[InferenceRequest.MAX_PROMPT_TOKENS + 1]));
    assertThrows(NullPointerException.class, () -> InferenceRequest.of("r", null));
    assertThrows(NullPointerException.class, () -> InferenceRequest.of(null, new int[] {1}));
  }

  @Test
  void equalityCoversEveryComponent() {
    InferenceRequest a = InferenceRequest.of("r", new int[] {1, 2});
    assertEquals(a, InferenceRequest.of("r", new int[] {1, 2}));
    assertEquals(a.hashCode(), InferenceRequest.of("r", new int[] {1, 2}).hashCode());
    assertNotEquals(a, InferenceRequest.of("s", new int[] {1, 2}));
    assertNotEquals(a, InferenceRequest.of("r", new int[] {1, 3}));
    assertNotEquals(a, a.withScope(CacheScope.salt("t")));
    assertSame(a, a.withScope(CacheScope.DEFAULT));
    assertEquals(2, a.length());
    assertEquals(2, a.tokenAt(1));
    assertTrue(Arrays.equals(new int[] {1, 2}, a.tokens()));
  }

  /**
   * A prompt array another thread writes to while the request is made: the request checks the
   * tokens it keeps, so it never holds a token id outside [0, MAX_TOKEN_ID). (It checked the
   * caller's array and then copied it: a token written in between was kept unchecked.)
   */
  @Test
  void aPromptChangedWhileTheRequestIsMadeNeverGetsPastTheChecks() throws Exception {
    int[] prompt = new int[InferenceRequest.MAX_PROMPT_TOKENS];
    VarHandle slot = MethodHandles.arrayElementVarHandle(int[].class);
    AtomicBoolean done = new AtomicBoolean();
    Thread writer = new Thread(() -> {
      for (int i = 0; !done.get(); i++) {
        slot.setVolatile(prompt, 0, (i & 1) == 0 ? 5 : -1);
      }
    });
    writer.start();
    try {
      // as long as it takes the writer to get in between, on a busy machine too
      long end = System.nanoTime() + 1_500_000_000L;
      for (int n = 0; System.nanoTime() - end < 0; n++) {
        InferenceRequest r;
        try {
          r = InferenceRequest.of("r" + n, prompt);
        } catch (IllegalArgumentException refused) {
          continue;
        }
        assertTrue(r.tokenAt(0) >= 0, "request " + n + " kept token id " + r.tokenAt(0));
      }
    } finally {
      done.set(true);
      writer.join();
    }
  }

  private static void assertMessage(String part, Runnable r) {
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, r::run);
    assertTrue(e.getMessage().contains(part), e.getMessage());
  }

  private static Object invoke(Method m, Object target) {
    if (m.getParameterCount() != 0) {
      return new int[0];
    }
    try {
      return m.invoke(target);
    } catch (ReflectiveOperationException e) {
      throw new AssertionError(e);
    }
  }
}
