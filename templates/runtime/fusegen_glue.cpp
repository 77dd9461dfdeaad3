// fusegen glue, ATen: registers every generated op from its description (fusegen_glue.h) with
// torch::Library. One shared translation unit compiled once per toolchain, so the ops'
// registration files stay free of torch's headers. Each plan is a boxed kernel: it reads the
// dispatcher's stack by the values' types (tensors, float/int/bool attrs, the generator, the
// backward's bool[] output_mask), runs the plan (fusegen_run.h over fusegen_torch.h's ATen
// backend) and pushes the results. The build uses it where the stable glue
// (fusegen_glue_stable.cpp) cannot serve: torch < 2.10, or an op that draws random numbers.
#include "fusegen_glue.h"

#include "fusegen_autograd.h"
#include "fusegen_torch.h"

#include <torch/library.h>

#include <memory>
#include <utility>
#include <vector>

namespace fg::glue {
namespace {

class PlanKernel final : public c10::OperatorKernel {
public:
  explicit PlanKernel(const PlanInfo& plan) : plan_(plan) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t n = op.schema().arguments().size();
    auto args = torch::jit::last(*stack, n);
    std::vector<const at::Tensor*> tensors;
    std::vector<double> attrs;
    std::vector<bool> need;
    Aten backend;
    for (const c10::IValue& v : args) {
      if (v.isGenerator())
        backend.generator = v.toGenerator();
      else if (v.isNone()) // generator=None: the device's default generator
        continue;
      else if (v.isTensor())
        tensors.push_back(&v.toTensor());
      else if (v.isDouble())
        attrs.push_back(v.toDouble());
      else if (v.isInt())
        attrs.push_back(static_cast<double>(v.toInt()));
      else if (v.isBool())
        attrs.push_back(v.toBool() ? 1.0 : 0.0);
      else if (v.isBoolList())
        for (bool b : v.toBoolList())
          need.push_back(b);
      else
        TORCH_CHECK(false, plan_.op, ": unexpected argument of type ", v.tagKind());
    }
    std::vector<at::Tensor> results = runOp(backend, plan_, tensors, attrs, std::move(need));
    torch::jit::drop(*stack, n);
    for (at::Tensor& t : results)
      stack->emplace_back(std::move(t));
  }

private:
  PlanInfo plan_;
};

torch::CppFunction planKernel(const PlanInfo& plan) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<PlanKernel>(plan));
}

} // namespace

void registerOp(const OpInfo& op, const StableKernels&) {
  // Kept until the library is unloaded, as TORCH_LIBRARY's static objects would be; filled
  // from the registration files' static initializers, which run one at a time.
  static std::vector<std::unique_ptr<torch::Library>> libraries;
  auto library = [&](torch::Library::Kind kind, std::optional<c10::DispatchKey> key) {
    libraries.push_back(std::make_unique<torch::Library>(kind, op.ns, key, op.file, 0));
    return libraries.back().get();
  };
  torch::Library* def = library(torch::Library::FRAGMENT, std::nullopt);
  // An op that draws random numbers is seeded by torch's generator: torch.compile keeps its
  // calls in order and does not merge them (torch.Tag.nondeterministic_seeded).
  if (op.forward.randomStreams > 0)
    def->def(op.schema, {at::Tag::nondeterministic_seeded});
  else
    def->def(op.schema);
  def->def(op.backwardSchema);
  torch::Library* cpu = library(torch::Library::IMPL, c10::DispatchKey::CPU);
  cpu->impl(op.name, planKernel(op.forward));
  cpu->impl(op.backwardName, planKernel(op.backward));
  torch::Library* autograd = library(torch::Library::IMPL, c10::DispatchKey::Autograd);
  autograd->impl(op.name, autogradKernel(op.autograd));
#ifdef FUSEGEN_WITH_CUDA
  torch::Library* cuda = library(torch::Library::IMPL, c10::DispatchKey::CUDA);
  cuda->impl(op.name, planKernel(op.forward));
  cuda->impl(op.backwardName, planKernel(op.backward));
#endif
}

} // namespace fg::glue
