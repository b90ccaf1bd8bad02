// Kernels: variants, and the expansion of single-source kernels. The body of a
// CASCADE_KERNEL is compiled three ways: as C++ here (run by the CPU loop below, one call per
// work item; a body with kernel_barrier() runs each work group's items as fibers that switch
// at the barrier), as OpenCL C (the preludes map the dialect to OpenCL's built-ins and add a
// hidden __local scratch parameter), and as CUDA C++ for NVRTC.
#include "cascade/device/kernel.hpp"

#include <ucontext.h>

#include <atomic>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <vector>

#include "cascade/core/errors.hpp"

namespace cascade {

namespace device::detail {

namespace {
thread_local ItemContext t_item{};

// Fibers of one work group (a body with barriers), on the thread running the group.
struct Fibers {
    ucontext_t main{};
    std::vector<ucontext_t> ctx;
    std::vector<std::unique_ptr<char[]>> stacks;
    std::vector<ItemContext> items;
    std::vector<char> finished;
    int current = -1;
    ItemFn fn = nullptr;
    void* const* slots = nullptr;
    std::exception_ptr error;
};
thread_local Fibers* t_fibers = nullptr;
constexpr std::size_t kFiberStack = 64 * 1024;

void fiber_entry() {
    Fibers& f = *t_fibers;
    const int me = f.current;
    try {
        f.fn(f.slots);
    } catch (...) {
        if (!f.error) f.error = std::current_exception();
    }
    f.finished[static_cast<std::size_t>(me)] = 1;
    // Returning resumes uc_link (the group's scheduler).
}

// One fiber per call: nothing the caller changes afterwards lives across getcontext().
__attribute__((noinline)) void make_fiber(Fibers& f, std::size_t i) {
    getcontext(&f.ctx[i]);
    f.ctx[i].uc_stack.ss_sp = f.stacks[i].get();
    f.ctx[i].uc_stack.ss_size = kFiberStack;
    f.ctx[i].uc_link = &f.main;
    makecontext(&f.ctx[i], &fiber_entry, 0);
}

void make_fibers(Fibers& f, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        make_fiber(f, i);
}

// Resumes each work item in turn until all finished (so every item reaches a barrier before
// any passes it). Its own function: nothing of the caller lives across the switches.
__attribute__((noinline)) void run_fibers(Fibers& f, std::size_t n) {
    t_fibers = &f;
    for (bool left = true; left;) {
        left = false;
        for (std::size_t i = 0; i < n; ++i) {
            if (f.finished[i]) continue;
            f.current = static_cast<int>(i);
            t_item = f.items[i];
            swapcontext(&f.main, &f.ctx[i]);
            if (!f.finished[i]) left = true;
        }
    }
    t_fibers = nullptr;
}
}  // namespace

ItemContext& item_context() noexcept {
    return t_item;
}

void item_barrier() {
    Fibers* f = t_fibers;
    if (!f) return;  // groups of one item: the barrier is trivially reached
    const int me = f->current;
    f->items[static_cast<std::size_t>(me)] = t_item;
    swapcontext(&f->ctx[static_cast<std::size_t>(me)], &f->main);
    t_item = f->items[static_cast<std::size_t>(me)];
}

}  // namespace device::detail

using device::detail::ItemContext;

namespace {
std::atomic<int> g_kernel_ids{0};

// The OpenCL and CUDA preludes: the kernel dialect in each language.
const char* const kOpenclPrelude = R"(#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define kernel_global __global
#define kernel_local __local
#define kernel_global_id_x ((int)get_global_id(0))
#define kernel_global_id_y ((int)get_global_id(1))
#define kernel_global_id_z ((int)get_global_id(2))
#define kernel_local_id_x ((int)get_local_id(0))
#define kernel_local_id_y ((int)get_local_id(1))
#define kernel_local_id_z ((int)get_local_id(2))
#define kernel_group_id_x ((int)get_group_id(0))
#define kernel_group_id_y ((int)get_group_id(1))
#define kernel_group_id_z ((int)get_group_id(2))
#define kernel_global_size_x ((int)get_global_size(0))
#define kernel_global_size_y ((int)get_global_size(1))
#define kernel_global_size_z ((int)get_global_size(2))
#define kernel_local_size_x ((int)get_local_size(0))
#define kernel_local_size_y ((int)get_local_size(1))
#define kernel_local_size_z ((int)get_local_size(2))
#define kernel_num_groups_x ((int)get_num_groups(0))
#define kernel_num_groups_y ((int)get_num_groups(1))
#define kernel_num_groups_z ((int)get_num_groups(2))
#define kernel_barrier() barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE)
#define kernel_dynamic_local(T) ((__local T*)cascade_scratch_)
)";

const char* const kCudaPrelude = R"(#define kernel_global
#define kernel_local
#define kernel_global_id_x ((int)(blockIdx.x * blockDim.x + threadIdx.x))
#define kernel_global_id_y ((int)(blockIdx.y * blockDim.y + threadIdx.y))
#define kernel_global_id_z ((int)(blockIdx.z * blockDim.z + threadIdx.z))
#define kernel_local_id_x ((int)threadIdx.x)
#define kernel_local_id_y ((int)threadIdx.y)
#define kernel_local_id_z ((int)threadIdx.z)
#define kernel_group_id_x ((int)blockIdx.x)
#define kernel_group_id_y ((int)blockIdx.y)
#define kernel_group_id_z ((int)blockIdx.z)
#define kernel_global_size_x ((int)(gridDim.x * blockDim.x))
#define kernel_global_size_y ((int)(gridDim.y * blockDim.y))
#define kernel_global_size_z ((int)(gridDim.z * blockDim.z))
#define kernel_local_size_x ((int)blockDim.x)
#define kernel_local_size_y ((int)blockDim.y)
#define kernel_local_size_z ((int)blockDim.z)
#define kernel_num_groups_x ((int)gridDim.x)
#define kernel_num_groups_y ((int)gridDim.y)
#define kernel_num_groups_z ((int)gridDim.z)
#define kernel_barrier() __syncthreads()
#define kernel_dynamic_local(T) ((T*)cascade_scratch_)
)";

