// @difffuzz: C++ functions of a generated spec (tests/difffuzz/gen.py).
#ifndef FUSEGEN_DERIVATIVE
#define FUSEGEN_DERIVATIVE(...)
#endif

__host__ __device__ inline float fz605_16_f0_d0(float p) {
  return (0.25f + (p * 0.5f));
}

FUSEGEN_DERIVATIVE(fz605_16_f0_d0)
__host__ __device__ inline float fz605_16_f0(float p) {
  const float v0 = expf((tanhf((- (p - p))) * 1.0f));
  return sqrtf(v0);
}

__host__ __device__ inline float fz605_16_f1(float p) {
  return (- fminf(rsqrtf(expf((tanhf(0.1) * 1.0f))), (0 / (fabsf(p) + 1.0f))));
}

__host__ __device__ inline float fz605_16_f2(float p) {
  return expf(rsqrtf((fabsf(p) + 1.0f)));
}
