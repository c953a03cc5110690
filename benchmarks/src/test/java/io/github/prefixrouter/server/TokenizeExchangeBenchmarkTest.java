package io.github.prefixrouter.server;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class TokenizeExchangeBenchmarkTest {

  @Test
  void bothSidesTokenizeTheSameConversation() throws Exception {
    TokenizeExchangeBenchmark b = new TokenizeExchangeBenchmark();
    b.systemChars = 400;
    b.start(); // checks that the stand-in's ids come back through the node's tokenizer
    try {
      assertEquals((400 + 40) / TokenizeExchangeBenchmark.CHARS_PER_TOKEN,
          b.serverTokenize().length);
      assertEquals(400 + 40 + "<|system|>\n\n<|user|>\n\n<|assistant|>\n".length(),
          b.inProcessTokenize().length);
    } finally {
      b.stop();
    }
  }
}
