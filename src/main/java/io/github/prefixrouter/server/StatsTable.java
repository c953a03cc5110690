package io.github.prefixrouter.server;

import io.github.prefixrouter.server.PrometheusText.Type;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;

/**
 * The fields of one stats snapshot type ({@code NodeStats}, {@code HttpTransport.Stats}, ...),
 * listed once and written both ways: as the JSON object of {@code GET /v1/stats} and as
 * Prometheus families for {@code GET /metrics}.
 *
 * <p>A field's value is a {@link Number} (one sample), an {@link Enum} (one sample per constant,
 * 1 for the value and 0 for the others; the JSON has its name), a {@link Map} from enum
 * constants or texts to numbers (one sample per key, the key's name or text in the label; the
 * JSON has the same object) or a {@link String} (an info family: one sample of 1 with the text in the label).
 * A histogram's value is a {@link Map} from texts to {@link LatencyHistogram.Snapshot}s (one
 * histogram per key, the key in the label); it is in {@code /metrics} only.
 *
 * @param <S> the snapshot type
 */
final class StatsTable<S> {

  /**
   * One field.
   *
   * @param key its key in {@code /v1/stats}; null when it is only in {@code /metrics}
   * @param family its Prometheus family's full name
   * @param type counter, gauge or histogram
   * @param help the family's help text
   * @param label the label naming an enum constant, a map's key or an info text; null for a number
   * @param value reads the field from a snapshot
   */
  record Field<S>(String key, String family, Type type, String help, String label,
      Function<S, Object> value) {
    Field {
      Objects.requireNonNull(family, "family");
      Objects.requireNonNull(type, "type");
      Objects.requireNonNull(help, "help");
      Objects.requireNonNull(value, "value");
      if (type == Type.HISTOGRAM && key != null) {
        throw new IllegalArgumentException(family + ": a histogram is in /metrics only");
      }
    }
  }

  /** A table with one snapshot: a part of {@code /v1/stats} (its key; null: the top level). */
  record Section<S>(String key, StatsTable<S> table, S snapshot) {
    Map<String, Object> json() {
      return table.json(snapshot);
    }

    void metrics(PrometheusText out) {
      table.metrics(snapshot, out);
    }
  }

  private final List<Field<S>> fields;

  private StatsTable(List<Field<S>> fields) {
    this.fields = List.copyOf(fields);
  }

  static <S> Builder<S> builder() {
    return new Builder<>();
  }

  List<Field<S>> fields() {
    return fields;
  }

  /** This snapshot under a key of {@code /v1/stats}. */
  Section<S> section(String key, S snapshot) {
    return new Section<>(key, this, snapshot);
  }

  /** The JSON object, in the table's order. */
  Map<String, Object> json(S s) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (Field<S> f : fields) {
      if (f.key() == null) {
        continue;
      }
      Object v = f.value().apply(s);
      if (v instanceof Enum<?> e) {
        m.put(f.key(), e.name());
      } else if (v instanceof Map<?, ?> map) {
        Map<String, Object> o = new LinkedHashMap<>();
        map.forEach((k, n) -> o.put(labelOf(k), n));
        m.put(f.key(), o);
      } else {
        m.put(f.key(), v);
      }
    }
    return m;
  }

  /** One family per field, in the table's order. */
  void metrics(S s, PrometheusText out) {
    for (Field<S> f : fields) {
      Object v = f.value().apply(s);
      out.family(f.family(), f.type(), f.help());
      if (f.type() == Type.HISTOGRAM && v instanceof Map<?, ?> map) {
        map.forEach((k, h) ->
            out.histogram(f.label(), labelOf(k), (LatencyHistogram.Snapshot) h));
      } else if (v instanceof Number n) {
        out.sample(n);
      } else if (v instanceof Enum<?> e) {
        for (Object c : e.getDeclaringClass().getEnumConstants()) {
          out.sample(f.label(), ((Enum<?>) c).name(), c == e ? 1 : 0);
        }
      } else if (v instanceof Map<?, ?> map) {
        map.forEach((k, n) -> out.sample(f.label(), labelOf(k), (Number) n));
      } else if (v instanceof String text) {
        out.sample(f.label(), text, 1);
      } else {
        throw new IllegalStateException(f.family() + ": no samples for " + v);
      }
    }
  }

  /** A map key as a label value: an enum constant's name, or the text. */
  private static String labelOf(Object key) {
    return key instanceof Enum<?> e ? e.name() : (String) key;
  }

  /** Adds fields in order. */
  static final class Builder<S> {
    private final List<Field<S>> fields = new ArrayList<>();

    /** A counter: a number that only goes up; the family's name ends in {@code _total}. */
    Builder<S> counter(String key, String family, String help, Function<S, Object> value) {
      return add(new Field<>(key, family, Type.COUNTER, help, null, value));
    }

    /** A gauge: a number that goes up and down. */
    Builder<S> gauge(String key, String family, String help, Function<S, Object> value) {
      return add(new Field<>(key, family, Type.GAUGE, help, null, value));
    }

    /**
     * A field whose value is an enum, a map from enum constants or texts, or a text: labelled
     * samples.
     */
    Builder<S> labelled(String key, String family, Type type, String label, String help,
        Function<S, Object> value) {
      return add(new Field<>(key, family, type, help, Objects.requireNonNull(label, "label"),
          value));
    }

    /**
     * Histograms by a label, in {@code /metrics} only: the value is a map from the label's
     * texts to {@link LatencyHistogram.Snapshot}s.
     */
    Builder<S> histogram(String family, String label, String help, Function<S, Object> value) {
      return add(new Field<>(null, family, Type.HISTOGRAM, help,
          Objects.requireNonNull(label, "label"), value));
    }

    private Builder<S> add(Field<S> f) {
      fields.add(f);
      return this;
    }

    StatsTable<S> build() {
      return new StatsTable<>(fields);
    }
  }
}
