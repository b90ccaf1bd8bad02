// Device: the small interface every backend implements (cpu, opencl, cuda, sim), close to
// OpenCL's: allocate and free memory of the device's space, copy in and out, launch a kernel,
// and query an event. All calls come from the runtime's own thread; a backend may finish its
// work on threads of its own (the sim device's engines, the pool's workers) and marks the
// Event done there. The runtime polls events and never waits for a device.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include "cascade/device/access.hpp"
#include "cascade/device/kernel.hpp"

namespace cascade {

/// Completion of one device operation. Backends that finish on their own threads call
/// finish()/fail(); backends with native events (OpenCL, CUDA) keep one in `native` and
/// answer Device::poll.
struct Event {
    enum : int { pending = 0, done = 1, failed = 2 };
    std::atomic<int> state{pending};
    std::exception_ptr error;
    void* native = nullptr;
    std::atomic<int> parts{0};  // for the backend: pieces of the work not finished
    std::atomic<bool> part_failed{false};
    std::int64_t t_start = 0, t_end = 0;  // trace stamps (0: not recorded)
    double seconds = 0;  // the operation's own duration when the backend knows it (sim)
    // Runtime bookkeeping.
    int refs = 0;
    bool processed = false;  // the runtime handled its completion
    Event* next_free = nullptr;
    void (*on_finish)(void*) = nullptr;  // wakes the runtime (set by it)
    void* on_finish_arg = nullptr;

    bool finished() const noexcept { return state.load(std::memory_order_acquire) != pending; }
    void finish() noexcept {
        state.store(done, std::memory_order_release);
        if (on_finish) on_finish(on_finish_arg);
    }
    void fail(std::exception_ptr e) noexcept {
        error = std::move(e);
        state.store(failed, std::memory_order_release);
        if (on_finish) on_finish(on_finish_arg);
    }
};

/// One kernel launch as a backend sees it.
struct LaunchRecord {
    const Kernel* kernel = nullptr;
    const std::string* task_name = nullptr;
    Threads threads;
    std::size_t scratch_bytes = 0;
    void* const* slots = nullptr;  // per argument: device memory handle or pointer to value
    const std::size_t* sizes = nullptr;
    const bool* is_data = nullptr;
    int n = 0;
};

/// Counters of one device (Devices::stats).
struct DeviceStats {
    std::uint64_t tasks = 0;        ///< Kernels launched.
    std::uint64_t bytes_in = 0;     ///< Host to device.
    std::uint64_t bytes_out = 0;    ///< Device to host (fetches and write-backs).
    std::uint64_t evictions = 0;    ///< Copies evicted to make room.
    std::uint64_t write_backs = 0;  ///< Of those, Modified copies written back.
    std::uint64_t allocations = 0;  ///< Backend allocations (the pool reuses freed ones).
    std::size_t memory_used = 0;    ///< Bytes of data resident now.
    std::size_t memory_peak = 0;    ///< Most bytes resident at once.
    double busy_seconds = 0;        ///< Time kernels ran (measured by the runtime).
    double transfer_seconds = 0;    ///< Time copies took (the backend's or the runtime's measure).
};

/// The backend interface (see the top of this file).
class Device {
  public:
    virtual ~Device() = default;
    virtual DeviceKind kind() const noexcept = 0;
    /// "cpu", "sim0", "opencl0 (pthread-haswell)".
    virtual std::string name() const = 0;
    /// Bytes of memory this device offers to data (0: the host's, unlimited).
    virtual std::size_t capacity() const noexcept = 0;
    /// Device memory for `bytes`, or null when the device has no room.
    virtual void* allocate(std::size_t bytes) = 0;
    virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
    /// Copies host -> device (offset 0); marks `e` when done.
    virtual void copy_in(void* dst, const void* src, std::size_t bytes, Event& e) = 0;
    /// Copies device -> host.
    virtual void copy_out(void* dst, const void* src, std::size_t bytes, Event& e) = 0;
    /// Runs a kernel; marks `e` when done (or failed, with the kernel's error).
    virtual void launch(const LaunchRecord& r, Event& e) = 0;
    /// Whether `e` has finished (native events are queried here; others read e.state).
    virtual bool poll(Event& e) { return e.finished(); }
    /// Releases what a finished event holds (a native event).
    virtual void release(Event&) noexcept {}
    /// Modelled or measured host<->device bandwidth (bytes/s) and latency (s), for the
    /// scheduler's transfer estimates.
    virtual double bandwidth() const noexcept { return 10e9; }
    virtual double latency() const noexcept { return 10e-6; }
    /// Whether completion must be polled (native events) rather than signalled.
    virtual bool needs_polling() const noexcept { return false; }

    /// The memory space of this device (0: the host); set by the runtime.
    int space = 0;
    /// Index among the runtime's devices; set by the runtime.
    int index = 0;
};

}  // namespace cascade
