// For tests/errors/cxx_derivative_arity.yaml: four parameters with named derivatives, where
// with_grad takes at most three (templates/primitives.yaml).
__host__ __device__ inline float one(float a, float b, float c, float d) { return 1.0f; }
FUSEGEN_DERIVATIVE(one, one, one, one)
__host__ __device__ inline float sum4(float a, float b, float c, float d) { return a + b + c + d; }
