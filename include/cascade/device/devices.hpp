// Devices: the device runtime of one process over a Threadpool (no MPI). It owns the devices
// (the pool's workers as `cpu`, simulated devices, OpenCL and CUDA devices), the data's
// copies, and a runtime thread that schedules ready tasks, moves data, launches kernels and
// polls their completion; pool workers never wait for a device.
//
//   cascade::Threadpool tp(2);
//   cascade::Devices devs(tp, {.sim = 2});
//   cascade::Data<double> x(devs, n), y(devs, n);
//   auto t = devs.submit(axpy, 2.0, cascade::read(x), cascade::readwrite(y), n,
//                        cascade::Launch{.threads = {n}});
//   t.get();
//
// Dependencies come three ways: implicitly from the access modes in submission order (readers
// share, a writer waits for earlier readers and writers), explicitly (prepare, after, submit),
// and fork-join (DeviceTask::wait, Devices::wait_all).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "cascade/core/errors.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/device/data.hpp"
#include "cascade/device/device.hpp"
#include "cascade/device/kernel.hpp"
#include "cascade/device/task.hpp"

namespace cascade {

/// A simulated device: memory of its own (an arena of `memory` bytes), a copy engine with a
/// modelled bandwidth and latency, and kernels run on its own thread.
struct SimOptions {
    std::size_t memory = std::size_t(256) << 20;  ///< arena bytes
    double bandwidth = 12e9;                      ///< bytes/s of each copy engine (page-locked)
    double latency = 8e-6;                        ///< seconds per copy
    double launch_latency = 4e-6;                 ///< seconds per kernel launch
    /// Seconds per allocation from the device (a GPU's cudaMalloc; the memory pool avoids
    /// most of them). The runtime thread waits it out, as it would for the real call.
    double alloc_latency = 0;
    /// Run the CPU variant (true) or sleep the kernel's modelled time (Kernel::model).
    bool run_kernels = true;
    /// Adversarial delays for tests: each copy waits a further random 0 .. this many seconds
    /// (a fixed seed per engine, so runs repeat).
    double copy_jitter = 0;
};

/// Settings of a Devices (which devices, the optimizations).
struct DevicesOptions {
    bool cpu = true;           ///< the pool's workers as device `cpu` (the host's memory)
    int sim = 0;               ///< simulated devices
    SimOptions sim_options{};  ///< the simulated devices' model
    int opencl = 0;            ///< OpenCL devices to use (-1: all found; 0: none)
    int cuda = 0;              ///< CUDA devices to use (-1: all found; 0: none)
    /// Data bytes each device may hold (0: CASCADE_DEVICE_MEMORY if set, else the device's
    /// own memory). Least recently used copies are evicted beyond it.
    std::size_t memory = 0;
    // The optimizations (all on by default; off for comparisons).
    bool pinned_host = true;      ///< page-locked host copies where the backend offers them
    bool separate_queues = true;  ///< copies in, copies out and kernels on their own queues
    bool memory_pool = true;      ///< freed device memory is kept for reuse
    /// A thread outside the pool waiting for an OpenCL task blocks on its event and completes
    /// it itself (off: it polls, and the runtime thread completes it).
    bool wait_on_events = true;
    /// A sim device's engine thread that finishes a copy or kernel runs the runtime's step
    /// itself (completing it, launching what it released) once its next operation has
    /// started, instead of waking the runtime thread (off: the runtime thread does it).
    bool complete_on_backend = true;
    std::string name = "devices";  ///< in errors and trace tracks
};

/// Counters of the whole runtime.
struct DevicesStats {
    std::uint64_t tasks = 0;      ///< tasks submitted
    std::uint64_t bytes_in = 0;   ///< host to devices, all devices
    std::uint64_t bytes_out = 0;  ///< devices to host, all devices
    /// Steps of the runtime run by a backend's own thread (complete_on_backend).
    std::uint64_t backend_steps = 0;
    std::vector<DeviceStats> devices;  ///< per device, in index order
};

namespace device::detail {
class Runtime;
}

/// The device runtime of a pool (see the top of this file).
class Devices {
  public:
    /// Devices run by `tp` as `opts` says; throws UsageError if asked-for devices are missing.
    Devices(Threadpool& tp, DevicesOptions opts = {});
    Devices(const Devices&) = delete;
    Devices& operator=(const Devices&) = delete;
    /// Waits for every task, then frees every copy.
    ~Devices();

    /// Submits `kernel` with `args`: Data arguments as read(d) / write(d) / readwrite(d),
    /// scalars by value, and an optional Launch (anywhere in the list).
    template <class... A>
    DeviceTask submit(const Kernel& kernel, const A&... args) {
        DeviceTask t = prepare(kernel, args...);
        t.submit();
        return t;
    }
    /// As submit, without submitting: add explicit dependencies with after(), then submit().
    template <class... A>
    DeviceTask prepare(const Kernel& kernel, const A&... args) {
        device::detail::TaskState* s = begin(kernel);
        Launch l;
        (add(s, args, l), ...);
        return finish(s, l);
    }
    /// Waits until every task submitted so far finished (a pool worker runs pool tasks
    /// meanwhile). Throws UsageError if a host request is held (not released): the tasks
    /// after it could never run.
    void wait_all();

    /// The devices, in index order (index 0 is `cpu` when DevicesOptions::cpu).
    int size() const noexcept;
    /// Device `i` (0 .. size() - 1).
    Device& device(int i) const;
    /// The first device index of `kind`, or -1.
    int find(DeviceKind kind) const noexcept;
    /// Counters (a snapshot; exact after wait_all()).
    DevicesStats stats() const;
    /// The pool it runs on.
    Threadpool& pool() const noexcept { return tp_; }
    /// Its options.
    const DevicesOptions& options() const noexcept { return opts_; }
    /// The internals (for Data and DeviceTask).
    device::detail::Runtime& runtime() const noexcept { return *rt_; }

  private:
    device::detail::TaskState* begin(const Kernel& k);
    DeviceTask finish(device::detail::TaskState* s, const Launch& l);
    void add_data(device::detail::TaskState* s, device::detail::DataBlock* b, DataAccess m,
                  std::size_t elem);
    // kind 1: integer (value in i), 2: floating point (in f): converted to the parameter's
    // type for single-source kernels; otherwise the bytes as given.
    void add_scalar(device::detail::TaskState* s, const void* p, std::size_t bytes, int kind,
                    long long i, double f);

    template <class T>
    void add(device::detail::TaskState* s, const DataArg<T>& a, Launch&) {
        add_data(s, a.block, a.mode, sizeof(T));
    }
    void add(device::detail::TaskState*, const Launch& a, Launch& l) { l = a; }
    template <class T>
    void add(device::detail::TaskState* s, const T& v, Launch&) {
        static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 16,
                      "a scalar argument is trivially copyable and at most 16 bytes");
        if constexpr (std::is_integral_v<T>)
            add_scalar(s, &v, sizeof(T), 1, static_cast<long long>(v), 0);
        else if constexpr (std::is_floating_point_v<T>)
            add_scalar(s, &v, sizeof(T), 2, 0, static_cast<double>(v));
        else
            add_scalar(s, &v, sizeof(T), 0, 0, 0);
    }

    Threadpool& tp_;
    DevicesOptions opts_;
    std::unique_ptr<device::detail::Runtime> rt_;
};

}  // namespace cascade
