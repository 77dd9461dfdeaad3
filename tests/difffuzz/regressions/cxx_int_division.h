// difffuzz regression (tests/difffuzz/regressions/cxx_int_division.yaml): in C++, 1 / 2 is an
// int division and is 0, so half_of(x) is x * 0 = 0.
__host__ __device__ inline float half_of(float x) {
  return x * (1 / 2);
}
