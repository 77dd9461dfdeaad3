// For tests/errors/cxx_derivative_count.yaml: two parameters, one named derivative.
__host__ __device__ inline float scaled_dx(float x, float s) { return s; }
FUSEGEN_DERIVATIVE(scaled_dx)
__host__ __device__ inline float scaled(float x, float s) { return x * s; }
