// Custom activations for specs/mish.yaml and specs/relu_squared.yaml: plain scalar
// __host__ __device__ functions. fusegen parses them with Clang, turns each body into a
// formula and derives the gradient, unless the function names its own derivative with
// FUSEGEN_DERIVATIVE (mish does, to show how; the generated tests check it against autograd).

// fusegen defines FUSEGEN_DERIVATIVE when it reads this header; other compilers see nothing.
#ifndef FUSEGEN_DERIVATIVE
#define FUSEGEN_DERIVATIVE(...)
#endif

// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
__host__ __device__ inline float softplus_stable(float x) {
  return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
}

// d mish / dx = tanh(sp) + x * (1 - tanh(sp)^2) * sigmoid(x), with sp = softplus(x) and
// softplus' = sigmoid: one tanh and one exp, where the derived backward repeats the
// softplus chain.
__host__ __device__ inline float mish_grad(float x) {
  const float t = tanhf(softplus_stable(x));
  const float sigmoid = 1.0f / (1.0f + expf(-x));
  return t + x * (1.0f - t * t) * sigmoid;
}

// Mish (Misra 2019): x * tanh(softplus(x)).
FUSEGEN_DERIVATIVE(mish_grad)
__host__ __device__ inline float mish(float x) {
  const float sp = softplus_stable(x);
  return x * tanhf(sp);
}

// Squared ReLU (Primer, So et al. 2021): relu(x)^2.
__host__ __device__ inline float relu_squared(float x) {
  const float r = x > 0.0f ? x : 0.0f;
  return r * r;
}
