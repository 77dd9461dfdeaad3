// @difffuzz: C++ functions of a generated spec (tests/difffuzz/gen.py).
#ifndef FUSEGEN_DERIVATIVE
#define FUSEGEN_DERIVATIVE(...)
#endif

__host__ __device__ inline float fz403_44_f0(float p, float q, float r) {
  const float v0 = erff(logf((fabsf(r) + 1.0f)));
  const float v1 = (q * 0.5f);
  return ((expm1f(v0) + (p * 0.5f)) + v1);
}
