// For tests/errors/cxx_pointer.yaml: functions take floats, not pointers.
__host__ __device__ inline float first(const float* p) { return p[0]; }
