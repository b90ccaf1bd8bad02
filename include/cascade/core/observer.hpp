// Observer: how a tool watches the core without the core knowing it. Pools and taskflows
// call the hooks below when an observer is installed (the trace layer installs one when
// CASCADE_TRACE or CASCADE_DAG is set); with none installed each hook site costs one
// predictable branch on a pointer the pool reads once when it is created.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "cascade/core/task.hpp"

namespace cascade {

/// Receives what pools and taskflows do, for tracing or profiling. Install one with
/// set_observer() before creating the pools it should watch; it must outlive them.
///
/// ```cpp
/// struct CountTasks : cascade::Observer {
///     std::atomic<long> n{0};
///     void* on_worker_created(const std::string&, int) override { return nullptr; }
///     std::uint64_t on_task_begin(void*, const cascade::Task&) noexcept override {
///         ++n;
///         return 0;
///     }
/// };
/// CountTasks counter;
/// cascade::set_observer(&counter);
/// cascade::Threadpool tp(2);  // this pool reports to `counter`
/// ```
class Observer {
  public:
    /// How a task kind's payload splits into the name of its Taskflow and its key.
    using PartsFn = void (*)(const unsigned char* payload, std::string& flow, std::string& key);

    virtual ~Observer() = default;

    /// A pool was created with worker number `index` (called in order, by its constructor).
    /// The value returned identifies that worker in the calls below.
    virtual void* on_worker_created(const std::string& label, int index) = 0;
    /// The calling thread starts serving as `worker`.
    virtual void on_worker_start(void* /*worker*/) noexcept {}
    /// The calling thread stops serving as `worker` (the pool is stopping).
    virtual void on_worker_stop(void* /*worker*/) noexcept {}
    /// Task `t` starts on `worker`; the value returned is passed to on_task_end.
    virtual std::uint64_t on_task_begin(void* /*worker*/, const Task& /*t*/) noexcept { return 0; }
    /// The task that on_task_begin announced on `worker` ended; `begin` is what it returned.
    virtual void on_task_end(void* /*worker*/, std::uint64_t /*begin*/) noexcept {}
    /// `worker` took a task from worker `victim`'s queue.
    virtual void on_steal(void* /*worker*/, int /*victim*/) noexcept {}
    /// A time stamp, as the observer counts time (passed back to on_idle).
    virtual std::int64_t now() noexcept { return 0; }
    /// `worker` was idle since `since` (a value of now()) until now.
    virtual void on_idle(void* /*worker*/, std::int64_t /*since*/) noexcept {}

    /// A Taskflow whose tasks use `vt` was created; `parts` names their flow and key.
    virtual void on_taskflow_created(const TaskVTable* /*vt*/, PartsFn /*parts*/) {}
    /// The Taskflow `owner` is going away: its tasks' names can be read now, not later.
    virtual void on_taskflow_destroyed(const TaskVTable* /*vt*/, const void* /*owner*/) {}
    /// fulfill_promise on the calling thread, for the task described by (vt, payload).
    /// Called only while wants_promises() (a promise is far more frequent than a task).
    virtual void on_promise(const TaskVTable* /*vt*/, const void* /*payload*/,
                            std::size_t /*bytes*/) noexcept {}
    /// Whether on_promise is called (true unless the observer turned it off). Any thread.
    bool wants_promises() const noexcept { return promises_.load(std::memory_order_relaxed); }

  protected:
    /// Turns on_promise calls on or off (e.g. off while not recording edges).
    void set_wants_promises(bool on) noexcept { promises_.store(on, std::memory_order_relaxed); }

  private:
    std::atomic<bool> promises_{true};
};

namespace detail {
inline constinit std::atomic<Observer*> g_observer{nullptr};
inline constinit std::atomic<void (*)()> g_observer_setup{nullptr};
}  // namespace detail

/// The installed observer, or null. Cheap: one relaxed load.
inline Observer* observer() noexcept {
    return detail::g_observer.load(std::memory_order_relaxed);
}
/// Installs `o` (null: none) for the pools and taskflows created from now on.
inline void set_observer(Observer* o) noexcept {
    detail::g_observer.store(o, std::memory_order_seq_cst);
}
/// Registers `f`, called whenever a pool or taskflow is created, before it reads observer():
/// how a layer that installs its observer on demand (the trace reads its environment
/// variables there) gets the chance to do so without the core naming it.
inline void set_observer_setup(void (*f)()) noexcept {
    detail::g_observer_setup.store(f, std::memory_order_seq_cst);
}
/// Runs the function registered with set_observer_setup, if any.
inline void setup_observer() {
    if (auto f = detail::g_observer_setup.load(std::memory_order_acquire)) f();
}

}  // namespace cascade
