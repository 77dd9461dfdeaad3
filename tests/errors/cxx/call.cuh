// For tests/errors/cxx_call.yaml: sinf is not one of the translatable math functions.
float sinf(float);
__host__ __device__ inline float wave(float x) { return sinf(x) * x; }
