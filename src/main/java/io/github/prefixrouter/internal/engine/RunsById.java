package io.github.prefixrouter.internal.engine;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

/**
 * An engine's requests in flight by request id, for {@code cancel(id)}: ids are unique per
 * origin node only, so several runs may share one, and cancelling an id reaches all of them.
 * Runs are told apart by identity. An id with no run left has no entry. Thread-safe.
 *
 * @param <T> what the engine keeps of a run
 */
public final class RunsById<T> {

  private final Map<String, List<T>> runs = new ConcurrentHashMap<>();

  /** Adds {@code run} under {@code id}. */
  public void add(String id, T run) {
    runs.merge(id, List.of(run), (held, added) -> {
      List<T> all = new ArrayList<>(held);
      all.addAll(added);
      return List.copyOf(all);
    });
  }

  /** Removes {@code run} (this very object) from under {@code id}. */
  public void remove(String id, T run) {
    runs.computeIfPresent(id, (k, held) -> {
      List<T> rest = held.stream().filter(r -> r != run).toList();
      return rest.isEmpty() ? null : rest;
    });
  }

  /** The runs of {@code id} now (an immutable snapshot). */
  public List<T> of(String id) {
    return runs.getOrDefault(id, List.of());
  }

  /** Gives {@code action} every run of every id. */
  public void forEach(Consumer<? super T> action) {
    for (List<T> held : runs.values()) {
      held.forEach(action);
    }
  }
}
