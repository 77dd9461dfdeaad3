// fusegen glue, stable ABI: registers every generated op from its description (fusegen_glue.h)
// through LibTorch's stable C shim (torch >= 2.10), so the package's library loads under later
// torch versions too; the build picks it over the ATen glue (fusegen_glue.cpp) when torch is new
// enough and no op of the package draws random numbers. The stable ABI registers a kernel as a
// plain function of the stack: each op's registration file instantiates one per plan
// (fusegen_glue.h stableKernel), which calls boxedCall below with its op. The stack's values
// carry no types, so the arguments' kinds are read from the schema once, at registration. No
// C++ autograd here (the stable ABI has none): the op's Python module registers it
// (_support.register_forward_autograd).
#include "fusegen_glue.h"

#include "fusegen_torch_stable.h"

#include <torch/csrc/stable/library.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fg::glue {
namespace {

enum class ArgKind { Tensor, Float, Int, Bool, BoolList, Other };

// The kinds of a schema's arguments, in order: "name(Tensor x, *, float eps=1e-06,
// bool[2] output_mask) -> (Tensor, Tensor)".
std::vector<ArgKind> argKinds(const std::string& schema) {
  std::vector<ArgKind> kinds;
  const size_t open = schema.find('('), close = schema.find(')');
  std::string args = schema.substr(open + 1, close - open - 1);
  size_t start = 0;
  while (start <= args.size()) {
    size_t end = args.find(',', start);
    if (end == std::string::npos) end = args.size();
    std::string arg = args.substr(start, end - start);
    arg.erase(0, arg.find_first_not_of(' '));
    const std::string type = arg.substr(0, arg.find(' '));
    if (!arg.empty() && arg != "*")
      kinds.push_back(type == "Tensor"              ? ArgKind::Tensor
                      : type == "float"             ? ArgKind::Float
                      : type == "int"               ? ArgKind::Int
                      : type == "bool"              ? ArgKind::Bool
                      : type.rfind("bool[", 0) == 0 ? ArgKind::BoolList
                                                    : ArgKind::Other);
    start = end + 1;
  }
  return kinds;
}

struct OpKinds {
  std::vector<ArgKind> forward, backward;
};

// Filled at registration (the libraries' static initializers), read by every call.
std::mutex kindsMutex;
std::map<const OpInfo*, OpKinds>& registeredKinds() {
  static std::map<const OpInfo*, OpKinds> kinds;
  return kinds;
}

const std::vector<ArgKind>& kindsOf(const OpInfo& op, bool backward) {
  std::lock_guard<std::mutex> lock(kindsMutex);
  const OpKinds& k = registeredKinds().at(&op);
  return backward ? k.backward : k.forward;
}

} // namespace

void boxedCall(const OpInfo& op, bool backward, uint64_t* stack, uint64_t nArgs,
               uint64_t nResults) {
  using torch::stable::detail::to;
  const PlanInfo& plan = backward ? op.backward : op.forward;
  const std::vector<ArgKind>& kinds = kindsOf(op, backward);
  if (kinds.size() != nArgs)
    failWith<Stable>(plan.op, ": the dispatcher passed ", nArgs, " arguments where the schema has ",
                     kinds.size());
  std::vector<Stable::Tensor> owned; // (the stack's tensors: this function owns them now)
  owned.reserve(nArgs);
  std::vector<double> attrs;
  std::vector<bool> need;
  for (uint64_t i = 0; i < nArgs; ++i) {
    switch (kinds[i]) {
    case ArgKind::Tensor:
      owned.push_back(to<Stable::Tensor>(stack[i]));
      break;
    case ArgKind::Float:
      attrs.push_back(to<double>(stack[i]));
      break;
    case ArgKind::Int:
      attrs.push_back(static_cast<double>(to<int64_t>(stack[i])));
      break;
    case ArgKind::Bool:
      attrs.push_back(to<bool>(stack[i]) ? 1.0 : 0.0);
      break;
    case ArgKind::BoolList:
      need = to<std::vector<bool>>(stack[i]);
      break;
    case ArgKind::Other:
      failWith<Stable>(plan.op, ": argument ", i, " has a type the stable glue cannot read");
    }
  }
  std::vector<const Stable::Tensor*> tensors;
  for (const Stable::Tensor& t : owned)
    tensors.push_back(&t);
  Stable backend;
  std::vector<Stable::Tensor> results = runOp(backend, plan, tensors, attrs, std::move(need));
  if (results.size() != nResults)
    failWith<Stable>(plan.op, ": ", results.size(), " results where the schema has ", nResults);
  for (size_t k = 0; k < results.size(); ++k)
    stack[k] = torch::stable::detail::from(std::move(results[k]));
}

void registerOp(const OpInfo& op, const StableKernels& kernels) {
  using torch::stable::detail::StableLibrary;
  if (!kernels.forward || !kernels.backward)
    failWith<Stable>(op.name, ": the registration file was compiled without FUSEGEN_STABLE");
  {
    std::lock_guard<std::mutex> lock(kindsMutex);
    registeredKinds()[&op] = {argKinds(op.schema), argKinds(op.backwardSchema)};
  }
  // Kept until the library is unloaded, as STABLE_TORCH_LIBRARY's static objects would be;
  // filled from the registration files' static initializers, which run one at a time.
  static std::vector<std::unique_ptr<StableLibrary>> libraries;
  auto library = [&](StableLibrary::Kind kind, const char* key) {
    libraries.push_back(std::make_unique<StableLibrary>(kind, op.ns, key, op.file, 0));
    return libraries.back().get();
  };
  StableLibrary* def = library(StableLibrary::Kind::FRAGMENT, nullptr);
  def->def(op.schema);
  def->def(op.backwardSchema);
  StableLibrary* cpu = library(StableLibrary::Kind::IMPL, "CPU");
  cpu->impl(op.name, kernels.forward);
  cpu->impl(op.backwardName, kernels.backward);
#ifdef FUSEGEN_WITH_CUDA
  StableLibrary* cuda = library(StableLibrary::Kind::IMPL, "CUDA");
  cuda->impl(op.name, kernels.forward);
  cuda->impl(op.backwardName, kernels.backward);
#endif
}

} // namespace fg::glue
