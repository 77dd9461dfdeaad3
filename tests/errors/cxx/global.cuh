// For tests/errors/cxx_global.yaml: a body may read its parameters and locals only.
float scale = 2.0f;
__host__ __device__ inline float scaled(float x) { return x * scale; }
