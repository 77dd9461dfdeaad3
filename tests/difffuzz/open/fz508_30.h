// @difffuzz: C++ functions of a generated spec (tests/difffuzz/gen.py).
#ifndef FUSEGEN_DERIVATIVE
#define FUSEGEN_DERIVATIVE(...)
#endif

__host__ __device__ inline float fz508_30_f0_d0(float p, float q) {
  const float v0 = expm1f(p);
  const float v1 = (p - q);
  return ((v0 != 7.0f) ? v1 : powf(2.5, 0.5f));
}

__host__ __device__ inline float fz508_30_f0_d1(float p, float q) {
  return (q + (p * 0.5f));
}

FUSEGEN_DERIVATIVE(fz508_30_f0_d0, fz508_30_f0_d1)
__host__ __device__ inline float fz508_30_f0(float p, float q) {
  return ((rsqrtf(2.0f) + (p * 0.5f)) + (q * 0.5f));
}
