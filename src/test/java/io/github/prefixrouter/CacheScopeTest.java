package io.github.prefixrouter;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class CacheScopeTest {

  @Test
  void defaultScopeIsBothEmpty() {
    assertSame(CacheScope.DEFAULT, CacheScope.of("", ""));
    assertTrue(CacheScope.DEFAULT.isDefault());
    assertEquals("", CacheScope.DEFAULT.adapter());
    assertEquals("", CacheScope.DEFAULT.salt());
    assertFalse(CacheScope.adapter("a").isDefault());
    assertFalse(CacheScope.salt("s").isDefault());
  }

  @Test
  void equalityIsByBothStrings() {
    assertEquals(CacheScope.of("a", "s"), CacheScope.of("a", "s"));
    assertEquals(CacheScope.of("a", "s").hashCode(), CacheScope.of("a", "s").hashCode());
    assertNotEquals(CacheScope.of("a", "s"), CacheScope.of("a", ""));
    assertNotEquals(CacheScope.of("ab", "c"), CacheScope.of("a", "bc"));
    assertNotEquals(CacheScope.adapter("x"), CacheScope.salt("x"));
    assertEquals(CacheScope.adapter("x"), CacheScope.of("x", ""));
  }

  @Test
  void toStringHidesTheSalt() {
    String s = CacheScope.of("sql-lora", "tenant-secret").toString();
    assertTrue(s.contains("sql-lora"), s);
    assertTrue(s.contains("salted"), s);
    assertFalse(s.contains("tenant-secret"), s);
  }

  @Test
  void lengthCapsCountUtf8Bytes() {
    CacheScope.of("a".repeat(CacheScope.MAX_ADAPTER_BYTES), "s".repeat(CacheScope.MAX_SALT_BYTES));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> CacheScope.adapter("a".repeat(CacheScope.MAX_ADAPTER_BYTES + 1)));
    assertTrue(e.getMessage().contains("adapter"), e.getMessage());
    // 128 two-byte characters fit, 129 do not
    CacheScope.salt("é".repeat(CacheScope.MAX_SALT_BYTES / 2));
    e = assertThrows(IllegalArgumentException.class,
        () -> CacheScope.salt("é".repeat(CacheScope.MAX_SALT_BYTES / 2 + 1)));
    assertTrue(e.getMessage().contains("cache salt") && e.getMessage().contains("bytes"),
        e.getMessage());
  }

  @Test
  void rejectsControlCharactersAndLoneSurrogates() {
    for (String bad : new String[] {"a\nb", "\u0000", "x\u007F", "\u0085", "\t"}) {
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> CacheScope.adapter(bad));
      assertTrue(e.getMessage().contains("control character"), e.getMessage());
      assertThrows(IllegalArgumentException.class, () -> CacheScope.salt(bad));
    }
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> CacheScope.salt("ab\uD800"));
    assertTrue(e.getMessage().contains("lone surrogate at index 2"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> CacheScope.adapter("\uDC00x"));
    // a pair is fine
    assertEquals("\uD83D\uDE00", CacheScope.adapter("\uD83D\uDE00").adapter());
    assertThrows(NullPointerException.class, () -> CacheScope.of(null, ""));
    assertThrows(NullPointerException.class, () -> CacheScope.of("", null));
  }

  @Test
  void requestCarriesItsScope() {
    InferenceRequest plain = InferenceRequest.of("r1", new int[] {1, 2, 3});
    assertSame(CacheScope.DEFAULT, plain.scope());
    CacheScope a = CacheScope.of("lora-a", "t1");
    InferenceRequest scoped = plain.withScope(a);
    assertEquals(a, scoped.scope());
    assertEquals(plain.id(), scoped.id());
    assertEquals(3, scoped.length());
    assertSame(plain, plain.withScope(CacheScope.DEFAULT));
    assertNotEquals(plain, scoped);
    assertNotEquals(plain.hashCode(), scoped.hashCode());
    assertEquals(scoped,
        new InferenceRequest("r1", new int[] {1, 2, 3}, GenerationParams.DEFAULT, a));
    assertEquals(scoped.hashCode(),
        new InferenceRequest("r1", new int[] {1, 2, 3}, GenerationParams.DEFAULT, a).hashCode());
    assertTrue(scoped.toString().contains("lora-a"), scoped.toString());
    assertFalse(plain.toString().contains("CacheScope"), plain.toString());
    assertThrows(NullPointerException.class, () -> plain.withScope(null));
    assertThrows(NullPointerException.class,
        () -> new InferenceRequest("r", new int[] {1}, GenerationParams.DEFAULT, null));
  }
}
