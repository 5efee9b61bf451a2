// torch-nki's fast path: C++ dispatcher kernels for the ops of a torch-nki native module.
//
// Python-registered kernels cost microseconds per call (the Python autograd kernel, the Python
// CPU kernel, the crossing into the native module). These kernels do the common case without
// Python, calling the module's Rust kernels through its C ABI (python/native/src/fast.rs):
//
// - CPU: the contract check and compile (through the compile cache), output allocation and the
//   simulator. Anything unusual (a non-CPU, non-contiguous, conjugated or f64 tensor, a contract
//   violation, any failure) runs the op's Python CPU kernel instead (a hidden op,
//   `<ns>::_nki_slow_<name>`), which handles it and raises the proper torch_nki exception.
// - AutogradCPU: when no gradient can be needed (grad mode off, or no tensor requires grad, no
//   forward-mode tangent, no functorch transform), straight to the CPU kernel. When a plain CPU
//   tensor requires grad and the op has a backward kernel, the forward runs below autograd and
//   a C++ autograd node (`NkiBackward`) records it: it saves what the op's backward plan (the
//   registry's, passed in at registration) says, and its backward calls the backward op through
//   the dispatcher, as the Python rule (torch_nki.autograd) does. Anything else (forward-mode AD,
//   a functorch transform, a tensor subclass such as DTensor or a fake tensor, an op without a
//   backward) runs the Python autograd kernel, registered on a hidden twin op
//   (`<ns>::_nki_grad_<name>`).
//
// Built against the installed torch by torch_nki._fast (at install, or on first import) and
// loaded with torch.ops.load_library; registration goes through torch.ops.torch_nki_fast.register.
// The ABI's constants, enums and structs come from fast_abi.h, which torch_nki._fast generates
// from their one definition in Rust (python/native/src/fast/abi.rs) when it compiles this file;
// `torch-nki fast --header` prints it.

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include "fast_abi.h"  // generated from python/native/src/fast/abi.rs (see torch_nki._fast)

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

using namespace torch_nki_fast_abi;

// The FastDtype code of a torch dtype, or -1.
int dtype_code(at::ScalarType t) {
  switch (t) {
#define TORCH_NKI_CASE(variant, aten) \
  case at::ScalarType::aten:          \
    return static_cast<int>(FastDtype::variant);
    TORCH_NKI_FAST_DTYPES(TORCH_NKI_CASE)
#undef TORCH_NKI_CASE
    default: return -1;
  }
}

// The torch dtype of a FastDtype code (the native module only returns known codes).
at::ScalarType scalar_type(uint8_t code) {
  switch (static_cast<FastDtype>(code)) {
#define TORCH_NKI_CASE(variant, aten) \
  case FastDtype::variant:            \
    return at::ScalarType::aten;
    TORCH_NKI_FAST_DTYPES(TORCH_NKI_CASE)
#undef TORCH_NKI_CASE
  }
  TORCH_CHECK(false, "torch_nki_fast: unknown dtype code ", static_cast<int>(code));
}

// A FastScalar of kind `kind`.
FastScalar scalar(FastScalarKind kind, double f, int64_t i) {
  return FastScalar{static_cast<uint8_t>(kind), f, i};
}

// Releases a plan's handle on every exit.
struct PlanGuard {
  const FastApi* api;
  const void* handle;
  ~PlanGuard() {
    if (handle != nullptr) api->release(handle);
  }
};

// One op's fast CPU kernel.
class FastCpu final : public c10::OperatorKernel {
 public:
  FastCpu(const FastApi* api, const void* kernel, c10::OperatorHandle slow)
      : api_(api), kernel_(kernel), slow_(std::move(slow)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    if (!run(op, stack)) {
      slow_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    }
  }

