// The opencl device: any OpenCL platform's device (PoCL's CPU device on machines without a
// GPU). Buffers are cl_mem objects; copies in, copies out and kernels go to three in-order
// command queues (one when separate queues are off) and are flushed at once; completion is
// read from the commands' events when the runtime polls. Programs are built on first use per
// kernel and device, and a build error carries the compiler's log.
#include "runtime.hpp"

#ifdef CASCADE_DEVICE_OPENCL
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <stdexcept>
#include <unordered_map>

namespace cascade::device::detail {

namespace {

std::string cl_error(const char* what, cl_int err) {
    return std::string(what) + " failed: OpenCL error " + std::to_string(err);
}
void check(cl_int err, const char* what) {
    if (err != CL_SUCCESS) throw std::runtime_error(cl_error(what, err));
}

class OpenclDevice final : public Device {
  public:
    OpenclDevice(int number, cl_platform_id, cl_device_id dev, bool separate) : dev_(dev) {
        cl_int err;
        ctx_ = clCreateContext(nullptr, 1, &dev_, nullptr, nullptr, &err);
        check(err, "clCreateContext");
        kq_ = clCreateCommandQueue(ctx_, dev_, 0, &err);
        check(err, "clCreateCommandQueue");
        if (separate) {
            inq_ = clCreateCommandQueue(ctx_, dev_, 0, &err);
            check(err, "clCreateCommandQueue");
            outq_ = clCreateCommandQueue(ctx_, dev_, 0, &err);
            check(err, "clCreateCommandQueue");
        } else {
            inq_ = outq_ = kq_;
            clRetainCommandQueue(kq_);
            clRetainCommandQueue(kq_);
        }
        char buf[256] = {};
        clGetDeviceInfo(dev_, CL_DEVICE_NAME, sizeof buf - 1, buf, nullptr);
        name_ = "opencl" + std::to_string(number) + " (" + buf + ")";
        cl_ulong mem = 0;
        clGetDeviceInfo(dev_, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
        mem_ = static_cast<std::size_t>(mem);
    }
    ~OpenclDevice() override {
        clFinish(kq_);
        clFinish(inq_);
        clFinish(outq_);
        for (auto& [id, k] : kernels_) {
            clReleaseKernel(k.kernel);
            clReleaseProgram(k.program);
        }
        clReleaseCommandQueue(inq_);
        clReleaseCommandQueue(outq_);
        clReleaseCommandQueue(kq_);
        clReleaseContext(ctx_);
    }
    DeviceKind kind() const noexcept override { return DeviceKind::opencl; }
    std::string name() const override { return name_; }
    std::size_t capacity() const noexcept override { return mem_; }
    bool needs_polling() const noexcept override { return true; }
    double bandwidth() const noexcept override { return 8e9; }
    double latency() const noexcept override { return 20e-6; }

    void* allocate(std::size_t bytes) override {
        cl_int err;
        cl_mem m = clCreateBuffer(ctx_, CL_MEM_READ_WRITE, bytes ? bytes : 1, nullptr, &err);
        if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES) return nullptr;
        check(err, "clCreateBuffer");
        return m;
    }
    void deallocate(void* p, std::size_t) noexcept override {
        clReleaseMemObject(static_cast<cl_mem>(p));
    }
    void copy_in(void* dst, const void* src, std::size_t n, Event& e) override {
        cl_event ev;
        check(clEnqueueWriteBuffer(inq_, static_cast<cl_mem>(dst), CL_FALSE, 0, n, src, 0, nullptr,
                                   &ev),
              "clEnqueueWriteBuffer");
        e.native = ev;
        clFlush(inq_);
    }
    void copy_out(void* dst, const void* src, std::size_t n, Event& e) override {
        cl_event ev;
        check(clEnqueueReadBuffer(outq_, static_cast<cl_mem>(const_cast<void*>(src)), CL_FALSE, 0,
                                  n, dst, 0, nullptr, &ev),
              "clEnqueueReadBuffer");
        e.native = ev;
        clFlush(outq_);
    }
    // Buffers are handles: a range is an offset into the buffer.
    void copy_in_range(void* dst, const void* src, std::size_t off, std::size_t n,
                       Event& e) override {
        cl_event ev;
        check(clEnqueueWriteBuffer(inq_, static_cast<cl_mem>(dst), CL_FALSE, off, n,
                                   static_cast<const unsigned char*>(src) + off, 0, nullptr, &ev),
              "clEnqueueWriteBuffer");
        e.native = ev;
        clFlush(inq_);
    }
    void copy_out_range(void* dst, const void* src, std::size_t off, std::size_t n,
                        Event& e) override {
        cl_event ev;
        check(clEnqueueReadBuffer(outq_, static_cast<cl_mem>(const_cast<void*>(src)), CL_FALSE, off,
                                  n, static_cast<unsigned char*>(dst) + off, 0, nullptr, &ev),
              "clEnqueueReadBuffer");
        e.native = ev;
        clFlush(outq_);
    }
    void launch(const LaunchRecord& r, Event& e) override {
        const Kernel& k = *r.kernel;
        if (k.opencl_fn()) {
            void* ev = nullptr;
            std::vector<void*> slots(r.slots, r.slots + r.n);
            // A call variant gets cl_mem* for Data arguments (like clSetKernelArg).
            std::vector<void*> mems(static_cast<std::size_t>(r.n));
            for (int i = 0; i < r.n; ++i)
                if (r.is_data[i]) {
                    mems[static_cast<std::size_t>(i)] = r.slots[i];
                    slots[static_cast<std::size_t>(i)] = &mems[static_cast<std::size_t>(i)];
                }
            OpenclCall c{ctx_, kq_, dev_, slots.data(), r.sizes, r.n, &ev};
            k.opencl_fn()(c);
            if (!ev)
                throw std::runtime_error("kernel '" + k.name() +
                                         "': its OpenCL call variant set no event");
            e.native = ev;
            clFlush(kq_);
            return;
        }
        cl_kernel kern = get(k);
        for (int i = 0; i < r.n; ++i) {
            const cl_int err =
                r.is_data[i]
                    ? clSetKernelArg(kern, static_cast<cl_uint>(i), sizeof(cl_mem), &r.slots[i])
                    : clSetKernelArg(kern, static_cast<cl_uint>(i), r.sizes[i], r.slots[i]);
            if (err != CL_SUCCESS)
                throw std::runtime_error("kernel '" + k.name() + "', argument " +
                                         std::to_string(i) + ": " +
                                         cl_error("clSetKernelArg", err));
        }
        if (k.single_source())
            check(clSetKernelArg(kern, static_cast<cl_uint>(r.n),
                                 r.scratch_bytes ? r.scratch_bytes : 8, nullptr),
                  "clSetKernelArg (scratch)");
        const int dims = r.threads.dims();
        std::size_t g[3], l[3];
        bool local = r.threads.local[0] != 0;
        for (int d = 0; d < dims; ++d) {
            g[d] = r.threads.global[d];
            l[d] = r.threads.local[d] ? r.threads.local[d] : 1;
        }
        cl_event ev;
        const cl_int err = clEnqueueNDRangeKernel(kq_, kern, static_cast<cl_uint>(dims), nullptr, g,
                                                  local ? l : nullptr, 0, nullptr, &ev);
        if (err != CL_SUCCESS)
            throw std::runtime_error("task '" + *r.task_name +
                                     "': " + cl_error("clEnqueueNDRangeKernel", err));
        e.native = ev;
        clFlush(kq_);
    }
    bool poll(Event& e) override {
        if (e.finished()) return true;
        if (!e.native) return false;
        cl_int st = CL_QUEUED;
        clGetEventInfo(static_cast<cl_event>(e.native), CL_EVENT_COMMAND_EXECUTION_STATUS,
                       sizeof st, &st, nullptr);
        if (st == CL_COMPLETE) {
            e.state.store(Event::done, std::memory_order_release);
            return true;
        }
        if (st < 0) {
            e.error = std::make_exception_ptr(std::runtime_error(
                name_ + ": a command failed with OpenCL error " + std::to_string(st)));
            e.state.store(Event::failed, std::memory_order_release);
            return true;
        }
        return false;
    }
    void release(Event& e) noexcept override {
        if (e.native) clReleaseEvent(static_cast<cl_event>(e.native));
        e.native = nullptr;
    }
    // A waiter outside the pool blocks in clWaitForEvents, as a plain OpenCL program would: the
    // platform wakes it directly when the kernel ends (no polling, no hand-off between threads).
    void* hold(Event& e) noexcept override {
        if (!e.native || clRetainEvent(static_cast<cl_event>(e.native)) != CL_SUCCESS)
            return nullptr;
        return e.native;
    }
    void wait_held(void* held) noexcept override {
        auto ev = static_cast<cl_event>(held);
        clWaitForEvents(1, &ev);  // a failed command is reported by poll()
        clReleaseEvent(ev);
    }