// "(a, b)" -> "(a, b, extra)" (or "(extra)" for "()").
std::string with_param(const std::string& params, const std::string& extra) {
    const auto close = params.rfind(')');
    const auto open = params.find('(');
    if (close == std::string::npos || open == std::string::npos) return "(" + extra + ")";
    const bool empty = params.find_first_not_of(" \t\n", open + 1) == close;
    return params.substr(0, close) + (empty ? "" : ", ") + extra + ")";
}
}  // namespace

Kernel::Kernel(std::string name) : name_(std::move(name)), id_(g_kernel_ids.fetch_add(1)) {}

Kernel::Kernel(std::string name, SingleSource s)
    : name_(std::move(name)), id_(g_kernel_ids.fetch_add(1)), ss_(std::move(s)) {
    ss_.barrier = ss_.body.find("kernel_barrier") != std::string::npos;
    ocl_fn_ = name_;
    ocl_src_ = std::string(kOpenclPrelude) + "__kernel void " + name_ +
               with_param(ss_.params_text, "__local uchar* cascade_scratch_") + "\n" + ss_.body +
               "\n";
    cuda_fn_ = name_;
    cuda_src_ = std::string(kCudaPrelude) + "extern \"C\" __global__ void " + name_ +
                ss_.params_text + "\n{\nextern __shared__ unsigned char cascade_scratch_[];\n" +
                ss_.body + "\n}\n";
}

Kernel& Kernel::cpu(std::function<void(KernelArgs&)> fn) {
    cpu_ = std::move(fn);
    return *this;
}
Kernel& Kernel::opencl_source(std::string source, std::string function) {
    ocl_src_ = std::move(source);
    ocl_fn_ = std::move(function);
    return *this;
}
Kernel& Kernel::opencl(std::function<void(OpenclCall&)> fn) {
    ocl_call_ = std::move(fn);
    return *this;
}
Kernel& Kernel::cuda_source(std::string source, std::string function) {
    cuda_src_ = std::move(source);
    cuda_fn_ = std::move(function);
    return *this;
}
Kernel& Kernel::cuda(std::function<void(CudaCall&)> fn) {
    cuda_call_ = std::move(fn);
    return *this;
}
Kernel& Kernel::model(std::function<double(const Threads&)> seconds) {
    model_ = std::move(seconds);
    return *this;
}

