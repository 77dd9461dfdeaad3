// fusegen torch glue, stable ABI: the tensor backend of fusegen_run.h over
// torch::stable::Tensor (LibTorch's stable C shim, torch >= 2.10), included only by the stable
// glue (fusegen_glue_stable.cpp). Every call goes through the shim's C functions or the
// dispatcher (torch_call_dispatcher), never through ATen's C++ symbols, so a library built with
// it loads under later torch versions too. What the stable ABI lacks: torch's generators (a
// random op's seed and offset), so drawRng refuses; the build keeps such ops on the ATen glue.
#pragma once

#include "fusegen_run.h"

// The shim declares its CUDA functions (the current stream) only under USE_CUDA.
#if defined(FUSEGEN_WITH_CUDA) && !defined(USE_CUDA)
#define USE_CUDA 1
#endif
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fg::glue {
// (internal linkage, as the stable ABI's hidden types it holds: this header has one includer)
namespace {

struct Stable {
  using Tensor = torch::stable::Tensor;
  using ScalarType = torch::headeronly::ScalarType;

  static ScalarType native(TType t) {
    switch (t) {
    case TType::Float16:
      return ScalarType::Half;
    case TType::BFloat16:
      return ScalarType::BFloat16;
    case TType::Float64:
      return ScalarType::Double;
    case TType::Int64:
      return ScalarType::Long;
    case TType::Int32:
      return ScalarType::Int;
    case TType::Int16:
      return ScalarType::Short;
    case TType::Int8:
      return ScalarType::Char;
    case TType::UInt8:
      return ScalarType::Byte;
    case TType::Bool:
      return ScalarType::Bool;
    case TType::Float8E4M3:
      return ScalarType::Float8_e4m3fn;
    case TType::Float8E5M2:
      return ScalarType::Float8_e5m2;
    default:
      return ScalarType::Float;
    }
  }
  static TType type(const Tensor& t) {
    switch (t.scalar_type()) {
    case ScalarType::Float:
      return TType::Float32;
    case ScalarType::Half:
      return TType::Float16;
    case ScalarType::BFloat16:
      return TType::BFloat16;
    case ScalarType::Double:
      return TType::Float64;
    case ScalarType::Long:
      return TType::Int64;
    case ScalarType::Int:
      return TType::Int32;
    case ScalarType::Short:
      return TType::Int16;
    case ScalarType::Char:
      return TType::Int8;
    case ScalarType::Byte:
      return TType::UInt8;
    case ScalarType::Bool:
      return TType::Bool;
    case ScalarType::Float8_e4m3fn:
      return TType::Float8E4M3;
    case ScalarType::Float8_e5m2:
      return TType::Float8E5M2;
    default:
      return TType::Other;
    }
  }
  static std::string typeName(const Tensor& t) {
    return torch::headeronly::toString(t.scalar_type());
  }

  static bool defined(const Tensor& t) { return t.defined(); }
  static int64_t dim(const Tensor& t) { return t.dim(); }
  static int64_t size(const Tensor& t, int64_t k) { return t.size(k); }
  static Sizes sizes(const Tensor& t) {
    const auto s = t.sizes(); // (borrowed from the tensor)
    return {s.data(), s.size()};
  }
  static bool isContiguous(const Tensor& t) { return t.is_contiguous(); }
  static DeviceId device(const Tensor& t) {
    const torch::stable::Device d = t.device();
    using torch::headeronly::DeviceType;
    return {d.type() == DeviceType::CPU    ? DeviceId::kCpu
            : d.type() == DeviceType::CUDA ? DeviceId::kCuda
                                           : 2 + static_cast<int>(d.type()),
            static_cast<int>(d.index())};
  }
  static std::string deviceName(const Tensor& t) {
    const DeviceId d = device(t);
    const std::string type = d.isCpu()    ? "cpu"
                             : d.isCuda() ? "cuda"
                                          : "device type " + std::to_string(d.type - 2);
    return d.index >= 0 ? type + ":" + std::to_string(d.index) : type;
  }
  static void* data(const Tensor& t) { return t.data_ptr(); }
  // (std::runtime_error: the dispatcher reports it as a RuntimeError with this message)
  [[noreturn]] static void fail(const std::string& message) { throw std::runtime_error(message); }

  static Tensor contiguous(const Tensor& t) {
    return t.is_contiguous() ? t : torch::stable::contiguous(t);
  }
  static Tensor empty(const std::vector<int64_t>& shape, TType type, const Tensor& like) {
    return torch::stable::new_empty(like, shape, native(type));
  }
  static Tensor zeros(const std::vector<int64_t>& shape, TType type, const Tensor& like) {
    return torch::stable::new_zeros(like, shape, native(type));
  }
  static Tensor copyAs(const Tensor& t, TType type) {
    return torch::stable::to(t, native(type), std::nullopt, std::nullopt, std::nullopt,
                             /*non_blocking=*/false, /*copy=*/true);
  }
  static Tensor sumTo(const Tensor& t, const std::vector<int64_t>& view,
                      const std::vector<int64_t>& sumDims, TType type,
                      const std::vector<int64_t>& shape) {
    Tensor v = torch::stable::view(t, view);
    if (!sumDims.empty()) v = torch::stable::sum(v, sumDims);
    return torch::stable::view(torch::stable::to(v, native(type)), shape);
  }

  struct DeviceGuard {
    explicit DeviceGuard(const Tensor& like) {
      if (like.is_cuda()) guard.emplace(like.get_device_index());
    }
    std::optional<torch::stable::accelerator::DeviceGuard> guard;
  };

  static void* stream(const Tensor& like) {
#ifdef FUSEGEN_WITH_CUDA
    void* s = nullptr;
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(like.get_device_index(), &s));
    return s;
#else
    (void)like;
    return nullptr;
#endif
  }

  // The stable ABI reaches no generator: the build keeps random ops on the ATen glue.
  RngArgs drawRng(const Tensor&, uint64_t, bool, Tensor&) {
    fail("fusegen: an op that draws random numbers was built with the stable ABI glue, which "
         "reaches no torch generator; rebuild it with FUSEGEN_STABLE_ABI=0");
  }
};

} // namespace
} // namespace fg::glue