    cl_command_queue kernel_queue() const noexcept { return kq_; }

  private:
    struct Built {
        cl_program program;
        cl_kernel kernel;
    };
    cl_kernel get(const Kernel& k) {
        auto it = kernels_.find(k.id());
        if (it != kernels_.end()) return it->second.kernel;
        const char* src = k.opencl_text().c_str();
        cl_int err;
        cl_program p = clCreateProgramWithSource(ctx_, 1, &src, nullptr, &err);
        check(err, "clCreateProgramWithSource");
        err = clBuildProgram(p, 1, &dev_, "", nullptr, nullptr);
        if (err != CL_SUCCESS) {
            std::size_t n = 0;
            clGetProgramBuildInfo(p, dev_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
            std::string log(n, '\0');
            clGetProgramBuildInfo(p, dev_, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
            clReleaseProgram(p);
            throw std::runtime_error("kernel '" + k.name() + "': OpenCL build failed on " + name_ +
                                     ":\n" + log);
        }
        cl_kernel kern = clCreateKernel(p, k.opencl_function().c_str(), &err);
        if (err != CL_SUCCESS) {
            clReleaseProgram(p);
            throw std::runtime_error("kernel '" + k.name() + "': no __kernel '" +
                                     k.opencl_function() + "' in its OpenCL source");
        }
        kernels_[k.id()] = Built{p, kern};
        return kern;
    }
    cl_device_id dev_;
    cl_context ctx_;
    cl_command_queue kq_, inq_, outq_;
    std::string name_;
    std::size_t mem_ = 0;
    std::unordered_map<int, Built> kernels_;
};

}  // namespace

std::vector<std::unique_ptr<Device>> make_opencl_devices(int count, bool separate,
                                                         std::string& why) {
    std::vector<std::unique_ptr<Device>> out;
    cl_uint np = 0;
    if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) {
        why = "no OpenCL platform (on Debian: apt-get install pocl-opencl-icd)";
        return out;
    }
    std::vector<cl_platform_id> ps(np);
    clGetPlatformIDs(np, ps.data(), nullptr);
    for (cl_platform_id p : ps) {
        cl_uint nd = 0;
        if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS) continue;
        std::vector<cl_device_id> ds(nd);
        clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ds.data(), nullptr);
        for (cl_device_id d : ds) {
            if (count >= 0 && static_cast<int>(out.size()) >= count) return out;
            out.push_back(
                std::make_unique<OpenclDevice>(static_cast<int>(out.size()), p, d, separate));
        }
    }
    if (out.empty()) why = "the OpenCL platforms offer no device";
    return out;
}

}  // namespace cascade::device::detail

#else

namespace cascade::device::detail {
std::vector<std::unique_ptr<Device>> make_opencl_devices(int, bool, std::string& why) {
    why =
        "Cascade was built without OpenCL (on Debian: apt-get install ocl-icd-opencl-dev "
        "opencl-headers pocl-opencl-icd, then configure again)";
    return {};
}
}  // namespace cascade::device::detail

#endif
