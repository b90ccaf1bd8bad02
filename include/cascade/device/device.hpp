// Device: the small interface every backend implements (cpu, opencl, cuda, sim), close to
// OpenCL's: allocate and free memory of the device's space, copy in and out, launch a kernel,
// and query an event. All calls come from the runtime's own thread (or a thread holding its
// step lock), except wait_held(); a backend may finish its work on threads of its own (the sim
// device's engines, the pool's workers) and marks the Event done there. The runtime polls
// events and never waits for a device; only a thread outside the pool that waits for a task
// may block on the task's native event (hold(), wait_held()).
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
    /// Values of `state`.
    enum : int { pending = 0, done = 1, failed = 2 };
    std::atomic<int> state{pending};       ///< pending, done or failed
    std::exception_ptr error;              ///< the error of a failed operation
    void* native = nullptr;                ///< the backend's event (cl_event, CUevent)
    std::atomic<int> parts{0};             ///< for the backend: pieces not finished yet
    std::atomic<bool> part_failed{false};  ///< for the backend: a piece failed
    std::int64_t t_start = 0;              ///< trace stamp of the start (0: unknown)
    std::int64_t t_end = 0;                ///< trace stamp of the end (0: unknown)
    double seconds = 0;                    ///< the operation's duration if the backend knows it
    int refs = 0;                          ///< the runtime's references
    bool processed = false;                ///< the runtime handled its completion
    Event* next_free = nullptr;            ///< the runtime's free list
    /// Called by finish()/fail() with `true` before the state changes and `false` after (the
    /// runtime counts the finishers in between and wakes up); set by the runtime.
    void (*on_finish)(void*, bool) = nullptr;
    void* on_finish_arg = nullptr;  ///< on_finish's argument

    /// Whether it is done or failed.
    bool finished() const noexcept { return state.load(std::memory_order_acquire) != pending; }
    /// Marks it done (any thread). The event may be reused as soon as the state changes, so
    /// nothing of it is touched after.
    void finish() noexcept { settle(done); }
    /// Marks it failed with `e` (any thread).
    void fail(std::exception_ptr e) noexcept {
        error = std::move(e);
        settle(failed);
    }

  private:
    void settle(int st) noexcept {
        void (*const f)(void*, bool) = on_finish;
        void* const a = on_finish_arg;
        if (f) f(a, true);
        state.store(st, std::memory_order_release);
        if (f) f(a, false);
    }
};

/// One kernel launch as a backend sees it.
struct LaunchRecord {
    const Kernel* kernel = nullptr;          ///< what to run
    const std::string* task_name = nullptr;  ///< for errors
    Threads threads;                         ///< work items
    std::size_t scratch_bytes = 0;           ///< scratch memory per work group
    void* const* slots = nullptr;        ///< per argument: device memory, or the value's address
    const std::size_t* sizes = nullptr;  ///< per argument: bytes
    const bool* is_data = nullptr;       ///< per argument: a Data (else a scalar)
    int n = 0;                           ///< number of arguments
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
    /// Its kind.
    virtual DeviceKind kind() const noexcept = 0;
    /// "cpu", "sim0", "opencl0 (pthread-haswell)".
    virtual std::string name() const = 0;
    /// Bytes of memory this device offers to data (0: the host's, unlimited).
    virtual std::size_t capacity() const noexcept = 0;
    /// Device memory for `bytes`, or null when the device has no room.
    virtual void* allocate(std::size_t bytes) = 0;
    /// Gives back memory from allocate().
    virtual void deallocate(void* p, std::size_t bytes) noexcept = 0;
    /// Copies host -> device (offset 0); marks `e` when done.
    virtual void copy_in(void* dst, const void* src, std::size_t bytes, Event& e) = 0;
    /// Copies device -> host.
    virtual void copy_out(void* dst, const void* src, std::size_t bytes, Event& e) = 0;
    /// Copies `bytes` from `offset` of device memory `src` to host `dst` (a chunk of a copy
    /// out); backends whose memory is addressed by pointers need not override it.
    virtual void copy_out_range(void* dst, const void* src, std::size_t offset, std::size_t bytes,
                                Event& e) {
        copy_out(static_cast<unsigned char*>(dst) + offset,
                 static_cast<const unsigned char*>(src) + offset, bytes, e);
    }
    /// Copies `bytes` from host `src` + `offset` to `offset` of device memory `dst`.
    virtual void copy_in_range(void* dst, const void* src, std::size_t offset, std::size_t bytes,
                               Event& e) {
        copy_in(static_cast<unsigned char*>(dst) + offset,
                static_cast<const unsigned char*>(src) + offset, bytes, e);
    }
    /// Runs a kernel; marks `e` when done (or failed, with the kernel's error).
    virtual void launch(const LaunchRecord& r, Event& e) = 0;
    /// Whether `e` has finished (native events are queried here; others read e.state).
    virtual bool poll(Event& e) { return e.finished(); }
    /// Releases what a finished event holds (a native event).
    virtual void release(Event&) noexcept {}
    /// Host<->device bandwidth (bytes/s) for the scheduler's transfer estimates.
    virtual double bandwidth() const noexcept { return 10e9; }
    /// Seconds per copy for the scheduler's transfer estimates.
    virtual double latency() const noexcept { return 10e-6; }
    /// Whether completion must be polled (native events) rather than signalled.
    virtual bool needs_polling() const noexcept { return false; }
    /// A reference to `e`'s native event that a thread outside the pool may block on with
    /// wait_held(), or null when the backend offers none (then waiters poll).
    virtual void* hold(Event&) noexcept { return nullptr; }
    /// Blocks the calling thread until the event behind `held` (from hold()) has finished, then
    /// lets go of the reference. Called from any thread, without the runtime's lock.
    virtual void wait_held(void*) noexcept {}
    /// Whether the device's memory is the process's own: a pointer to a copy there may be
    /// read and written by host code (another library, an MPI send or receive) directly. A
    /// sim device's arena is; a CUDA device's is not (only a GPU-aware MPI reads it), and an
    /// OpenCL buffer is a handle.
    virtual bool host_addressable() const noexcept { return false; }

    /// The memory space of this device (0: the host); set by the runtime.
    int space = 0;
    /// Index among the runtime's devices; set by the runtime.
    int index = 0;
};

}  // namespace cascade
