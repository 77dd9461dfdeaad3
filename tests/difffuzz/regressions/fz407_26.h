// @difffuzz: C++ functions of a generated spec (tests/difffuzz/gen.py).
#ifndef FUSEGEN_DERIVATIVE
#define FUSEGEN_DERIVATIVE(...)
#endif

__host__ __device__ inline float fz407_26_f0(float p, float q, float r) {
  const float v0 = (q * 0.5f);
  return (((powf(r, 4.0f) / expf(p)) * p) + v0);
}

__host__ __device__ inline float fz407_26_f1_d0(float p, float q) {
  const float v0 = (tanhf(1.0000000150474662e+30f) * 1.0f);
  return (fminf(expf(v0), tanhf(p)) + (q * 0.5f));
}

__host__ __device__ inline float fz407_26_f1_d1(float p, float q) {
  return (log1pf((fabsf(p) + 1.0f)) + (q * 0.5f));
}

FUSEGEN_DERIVATIVE(fz407_26_f1_d0, fz407_26_f1_d1)
__host__ __device__ inline float fz407_26_f1(float p, float q) {
  const float v0 = powf(expf((-0.0f * 0.3)), 0.5f);
  return ((v0 + (p * 0.5f)) + (q * 0.5f));
}