 private:
  // The fast path; false (with the stack untouched) to take the slow one.
  bool run(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
    const auto& schema = op.schema();
    const size_t n = schema.arguments().size();
    if (stack->size() < n) return false;
    auto args = torch::jit::last(*stack, n);
    std::array<FastTensorMeta, 16> metas{};
    std::array<FastScalar, 16> scalars{};
    std::array<FastBuffer, 16> inputs{};
    size_t n_tensors = 0, n_scalars = 0, n_inputs = 0;
    for (size_t i = 0; i < n; ++i) {
      const c10::IValue& v = args[i];
      const auto& type = schema.arguments()[i].type();
      const bool tensor_arg = type->kind() == c10::TypeKind::TensorType ||
          (type->kind() == c10::TypeKind::OptionalType &&
           type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType);
      if (tensor_arg) {
        if (n_tensors >= metas.size()) return false;
        if (v.isNone()) {
          metas[n_tensors++] = FastTensorMeta{0, 0, 0, nullptr};
          continue;
        }
        if (!v.isTensor()) return false;
        const at::Tensor& t = v.toTensor();
        const int code = t.defined() ? dtype_code(t.scalar_type()) : -1;
        if (code < 0 || !t.device().is_cpu() || t.layout() != at::kStrided || !t.is_contiguous() ||
            t.is_conj() || t.is_neg()) {
          return false;
        }
        metas[n_tensors++] = FastTensorMeta{1, static_cast<uint8_t>(code),
                                            static_cast<size_t>(t.dim()), t.sizes().data()};
        inputs[n_inputs++] = FastBuffer{t.data_ptr(), t.nbytes()};
      } else {
        if (n_scalars >= scalars.size()) return false;
        if (v.isDouble()) {
          scalars[n_scalars++] = scalar(FastScalarKind::Float, v.toDouble(), 0);
        } else if (v.isBool()) {
          scalars[n_scalars++] = scalar(FastScalarKind::Bool, 0.0, v.toBool() ? 1 : 0);
        } else if (v.isInt()) {
          scalars[n_scalars++] = scalar(FastScalarKind::Int, 0.0, v.toInt());
        } else if (v.isNone()) {
          scalars[n_scalars++] = scalar(FastScalarKind::None, 0.0, 0);
        } else if (v.isString()) {
          // The string lives on the stack's IValue until the call returns.
          scalars[n_scalars++] = scalar(
              FastScalarKind::Str, 0.0,
              static_cast<int64_t>(reinterpret_cast<uintptr_t>(v.toStringRef().c_str())));
        } else {
          return false;
        }
      }
    }
    FastPlan plan{};
    if (api_->plan(kernel_, metas.data(), n_tensors, scalars.data(), n_scalars, &plan) != kOk) {
      return false;
    }
    PlanGuard guard{api_, plan.handle};
    const size_t n_out = plan.n_outputs;
    if (n_out != schema.returns().size() || n_out > kMaxOutputs) return false;
    // On the stack, as the other per-call arrays: a small call's allocations are its outputs.
    std::array<at::Tensor, kMaxOutputs> outs;
    std::array<FastBuffer, kMaxOutputs> buffers{};
    bool any_elements = false;
    for (size_t k = 0; k < n_out; ++k) {
      at::IntArrayRef shape(plan.shape[k], plan.ndim[k]);
      // Straight to the CPU allocator: this kernel already is the CPU dispatch key's, and a
      // second trip through the dispatcher for `at::empty` cost a tenth of a small call.
      outs[k] = at::detail::empty_cpu(shape, scalar_type(plan.dtype[k]));
      buffers[k] = FastBuffer{outs[k].data_ptr(), outs[k].nbytes()};
      any_elements = any_elements || outs[k].numel() > 0;
    }
    if (any_elements &&
        api_->execute(plan.handle, inputs.data(), n_inputs, buffers.data(), n_out) != kOk) {
      return false;
    }
    torch::jit::drop(*stack, n);
    for (size_t k = 0; k < n_out; ++k) torch::jit::push(*stack, std::move(outs[k]));
    return true;
  }

  const FastApi* api_;
  const void* kernel_;
  c10::OperatorHandle slow_;
};

// An op's backward plan (torch_nki._backward.BackwardSpec, by position), from the registry.
struct BackwardPlan {
  std::string op_name;   // the forward op's name, for the node's name
  std::string backward;  // the backward op, `ns::name`
  std::vector<std::pair<bool, size_t>> saved;  // (is an output, index) per saved tensor
  enum class ArgKind : uint8_t { Grad = 0, Saved = 1, Scalar = 2 };
  std::vector<std::pair<ArgKind, size_t>> args;  // per backward argument
  std::vector<size_t> grads;           // per backward output: the forward argument it is for
  std::vector<bool> non_differentiable;  // per forward output (saved outputs)

