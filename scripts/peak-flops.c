// Per-core f32 arithmetic peaks of this CPU, for reading the page / native ratio
// (BENCHMARKS.md): what native code gets (AVX-512 and AVX2 fused multiply-add) against
// what the page's 128-bit wasm SIMD becomes on x86 (relaxed SIMD's f32x4.relaxed_madd is a
// 128-bit FMA; plain SIMD128 is a multiply then an add). Twelve independent accumulator
// chains per loop, enough to hide the latencies. A benchmark: it prints figures.
//
//   cc -O2 -o /tmp/peak-flops scripts/peak-flops.c && /tmp/peak-flops
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define N 200000000L
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// One timed loop: VEC is the vector type, SET splats, STEP(c) updates chain c, LANES its width.
#define PEAK(NAME, TARGET, VEC, SET, STEP, LANES)                                      \
  __attribute__((target(TARGET))) static double NAME(float *sink) {                   \
    VEC a = SET(0.999f), b = SET(1e-7f);                                              \
    CHAINS(DECLARE)                                                                   \
    double t = now();                                                                 \
    for (long n = 0; n < N / 12; n++) {                                               \
      CHAINS(STEP)                                                                    \
      __asm__ volatile("" ::"x"(c0));                                                 \
    }                                                                                 \
    t = now() - t;                                                                    \
    float out[16];                                                                    \
    CHAINS(SINK)                                                                      \
    return (double)(N / 12 * 12) * LANES * 2 / t / 1e9;                               \
  }

#define DECLARE(i) VEC c##i = SET((float)i);
#define SINK(i) memcpy(out, &c##i, sizeof c##i); *sink += out[0];
#include <string.h>

#define STEP512(i) c##i = _mm512_fmadd_ps(c##i, a, b);
#define STEP256(i) c##i = _mm256_fmadd_ps(c##i, a, b);
#define STEP128FMA(i) c##i = _mm_fmadd_ps(c##i, a, b);
#define STEP128(i) c##i = _mm_add_ps(_mm_mul_ps(c##i, a), b);

#define VEC __m512
#define SET _mm512_set1_ps
PEAK(avx512_fma, "avx512f", __m512, _mm512_set1_ps, STEP512, 16)
#undef VEC
#undef SET
#define VEC __m256
#define SET _mm256_set1_ps
PEAK(avx2_fma, "avx2,fma", __m256, _mm256_set1_ps, STEP256, 8)
#undef VEC
#undef SET
#define VEC __m128
#define SET _mm_set1_ps
PEAK(sse_fma, "avx2,fma", __m128, _mm_set1_ps, STEP128FMA, 4)
PEAK(sse_mul_add, "avx2", __m128, _mm_set1_ps, STEP128, 4)

int main(void) {
  float sink = 0;
  // A CPU without AVX-512 (AMD before Zen 4, many Intel client parts) would fault on it.
  if (__builtin_cpu_supports("avx512f"))
    printf("AVX-512 FMA (native):               %6.1f GFLOP/s\n", avx512_fma(&sink));
  else
    printf("AVX-512 FMA (native):               not on this CPU\n");
  printf("AVX2 FMA (native):                  %6.1f GFLOP/s\n", avx2_fma(&sink));
  printf("128-bit FMA (relaxed SIMD on x86):  %6.1f GFLOP/s\n", sse_fma(&sink));
  printf("128-bit mul + add (plain SIMD128):  %6.1f GFLOP/s\n", sse_mul_add(&sink));
  printf("(sink %g)\n", sink);
  return 0;
}
