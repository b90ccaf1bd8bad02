// Kernel: one computation with a variant per device kind, registered once and submitted many
// times (Devices::submit). Two ways to make one:
//
// A single-source kernel: one body in the kernel dialect (dialect.hpp), expanded to a CPU loop
// (cpu and sim devices), OpenCL C (compiled by the OpenCL driver when first used on a device)
// and CUDA C++ (compiled by NVRTC). Parameters: pointers to kernel_global data (one Data per
// pointer, in order) and scalars of type int, long, float or double. At namespace scope:
//
//   CASCADE_KERNEL(axpy, (double a, kernel_global const double* x, kernel_global double* y,
//                         int n), {
//       int i = kernel_global_id_x;
//       if (i < n) y[i] += a * x[i];
//   });
//
// A kernel of separate variants (e.g. a BLAS call per device kind), built by hand:
//
//   cascade::Kernel gemm("gemm");
//   gemm.cpu([](cascade::KernelArgs& a) { cblas_dgemm(..., a.data<double>(0), ...); });
//   gemm.opencl_source(src, "gemm");   // or gemm.opencl([](OpenclCall& c) { ... });
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cascade/device/access.hpp"
#include "cascade/device/dialect.hpp"

namespace cascade {

/// What a CPU variant (Kernel::cpu) gets: its arguments in submission order, resolved to the
/// memory of the device it runs on (host memory for cpu, the arena of a sim device).
class KernelArgs {
  public:
    /// Argument i, a Data, as a pointer to its elements.
    template <class T>
    T* data(int i) const noexcept {
        return static_cast<T*>(slots_[i]);
    }
    /// Argument i, a scalar.
    template <class T>
    T scalar(int i) const noexcept {
        return *static_cast<const T*>(slots_[i]);
    }
    /// Bytes of argument i (a Data's size, or a scalar's).
    std::size_t bytes(int i) const noexcept { return sizes_[i]; }
    /// Number of arguments.
    int size() const noexcept { return n_; }
    /// The launch's scratch memory (Launch::scratch_bytes), or null.
    void* scratch() const noexcept { return scratch_; }

    /// Made by the backends.
    KernelArgs(void* const* slots, const std::size_t* sizes, int n, void* scratch) noexcept
        : slots_(slots), sizes_(sizes), n_(n), scratch_(scratch) {}

