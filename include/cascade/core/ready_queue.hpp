// ReadyQueue: one per worker. Two task queues under one spinlock: tasks any worker may
// steal, and tasks bound to this worker. The owner pops the better top of the two; thieves
// only look at the stealable heap. Sizes are mirrored in atomics so idle workers can scan
// queues without taking locks. Stealable tasks from threads outside the pool arrive through
// an Inbox instead of the lock. Whoever takes the lock next (owner or thief) takes the
// oldest of them directly when nothing else is queued, else first moves a batch of them
// into the stealable queue, so that priorities order them with the rest.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "cascade/core/detail/inbox.hpp"
#include "cascade/core/spinlock.hpp"
#include "cascade/core/task.hpp"

namespace cascade {

/// A binary max-heap on Task::priority. Unlike std::pop_heap, sifting stops as soon as the
/// order holds, so equal priorities (the common case) cost O(1) per push and pop. Not
/// thread-safe (ReadyQueue locks around it).
class TaskHeap {
  public:
    /// An empty heap with room for 256 tasks.
    TaskHeap() { v_.reserve(256); }
    /// True when no task is queued.
    bool empty() const noexcept { return v_.empty(); }
    /// The number of queued tasks.
    std::size_t size() const noexcept { return v_.size(); }
    /// The task of highest priority (the heap must not be empty).
    const Task& top() const noexcept { return v_.front(); }

    /// Adds a task.
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

    /// Removes the task of highest priority into `out` (the heap must not be empty).
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

/// A FIFO ring of tasks (grows geometrically, never shrinks). Not thread-safe.
class TaskFifo {
  public:
    /// An empty ring with room for 256 tasks.
    TaskFifo() : v_(256) {}
    /// True when no task is queued.
    bool empty() const noexcept { return head_ == tail_; }
    /// The number of queued tasks.
    std::size_t size() const noexcept { return tail_ - head_; }
    /// The oldest task (the ring must not be empty).
    const Task& front() const noexcept { return v_[head_ & (v_.size() - 1)]; }
    /// Appends a task (grows the ring when full).
    void push(const Task& t) {
        if (size() == v_.size()) grow();
        v_[tail_++ & (v_.size() - 1)] = t;
    }
    /// Removes the oldest task into `out` (the ring must not be empty).
    void pop(Task& out) { out = v_[head_++ & (v_.size() - 1)]; }

  private:
    void grow() {
        std::vector<Task> bigger(v_.size() * 2);
        for (std::size_t i = head_; i != tail_; ++i)
            bigger[i - head_] = v_[i & (v_.size() - 1)];
        tail_ -= head_;
        head_ = 0;
        v_ = std::move(bigger);
    }
    std::vector<Task> v_;
    std::size_t head_ = 0, tail_ = 0;
};

/// Ready tasks of one kind (stealable or bound): priority-0 tasks (the default) in a FIFO, so
/// a graph without priorities runs breadth-first in the order it became ready; others in a
/// heap. The best is the heap top if its priority is above 0, else the FIFO front. Not
/// thread-safe.
class TaskQueue {
  public:
    /// True when no task is queued.
    bool empty() const noexcept { return fifo_.empty() && heap_.empty(); }
    /// The number of queued tasks.
    std::size_t size() const noexcept { return fifo_.size() + heap_.size(); }
    /// The priority of the task pop() would return (0 when the FIFO's front wins).
    double top_priority() const noexcept {
        if (!heap_.empty() && (fifo_.empty() || heap_.top().priority > 0))
            return heap_.top().priority;
        return 0.0;
    }
    /// Adds a task: to the FIFO if its priority is 0, else to the heap.
    void push(const Task& t) {
        if (t.priority == 0.0)
            fifo_.push(t);
        else
            heap_.push(t);
    }
    /// Removes the best task into `out` (see above; the queue must not be empty).
    void pop(Task& out) {
        if (!heap_.empty() && (fifo_.empty() || heap_.top().priority > 0))
            heap_.pop(out);
        else
            fifo_.pop(out);
    }

