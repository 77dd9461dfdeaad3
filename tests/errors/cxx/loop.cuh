// For tests/errors/cxx_loop.yaml: a loop cannot become a formula.
__host__ __device__ inline float powi(float x) {
  for (int i = 0; i < 3; ++i) x = x * x;
  return x;
}
