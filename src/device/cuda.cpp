// The cuda device: NVIDIA GPUs through the CUDA driver API, with kernels compiled at run time
// by NVRTC (the CUDA C++ generated from a single-source kernel, or a Kernel::cuda_source).
// Built when the CUDA toolkit's headers are found; the driver (libcuda.so.1) and NVRTC are
// opened at run time, so a program built with this backend still starts on machines without
// a GPU or driver, and Devices with `cuda` then says why there is no device. Copies in, copies
// out and kernels go to three streams; completion is read from CUDA events when polled.
#include "runtime.hpp"

#ifdef CASCADE_DEVICE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <stdexcept>
#include <unordered_map>

namespace cascade::device::detail {

namespace {

#define CASCADE_STR2(x) #x
#define CASCADE_STR(x) CASCADE_STR2(x)
#define CASCADE_API(f) decltype(&::f) f = nullptr;
struct Api {
    CASCADE_API(cuInit)
    CASCADE_API(cuDeviceGetCount)
    CASCADE_API(cuDeviceGet)
    CASCADE_API(cuDeviceGetName)
    CASCADE_API(cuDeviceTotalMem)
    CASCADE_API(cuDeviceGetAttribute)
    CASCADE_API(cuDevicePrimaryCtxRetain)
    CASCADE_API(cuCtxSetCurrent)
    CASCADE_API(cuStreamCreate)
    CASCADE_API(cuStreamDestroy)
    CASCADE_API(cuMemAlloc)
    CASCADE_API(cuMemFree)
    CASCADE_API(cuMemcpyHtoDAsync)
    CASCADE_API(cuMemcpyDtoHAsync)
    CASCADE_API(cuEventCreate)
    CASCADE_API(cuEventRecord)
    CASCADE_API(cuEventQuery)
    CASCADE_API(cuEventDestroy)
    CASCADE_API(cuModuleLoadData)
    CASCADE_API(cuModuleGetFunction)
    CASCADE_API(cuLaunchKernel)
    CASCADE_API(nvrtcCreateProgram)
    CASCADE_API(nvrtcCompileProgram)
    CASCADE_API(nvrtcGetProgramLogSize)
    CASCADE_API(nvrtcGetProgramLog)
    CASCADE_API(nvrtcGetPTXSize)
    CASCADE_API(nvrtcGetPTX)
    CASCADE_API(nvrtcDestroyProgram)
    std::string error;
};

const Api& api() {
    static Api a = [] {
        Api x;
        void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!cu) {
            x.error = "no CUDA driver (libcuda.so.1 not found: no NVIDIA GPU driver installed)";
            return x;
        }
        void* rtc = dlopen("libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
        if (!rtc) rtc = dlopen("/usr/local/cuda/lib64/libnvrtc.so", RTLD_NOW | RTLD_LOCAL);
        if (!rtc) {
            x.error = "NVRTC (libnvrtc.so of the CUDA toolkit) not found";
            return x;
        }
#define CASCADE_LOAD(lib, f)                                            \
    x.f = reinterpret_cast<decltype(x.f)>(dlsym(lib, CASCADE_STR(f)));  \
    if (!x.f) {                                                         \
        x.error = std::string("symbol ") + CASCADE_STR(f) + " missing"; \
        return x;                                                       \
    }
        CASCADE_LOAD(cu, cuInit)
        CASCADE_LOAD(cu, cuDeviceGetCount)
        CASCADE_LOAD(cu, cuDeviceGet)
        CASCADE_LOAD(cu, cuDeviceGetName)
        CASCADE_LOAD(cu, cuDeviceTotalMem)
        CASCADE_LOAD(cu, cuDeviceGetAttribute)
        CASCADE_LOAD(cu, cuDevicePrimaryCtxRetain)
        CASCADE_LOAD(cu, cuCtxSetCurrent)
        CASCADE_LOAD(cu, cuStreamCreate)
        CASCADE_LOAD(cu, cuStreamDestroy)
        CASCADE_LOAD(cu, cuMemAlloc)
        CASCADE_LOAD(cu, cuMemFree)
        CASCADE_LOAD(cu, cuMemcpyHtoDAsync)
        CASCADE_LOAD(cu, cuMemcpyDtoHAsync)
        CASCADE_LOAD(cu, cuEventCreate)
        CASCADE_LOAD(cu, cuEventRecord)
        CASCADE_LOAD(cu, cuEventQuery)
        CASCADE_LOAD(cu, cuEventDestroy)
        CASCADE_LOAD(cu, cuModuleLoadData)
        CASCADE_LOAD(cu, cuModuleGetFunction)
        CASCADE_LOAD(cu, cuLaunchKernel)
        CASCADE_LOAD(rtc, nvrtcCreateProgram)
        CASCADE_LOAD(rtc, nvrtcCompileProgram)
        CASCADE_LOAD(rtc, nvrtcGetProgramLogSize)
        CASCADE_LOAD(rtc, nvrtcGetProgramLog)
        CASCADE_LOAD(rtc, nvrtcGetPTXSize)
        CASCADE_LOAD(rtc, nvrtcGetPTX)
        CASCADE_LOAD(rtc, nvrtcDestroyProgram)
#undef CASCADE_LOAD
        return x;
    }();
    return a;
}

void check(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS)
        throw std::runtime_error(std::string(what) + " failed: CUDA error " +
                                 std::to_string(static_cast<int>(r)));
}

class CudaDevice final : public Device {
  public:
    CudaDevice(int number, CUdevice dev, bool separate) : dev_(dev), number_(number), a_(api()) {
        check(a_.cuDevicePrimaryCtxRetain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
        current();
        check(a_.cuStreamCreate(&ks_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        if (separate) {
            check(a_.cuStreamCreate(&ins_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
            check(a_.cuStreamCreate(&outs_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        } else {
            ins_ = outs_ = ks_;
        }
        char buf[256] = {};
        a_.cuDeviceGetName(buf, sizeof buf - 1, dev_);
        name_ = "cuda" + std::to_string(number) + " (" + buf + ")";
        std::size_t mem = 0;
        a_.cuDeviceTotalMem(&mem, dev_);
        mem_ = mem;
        a_.cuDeviceGetAttribute(&major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev_);
        a_.cuDeviceGetAttribute(&minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev_);
    }
    ~CudaDevice() override {
        current();
        if (ins_ != ks_) {
            a_.cuStreamDestroy(ins_);
            a_.cuStreamDestroy(outs_);
        }
        a_.cuStreamDestroy(ks_);
    }
    DeviceKind kind() const noexcept override { return DeviceKind::cuda; }
    std::string name() const override { return name_; }
    std::size_t capacity() const noexcept override { return mem_ / 10 * 9; }
    bool needs_polling() const noexcept override { return true; }
    double bandwidth() const noexcept override { return 20e9; }
    double latency() const noexcept override { return 10e-6; }

    void* allocate(std::size_t bytes) override {
        current();
        CUdeviceptr p = 0;
        if (a_.cuMemAlloc(&p, bytes ? bytes : 1) != CUDA_SUCCESS) return nullptr;
        return reinterpret_cast<void*>(p);
    }
    void deallocate(void* p, std::size_t) noexcept override {
        current();
        a_.cuMemFree(reinterpret_cast<CUdeviceptr>(p));
    }
    void copy_in(void* dst, const void* src, std::size_t n, Event& e) override {
        current();
        check(a_.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, n, ins_),
              "cuMemcpyHtoDAsync");
        record(ins_, e);
    }
    void copy_out(void* dst, const void* src, std::size_t n, Event& e) override {
        current();
        check(a_.cuMemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), n, outs_),
              "cuMemcpyDtoHAsync");
        record(outs_, e);
    }
    void launch(const LaunchRecord& r, Event& e) override {
        current();
        if (r.kernel->cuda_fn()) {
            // A call variant gets CUdeviceptr* for Data arguments, value pointers for scalars.
            std::vector<void*> slots(r.slots, r.slots + r.n);
            for (int i = 0; i < r.n; ++i)
                if (r.is_data[i])
                    slots[static_cast<std::size_t>(i)] = const_cast<void**>(&r.slots[i]);
            CudaCall c{ctx_, ks_, number_, slots.data(), r.sizes, r.n};
            r.kernel->cuda_fn()(c);
            record(ks_, e);
            return;
        }
        CUfunction f = get(*r.kernel);
        std::vector<void*> args(static_cast<std::size_t>(r.n));
        for (int i = 0; i < r.n; ++i)
            args[static_cast<std::size_t>(i)] =
                r.is_data[i] ? const_cast<void**>(&r.slots[i]) : r.slots[i];
        unsigned grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
        for (int d = 0; d < r.threads.dims(); ++d) {
            const std::size_t g = r.threads.global[d];
            std::size_t l = r.threads.local[d];
            if (!l) l = d == 0 ? std::min<std::size_t>(g, 256) : 1;
            block[d] = static_cast<unsigned>(l);
            grid[d] = static_cast<unsigned>((g + l - 1) / l);
        }
        check(a_.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                static_cast<unsigned>(r.scratch_bytes), ks_, args.data(), nullptr),
              "cuLaunchKernel");
        record(ks_, e);
    }
    bool poll(Event& e) override {
        if (e.finished()) return true;
        if (!e.native) return false;
        const CUresult q = a_.cuEventQuery(static_cast<CUevent>(e.native));
        if (q == CUDA_ERROR_NOT_READY) return false;
        if (q == CUDA_SUCCESS) {
            e.state.store(Event::done, std::memory_order_release);
        } else {
            e.error = std::make_exception_ptr(
                std::runtime_error(name_ + ": a command failed with CUDA error " +
                                   std::to_string(static_cast<int>(q))));
            e.state.store(Event::failed, std::memory_order_release);
        }
        return true;
    }
    void release(Event& e) noexcept override {
        if (e.native) a_.cuEventDestroy(static_cast<CUevent>(e.native));
        e.native = nullptr;
    }

  private:
    void current() { a_.cuCtxSetCurrent(ctx_); }
    void record(CUstream s, Event& e) {
        CUevent ev;
        check(a_.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
        check(a_.cuEventRecord(ev, s), "cuEventRecord");
        e.native = ev;
    }
    CUfunction get(const Kernel& k) {
        auto it = fns_.find(k.id());
        if (it != fns_.end()) return it->second;
        nvrtcProgram p;
        if (a_.nvrtcCreateProgram(&p, k.cuda_text().c_str(), (k.name() + ".cu").c_str(), 0, nullptr,
                                  nullptr) != NVRTC_SUCCESS)
            throw std::runtime_error("kernel '" + k.name() + "': nvrtcCreateProgram failed");
        const std::string arch =
            "--gpu-architecture=compute_" + std::to_string(major_) + std::to_string(minor_);
        const char* opts[] = {arch.c_str()};
        if (a_.nvrtcCompileProgram(p, 1, opts) != NVRTC_SUCCESS) {
            std::size_t n = 0;
            a_.nvrtcGetProgramLogSize(p, &n);
            std::string log(n, '\0');
            a_.nvrtcGetProgramLog(p, log.data());
            a_.nvrtcDestroyProgram(&p);
            throw std::runtime_error("kernel '" + k.name() + "': CUDA build failed on " + name_ +
                                     ":\n" + log);
        }
        std::size_t n = 0;
        a_.nvrtcGetPTXSize(p, &n);
        std::string ptx(n, '\0');
        a_.nvrtcGetPTX(p, ptx.data());
        a_.nvrtcDestroyProgram(&p);
        CUmodule m;
        check(a_.cuModuleLoadData(&m, ptx.c_str()), "cuModuleLoadData");
        CUfunction f;
        check(a_.cuModuleGetFunction(&f, m, k.cuda_function().c_str()), "cuModuleGetFunction");
        fns_[k.id()] = f;
        return f;
    }
    CUdevice dev_;
    int number_;
    const Api& a_;
    CUcontext ctx_ = nullptr;
    CUstream ks_ = nullptr, ins_ = nullptr, outs_ = nullptr;
    std::string name_;
    std::size_t mem_ = 0;
    int major_ = 0, minor_ = 0;
    std::unordered_map<int, CUfunction> fns_;
};

}  // namespace

std::vector<std::unique_ptr<Device>> make_cuda_devices(int count, bool separate, bool,
                                                       std::string& why) {
    std::vector<std::unique_ptr<Device>> out;
    const Api& a = api();
    if (!a.error.empty()) {
        why = a.error;
        return out;
    }
    if (a.cuInit(0) != CUDA_SUCCESS) {
        why = "cuInit failed (no usable NVIDIA GPU)";
        return out;
    }
    int n = 0;
    a.cuDeviceGetCount(&n);
    for (int i = 0; i < n && (count < 0 || i < count); ++i) {
        CUdevice d;
        if (a.cuDeviceGet(&d, i) == CUDA_SUCCESS)
            out.push_back(std::make_unique<CudaDevice>(i, d, separate));
    }
    if (out.empty()) why = "the CUDA driver reports no GPU";
    return out;
}

}  // namespace cascade::device::detail

#else

namespace cascade::device::detail {
std::vector<std::unique_ptr<Device>> make_cuda_devices(int, bool, bool, std::string& why) {
    why =
        "Cascade was built without CUDA (the CUDA toolkit's nvcc was not found at configure time)";
    return {};
}
}  // namespace cascade::device::detail

#endif
