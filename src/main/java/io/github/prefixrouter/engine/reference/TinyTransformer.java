package io.github.prefixrouter.engine.reference;

import java.util.SplittableRandom;

/**
 * A small decoder-only transformer with fixed-seed random weights, evaluated one position at a
 * time in plain Java.
 *
 * <p>Architecture (pre-norm, as in GPT-style models): token embedding (token ids hashed into
 * {@code vocab} buckets, so any id is accepted) plus sinusoidal position encoding; per layer,
 * RMS-norm, multi-head causal self-attention over the key/value cache, residual, RMS-norm, a ReLU
 * feed-forward block, residual; final RMS-norm and logits from the tied embedding table. The
 * weights are meaningless, but the arithmetic is that of a real forward pass: the cost of a
 * position grows with its index (attention over all earlier keys), and the keys and values of a
 * prefix are exactly what a later request with the same prefix can reuse.
 *
 * <p>Immutable after construction and safe to share between threads; the per-sequence state
 * lives in {@link Sequence}.
 */
final class TinyTransformer {

  final int layers;
  final int dim;
  final int heads;
  final int headDim;
  final int ffn;
  final int vocab;
  private final float[] embedding; // vocab x dim
  private final float[][] wq;
  private final float[][] wk;
  private final float[][] wv;
  private final float[][] wo;
  private final float[][] w1; // ffn rows of dim (transposed: row c feeds output c)
  private final float[][] w2; // dim rows of ffn
  private final long hashSeed;

  TinyTransformer(long seed, int layers, int dim, int heads, int ffn, int vocab) {
    if (dim % heads != 0) {
      throw new IllegalArgumentException("modelDim " + dim + " must be divisible by heads " + heads);
    }
    this.layers = layers;
    this.dim = dim;
    this.heads = heads;
    this.headDim = dim / heads;
    this.ffn = ffn;
    this.vocab = vocab;
    SplittableRandom rnd = new SplittableRandom(seed);
    this.hashSeed = rnd.nextLong();
    this.embedding = gaussian(rnd, vocab * dim, 1.0);
    this.wq = new float[layers][];
    this.wk = new float[layers][];
    this.wv = new float[layers][];
    this.wo = new float[layers][];
    this.w1 = new float[layers][];
    this.w2 = new float[layers][];
    double s = 1.0 / Math.sqrt(dim);
    for (int l = 0; l < layers; l++) {
      wq[l] = gaussian(rnd, dim * dim, s);
      wk[l] = gaussian(rnd, dim * dim, s);
      wv[l] = gaussian(rnd, dim * dim, s);
      wo[l] = gaussian(rnd, dim * dim, s);
      w1[l] = gaussian(rnd, dim * ffn, s);
      w2[l] = gaussian(rnd, ffn * dim, 1.0 / Math.sqrt(ffn));
    }
  }