  private:
    void* const* slots_;
    const std::size_t* sizes_;
    int n_;
    void* scratch_;
};

/// Sizes in up to 3 dimensions (0: the dimension is unused).
struct Dims {
    std::size_t v[3] = {0, 0, 0};  ///< x, y, z
    Dims() = default;
    /// {x}, {x, y} or {x, y, z}.
    template <std::integral X, std::integral Y = int, std::integral Z = int>
    Dims(X x, Y y = 0, Z z = 0)
        : v{static_cast<std::size_t>(x), static_cast<std::size_t>(y), static_cast<std::size_t>(z)} {
    }
};

/// Work-item geometry of a launch: `global` items in up to 3 dimensions (0 = unused
/// dimension), in groups of `local` (0: the device chooses; the CPU loop uses groups of 1).
/// `{n}`: n items; `{n, l}`: n items in groups of l; `{{nx, ny}, {lx, ly}}`: 2-D.
struct Threads {
    std::size_t global[3] = {1, 0, 0};  ///< work items per dimension
    std::size_t local[3] = {0, 0, 0};   ///< work-group size per dimension (0: any)
    Threads() = default;
    /// `g` work items in groups of `l`.
    Threads(Dims g, Dims l = {}) : global{g.v[0], g.v[1], g.v[2]}, local{l.v[0], l.v[1], l.v[2]} {}
    /// Number of dimensions used (1..3).
    int dims() const noexcept { return global[2] ? 3 : global[1] ? 2 : 1; }
};

/// What an OpenCL call variant (Kernel::opencl) gets: the device's context and queue, the
/// arguments as cl_mem / scalar pointers, and the event it must set (an OpenCL event of its
/// last command). Types are void* so that this header needs no OpenCL headers.
struct OpenclCall {
    void* context;       ///< cl_context
    void* queue;         ///< cl_command_queue
    void* device;        ///< cl_device_id
    void* const* slots;  ///< per argument: a cl_mem* for Data, a pointer to the value for scalars
    const std::size_t* sizes;  ///< per argument: bytes
    int n;                     ///< number of arguments
    void** event;              ///< set to the cl_event that completes the work
};

/// What a CUDA call variant (Kernel::cuda) gets: the device's context and kernel stream, the
/// arguments as device pointers / scalar pointers. It queues its work on `stream` (e.g. a cuBLAS
/// call after cublasSetStream); the runtime records the task's end on that stream after the
/// call returns. Types are void* so that this header needs no CUDA headers.
struct CudaCall {
    void* context;  ///< CUcontext (current on the calling thread)
    void* stream;   ///< CUstream (a cudaStream_t for the runtime API and the libraries)
    int device;     ///< the CUDA device ordinal
    void* const*
        slots;  ///< per argument: a CUdeviceptr* for Data, a pointer to the value for scalars
    const std::size_t* sizes;  ///< per argument: bytes
    int n;                     ///< number of arguments
};

namespace device::detail {
// Per-parameter facts of a single-source kernel, from its C++ signature.
enum class ParamKind : std::uint8_t { pointer, i32, i64, f32, f64, other };
struct Param {
    ParamKind kind;
    std::uint32_t size;  // element size for pointers, value size for scalars
    bool is_const;       // pointer to const: the kernel only reads it
};
template <class P>
constexpr Param param_of() {
    if constexpr (std::is_pointer_v<P>) {
        using E = std::remove_pointer_t<P>;
        return {ParamKind::pointer, sizeof(E), std::is_const_v<E>};
    } else if constexpr (std::is_integral_v<P> && sizeof(P) == 4) {
        return {ParamKind::i32, 4, false};
    } else if constexpr (std::is_integral_v<P> && sizeof(P) == 8) {
        return {ParamKind::i64, 8, false};
    } else if constexpr (std::is_same_v<P, float>) {
        return {ParamKind::f32, 4, false};
    } else if constexpr (std::is_same_v<P, double>) {
        return {ParamKind::f64, 8, false};
    } else {
        return {ParamKind::other, sizeof(P), false};
    }
}
template <class P>
P unpack(void* slot) noexcept {
    if constexpr (std::is_pointer_v<P>)
        return static_cast<P>(slot);
    else
        return *static_cast<P*>(slot);
}
// Calls a kernel body for the work item of the current ItemContext.
using ItemFn = void (*)(void* const* slots);
template <auto Fn, class... P, std::size_t... I>
void call_item(void* const* slots, std::index_sequence<I...>) {
    Fn(unpack<P>(slots[I])...);
}
template <auto Fn, class Sig>
struct ItemOf;
template <auto Fn, class... P>
struct ItemOf<Fn, void (*)(P...)> {
    static void run(void* const* slots) {
        call_item<Fn, P...>(slots, std::index_sequence_for<P...>{});
    }
    static std::vector<Param> params() { return {param_of<P>()...}; }
};
}  // namespace device::detail

/// A computation with a variant per device kind (see the top of this file). Register it once
/// (a namespace-scope object or one that outlives the Devices using it); it is immutable
/// once submitted.
class Kernel {
  public:
    /// A kernel named `name` (in errors and the trace) with no variant yet.
    explicit Kernel(std::string name);
    Kernel(const Kernel&) = delete;
    Kernel& operator=(const Kernel&) = delete;

    /// The CPU variant: runs once per launch on cpu and sim devices (the whole range).
    Kernel& cpu(std::function<void(KernelArgs&)> fn);
    /// An OpenCL variant from OpenCL C source and the name of its __kernel function; Data
    /// arguments are passed as __global pointers, scalars by value, in order.
    Kernel& opencl_source(std::string source, std::string function);
    /// An OpenCL variant that enqueues its own commands (e.g. a CLBlast call).
    Kernel& opencl(std::function<void(OpenclCall&)> fn);
    /// A CUDA variant from CUDA C++ source (compiled by NVRTC) and its extern "C"
    /// __global__ function's name.
    Kernel& cuda_source(std::string source, std::string function);
    /// A CUDA variant that queues its own work on the device's stream (e.g. a cuBLAS call).
    Kernel& cuda(std::function<void(CudaCall&)> fn);
    /// Expected seconds of one launch on a simulated device (sim devices with
    /// SimOptions::run_kernels = false sleep that long instead of running the CPU variant).
    Kernel& model(std::function<double(const Threads&)> seconds);

