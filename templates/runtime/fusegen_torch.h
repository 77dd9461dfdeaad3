// fusegen torch glue, ATen: the tensor backend of fusegen_run.h over at::Tensor, included only
// by the ATen glue (fusegen_glue.cpp). Besides the tensor calls it has what the stable ABI does
// not: torch's generators, for the ops that draw random numbers.
#pragma once

#include "fusegen_run.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/DeviceGuard.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>
#ifdef FUSEGEN_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fg::glue {

struct Aten {
  using Tensor = at::Tensor;

  static at::ScalarType native(TType t) {
    switch (t) {
    case TType::Float16:
      return at::kHalf;
    case TType::BFloat16:
      return at::kBFloat16;
    case TType::Float64:
      return at::kDouble;
    case TType::Int64:
      return at::kLong;
    case TType::Int32:
      return at::kInt;
    case TType::Int16:
      return at::kShort;
    case TType::Int8:
      return at::kChar;
    case TType::UInt8:
      return at::kByte;
    case TType::Bool:
      return at::kBool;
    case TType::Float8E4M3:
      return at::kFloat8_e4m3fn;
    case TType::Float8E5M2:
      return at::kFloat8_e5m2;
    default:
      return at::kFloat;
    }
  }
  static TType type(const Tensor& t) {
    switch (t.scalar_type()) {
    case at::kFloat:
      return TType::Float32;
    case at::kHalf:
      return TType::Float16;
    case at::kBFloat16:
      return TType::BFloat16;
    case at::kDouble:
      return TType::Float64;
    case at::kLong:
      return TType::Int64;
    case at::kInt:
      return TType::Int32;
    case at::kShort:
      return TType::Int16;
    case at::kChar:
      return TType::Int8;
    case at::kByte:
      return TType::UInt8;
    case at::kBool:
      return TType::Bool;
    case at::kFloat8_e4m3fn:
      return TType::Float8E4M3;
    case at::kFloat8_e5m2:
      return TType::Float8E5M2;
    default:
      return TType::Other;
    }
  }
  static std::string typeName(const Tensor& t) { return c10::toString(t.scalar_type()); }

  static bool defined(const Tensor& t) { return t.defined(); }
  static int64_t dim(const Tensor& t) { return t.dim(); }
  static int64_t size(const Tensor& t, int64_t k) { return t.size(k); }
  static Sizes sizes(const Tensor& t) { return {t.sizes().data(), t.sizes().size()}; }
  static bool isContiguous(const Tensor& t) { return t.is_contiguous(); }
  static DeviceId device(const Tensor& t) {
    const at::Device d = t.device();
    return {d.is_cpu()    ? DeviceId::kCpu
            : d.is_cuda() ? DeviceId::kCuda
                          : 2 + int(d.type()),
            d.index()};
  }
  static std::string deviceName(const Tensor& t) { return t.device().str(); }
  static void* data(const Tensor& t) { return t.data_ptr(); }
  [[noreturn]] static void fail(const std::string& message) { TORCH_CHECK(false, message); }

  static Tensor contiguous(const Tensor& t) { return t.contiguous(); }
  static Tensor empty(const std::vector<int64_t>& shape, TType type, const Tensor& like) {
    return at::empty(shape, like.options().dtype(native(type)));
  }
  static Tensor zeros(const std::vector<int64_t>& shape, TType type, const Tensor& like) {
    return at::zeros(shape, like.options().dtype(native(type)));
  }
  static Tensor copyAs(const Tensor& t, TType type) {
    return t.to(native(type), /*non_blocking=*/false, /*copy=*/true);
  }
  static Tensor sumTo(const Tensor& t, const std::vector<int64_t>& view,
                      const std::vector<int64_t>& sumDims, TType type,
                      const std::vector<int64_t>& shape) {
    Tensor v = t.view(view);
    return (sumDims.empty() ? v : v.sum(sumDims)).to(native(type)).view(shape);
  }

  struct DeviceGuard {
    explicit DeviceGuard(const Tensor& like) : guard(like.device()) {}
    const at::OptionalDeviceGuard guard;
  };

  static void* stream(const Tensor& like) {
#ifdef FUSEGEN_WITH_CUDA
    return c10::cuda::getCurrentCUDAStream(like.device().index()).stream();
#else
    (void)like;
    return nullptr;
#endif
  }

  // A random op's forward: a seed and offset from the generator (`generator`, else the
  // device's default), reserving `increment` of its offset, and the int64 [2] tensor `state`
  // the op returns them in (written here when no kernel runs: `empty`). CUDA: the generator's
  // Philox state, as ATen's own random kernels take it (under CUDA graph capture, pointers the
  // replays advance). CPU: a 63-bit seed drawn by random_() of an int64 tensor, offset 0; the
  // package's _support.draw_rng takes the same two in Python.
  RngArgs drawRng(const Tensor& like, uint64_t increment, bool empty, Tensor& state) {
    const at::Device device = like.device();
    RngArgs r{};
    state = at::empty({2}, like.options().dtype(at::kLong));
    r.save = state.data_ptr<int64_t>();
#ifdef FUSEGEN_WITH_CUDA
    if (device.is_cuda()) {
      auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(
          generator, at::cuda::detail::getDefaultCUDAGenerator(device.index()));
      at::PhiloxCudaState s;
      {
        std::lock_guard<std::mutex> lock(gen->mutex_);
        s = gen->philox_cuda_state(increment);
      }
      if (s.captured_) {
        r.seedPtr = s.seed_.ptr;
        r.offsetPtr = s.offset_.ptr;
        r.offset = s.offset_intragraph_;
      } else {
        r.seed = s.seed_.val;
        r.offset = s.offset_.val;
      }
    }
#endif
    if (!device.is_cuda()) {
      (void)increment;
      TORCH_CHECK(device.is_cpu(), "fusegen: random numbers on ", device.str(),
                  " are not supported");
      at::Tensor seed = at::empty({}, at::TensorOptions().dtype(at::kLong));
      seed.random_(generator);
      r.seed = static_cast<uint64_t>(seed.item<int64_t>());
    }
    if (empty) { // no kernel runs to write the state
      const at::TensorOptions longs = like.options().dtype(at::kLong);
      const at::Tensor seed = r.seedPtr ? at::from_blob(const_cast<int64_t*>(r.seedPtr), {1}, longs)
                                        : at::full({1}, static_cast<int64_t>(r.seed), longs);
      const at::Tensor offset =
          (r.offsetPtr ? at::from_blob(const_cast<int64_t*>(r.offsetPtr), {1}, longs)
                       : at::zeros({1}, longs))
              .add(static_cast<int64_t>(r.offset));
      state.copy_(at::cat({seed, offset}));
    }
    return r;
  }

  std::optional<at::Generator> generator; // the call's (None: the device's default)
};

} // namespace fg::glue