  // The backward op, looked up on first use (it may be registered after the forward op).
  const c10::OperatorHandle& backward_op() const {
    std::call_once(once_, [this] {
      auto op = c10::Dispatcher::singleton().findOp({backward, ""});
      TORCH_CHECK(op.has_value(), "torch_nki_fast: no backward op ", backward);
      op_ = std::move(op);
    });
    return *op_;
  }

 private:
  mutable std::once_flag once_;
  mutable std::optional<c10::OperatorHandle> op_;
};

// The autograd graph's pointer to a node: std::shared_ptr<Node> or c10::intrusive_ptr<Node>,
// depending on the torch version.
using NodePtr = decltype(torch::autograd::Edge::function);

template <class T, class... Args>
NodePtr make_node(Args&&... args) {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<typename NodePtr::element_type>>) {
    return NodePtr(new T(std::forward<Args>(args)...));
  } else {
    return c10::make_intrusive<T>(std::forward<Args>(args)...);
  }
}

// The autograd node of one recorded call: what autograd.py's rule does, in C++.
struct NkiBackward final : public torch::autograd::Node {
  NkiBackward(std::shared_ptr<const BackwardPlan> plan, torch::autograd::edge_list&& edges)
      : torch::autograd::Node(std::move(edges)), plan_(std::move(plan)) {}

  std::string name() const override { return "NeuronAutograd_" + plan_->op_name + "Backward"; }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const BackwardPlan& plan = *plan_;
    torch::jit::Stack stack;
    stack.reserve(plan.args.size());
    for (const auto& [kind, index] : plan.args) {
      switch (kind) {
        case BackwardPlan::ArgKind::Grad: {
          TORCH_CHECK(index < grads.size() && index < out_meta_.size(),
                      "torch_nki_fast: gradient index out of range");
          at::Tensor g = grads[index];
          // An output no loss used: its gradient arrives undefined and is zero.
          if (!g.defined()) g = at::zeros(out_meta_[index].first, out_meta_[index].second);
          stack.emplace_back(std::move(g));
          break;
        }
        case BackwardPlan::ArgKind::Saved: {
          TORCH_CHECK(index < saved_.size(), "torch_nki_fast: saved index out of range");
          at::Tensor t = saved_[index].unpack(getptr());
          // A left-out optional tensor was saved as such: the backward gets None, as in Python.
          if (t.defined()) {
            stack.emplace_back(std::move(t));
          } else {
            stack.emplace_back();
          }
          break;
        }
        case BackwardPlan::ArgKind::Scalar:
          TORCH_CHECK(index < scalars_.size(), "torch_nki_fast: scalar index out of range");
          stack.push_back(scalars_[index]);
          break;
      }
    }
    plan.backward_op().callBoxed(&stack);
    TORCH_CHECK(stack.size() == plan.grads.size(), "torch_nki_fast: ", plan.backward, " returned ",
                stack.size(), " values, its plan has ", plan.grads.size(), " gradients");
    torch::autograd::variable_list out(num_outputs());
    for (size_t k = 0; k < plan.grads.size(); ++k) {
      const size_t pos = plan.grads[k];
      if (pos < out.size() && should_compute_output(pos) && !stack[k].isNone()) {
        out[pos] = stack[k].toTensor();
      }
    }
    return out;
  }

  void release_variables() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& s : saved_) s.reset_data();
  }

  std::shared_ptr<const BackwardPlan> plan_;
  std::vector<torch::autograd::SavedVariable> saved_;
  std::vector<c10::IValue> scalars_;  // the forward's non-tensor arguments (None for tensors)
  std::vector<std::pair<std::vector<int64_t>, at::TensorOptions>> out_meta_;
};

// Whether the C++ node records calls (else the Python autograd kernel does; for tests).
std::atomic<bool> cpp_autograd{true};

// One op's AutogradCPU kernel: below autograd unless a gradient can be needed.
class FastAutograd final : public c10::OperatorKernel {
 public:
  FastAutograd(c10::OperatorHandle grad, std::shared_ptr<const BackwardPlan> plan)
      : grad_(std::move(grad)), plan_(std::move(plan)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    switch (mode(op, stack)) {
      case Mode::Below: op.redispatchBoxed(ks & c10::after_autograd_keyset, stack); break;
      case Mode::Record: record(op, ks, stack); break;
      case Mode::Python: grad_.callBoxed(stack); break;
    }
  }

 private:
  enum class Mode { Below, Record, Python };

