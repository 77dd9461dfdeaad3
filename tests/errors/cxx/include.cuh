// For tests/errors/cxx_include.yaml: a header may not read other files.
#include "/etc/hostname"
__host__ __device__ inline float twice(float x) { return 2.0f * x; }