  private static float[] gaussian(SplittableRandom rnd, int n, double scale) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) {
      a[i] = (float) (rnd.nextGaussian() * scale);
    }
    return a;
  }

  /** The embedding bucket of a token id. */
  int bucket(int tokenId) {
    long z = (tokenId ^ hashSeed) * 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 31)) * 0xBF58476D1CE4E5B9L;
    z ^= z >>> 29;
    return (int) Math.floorMod(z, (long) vocab);
  }

  /** Multiply-adds to evaluate one position at index {@code pos} (0-based), without logits. */
  long macsForPosition(int pos) {
    long perLayer = 4L * dim * dim + 2L * dim * ffn + 2L * (pos + 1) * dim;
    return perLayer * layers;
  }

  /** Multiply-adds for one set of logits. */
  long macsForLogits() {
    return (long) vocab * dim;
  }

  /** The key/value cache of one sequence being evaluated, growable. */
  final class Sequence {
    float[][] keys = new float[layers][];
    float[][] values = new float[layers][];
    int length;
    private final float[] x = new float[dim];
    private final float[] h = new float[dim];
    private final float[] q = new float[dim];
    private final float[] att = new float[dim];
    private final float[] hidden = new float[ffn];
    private float[] scores = new float[64];

    Sequence(int capacity) {
      for (int l = 0; l < layers; l++) {
        keys[l] = new float[Math.max(1, capacity) * dim];
        values[l] = new float[Math.max(1, capacity) * dim];
      }
    }

    /** Copies cached keys and values for positions [at, at + n) of every layer. */
    void load(int at, int n, float[][] k, float[][] v, int srcOffsetPositions) {
      ensure(at + n);
      for (int l = 0; l < layers; l++) {
        System.arraycopy(k[l], srcOffsetPositions * dim, keys[l], at * dim, n * dim);
        System.arraycopy(v[l], srcOffsetPositions * dim, values[l], at * dim, n * dim);
      }
      length = Math.max(length, at + n);
    }

    private void ensure(int positions) {
      if (keys[0].length < positions * dim) {
        int cap = Math.max(positions, keys[0].length / dim * 2);
        for (int l = 0; l < layers; l++) {
          keys[l] = java.util.Arrays.copyOf(keys[l], cap * dim);
          values[l] = java.util.Arrays.copyOf(values[l], cap * dim);
        }
      }
    }

    /**
     * Evaluates the token at position {@code length}, appending its keys and values.
     *
     * @param logits where to write the logits, or null to skip them
     */
    void step(int tokenId, float[] logits) {
      int pos = length;
      ensure(pos + 1);
      if (scores.length < pos + 1) {
        scores = new float[Math.max(pos + 1, scores.length * 2)];
      }
      int b = bucket(tokenId);
      System.arraycopy(embedding, b * dim, x, 0, dim);
      for (int i = 0; i < dim; i += 2) {
        double freq = StrictMath.pow(10000.0, -(double) i / dim);
        x[i] += (float) StrictMath.sin(pos * freq);
        x[i + 1] += (float) StrictMath.cos(pos * freq);
      }
      float scale = (float) (1.0 / Math.sqrt(headDim));
      for (int l = 0; l < layers; l++) {
        rmsNorm(x, h);
        float[] kl = keys[l];
        float[] vl = values[l];
        matVec(h, wq[l], q, dim, dim, 0);
        matVec(h, wk[l], kl, dim, dim, pos * dim);
        matVec(h, wv[l], vl, dim, dim, pos * dim);
        for (int hd = 0; hd < heads; hd++) {
          int off = hd * headDim;
          float max = Float.NEGATIVE_INFINITY;
          for (int j = 0; j <= pos; j++) {
            float sc = 0f;
            int kb = j * dim + off;
            for (int i = 0; i < headDim; i++) {
              sc += q[off + i] * kl[kb + i];
            }
            sc *= scale;
            scores[j] = sc;
            if (sc > max) {
              max = sc;
            }
          }
          float sum = 0f;
          for (int j = 0; j <= pos; j++) {
            float e = expNonPositive(scores[j] - max);
            scores[j] = e;
            sum += e;
          }
          for (int i = 0; i < headDim; i++) {
            att[off + i] = 0f;
          }
          for (int j = 0; j <= pos; j++) {
            float a = scores[j] / sum;
            int vb = j * dim + off;
            for (int i = 0; i < headDim; i++) {
              att[off + i] += a * vl[vb + i];
            }
          }
        }
        matVecAdd(att, wo[l], x, dim, dim);
        rmsNorm(x, h);
        matVec(h, w1[l], hidden, dim, ffn, 0);
        for (int i = 0; i < ffn; i++) {
          if (hidden[i] < 0f) {
            hidden[i] = 0f;
          }
        }
        matVecAdd(hidden, w2[l], x, ffn, dim);
      }
      length = pos + 1;
      if (logits != null) {
        rmsNorm(x, h);
        float logitScale = (float) (1.0 / Math.sqrt(dim));
        for (int t = 0; t < vocab; t++) {
          logits[t] = dot(h, 0, embedding, t * dim, dim) * logitScale;
        }
      }
    }
  }

  /**
   * e^x for x <= 0 in plain float arithmetic (range reduction and a degree-6 polynomial), so the
   * result is bit-identical on every JVM and JIT tier; {@link Math#exp} may differ by an ulp
   * between intrinsic and library versions, which would make outputs differ between nodes.
   */
  static float expNonPositive(float x) {
    if (x < -87f) {
      return 0f;
    }
    // x = k ln2 + r with |r| <= ln2 / 2, in double; Taylor terms to r^8
    double k = Math.rint(x * 1.4426950408889634);
    double r = x - k * 0.6931471805599453;
    double p = 1 + r * (1 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120
        + r * (1.0 / 720 + r * (1.0 / 5040 + r * (1.0 / 40320))))))));
    // k is in [-126, 0] here: 2^k is a normal double, and scaling by it is exact
    return (float) (p * Double.longBitsToDouble((long) ((int) k + 1023) << 52));
  }

  private static void rmsNorm(float[] in, float[] out) {
    double ss = 0;
    for (float v : in) {
      ss += v * v;
    }
    float inv = (float) (1.0 / Math.sqrt(ss / in.length + 1e-6));
    for (int i = 0; i < in.length; i++) {
      out[i] = in[i] * inv;
    }
  }

  /**
   * out[outOff + c] = dot(in, row c of w), with w holding {@code cols} rows of {@code rows}
   * weights each (the transpose of the usual layout, so each output is one contiguous dot
   * product).
   */
  private static void matVec(float[] in, float[] w, float[] out, int rows, int cols, int outOff) {
    for (int c = 0; c < cols; c++) {
      out[outOff + c] = dot(in, 0, w, c * rows, rows);
    }
  }

  /** out[c] += dot(in, row c of w). */
  private static void matVecAdd(float[] in, float[] w, float[] out, int rows, int cols) {
    for (int c = 0; c < cols; c++) {
      out[c] += dot(in, 0, w, c * rows, rows);
    }
  }

  /**
   * A dot product with four independent accumulators (summed in a fixed order), which keeps
   * the FPU pipeline busy while staying bit-for-bit deterministic.
   */
  static float dot(float[] a, int ao, float[] b, int bo, int n) {
    float s0 = 0f;
    float s1 = 0f;
    float s2 = 0f;
    float s3 = 0f;
    int i = 0;
    for (; i + 3 < n; i += 4) {
      s0 += a[ao + i] * b[bo + i];
      s1 += a[ao + i + 1] * b[bo + i + 1];
      s2 += a[ao + i + 2] * b[bo + i + 2];
      s3 += a[ao + i + 3] * b[bo + i + 3];
    }
    for (; i < n; i++) {
      s0 += a[ao + i] * b[bo + i];
    }
    return (s0 + s1) + (s2 + s3);
  }
}
