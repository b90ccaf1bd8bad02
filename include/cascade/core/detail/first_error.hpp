// The first error of a pool's epoch (a task's or a handler's), kept until join() takes it.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

namespace cascade::detail {

class FirstError {
  public:
    // Keeps `e` unless an error is kept already. Any thread.
    void record(std::exception_ptr e) noexcept {
        {
            std::lock_guard<std::mutex> g(mutex_);
            if (!error_) error_ = std::move(e);
        }
        failed_.store(true);
    }
    // Whether an error was recorded since the last take() (a relaxed read: tasks check it).
    bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }
    // The error kept, or null.
    std::exception_ptr peek() const {
        std::lock_guard<std::mutex> g(mutex_);
        return error_;
    }
    // The error kept (or null), forgotten.
    std::exception_ptr take() {
        std::exception_ptr e;
        {
            std::lock_guard<std::mutex> g(mutex_);
            e = std::exchange(error_, nullptr);
        }
        failed_.store(false);
        return e;
    }

  private:
    std::atomic<bool> failed_{false};
    mutable std::mutex mutex_;
    std::exception_ptr error_;
};

}  // namespace cascade::detail
