// fusegen autograd: see fusegen_autograd.h. The backward op's schema is
//   <op>_backward(grads of the outputs..., inputs..., statistics..., attrs...,
//                 bool[inputs] output_mask) -> gradients of the inputs
#include "fusegen_autograd.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fg::glue {
namespace {

// A tensor of a torch.func transform, functionalization or a Python subclass, or any tensor
// while a torch.func transform runs: placeholders and passed-on gradients are kept to plain
// tensors outside transforms (vmap mishandled a passed-on unbatched gradient at out_dims=-1).
bool wrapped(const at::Tensor& t) {
  // (functorch includes its dynamic layer keys in the thread's dispatch keys while it runs)
  return c10::impl::tls_is_dispatch_key_included(
             c10::DispatchKey::FuncTorchDynamicLayerFrontMode) ||
         (t.defined() &&
          t.key_set().has_any(c10::DispatchKeySet(
              {c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::FuncTorchGradWrapper,
               c10::DispatchKey::Functionalize, c10::DispatchKey::Python})));
}

using torch::autograd::SavedVariable;
using torch::autograd::variable_list;

class OpBackward final : public torch::autograd::Node {
public:
  OpBackward(const AutogradInfo& info, const c10::OperatorHandle& backward)
      : info_(info), backward_(backward) {}

  std::string name() const override { return info_.backwardOp; }

  variable_list apply(variable_list&& grads) override {
    variable_list result(info_.inputs);
    c10::List<bool> mask;
    std::vector<bool> asked; // (mask moves to the stack)
    bool any = false;
    for (int k = 0; k < info_.inputs; ++k) {
      // The gradient of an output, unchanged (see wrapped(): else the backward op copies it).
      const int same = info_.passthrough[k] >= 0 && !wrapped(grads[info_.passthrough[k]])
                           ? info_.passthrough[k]
                           : -1;
      // An unused output's gradient is zeros, as below: an input asked for gets a tensor even
      // where it is reached only through outputs whose gradient is zero (with_surrogate_grad's
      // y and the unused code = round(x) of a straight-through estimator), as PyTorch's ops
      // give; an undefined one would make torch.autograd.grad call it unused.
      if (same >= 0 && should_compute_output(k))
        result[k] = grads[same].defined() ? grads[same] : input_metadata(same).zeros_like();
      asked.push_back(same < 0 && should_compute_output(k));
      mask.push_back(asked.back());
      any = any || asked.back();
    }
    if (!any) return result;
    torch::jit::Stack stack;
    stack.reserve(grads.size() + saved.size() + attrs.size() + 1);
    for (size_t m = 0; m < grads.size(); ++m) // an unused output's gradient is zeros
      stack.emplace_back(grads[m].defined() ? grads[m] : input_metadata(m).zeros_like());
    for (SavedVariable& s : saved)
      stack.emplace_back(s.unpack());
    for (const c10::IValue& a : attrs)
      stack.push_back(a);
    stack.emplace_back(std::move(mask));
    if (at::GradMode::is_enabled()) {
      // create_graph: through the backward op's own autograd formula (registered by the
      // op's Python module), which records the second derivatives.
      backward_.callBoxed(&stack);
    } else {
      at::AutoDispatchBelowADInplaceOrView below; // a plain backward runs no Python
      backward_.callBoxed(&stack);
    }
    for (int k = 0; k < info_.inputs; ++k)
      if (asked[k]) result[k] = stack[k].toTensor();
    return result;
  }

  void release_variables() override {
    for (SavedVariable& s : saved)
      s.reset_data();
  }

  std::vector<SavedVariable> saved; // the inputs, then the statistics
  std::vector<c10::IValue> attrs;

private:
  AutogradInfo info_;
  c10::OperatorHandle backward_;
};

class AutogradKernel final : public c10::OperatorKernel {
public:
  explicit AutogradKernel(const AutogradInfo& info) : info_(info) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    auto args = torch::jit::last(*stack, info_.inputs + info_.attrs + (info_.generator ? 1 : 0));
    std::vector<at::Tensor> inputs;
    bool needsGrad = false;
    for (int k = 0; k < info_.inputs; ++k) {
      inputs.push_back(args[k].toTensor());
      needsGrad = needsGrad || inputs.back().requires_grad();
      // No forward-mode derivative: without this check a tangent would be dropped and
      // torch.func.jvp would return zeros.
      TORCH_CHECK(!torch::autograd::isFwGradDefined(inputs.back()), op.schema().name(),
                  ": forward-mode AD (torch.func.jvp, jacfwd, torch.autograd.forward_ad) is not "
                  "supported; use reverse mode (torch.func.vjp, jacrev, torch.autograd.grad)");
    }
    bool anyDifferentiable = false; // (an op writing only FP8 and statistics has no node)
    for (int m = 0; m < info_.outputs; ++m)
      anyDifferentiable = anyDifferentiable || info_.differentiable[m];
    std::shared_ptr<OpBackward> node;
    if (needsGrad && anyDifferentiable && at::GradMode::is_enabled()) {
      node = std::shared_ptr<OpBackward>(new OpBackward(info_, backwardOp()),
                                         torch::autograd::deleteNode);
      torch::autograd::edge_list edges;
      for (const at::Tensor& t : inputs)
        edges.push_back(torch::autograd::impl::gradient_edge(t));
      node->set_next_edges(std::move(edges));
      // An input the backward does not read: a placeholder with its dtype, device and shape
      // (one element, expanded, left unwritten: zeros would cost a kernel launch per call),
      // which the backward op checks but does not read. (Not for a torch.func transform's
      // wrapped tensor: the transform batches what the node saves.)
      for (int k = 0; k < info_.inputs; ++k) {
        const at::Tensor& t = inputs[k];
        node->saved.emplace_back(
            info_.saveInput[k] || wrapped(t) ? t : t.new_empty({}).expand(t.sizes()),
            /*is_output=*/false);
      }
      for (int k = info_.inputs; k < info_.inputs + info_.attrs; ++k) // (not the generator)
        node->attrs.push_back(args[k]);
    }
    {
      at::AutoDispatchBelowADInplaceOrView below;
      op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
    }
    if (!node) return;
    auto results = torch::jit::last(*stack, op.schema().returns().size());
    for (int m = 0; m < info_.outputs; ++m) // (the node's gradients: these, in order)
      if (info_.differentiable[m]) torch::autograd::set_history(results[m].toTensor(), node);
    for (size_t m = info_.outputs; m < results.size(); ++m)
      node->saved.emplace_back(results[m].toTensor(), /*is_output=*/false);
  }

private:
  // Looked up at the first call, when every op of the package is registered; call_once
  // because the first calls may come from several threads.
  const c10::OperatorHandle& backwardOp() {
    std::call_once(found_, [this] {
      backward_ = c10::Dispatcher::singleton().findSchemaOrThrow(info_.backwardOp, "");
    });
    return *backward_;
  }

  AutogradInfo info_;
  std::once_flag found_;
  std::optional<c10::OperatorHandle> backward_;
};

} // namespace

torch::CppFunction autogradKernel(const AutogradInfo& info) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<AutogradKernel>(info));
}

} // namespace fg::glue