  Mode mode(const c10::OperatorHandle& op, const torch::jit::Stack* stack) const {
    // A functorch transform (grad, vjp, jvp, vmap) is active: its front-mode key is included.
    if (c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerFrontMode)) {
      return Mode::Python;
    }
    // Tensors the C++ node does not handle: subclasses (DTensor, fake tensors), functorch
    // wrappers, functionalization, lazy conjugation/negation.
    static const c10::DispatchKeySet special({
        c10::DispatchKey::Python,
        c10::DispatchKey::PythonTLSSnapshot,
        c10::DispatchKey::FuncTorchBatched,
        c10::DispatchKey::FuncTorchGradWrapper,
        c10::DispatchKey::Functionalize,
        c10::DispatchKey::Conjugate,
        c10::DispatchKey::Negative,
        c10::DispatchKey::ZeroTensor,
    });
    const bool grad_mode = c10::GradMode::is_enabled();
    bool needs = false, plain = true;
    const size_t n = op.schema().arguments().size();
    for (auto it = stack->end() - static_cast<std::ptrdiff_t>(n); it != stack->end(); ++it) {
      if (!it->isTensor()) continue;
      const at::Tensor& t = it->toTensor();
      if (!t.defined()) continue;
      if (t._fw_grad(0).defined()) return Mode::Python;
      needs = needs || (grad_mode && t.requires_grad());
      plain = plain && t.is_cpu() && !t.key_set().has_any(special);
    }
    if (!needs) return Mode::Below;
    return plain && plan_ != nullptr && cpp_autograd.load(std::memory_order_relaxed) ? Mode::Record
                                                                                      : Mode::Python;
  }

  // The forward below autograd, recorded by an NkiBackward node.
  void record(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    const BackwardPlan& plan = *plan_;
    const size_t n = op.schema().arguments().size();
    torch::autograd::edge_list edges(n);
    std::vector<c10::IValue> scalars(n);
    std::vector<at::Tensor> inputs(n);
    {
      auto args = torch::jit::last(*stack, n);
      for (size_t i = 0; i < n; ++i) {
        const c10::IValue& v = args[i];
        if (v.isTensor()) {
          inputs[i] = v.toTensor();
          if (inputs[i].defined() && inputs[i].requires_grad()) {
            edges[i] = torch::autograd::impl::gradient_edge(inputs[i]);
          }
        } else {
          scalars[i] = v;
        }
      }
    }
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
    }
    const size_t n_out = op.schema().returns().size();
    TORCH_CHECK(stack->size() >= n_out, "torch_nki_fast: ", op.schema().name(), " returned too few values");
    auto node = make_node<NkiBackward>(plan_, std::move(edges));
    auto* raw = static_cast<NkiBackward*>(node.get());
    raw->scalars_ = std::move(scalars);
    std::vector<at::Tensor> outs;
    outs.reserve(n_out);
    auto results = torch::jit::last(*stack, n_out);
    for (size_t k = 0; k < n_out; ++k) {
      const at::Tensor& out = results[k].toTensor();
      outs.push_back(out);
      raw->out_meta_.emplace_back(out.sizes().vec(), out.options());
      const bool differentiable = !(k < plan.non_differentiable.size() && plan.non_differentiable[k]) &&
          torch::autograd::isDifferentiableType(out.scalar_type());
      if (differentiable) {
        torch::autograd::set_history(out, node);
      } else {
        raw->add_input_metadata(torch::autograd::Node::undefined_input());
      }
    }
    raw->saved_.reserve(plan.saved.size());
    for (const auto& [is_output, index] : plan.saved) {
      if (is_output) {
        TORCH_CHECK(index < outs.size(), "torch_nki_fast: saved output index out of range");
        raw->saved_.emplace_back(outs[index], /*is_output=*/true);
      } else {
        TORCH_CHECK(index < inputs.size(), "torch_nki_fast: saved input index out of range");
        raw->saved_.emplace_back(inputs[index], /*is_output=*/false);  // undefined: a None
      }
    }
  }

  c10::OperatorHandle grad_;
  std::shared_ptr<const BackwardPlan> plan_;  // null: no backward kernel (the Python kernel says so)
};