bool Kernel::has_variant(DeviceKind kind) const noexcept {
    switch (kind) {
        case DeviceKind::cpu:
        case DeviceKind::sim:
            return ss_.item != nullptr || static_cast<bool>(cpu_);
        case DeviceKind::opencl:
            return !ocl_src_.empty() || static_cast<bool>(ocl_call_);
        case DeviceKind::cuda:
            return !cuda_src_.empty() || static_cast<bool>(cuda_call_);
        case DeviceKind::any:
            return true;
    }
    return false;
}

std::size_t Kernel::cpu_groups(const Threads& t) noexcept {
    std::size_t n = 1;
    for (int d = 0; d < 3; ++d) {
        const std::size_t g = t.global[d] ? t.global[d] : 1;
        const std::size_t l = t.local[d] ? t.local[d] : 1;
        n *= g / l;
    }
    return n;
}

void Kernel::run_cpu(void* const* slots, const std::size_t* sizes, int n, const Threads& t,
                     void* scratch, std::size_t group_begin, std::size_t group_end) const {
    if (!ss_.item) {
        if (!cpu_) throw UsageError("kernel '" + name_ + "' has no CPU variant");
        KernelArgs a(slots, sizes, n, scratch);
        cpu_(a);
        return;
    }
    ItemContext& it = device::detail::item_context();
    std::size_t gsz[3], lsz[3], ngr[3];
    for (int d = 0; d < 3; ++d) {
        gsz[d] = t.global[d] ? t.global[d] : 1;
        lsz[d] = t.local[d] ? t.local[d] : 1;
        ngr[d] = gsz[d] / lsz[d];
        it.global_size[d] = static_cast<int>(gsz[d]);
        it.local_size[d] = static_cast<int>(lsz[d]);
        it.num_groups[d] = static_cast<int>(ngr[d]);
    }
    it.scratch = scratch;
    const std::size_t per_group = lsz[0] * lsz[1] * lsz[2];
    const bool fibers = ss_.barrier && per_group > 1;
    for (std::size_t g = group_begin; g < group_end; ++g) {
        const std::size_t gx = g % ngr[0], gy = (g / ngr[0]) % ngr[1], gz = g / (ngr[0] * ngr[1]);
        it.group_id[0] = static_cast<int>(gx);
        it.group_id[1] = static_cast<int>(gy);
        it.group_id[2] = static_cast<int>(gz);
        auto set_item = [&](ItemContext& c, std::size_t i) {
            const std::size_t lx = i % lsz[0], ly = (i / lsz[0]) % lsz[1],
                              lz = i / (lsz[0] * lsz[1]);
            c.local_id[0] = static_cast<int>(lx);
            c.local_id[1] = static_cast<int>(ly);
            c.local_id[2] = static_cast<int>(lz);
            c.global_id[0] = static_cast<int>(gx * lsz[0] + lx);
            c.global_id[1] = static_cast<int>(gy * lsz[1] + ly);
            c.global_id[2] = static_cast<int>(gz * lsz[2] + lz);
        };
        if (!fibers) {
            for (std::size_t i = 0; i < per_group; ++i) {
                set_item(it, i);
                ss_.item(slots);
            }
            continue;
        }
        // Each work item a fiber; the scheduler resumes them in turn until all finished, so
        // every item reaches a barrier before any passes it.
        thread_local device::detail::Fibers f;
        f.ctx.resize(per_group);
        f.items.assign(per_group, it);
        f.finished.assign(per_group, 0);
        while (f.stacks.size() < per_group)
            f.stacks.emplace_back(new char[device::detail::kFiberStack]);
        f.fn = ss_.item;
        f.slots = slots;
        f.error = nullptr;
        for (std::size_t i = 0; i < per_group; ++i)
            set_item(f.items[i], i);
        device::detail::make_fibers(f, per_group);
        device::detail::run_fibers(f, per_group);
        if (f.error) std::rethrow_exception(f.error);
    }
}

}  // namespace cascade
