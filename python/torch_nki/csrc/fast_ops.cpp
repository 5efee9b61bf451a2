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
//   forward-mode tangent, no functorch transform), straight to the CPU kernel; otherwise the
//   Python autograd kernel, registered on a hidden twin op (`<ns>::_nki_grad_<name>`).
//
// Built against the installed torch by torch_nki._fast (at install, or on first import) and
// loaded with torch.ops.load_library; registration goes through torch.ops.torch_nki_fast.register.
// The ABI's constants, enums and structs come from fast_abi.h, which torch_nki._fast generates
// from their one definition in Rust (python/native/src/fast/abi.rs) when it compiles this file;
// `torch-nki fast --header` prints it.

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include "fast_abi.h"  // generated from python/native/src/fast/abi.rs (see torch_nki._fast)

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
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
    if (n_out != schema.returns().size()) return false;
    std::vector<at::Tensor> outs;
    outs.reserve(n_out);
    std::array<FastBuffer, kMaxOutputs> buffers{};
    bool any_elements = false;
    for (size_t k = 0; k < n_out; ++k) {
      at::IntArrayRef shape(plan.shape[k], plan.ndim[k]);
      outs.push_back(at::empty(shape, at::TensorOptions().dtype(scalar_type(plan.dtype[k]))));
      buffers[k] = FastBuffer{outs.back().data_ptr(), outs.back().nbytes()};
      any_elements = any_elements || outs.back().numel() > 0;
    }
    if (any_elements &&
        api_->execute(plan.handle, inputs.data(), n_inputs, buffers.data(), n_out) != kOk) {
      return false;
    }
    torch::jit::drop(*stack, n);
    for (auto& o : outs) torch::jit::push(*stack, std::move(o));
    return true;
  }

  const FastApi* api_;
  const void* kernel_;
  c10::OperatorHandle slow_;
};

// One op's AutogradCPU kernel: below autograd unless a gradient can be needed.
class FastAutograd final : public c10::OperatorKernel {
 public:
  explicit FastAutograd(c10::OperatorHandle grad) : grad_(std::move(grad)) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    if (needs_autograd(op, stack)) {
      grad_.callBoxed(stack);
    } else {
      op.redispatchBoxed(ks & c10::after_autograd_keyset, stack);
    }
  }

 private:
  static bool needs_autograd(const c10::OperatorHandle& op, const torch::jit::Stack* stack) {
    // A functorch transform (grad, vjp, jvp, vmap) is active: its front-mode key is included.
    if (c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerFrontMode)) {
      return true;
    }
    const bool grad_mode = c10::GradMode::is_enabled();
    const size_t n = op.schema().arguments().size();
    for (auto it = stack->end() - static_cast<std::ptrdiff_t>(n); it != stack->end(); ++it) {
      if (!it->isTensor()) continue;
      const at::Tensor& t = it->toTensor();
      if (!t.defined()) continue;
      if ((grad_mode && t.requires_grad()) || t._fw_grad(0).defined()) return true;
    }
    return false;
  }

  c10::OperatorHandle grad_;
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

// Registers the fast kernels of op `<ns>::<name>` (kernel `kernel` of the module whose C ABI
// table is at `api`): CPU and AutogradCPU on the op, CPU on its hidden grad twin.
void register_op(const std::string& qualname, int64_t api_address, const std::string& kernel,
                 const std::string& slow_qualname, const std::string& grad_qualname) {
  std::lock_guard<std::mutex> lock(registration_mutex);
  const auto* api = reinterpret_cast<const FastApi*>(static_cast<uintptr_t>(api_address));
  TORCH_CHECK(api != nullptr && api->version == kAbiVersion,
              "torch_nki_fast: the native module's fast ABI is ", api ? api->version : 0,
              ", this library's is ", kAbiVersion);
  const void* kernel_ptr = api->lookup(kernel.c_str());
  TORCH_CHECK(kernel_ptr != nullptr, "torch_nki_fast: the native module has no kernel ", kernel);
  auto slow = find_op(slow_qualname);
  auto grad = find_op(grad_qualname);
  const auto ns = qualname.substr(0, qualname.find("::"));
  const auto name = qualname.substr(qualname.find("::") + 2);
  const auto grad_name = grad_qualname.substr(grad_qualname.find("::") + 2);
  auto cpu = std::make_unique<torch::Library>(torch::Library::IMPL, ns, c10::DispatchKey::CPU,
                                              __FILE__, __LINE__);
  cpu->impl(name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                              std::make_unique<FastCpu>(api, kernel_ptr, slow)));
  cpu->impl(grad_name.c_str(), torch::CppFunction::makeFromBoxedFunctor(
                                   std::make_unique<FastCpu>(api, kernel_ptr, slow)));
  auto autograd = std::make_unique<torch::Library>(
      torch::Library::IMPL, ns, c10::DispatchKey::AutogradCPU, __FILE__, __LINE__);
  autograd->impl(name.c_str(),
                 torch::CppFunction::makeFromBoxedFunctor(std::make_unique<FastAutograd>(grad)));
  auto& libs = libraries()[qualname];
  libs.push_back(std::move(cpu));
  libs.push_back(std::move(autograd));
}

// Removes the kernels register_op registered for `qualname`.
void unregister_op(const std::string& qualname) {
  std::lock_guard<std::mutex> lock(registration_mutex);
  libraries().erase(qualname);
}

int64_t abi_version() { return kAbiVersion; }

}  // namespace

TORCH_LIBRARY(torch_nki_fast, m) {
  m.def("register_op(str op, int api, str kernel, str slow_op, str grad_op) -> ()", &register_op);
  m.def("unregister_op(str op) -> ()", &unregister_op);
  m.def("abi_version() -> int", &abi_version);
}
