// fusegen glue: registers every generated op from its description (fusegen_glue.h). One shared
// translation unit compiled once per toolchain, so the ops' registration files stay free of
// torch's headers. Each plan is a boxed kernel: it reads the dispatcher's stack by the values'
// types (tensors, float/int/bool attrs, the backward's bool[] output_mask), runs the plan
// (fusegen_torch.h) and pushes the results.
#include "fusegen_glue.h"

#include "fusegen_autograd.h"
#include "fusegen_torch.h"

#include <torch/library.h>

#include <memory>
#include <vector>

namespace fg::glue {
namespace {

class PlanKernel final : public c10::OperatorKernel {
public:
  explicit PlanKernel(const PlanInfo& plan) : plan_(plan) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    const size_t n = op.schema().arguments().size();
    auto args = torch::jit::last(*stack, n);
    c10::SmallVector<const at::Tensor*, 16> tensors;
    c10::SmallVector<double, 8> attrs;
    c10::SmallVector<bool, 8> need;
    std::optional<at::Generator> generator;
    for (const c10::IValue& v : args) {
      if (v.isGenerator())
        generator = v.toGenerator();
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
    if (need.empty()) need.assign(plan_.nResults, true);
    TORCH_INTERNAL_ASSERT(static_cast<int>(need.size()) == plan_.nResults);
    static const at::Tensor kNone; // a Random input's: the plan draws it
    // The programs run before this one (reductions over the rows), whose results follow the
    // schema's tensors.
    const size_t schemaTensors = tensors.size();
    std::vector<at::Tensor> earlier;
    auto tensorArgs = [&](const PlanInfo& plan) {
      std::vector<TensorArg> out;
      out.reserve(plan.nTensors);
      for (int k = 0; k < plan.nTensors; ++k) {
        const TensorInfo& t = plan.tensors[k];
        const at::Tensor& tensor = t.position < 0 ? kNone
                                   : static_cast<size_t>(t.position) < schemaTensors
                                       ? *tensors.at(t.position)
                                       : earlier.at(t.position - schemaTensors);
        out.push_back(TensorArg{t.name, tensor, t.bcast, t.elem, t.read, t.dims, t.chunks});
      }
      return out;
    };
    for (int q = 0; q < plan_.nBefore; ++q) {
      const PlanInfo& before = plan_.before[q];
      const c10::SmallVector<bool, 8> all(before.nResults, true);
      for (at::Tensor& t : runPlan(before, tensorArgs(before), attrs, all, std::nullopt, nullptr))
        earlier.push_back(std::move(t));
    }
    const at::Tensor* rngState = plan_.rngTensor >= 0 ? tensors.at(plan_.rngTensor) : nullptr;
    std::vector<at::Tensor> results =
        runPlan(plan_, tensorArgs(plan_), attrs, need, generator, rngState, earlier);
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

void registerOp(const OpInfo& op) {
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
