package io.github.prefixrouter.bench.tree;

import io.github.prefixrouter.internal.tree.BlockHasher;
import io.github.prefixrouter.workload.RandomSequences;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Time to compute the chained block hashes of a prompt (block size 16): {@link BlockHasher}
 * against the chained SHA-256 that vLLM uses for its prefix-cache block hashes (SHA-256 of the
 * parent hash and the block's token ids, truncated to 64 bits here). Run with
 * {@code benchmarks/run jmh BlockHashBenchmark}.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class BlockHashBenchmark {

  @Param({"512", "4096"})
  public int length;

  int[] tokens;
  long[] out;
  BlockHasher hasher;
  MessageDigest sha256;
  byte[] buf;

  @Setup
  public void setUp() throws NoSuchAlgorithmException {
    tokens = RandomSequences.create(5, 1, length)[0];
    out = new long[length / 16];
    hasher = new BlockHasher(16, 0);
    sha256 = MessageDigest.getInstance("SHA-256");
    buf = new byte[8 + 16 * 4];
  }

  @Benchmark
  public long blockHasher() {
    hasher.chain(tokens, tokens.length, out);
    return out[out.length - 1];
  }

  @Benchmark
  public long sha256() {
    long parent = BlockHasher.ROOT_PARENT;
    for (int b = 0; b < out.length; b++) {
      putLong(buf, 0, parent);
      for (int i = 0; i < 16; i++) {
        putInt(buf, 8 + 4 * i, tokens[b * 16 + i]);
      }
      byte[] d = sha256.digest(buf);
      parent = getLong(d);
      out[b] = parent;
    }
    return parent;
  }

  private static void putLong(byte[] b, int at, long v) {
    for (int i = 0; i < 8; i++) {
      b[at + i] = (byte) (v >>> (8 * i));
    }
  }

  private static void putInt(byte[] b, int at, int v) {
    for (int i = 0; i < 4; i++) {
      b[at + i] = (byte) (v >>> (8 * i));
    }
  }

  private static long getLong(byte[] d) {
    long v = 0;
    for (int i = 0; i < 8; i++) {
      v |= (d[i] & 0xFFL) << (8 * i);
    }
    return v;
  }
}
