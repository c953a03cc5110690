package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class OpenAiRouteBenchmarkTest {

  @Test
  void bothSidesBuildTheSameRequestAndAnswerIt() {
    OpenAiRouteBenchmark b = new OpenAiRouteBenchmark();
    b.systemChars = 300;
    b.outputTokens = 4;
    b.prepare();
    assertTrue(b.route() > 0);
    assertTrue(b.chat() > 0);
    assertArrayEquals(b.lastRoute.tokens(), b.lastChat.tokens());
    assertEquals(b.lastRoute.params(), b.lastChat.params());
    // the rendered chat: the system prompt, a user message of a tenth of it, the template's tags
    assertEquals(300 + 30 + "<|system|>\n\n<|user|>\n\n<|assistant|>\n".length(),
        b.lastChat.tokens().length);
  }
}
