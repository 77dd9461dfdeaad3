// For tests/errors/function_named_like_primitive.yaml: a function named like the primitive
// softplus, so a call softplus(x) could mean either.
__host__ __device__ inline float softplus(float x) { return x > 0.0f ? x : 0.0f; }
