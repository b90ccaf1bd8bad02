// What a Threadpool needs to know about each Taskflow attached to it (join diagnostics).
#pragma once

#include <cstddef>
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

}  // namespace cascade::detail