// The CompositeImplicitAutograd kernel of an op with saved outputs (`<name>`): calls its
// `<name>_fwd` (the same arguments, every output) through the dispatcher and keeps the public
// outputs, as torch_nki._register's Python kernel does, without a Python frame per call.
class PublicOutputs final : public c10::OperatorKernel {
 public:
  PublicOutputs(c10::OperatorHandle fwd, std::vector<int64_t> keep) : fwd_(std::move(fwd)), keep_(std::move(keep)) {
    const auto outputs = static_cast<int64_t>(fwd_.schema().returns().size());
    for (auto i : keep_) {
      TORCH_CHECK(i >= 0 && i < outputs, "torch_nki_fast: ", fwd_.schema().name(), " has no output ", i);
    }
  }

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack* stack) {
    fwd_.callBoxed(stack);
    auto outputs = torch::jit::pop(*stack, fwd_.schema().returns().size());
    for (auto i : keep_) stack->push_back(std::move(outputs[static_cast<size_t>(i)]));
  }

 private:
  c10::OperatorHandle fwd_;
  std::vector<int64_t> keep_;
};

std::mutex registration_mutex;
// The registrations of each op, by qualified name; erasing an entry deregisters its kernels.
std::unordered_map<std::string, std::vector<std::unique_ptr<torch::Library>>>& libraries() {
  static std::unordered_map<std::string, std::vector<std::unique_ptr<torch::Library>>> libs;
  return libs;
}

c10::OperatorHandle find_op(const std::string& qualname) {
  const auto sep = qualname.find("::");
  TORCH_CHECK(sep != std::string::npos, "torch_nki_fast: `", qualname, "` is not ns::name");
  auto op = c10::Dispatcher::singleton().findOp({qualname, ""});
  TORCH_CHECK(op.has_value(), "torch_nki_fast: no op ", qualname);
  return *op;
}

// The backward plan from register_op's arguments (flattened pairs; see torch_nki._fast), or
// null when the op has no backward op.
std::shared_ptr<const BackwardPlan> make_plan(const std::string& op_name, const std::string& backward,
                                              const std::vector<int64_t>& saved,
                                              const std::vector<int64_t>& args,
                                              const std::vector<int64_t>& grads,
                                              const std::vector<int64_t>& non_differentiable) {
  if (backward.empty()) return nullptr;
  TORCH_CHECK(saved.size() % 2 == 0 && args.size() % 2 == 0,
              "torch_nki_fast: a backward plan's saved and args lists are (kind, index) pairs");
  auto plan = std::make_shared<BackwardPlan>();
  plan->op_name = op_name;
  plan->backward = backward;
  auto index = [](int64_t i) {
    TORCH_CHECK(i >= 0, "torch_nki_fast: negative index ", i, " in a backward plan");
    return static_cast<size_t>(i);
  };
  for (size_t i = 0; i < saved.size(); i += 2) {
    TORCH_CHECK(saved[i] == 0 || saved[i] == 1, "torch_nki_fast: saved kind ", saved[i]);
    plan->saved.emplace_back(saved[i] == 1, index(saved[i + 1]));
  }
  for (size_t i = 0; i < args.size(); i += 2) {
    TORCH_CHECK(args[i] >= 0 && args[i] <= 2, "torch_nki_fast: argument kind ", args[i]);
    plan->args.emplace_back(static_cast<BackwardPlan::ArgKind>(args[i]), index(args[i + 1]));
  }
  for (auto g : grads) plan->grads.push_back(index(g));
  for (auto d : non_differentiable) plan->non_differentiable.push_back(d != 0);
  return plan;
}

// The simulator's parallel work on ATen's intra-op threads (nki_core::sim::threads): the threads
// ATen's own parallel ops use, awake between them, rather than a pool of the simulator's own
// competing with them. `piece(context, begin, end)` covers `0..n` once; inside another parallel
// region at::parallel_for runs it on the calling thread. Nothing may throw into Rust: a piece
// does not throw, and if ATen fails to run one, the simulator finds the index it skipped and
// reports it.
void host_parallel_for(int64_t n, void* context, void (*piece)(void*, int64_t, int64_t)) noexcept {
  try {
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) { piece(context, begin, end); });
  } catch (...) {
  }
}

int64_t host_thread_count() noexcept { return at::get_num_threads(); }