    /// Its name.
    const std::string& name() const noexcept { return name_; }
    /// Whether it can run on devices of `kind` (sim runs the CPU variant).
    bool has_variant(DeviceKind kind) const noexcept;
    /// A small dense number, for the runtime's per-kernel tables.
    int id() const noexcept { return id_; }

    // ---- used by the runtime and CASCADE_KERNEL ----------------------------------------
    /// A single-source kernel's parts (made by CASCADE_KERNEL).
    struct SingleSource {
        device::detail::ItemFn item = nullptr;      ///< runs one work item (the C++ body)
        std::vector<device::detail::Param> params;  ///< its parameters' kinds and sizes
        std::string params_text;                    ///< the parameter list as written
        std::string body;                           ///< the body as written
        bool barrier = false;                       ///< the body calls kernel_barrier()
    };
    /// A single-source kernel (CASCADE_KERNEL).
    Kernel(std::string name, SingleSource s);
    /// Its single-source parts, or null.
    const SingleSource* single_source() const noexcept { return ss_.item ? &ss_ : nullptr; }
    /// The CPU variant (Kernel::cpu), if any.
    const std::function<void(KernelArgs&)>& cpu_fn() const noexcept { return cpu_; }
    /// The OpenCL call variant (Kernel::opencl), if any.
    const std::function<void(OpenclCall&)>& opencl_fn() const noexcept { return ocl_call_; }
    /// The CUDA call variant (Kernel::cuda), if any.
    const std::function<void(CudaCall&)>& cuda_fn() const noexcept { return cuda_call_; }
    /// The modelled time (Kernel::model), if any.
    const std::function<double(const Threads&)>& model_fn() const noexcept { return model_; }
    /// OpenCL C source and function (generated for single-source kernels).
    const std::string& opencl_text() const noexcept { return ocl_src_; }
    /// The OpenCL __kernel function's name.
    const std::string& opencl_function() const noexcept { return ocl_fn_; }
    /// CUDA C++ source and function (generated for single-source kernels).
    const std::string& cuda_text() const noexcept { return cuda_src_; }
    /// The CUDA __global__ function's name.
    const std::string& cuda_function() const noexcept { return cuda_fn_; }
    /// Runs the CPU variant over the launch's work items [begin, end) of the groups.
    void run_cpu(void* const* slots, const std::size_t* sizes, int n, const Threads& t,
                 void* scratch, std::size_t group_begin, std::size_t group_end) const;
    /// Number of work groups of a launch on the CPU loop.
    static std::size_t cpu_groups(const Threads& t) noexcept;

  private:
    std::string name_;
    int id_;
    SingleSource ss_;
    std::function<void(KernelArgs&)> cpu_;
    std::function<void(OpenclCall&)> ocl_call_;
    std::function<void(CudaCall&)> cuda_call_;
    std::function<double(const Threads&)> model_;
    std::string ocl_src_, ocl_fn_, cuda_src_, cuda_fn_;
};

namespace device::detail {
template <auto Fn>
Kernel::SingleSource make_single_source(const char* params, const char* body) {
    using Item = ItemOf<Fn, decltype(Fn)>;
    Kernel::SingleSource s;
    s.item = &Item::run;
    s.params = Item::params();
    s.params_text = params;
    s.body = body;
    return s;
}
}  // namespace device::detail

}  // namespace cascade

/// Defines a single-source kernel `name` (a cascade::Kernel) from a parameter list in
/// parentheses and a body in braces, in the kernel dialect (see the top of this file).
#define CASCADE_KERNEL(name, params, ...)                                                   \
    inline void cascade_kernel_item_##name params                                           \
        __VA_ARGS__ inline const ::cascade::Kernel name {                                   \
#name, ::cascade::device::detail::make_single_source < &cascade_kernel_item_##name> \
                                                               (#params, #__VA_ARGS__)      \
    }