  private:
    TaskFifo fifo_;
    TaskHeap heap_;
};

/// One worker's ready tasks (see the top of this file). Every member is thread-safe.
class alignas(64) ReadyQueue {
  public:
    /// Queues a task from a pool thread: `bound` tasks run only on this queue's worker,
    /// others may be stolen.
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

    /// From a thread outside the pool that holds Inbox lane `lane`: a stealable task (of
    /// priority 0, which the owner may take before tasks queued later elsewhere). Returns
    /// true when the lane's backlog is high (Inbox::Push::busy): the caller should wait.
    bool push_foreign(int lane, const Task& t) {
        const detail::Inbox::Push r = inbox_.push(lane, t);
        if (r == detail::Inbox::Push::queued) [[likely]]
            return false;
        if (r == detail::Inbox::Push::busy) return true;
        lock_.lock();  // no memory for the lane: the locked path
        free_.push(t);
        n_free_.store(static_cast<std::uint32_t>(free_.size()), std::memory_order_relaxed);
        lock_.unlock();
        return false;
    }
    /// The inbox, for a thread outside the pool that waits for its lane's backlog to fall.
    detail::Inbox& inbox() noexcept { return inbox_; }

    /// Owner side: takes the task of highest priority among bound and stealable tasks into
    /// `out`; false if there was none.
    bool pop(Task& out) {
        const bool inbox = inbox_.pending();
        if (!inbox && n_free_.load(std::memory_order_relaxed) == 0 &&
            n_bound_.load(std::memory_order_relaxed) == 0)
            return false;
        lock_.lock();
        if (inbox && take_from_inbox(out)) {
            lock_.unlock();
            return true;
        }
        bool ok = true;
        if (!bound_.empty() && (free_.empty() || free_.top_priority() < bound_.top_priority())) {
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

    /// Thief side: takes a stealable task into `out`; false if there was none or the queue
    /// was busy (never blocks on a busy victim).
    bool steal(Task& out) {
        const bool inbox = inbox_.pending();
        if (!inbox && n_free_.load(std::memory_order_relaxed) == 0) return false;
        if (!lock_.try_lock()) return false;
        bool ok = inbox && take_from_inbox(out);
        if (!ok && !free_.empty()) {
            free_.pop(out);
            n_free_.store(static_cast<std::uint32_t>(free_.size()), std::memory_order_relaxed);
            ok = true;
        }
        lock_.unlock();
        return ok;
    }

    /// Tasks other workers may steal (without the lock: a snapshot).
    std::size_t stealable() const noexcept {
        return n_free_.load(std::memory_order_seq_cst) + inbox_.size();
    }
    /// Tasks bound to this worker (a snapshot).
    std::size_t bound() const noexcept { return n_bound_.load(std::memory_order_seq_cst); }
    /// All queued tasks (a snapshot).
    std::size_t size() const noexcept { return stealable() + bound(); }
    /// Bytes of the inbox's emptied segments kept for reuse (a snapshot; see inbox.hpp).
    std::size_t inbox_kept_bytes() const noexcept { return inbox_.kept_bytes(); }

  private:
    // Under the lock, with tasks in the inbox: when nothing else is queued, takes the oldest
    // inbox task straight into `out` (returns true); otherwise moves a batch of them into
    // the stealable queue, where their priorities count, and returns false.
    bool take_from_inbox(Task& out) {
        static constexpr std::size_t kBatch = 32;
        if (free_.empty() && bound_.empty())
            return inbox_.drain([&out](const Task& t) { out = t; }, 1) == 1;
        if (inbox_.drain([this](const Task& t) { free_.push(t); }, kBatch) > 0)
            n_free_.store(static_cast<std::uint32_t>(free_.size()), std::memory_order_relaxed);
        return false;
    }

    Spinlock lock_;
    std::atomic<std::uint32_t> n_free_{0};
    std::atomic<std::uint32_t> n_bound_{0};
    TaskQueue free_;
    TaskQueue bound_;
    detail::Inbox inbox_;
};

}  // namespace cascade