// Registers the fast kernels of op `<ns>::<name>` (kernel `kernel` of the module whose C ABI
// table is at `api`): CPU and AutogradCPU on the op, CPU on its hidden grad twin. `backward`
// (empty: none) and the lists are the op's backward plan, for the C++ autograd node.
void register_op(const std::string& qualname, int64_t api_address, const std::string& kernel,
                 const std::string& slow_qualname, const std::string& grad_qualname,
                 const std::string& backward, std::vector<int64_t> saved, std::vector<int64_t> args,
                 std::vector<int64_t> grads, std::vector<int64_t> non_differentiable) {
  std::lock_guard<std::mutex> lock(registration_mutex);
  const auto* api = reinterpret_cast<const FastApi*>(static_cast<uintptr_t>(api_address));
  TORCH_CHECK(api != nullptr && api->version == kAbiVersion,
              "torch_nki_fast: the native module's fast ABI is ", api ? api->version : 0,
              ", this library's is ", kAbiVersion);
#if !AT_PARALLEL_OPENMP || defined(_OPENMP)
  // (An OpenMP build of ATen compiled here without -fopenmp would run the pieces serially.)
  api->set_host_threads(&host_parallel_for, &host_thread_count);
#endif
  const void* kernel_ptr = api->lookup(kernel.c_str());
  TORCH_CHECK(kernel_ptr != nullptr, "torch_nki_fast: the native module has no kernel ", kernel);
  auto slow = find_op(slow_qualname);
  auto grad = find_op(grad_qualname);
  const auto ns = qualname.substr(0, qualname.find("::"));
  const auto name = qualname.substr(qualname.find("::") + 2);
  const auto grad_name = grad_qualname.substr(grad_qualname.find("::") + 2);
  auto plan = make_plan(name, backward, saved, args, grads, non_differentiable);
  auto cpu = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::CPU,
                                              __FILE__, __LINE__);
  cpu->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                              std::make_unique<FastCpu>(api, kernel_ptr, slow)));
  cpu->impl(grad_name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                   std::make_unique<FastCpu>(api, kernel_ptr, slow)));
  auto autograd = std::make_unique<torch::Library>(
      torch::Library::IMPL, ns, c10::DispatchKey::AutogradCPU, __FILE__, __LINE__);
  autograd->impl(name.c_str(),
                 torch::CppFunction::makeFromBoxedFunctor(std::make_unique<FastAutograd>(grad, std::move(plan))));
  auto& libs = libraries()[qualname];
  libs.push_back(std::move(cpu));
  libs.push_back(std::move(autograd));
}

// Registers the CompositeImplicitAutograd kernel of `qualname`, an op with saved outputs: its
// forward op `fwd_qualname`'s outputs at `keep` (see PublicOutputs).
void register_public(const std::string& qualname, const std::string& fwd_qualname, std::vector<int64_t> keep) {
  std::lock_guard<std::mutex> lock(registration_mutex);
  auto fwd = find_op(fwd_qualname);
  const auto ns = qualname.substr(0, qualname.find("::"));
  const auto name = qualname.substr(qualname.find("::") + 2);
  auto composite = std::make_unique<torch::Library>(torch::Library::IMPL, ns,
                                                    c10::DispatchKey::CompositeImplicitAutograd, __FILE__, __LINE__);
  composite->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                    std::make_unique<PublicOutputs>(std::move(fwd), std::move(keep))));
  libraries()[qualname].push_back(std::move(composite));
}

// Removes the kernels register_op or register_public registered for `qualname`.
void unregister_op(const std::string& qualname) {
  std::lock_guard<std::mutex> lock(registration_mutex);
  libraries().erase(qualname);
}

int64_t abi_version() { return kAbiVersion; }

// Sets whether the C++ node records calls; returns the previous setting.
bool set_cpp_autograd(bool enabled) { return cpp_autograd.exchange(enabled); }

}  // namespace

TORCH_LIBRARY(torch_nki_fast, m) {
  m.def(
      "register_op(str op, int api, str kernel, str slow_op, str grad_op, str backward, int[] saved, "
      "int[] args, int[] grads, int[] non_differentiable) -> ()",
      &register_op);
  m.def("register_public(str op, str fwd_op, int[] keep) -> ()", &register_public);
  m.def("set_cpp_autograd(bool enabled) -> bool", &set_cpp_autograd);
  m.def("unregister_op(str op) -> ()", &unregister_op);
  m.def("abi_version() -> int", &abi_version);
}
