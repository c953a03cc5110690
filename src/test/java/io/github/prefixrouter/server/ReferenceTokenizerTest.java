package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.prefixrouter.GenerationParams;
import io.github.prefixrouter.InferenceRequest;
import io.github.prefixrouter.engine.reference.ReferenceEngine;
import io.github.prefixrouter.internal.json.Json;
import io.github.prefixrouter.server.PromptTokenizer.TokenizeException;
import io.github.prefixrouter.server.PromptTokenizer.Tokenized;
import io.github.prefixrouter.spi.EngineResult;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** The demo engine's character tokenizer. */
class ReferenceTokenizerTest {

  private final ReferenceTokenizer tokenizer = new ReferenceTokenizer(1024, 1024);

  @Provide
  Arbitrary<String> texts() {
    // any code point but surrogates (which no valid text holds alone), all planes
    Arbitrary<Integer> cp = Arbitraries.oneOf(
        Arbitraries.integers().between(0, 0x2FF),
        Arbitraries.integers().between(0x300, Character.MIN_SURROGATE - 1),
        Arbitraries.integers().between(Character.MAX_SURROGATE + 1, Character.MAX_CODE_POINT));
    return cp.list().ofMinSize(1).ofMaxSize(40).map(l -> {
      StringBuilder b = new StringBuilder();
      l.forEach(b::appendCodePoint);
      return b.toString();
    });
  }

  @Provide
  Arbitrary<Integer> vocabularies() {
    return Arbitraries.oneOf(Arbitraries.of(1, 1024, 0xD800 - 0x100, 0xD800 - 0xFF, 1 << 20),
        Arbitraries.integers().between(1, 1 << 20));
  }

  @Property
  void textTokenizesToOneIdPerCodePointAndBack(@ForAll("texts") String text,
      @ForAll("vocabularies") int vocabulary) {
    ReferenceTokenizer t = new ReferenceTokenizer(vocabulary, 16);
    int[] ids = t.tokenize("any", text).join().tokens();
    assertEquals(text.codePointCount(0, text.length()), ids.length);
    assertEquals(text, t.outputText(ids, ""));
  }

  @Property
  void distinctCodePointsHaveDistinctIds(@ForAll("texts") String a, @ForAll("texts") String b,
      @ForAll("vocabularies") int vocabulary) {
    ReferenceTokenizer t = new ReferenceTokenizer(vocabulary, 16);
    assertEquals(a.equals(b), java.util.Arrays.equals(t.encode(a), t.encode(b)));
  }

  @Property
  void everyOutputIdOfTheEngineIsAPrintableCharacterOfItsRange(
      @ForAll @IntRange(min = 1, max = 1 << 20) int vocabulary,
      @ForAll @IntRange(min = 0, max = (1 << 20) - 1) int id) {
    ReferenceTokenizer t = new ReferenceTokenizer(vocabulary, 16);
    int outputId = id % vocabulary;
    String s = t.outputText(new int[] {outputId}, "");
    int cp = s.codePointAt(0);
    assertEquals(s.length(), Character.charCount(cp), "one code point");
    assertTrue(cp >= ReferenceTokenizer.OUTPUT_BASE && cp != 0xFFFD
        && Character.isValidCodePoint(cp) && !(cp >= Character.MIN_SURROGATE
        && cp <= Character.MAX_SURROGATE), "a character of the output range: " + cp);
    assertArrayEquals(new int[] {outputId}, t.encode(s), "its text tokenizes back to it");
  }

  @Test
  void theOutputRangeSkipsTheSurrogates() {
    ReferenceTokenizer big = new ReferenceTokenizer(1 << 20, 16);
    int last = Character.MIN_SURROGATE - 1 - ReferenceTokenizer.OUTPUT_BASE; // U+D7FF's id
    assertEquals("\uD7FF", big.outputText(new int[] {last}, ""));
    assertEquals("\uE000", big.outputText(new int[] {last + 1}, ""));
    assertArrayEquals(new int[] {last, last + 1}, big.encode("\uD7FF\uE000"));
    // a lone surrogate in a text is no character: U+FFFD's id
    assertArrayEquals(big.encode("\uFFFD"), big.encode("\uD800"));
  }

  @Test
  void idsThatAreNoCharacterAreTheReplacementCharacter() {
    assertEquals("\uFFFD\uFFFD\uFFFD", tokenizer.outputText(
        new int[] {-1, Character.MIN_SURROGATE, Character.MAX_CODE_POINT + 1}, "ignored"));
  }

  @Test
  void aConversationIsRenderedByTheFixedTemplate() {
    List<Map<String, Object>> messages = List.of(
        Map.of("role", "system", "content", "Be brief."),
        Map.of("role", "user", "content", List.of(Map.of("type", "text", "text", "Hi "),
            Map.of("type", "text", "text", "there"))),
        withNullContent("assistant"),
        Map.of("role", "user", "content", "Again?"));
    Tokenized t = tokenizer.tokenizeChat("any", messages, Map.of("ignored", true)).join();
    String expected = "<|system|>\nBe brief.\n<|user|>\nHi there\n<|assistant|>\n\n"
        + "<|user|>\nAgain?\n<|assistant|>\n";
    assertArrayEquals(tokenizer.encode(expected), t.tokens());
    assertEquals(expected.length() + 1024, t.maxModelLen(), "room for the engine's output limit");
  }

  private static Map<String, Object> withNullContent(String role) {
    Map<String, Object> m = new HashMap<>();
    m.put("role", role);
    m.put("content", Json.NULL);
    return m;
  }

  @Test
  void malformedConversationsAndEmptyPromptsAreTheRequestsFault() {
    for (var call : List.<java.util.function.Supplier<java.util.concurrent.CompletableFuture<Tokenized>>>of(
        () -> tokenizer.tokenize("m", ""),
        () -> tokenizer.tokenizeChat("m", List.of(Map.of("role", 3, "content", "x")), Map.of()),
        () -> tokenizer.tokenizeChat("m", List.of(Map.of("role", "user", "content", 3)), Map.of()),
        () -> tokenizer.tokenizeChat("m", List.of(Map.of("role", "user",
            "content", List.of(Map.of("type", "image_url")))), Map.of()))) {
      CompletionException e = assertThrows(CompletionException.class, () -> call.get().join());
      TokenizeException te = (TokenizeException) e.getCause();
      assertTrue(te.invalidRequest(), te.getMessage());
    }
  }

  @Test
  void theEnginesAnswerReadsAsTextThatTokenizesBackToItsIds() throws Exception {
    try (ReferenceEngine engine = ReferenceEngine.builder().build()) {
      int[] prompt = tokenizer.tokenize("m", "The capital of France is").join().tokens();
      EngineResult r = engine.execute(
          new InferenceRequest("q", prompt, GenerationParams.greedy(12))).get();
      String text = tokenizer.outputText(r.outputTokens(), r.text());
      assertEquals(12, text.codePointCount(0, text.length()));
      assertArrayEquals(r.outputTokens(), tokenizer.encode(text));
    }
  }

  @Test
  void settingsOutOfRangeAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> new ReferenceTokenizer(0, 1));
    assertThrows(IllegalArgumentException.class, () -> new ReferenceTokenizer((1 << 20) + 1, 1));
    assertThrows(IllegalArgumentException.class, () -> new ReferenceTokenizer(1024, 0));
  }
}
