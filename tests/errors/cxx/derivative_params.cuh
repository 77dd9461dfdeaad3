// For tests/errors/cxx_derivative_params.yaml: the derivative of a one-parameter function
// takes two.
__host__ __device__ inline float cube_grad(float x, float y) { return 3.0f * x * x; }
FUSEGEN_DERIVATIVE(cube_grad)
__host__ __device__ inline float cube(float x) { return x * x * x; }
