// What a Threadpool needs to know about each Taskflow attached to it (join diagnostics), and
// the list of them it keeps.
#pragma once

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

namespace cascade::detail {

class TaskflowBase {
  public:
    virtual ~TaskflowBase() = default;
    // Number of tasks with at least one but not all promises fulfilled; fills `names`
    // with up to `max_names` of them.
    virtual std::size_t pending(std::size_t max_names, std::vector<std::string>& names) const = 0;
};

// The taskflows attached to one pool (they attach and detach themselves). Thread-safe.
class TaskflowList {
  public:
    void add(TaskflowBase* tf) {
        std::lock_guard<std::mutex> g(mutex_);
        list_.push_back(tf);
    }
    void remove(TaskflowBase* tf) {
        std::lock_guard<std::mutex> g(mutex_);
        std::erase(list_, tf);
    }
    // Tasks waiting for promises in all of them; `names` gets the first ten.
    std::size_t pending(std::vector<std::string>& names) const {
        constexpr std::size_t kNames = 10;
        std::size_t total = 0;
        std::lock_guard<std::mutex> g(mutex_);
        for (const TaskflowBase* tf : list_)
            total += tf->pending(kNames - std::min(kNames, names.size()), names);
        return total;
    }

  private:
    mutable std::mutex mutex_;
    std::vector<TaskflowBase*> list_;
};

}  // namespace cascade::detail
