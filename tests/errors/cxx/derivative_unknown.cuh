// For tests/errors/cxx_derivative_unknown.yaml: the named derivative is not defined here.
FUSEGEN_DERIVATIVE(cube_grad)
__host__ __device__ inline float cube(float x) { return x * x * x; }
