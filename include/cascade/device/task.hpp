// DeviceTask: a handle to a submitted device task (or a host continuation of one). It behaves
// as a future<void>: ready(), wait() (a pool worker runs other tasks meanwhile), get()
// (rethrows the task's exception), then(f), when_all(...), and fulfil(taskflow, key) feeds a
// Taskflow promise when it completes. Explicit dependencies: Devices::prepare returns an
// unsubmitted task; after(u) makes it wait for u; submit() releases it. A program that also
// links the futures layer turns it into a cascade::future<void> with cascade::to_future(t)
// (<cascade/futures/device.hpp>; this layer itself stays free of MPI).
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cascade/core/taskflow.hpp"
#include "cascade/device/access.hpp"
#include "cascade/device/kernel.hpp"

namespace cascade {

class Threadpool;

namespace device::detail {
struct TaskState;
}

/// Where and how a task runs (the options of Devices::submit).
struct Launch {
    DeviceKind device = DeviceKind::any;  ///< kind of device (any: the scheduler chooses)
    int on = -1;                          ///< a device index (Devices::device(i)), or -1
    Threads threads{};                    ///< work items (global, local)
    std::size_t scratch_bytes = 0;        ///< scratch memory per work group
    const char* name = nullptr;           ///< task name in errors and the trace (the kernel's)
};

/// A handle to a device task: a future<void> of its completion (see the top of this file).
class DeviceTask {
  public:
    /// An empty handle.
    DeviceTask() = default;
    /// A handle owning one reference of `s` (made by Devices).
    explicit DeviceTask(device::detail::TaskState* s) noexcept;
    /// Another handle to the same task.
    DeviceTask(const DeviceTask& o) noexcept;
    /// Takes the handle over.
    DeviceTask(DeviceTask&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    /// Another handle to `o`'s task.
    DeviceTask& operator=(DeviceTask o) noexcept {
        std::swap(s_, o.s_);
        return *this;
    }
    /// Drops the handle (the task runs on regardless).
    ~DeviceTask();

    /// Whether it finished (done or failed).
    bool ready() const noexcept;
    /// Waits until it finished. On a pool worker, runs other pool tasks meanwhile.
    void wait() const;
    /// wait(), then rethrows the task's exception if it failed.
    void get() const;
    /// Whether it failed (after ready()).
    bool failed() const noexcept;
    /// Its exception, or null.
    std::exception_ptr error() const noexcept;
    /// Its name (the kernel's unless Launch::name).
    const std::string& name() const noexcept;
    /// The device index it ran on (-1: a host continuation, or not scheduled yet).
    int device() const noexcept;
    /// Seconds its kernel ran on the device, as the runtime measured it (the backend's own
    /// measure where it has one), once it finished; 0 before, and for a task with no kernel.
    double seconds() const noexcept;
    /// The pool of the Devices it belongs to (where its continuations run). Not for an empty
    /// handle.
    Threadpool& pool() const noexcept;

    /// Explicit dependency: this task starts only after `u` finished. Only before submit().
    DeviceTask& after(const DeviceTask& u);
    /// Submits a task made by Devices::prepare (after its after() calls).
    DeviceTask& submit();

    /// Runs `f()` on the pool after this task finished; the result finishes after f. If this
    /// task failed, f does not run and the result fails with the same exception.
    DeviceTask then(std::function<void()> f) const;
    /// Runs `f(error)` on the pool after this task finished, failed (`error` its exception)
    /// or not (null): e.g. to complete a `cascade::promise<void>` of the futures layer.
    DeviceTask on_done(std::function<void(std::exception_ptr)> f) const;
    /// Fulfils promise `k` of `tf` when this task finished (a device task as a dependency of
    /// a task graph). A failure reaches the waiter of the returned task, not the graph.
    template <class K>
    DeviceTask fulfil(Taskflow<K>& tf, K k) const {
        return then([&tf, k] { tf.fulfill_promise(k); });
    }

    /// False for an empty handle.
    bool valid() const noexcept { return s_ != nullptr; }
    /// The shared state (for the runtime).
    device::detail::TaskState* state() const noexcept { return s_; }

  private:
    device::detail::TaskState* s_ = nullptr;
};

/// A task that finishes when all of `tasks` finished (failed if one of them failed).
DeviceTask when_all(std::span<const DeviceTask> tasks);
DeviceTask when_all(std::initializer_list<DeviceTask> tasks);

}  // namespace cascade
