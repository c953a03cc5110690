package io.github.prefixrouter.workload;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class FreshQuestionsTest {

  @Test
  void everyPromptSharesItsSubjectPrefixAndAsksSomethingNew() {
    SyntheticMmluPrompts source = SyntheticMmluPrompts.create(3, 20);
    FreshQuestions fresh = new FreshQuestions(source);
    SplittableRandom r = new SplittableRandom(5);
    Set<String> questions = new HashSet<>();
    for (int i = 0; i < 5_000; i++) {
      int subject = i % source.subjectCount();
      int like = i % source.promptCount(subject);
      int[] p = fresh.next(subject, like, r);
      int prefix = source.sharedPrefixLength(subject);
      assertArrayEquals(source.sharedPrefix(subject), Arrays.copyOf(p, prefix));
      assertEquals(source.prompt(subject, like).length, p.length, "same question length");
      int[] question = Arrays.copyOfRange(p, prefix, p.length);
      assertTrue(Arrays.stream(question).allMatch(t -> t >= 0 && t < FreshQuestions.VOCABULARY));
      // 5,000 draws from 20 questions per subject would repeat; fresh ones never do
      assertTrue(questions.add(Arrays.toString(question)), "question repeated at draw " + i);
    }
  }
}
