// For tests/errors/cxx_int_arith.yaml: C++ computes (int)x / 3 in int; only integer
// constants (folded as C++ folds them) can be translated.
__host__ __device__ inline float thirds(float x) {
  return x - (int)x / 3;
}
