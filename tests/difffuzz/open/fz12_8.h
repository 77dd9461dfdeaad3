// @difffuzz: C++ functions of a generated spec (tests/difffuzz/gen.py).
#ifndef FUSEGEN_DERIVATIVE
#define FUSEGEN_DERIVATIVE(...)
#endif

__host__ __device__ inline float fz12_8_f0_d0(float p, float q, float r) {
  return ((expm1f((r - 1.0000000031710769e-30f)) + (p * 0.5f)) + (q * 0.5f));
}

__host__ __device__ inline float fz12_8_f0_d1(float p, float q, float r) {
  return ((((q + r) >= 0.25f) ? (q + r) : q) + (p * 0.5f));
}

__host__ __device__ inline float fz12_8_f0_d2(float p, float q, float r) {
  return (((powf((fabsf(q) + 2.0f), 2.5f) > 1.0f) ? (q + p) : powf(expf(fminf(p, 0.0f)), (-1.0f))) + (r * 0.5f));
}

FUSEGEN_DERIVATIVE(fz12_8_f0_d0, fz12_8_f0_d1, fz12_8_f0_d2)
__host__ __device__ inline float fz12_8_f0(float p, float q, float r) {
  return ((p + (q * 0.5f)) + (r * 0.5f));
}
