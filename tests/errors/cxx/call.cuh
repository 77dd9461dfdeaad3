// For tests/errors/cxx_call.yaml: atanf is not one of the translatable math functions.
float atanf(float);
__host__ __device__ inline float wave(float x) { return atanf(x) * x; }
