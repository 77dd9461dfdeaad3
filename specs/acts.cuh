// Custom activations for specs/mish.yaml and specs/relu_squared.yaml: plain scalar
// __host__ __device__ functions. fusegen parses them with Clang, turns each body into a
// formula and derives the gradient; nobody writes a backward for them.

// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
__host__ __device__ inline float softplus_stable(float x) {
  return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
}

// Mish (Misra 2019): x * tanh(softplus(x)).
__host__ __device__ inline float mish(float x) {
  const float sp = softplus_stable(x);
  return x * tanhf(sp);
}

// Squared ReLU (Primer, So et al. 2021): relu(x)^2.
__host__ __device__ inline float relu_squared(float x) {
  const float r = x > 0.0f ? x : 0.0f;
  return r * r;
}
