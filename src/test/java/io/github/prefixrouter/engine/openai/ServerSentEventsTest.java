package io.github.prefixrouter.engine.openai;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The event-stream format's corner cases, as the HTML standard parses them. */
class ServerSentEventsTest {

  private static List<String> parse(String stream, int max) {
    List<String> events = new ArrayList<>();
    ServerSentEvents p = new ServerSentEvents(max, (type, data) -> events.add(type + "|" + data));
    p.feed(stream.getBytes(StandardCharsets.UTF_8));
    return events;
  }

  private static List<String> parse(String stream) {
    return parse(stream, 1 << 16);
  }

  @Test
  void dataLinesAreJoinedByLineFeedsAndAnEmptyLineDispatches() {
    assertEquals(List.of("message|a\nb"), parse("data: a\ndata: b\n\n"));
    assertEquals(List.of("message|a", "message|b"), parse("data: a\n\ndata: b\n\n"));
  }

  @Test
  void onlyOneSpaceAfterTheColonIsDropped() {
    assertEquals(List.of("message| x", "message|y"), parse("data:  x\n\ndata:y\n\n"));
  }

  @Test
  void aFieldWithoutColonHasAnEmptyValue() {
    assertEquals(List.of("message|"), parse("data\n\n"));
    assertEquals(List.of("message|\n"), parse("data\ndata\n\n"));
  }

  @Test
  void commentsAndOtherFieldsAreIgnoredAndEventsWithoutDataAreNotDispatched() {
    assertEquals(List.of("message|x"),
        parse(": hello\nid: 7\nretry: 5\nfoo: bar\n\nevent: ping\n\ndata: x\n\n"));
  }

  @Test
  void theEventFieldSetsTheTypeOfItsEventOnly() {
    assertEquals(List.of("error|boom", "message|ok"), parse("event: error\ndata: boom\n\ndata: ok\n\n"));
  }

  /**
   * llama.cpp's server reported a failure once its stream had begun as an {@code error:} line
   * (then {@code data: [DONE]}): a field the standard ignores, so the failure went unseen.
   */
  @Test
  void anErrorLineIsTheDataOfAnErrorEvent() {
    assertEquals(List.of("error|{\"code\":500}", "message|[DONE]"),
        parse("error: {\"code\":500}\n\ndata: [DONE]\n\n"));
  }

  @Test
  void crLfAndCrLfEndLinesAlikeAndAByteOrderMarkIsSkipped() {
    assertEquals(List.of("message|a", "message|b", "message|c"),
        parse("\uFEFFdata: a\r\n\r\ndata: b\r\rdata: c\n\n"));
  }

  @Test
  void aCrLfSplitAcrossTwoChunksIsOneLineEnd() {
    List<String> events = new ArrayList<>();
    ServerSentEvents p = new ServerSentEvents(1024, (type, data) -> events.add(data));
    p.feed("data: a\r".getBytes(StandardCharsets.UTF_8));
    p.feed("\ndata: b\r".getBytes(StandardCharsets.UTF_8));
    p.feed("\n\r".getBytes(StandardCharsets.UTF_8));
    p.feed("\n".getBytes(StandardCharsets.UTF_8));
    assertEquals(List.of("a\nb"), events);
  }

  @Test
  void anEventNotEndedWhenTheStreamEndsIsNotDispatched() {
    assertEquals(List.of("message|a"), parse("data: a\n\ndata: b\n"));
  }

  @Test
  void linesAndEventsAreBounded() {
    assertEquals(List.of("message|" + "x".repeat(10)), parse("data: " + "x".repeat(10) + "\n\n", 16));
    var e = assertThrows(ServerSentEvents.MalformedStreamException.class,
        () -> parse("data: " + "x".repeat(11) + "\n\n", 16));
    assertTrue(e.getMessage().contains("longer than 16 bytes"), e.getMessage());
    e = assertThrows(ServerSentEvents.MalformedStreamException.class,
        () -> parse("data: 12345678\ndata: 12345678\n\n", 16));
    assertTrue(e.getMessage().contains("more than 16 bytes of data"), e.getMessage());
  }

  /**
   * A large event (vLLM's first chunk repeats the prompt's token ids: 700 KB for 100,000 of
   * them) needs large buffers while it is read, not after: they kept its size for the rest of
   * the stream, which lasts as long as the generation, so 256 streams of long prompts held
   * hundreds of MB of buffers they no longer used.
   */
  @Test
  void theBuffersOfALargeEventAreNotKeptAfterIt() {
    List<String> events = new ArrayList<>();
    ServerSentEvents p = new ServerSentEvents(4 << 20, (type, data) -> events.add(data));
    String large = "x".repeat(1 << 20);
    p.feed(("data: " + large + "\n\n").getBytes(StandardCharsets.UTF_8));
    p.feed("data: a\n\n".getBytes(StandardCharsets.UTF_8));
    assertEquals(List.of(large, "a"), events);
    assertTrue(p.capacity() <= 2 * ServerSentEvents.KEPT_CAPACITY,
        "buffers of " + p.capacity() + " kept");
    // a large event split over many reads and lines is read as before
    events.clear();
    for (int i = 0; i < 64; i++) {
      p.feed(("data: " + "y".repeat(16 << 10) + "\n").getBytes(StandardCharsets.UTF_8));
    }
    p.feed("\n".getBytes(StandardCharsets.UTF_8));
    assertEquals(1, events.size());
    assertEquals(64 * ((16 << 10) + 1) - 1, events.get(0).length());
    assertTrue(p.capacity() <= 2 * ServerSentEvents.KEPT_CAPACITY,
        "buffers of " + p.capacity() + " kept");
  }

  @Test
  void invalidUtf8IsRefused() {
    ServerSentEvents p = new ServerSentEvents(1024, (type, data) -> {});
    var e = assertThrows(ServerSentEvents.MalformedStreamException.class,
        () -> p.feed(new byte[] {'d', 'a', 't', 'a', ':', (byte) 0xFF, '\n'}));
    assertTrue(e.getMessage().contains("UTF-8"));
  }
}
