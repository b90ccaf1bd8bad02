// ReadyQueue: one per worker. Two priority heaps under one spinlock: tasks any worker may
// steal, and tasks bound to this worker. The owner pops the better top of the two; thieves
// only look at the stealable heap. Sizes are mirrored in atomics so idle workers can scan
// queues without taking locks.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "cascade/core/spinlock.hpp"
#include "cascade/core/task.hpp"

namespace cascade {

// A binary max-heap on Task::priority. Unlike std::pop_heap, sifting stops as soon as the
// order holds, so equal priorities (the common case) cost O(1) per push and pop.
class TaskHeap {
public:
    TaskHeap() { v_.reserve(256); }
    bool empty() const noexcept { return v_.empty(); }
    std::size_t size() const noexcept { return v_.size(); }
    const Task& top() const noexcept { return v_.front(); }

    void push(const Task& t) {
        v_.push_back(t);
        std::size_t i = v_.size() - 1;
        if (i == 0 || !(v_[(i - 1) / 2].priority < t.priority)) return;
        while (i > 0) {
            std::size_t parent = (i - 1) / 2;
            if (!(v_[parent].priority < t.priority)) break;
            v_[i] = v_[parent];
            i = parent;
        }
        v_[i] = t;
    }

    void pop(Task& out) {
        out = v_.front();
        const std::size_t n = v_.size() - 1;
        if (n == 0) {
            v_.pop_back();
            return;
        }
        const Task last = v_[n];
        v_.pop_back();
        std::size_t i = 0;
        for (;;) {
            std::size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && v_[child].priority < v_[child + 1].priority) ++child;
            if (!(last.priority < v_[child].priority)) break;
            v_[i] = v_[child];
            i = child;
        }
        v_[i] = last;
    }

private:
    std::vector<Task> v_;
};

class alignas(64) ReadyQueue {
public:
    void push(const Task& t, bool bound) {
        lock_.lock();
        if (bound) {
            bound_.push(t);
            n_bound_.store(static_cast<std::uint32_t>(bound_.size()), std::memory_order_relaxed);
        } else {
            free_.push(t);
            n_free_.store(static_cast<std::uint32_t>(free_.size()), std::memory_order_relaxed);
        }
        lock_.unlock();
    }

    // Owner side: highest priority among bound and stealable tasks.
    bool pop(Task& out) {
        if (n_free_.load(std::memory_order_relaxed) == 0 &&
            n_bound_.load(std::memory_order_relaxed) == 0)
            return false;
        lock_.lock();
        bool ok = true;
        if (!bound_.empty() && (free_.empty() || free_.top().priority < bound_.top().priority)) {
            bound_.pop(out);
            n_bound_.store(static_cast<std::uint32_t>(bound_.size()), std::memory_order_relaxed);
        } else if (!free_.empty()) {
            free_.pop(out);
            n_free_.store(static_cast<std::uint32_t>(free_.size()), std::memory_order_relaxed);
        } else {
            ok = false;
        }
        lock_.unlock();
        return ok;
    }

    // Thief side: never blocks on a busy victim.
    bool steal(Task& out) {
        if (n_free_.load(std::memory_order_relaxed) == 0) return false;
        if (!lock_.try_lock()) return false;
        bool ok = false;
        if (!free_.empty()) {
            free_.pop(out);
            n_free_.store(static_cast<std::uint32_t>(free_.size()), std::memory_order_relaxed);
            ok = true;
        }
        lock_.unlock();
        return ok;
    }

    std::size_t stealable() const noexcept { return n_free_.load(std::memory_order_seq_cst); }
    std::size_t bound() const noexcept { return n_bound_.load(std::memory_order_seq_cst); }
    std::size_t size() const noexcept { return stealable() + bound(); }

private:
    // Lock, sizes and heap headers share one cache line: a push or pop from another core
    // moves this line and the task's own line, nothing more.
    Spinlock lock_;
    std::atomic<std::uint32_t> n_free_{0};
    std::atomic<std::uint32_t> n_bound_{0};
    TaskHeap free_;
    TaskHeap bound_;
};

}  // namespace cascade
