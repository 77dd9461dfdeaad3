// @difffuzz: C++ functions of a generated spec (tests/difffuzz/gen.py).
#ifndef FUSEGEN_DERIVATIVE
#define FUSEGEN_DERIVATIVE(...)
#endif

__host__ __device__ inline float fz517_19_f0(float p, float q, float r) {
  const float v0 = (q * 0.5f);
  const float v1 = (p + v0);
  const float v2 = (r * 0.5f);
  return (v1 + v2);
}

__host__ __device__ inline float fz517_19_f1(float p) {
  const float v0 = (p / (fabsf((-0.75f)) + 1.0f));
  return fmaxf(powf((fabsf((p + 0.1)) + 0.5f), (-2.0f)), fmaxf(v0, p));
}

__host__ __device__ inline float fz517_19_f2(float p, float q, float r) {
  const float v0 = (p * 0.5f);
  const float v1 = (r + v0);
  return (v1 + (q * 0.5f));
}
