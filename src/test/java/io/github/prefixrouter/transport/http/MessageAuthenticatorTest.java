package io.github.prefixrouter.transport.http;

import static io.github.prefixrouter.transport.http.HttpTransportTest.KEY;
import static io.github.prefixrouter.transport.http.HttpTransportTest.OTHER_KEY;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class MessageAuthenticatorTest {

  private static final byte[] THIRD = "a third key of thirty-two bytes!".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] BODY = "payload".getBytes(StandardCharsets.UTF_8);

  private static String mac(List<byte[]> ring) {
    return new MessageAuthenticator(ring).sign(BODY, "request", "a", "127.0.0.1:1", "b", "5", "n-1");
  }

  private static int verify(List<byte[]> ring, String mac, String recipient) {
    return new MessageAuthenticator(ring).verify(mac, BODY, "request", "a", "127.0.0.1:1", recipient, "5", "n-1");
  }

  @Test
  void theFirstKeySignsAndEveryKeyVerifiesReportingWhichOne() {
    String signedWithKey = mac(List.of(KEY, OTHER_KEY));
    assertEquals(signedWithKey, mac(List.of(KEY)), "only the first key signs");
    assertEquals(0, verify(List.of(KEY), signedWithKey, "b"));
    assertEquals(1, verify(List.of(OTHER_KEY, KEY), signedWithKey, "b"));
    assertEquals(2, verify(List.of(OTHER_KEY, THIRD, KEY), signedWithKey, "b"));
    assertEquals(MessageAuthenticator.NO_KEY, verify(List.of(OTHER_KEY, THIRD), signedWithKey, "b"));
    // a changed field fails under every key
    assertEquals(MessageAuthenticator.NO_KEY, verify(List.of(KEY, OTHER_KEY), signedWithKey, "c"));
    assertEquals(MessageAuthenticator.NO_KEY, verify(List.of(KEY), null, "b"));
    assertEquals(MessageAuthenticator.NO_KEY, verify(List.of(KEY), "not base64!", "b"));
  }

  @Test
  void aKeyIdIsTheFirstFourBytesOfItsSha256() {
    // printf 0123456789abcdef0123456789abcdef | sha256sum
    assertEquals("3eb1bd43", MessageAuthenticator.keyId(KEY));
    assertEquals("4ba68aa8", MessageAuthenticator.keyId(OTHER_KEY));
    assertEquals(List.of("3eb1bd43", "4ba68aa8"),
        List.copyOf(new MessageAuthenticator(List.of(KEY, OTHER_KEY, KEY)).keyIds().keySet()));
  }
}
