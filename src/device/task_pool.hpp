// TaskStatePool: the device runtime's task states, reused. States come back from any thread
// onto a lock-free stack; a thread taking one takes the whole stack at once into a chain of
// its own (an exchange: no ABA) and hands states out from there. New states (the pool grows to
// the most tasks alive at once) are kept until the pool goes, under a mutex.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cascade/device/detail/task_state.hpp"

namespace cascade::device::detail {

class Runtime;

class TaskStatePool {
  public:
    /// `id`: unique among pools made by the process (names the threads' chains); `rt`: the
    /// runtime the states belong to.
    TaskStatePool(std::uint64_t id, Runtime* rt) : id_(id), rt_(rt) {}
    TaskStatePool(const TaskStatePool&) = delete;
    TaskStatePool& operator=(const TaskStatePool&) = delete;

    /// A reset state with one reference.
    TaskState* take();
    /// Gives back a state whose last reference is gone (any thread).
    void give(TaskState* t) noexcept;
    /// States made so far.
    std::size_t made() const;

  private:
    const std::uint64_t id_;
    Runtime* const rt_;
    std::atomic<TaskState*> returned_{nullptr};
    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<TaskState>> all_;
};

}  // namespace cascade::device::detail
