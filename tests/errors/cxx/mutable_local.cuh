// For tests/errors/cxx_mutable_local.yaml: locals must be const and initialized.
__host__ __device__ inline float accumulate(float x) {
  float r = x;
  return r;
}
