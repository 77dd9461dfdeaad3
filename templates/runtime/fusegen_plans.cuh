// fusegen CUDA entry points: run a program (fusegen_program.h) with the plan its struct names
// (P::kPlan, chosen by fusegen's planner): flat and colwise (fusegen_cuda.cuh), row
// (fusegen_row_cuda.cuh) or groups (fusegen_group_cuda.cuh, the row plan where a call cannot
// run it). The choice is made at compile time; what only the call can decide
// (vector width from alignment, geometry from the device, whether a colwise program that sums
// nothing this call runs flat) is decided in the plan's own launcher.
#pragma once

#include "fusegen_cuda.cuh"
#include "fusegen_group_cuda.cuh"
#include "fusegen_row_cuda.cuh"

namespace fg::cuda {

template <class P, typename S> size_t workspaceTyped(const typename P::Args& a) {
  if constexpr (P::kPlan == Plan::Row || P::kPlan == Plan::Groups)
    return rowWorkspaceTyped<P, S>(a);
  else
    return pointwiseWorkspace<P, S>(a);
}

template <class P, typename S> void runTyped(const typename P::Args& a, cudaStream_t stream) {
  if constexpr (P::kPlan == Plan::Groups) {
    if (groupsApply<P, S>(a))
      groupRun<P, S>(a, stream);
    else
      rowRunTyped<P, S>(a, stream);
  } else if constexpr (P::kPlan == Plan::Row)
    rowRunTyped<P, S>(a, stream);
  else
    pointwiseRun<P, S>(a, stream);
}

// Bytes of device memory the call needs for partial sums (the glue allocates them).
// (Both with the shifts of the program's rolls in their slots: fusegen_program.h withRolls.)
template <class P> size_t workspace(const typename P::Args& call) {
  const typename P::Args a = withRolls<P>(call);
  FG_CUDA_DISPATCH(P, a.dtype, workspaceTyped, a);
}

template <class P> void run(const typename P::Args& call, void* stream) {
  const typename P::Args a = withRolls<P>(call);
  FG_CUDA_DISPATCH(P, a.dtype, runTyped, a, static_cast<cudaStream_t>(stream));
}

} // namespace fg::cuda
