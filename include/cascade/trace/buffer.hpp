// trace::Buffer: the events of one thread (a worker of a pool, or a thread outside pools
// such as the one that drives MPI), in a fixed array allocated once. Only its thread writes
// it; when full, further events are dropped and counted (reported when the trace is
// written). Events are published with a release store of the count, so another thread may
// read (and name) the events below count() while the owner goes on recording.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "cascade/core/settings.hpp"
#include "cascade/trace/event.hpp"

namespace cascade::trace {

/// The events of one thread (see the top of this file). Written only by its thread; count(),
/// operator[] below count(), id() and dropped() may be read by others.
class Buffer {
  public:
    /// At most 2^28 events (32 GiB) per thread: the bound of CASCADE_TRACE_EVENTS.
    static constexpr std::size_t kMaxEventsPerThread = settings::kTraceEventsMax;
    /// A buffer of `capacity` events for the thread numbered `id`, named `label` in the
    /// trace. Allocates and touches the whole array now (huge pages where the system offers
    /// them), so that recording does not page-fault: a first touch costs more than the event.
    Buffer(std::uint32_t id, std::string label, std::size_t capacity);
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;

    /// A fresh event of kind k at the end of the buffer (its fields reset, context set), or
    /// null when the buffer is full (the event is counted as dropped). Publish it with
    /// commit().
    Event* reserve(Kind k) noexcept {
        const std::size_t i = count_.load(std::memory_order_relaxed);
        if (i == capacity_) [[unlikely]] {
            ++dropped_;
            return nullptr;
        }
        Event* e = &events_[i];
        e->t0 = e->t1 = 0;
        e->a = e->b = 0;
        e->c = context;
        e->vt = nullptr;
        e->peer = -1;
        e->am = e->name = e->flow = e->key = 0;
        e->kind = k;
        e->flags = 0;
        return e;
    }
    /// Publishes the event reserve() returned last; returns its index.
    std::uint64_t commit() noexcept {
        const std::size_t i = count_.load(std::memory_order_relaxed);
        count_.store(i + 1, std::memory_order_release);
        return i;
    }

    /// A task starts on this thread: records its identity and makes it the context of what
    /// the task does (sends, fulfilled promises). Returns the previous context for end_task.
    std::uint64_t begin_task(const Task& t) noexcept {
        const std::uint64_t outer = context;
        if (Event* e = reserve(Kind::task)) {
            e->vt = t.vt;
            std::memcpy(e->payload, t.payload, sizeof e->payload);
            e->t0 = stamp();
            context = commit();
        } else {
            context = kNone;
        }
        return outer;
    }
    /// The task begin_task started ended: stamps its end and restores the context `outer`
    /// that begin_task returned.
    void end_task(std::uint64_t outer) noexcept {
        if (context != kNone) events_[context].t1 = stamp();
        context = outer;
    }
    /// Records a slice [t0, now] of kind k without identity (idle, progress).
    void slice(Kind k, std::int64_t t0) noexcept {
        if (Event* e = reserve(k)) {
            e->t0 = t0;
            e->t1 = stamp();
            commit();
        }
    }

    /// Events published so far (acquire: events below it may be read from any thread).
    std::size_t count() const noexcept { return count_.load(std::memory_order_acquire); }
    /// The most events this buffer holds.
    std::size_t capacity() const noexcept { return capacity_; }
    /// Events lost because the buffer was full (read by its thread or after it stopped).
    std::uint64_t dropped() const noexcept { return dropped_; }
    /// Event `i` (below count() from other threads).
    Event& operator[](std::size_t i) noexcept { return events_[i]; }
    /// Event `i` (below count() from other threads).
    const Event& operator[](std::size_t i) const noexcept { return events_[i]; }
    /// The thread's number in the trace.
    std::uint32_t id() const noexcept { return id_; }
    /// The thread's name in the trace (e.g. the pool's name and worker index).
    const std::string& label() const noexcept { return label_; }
    /// Renames the thread in the trace (not synchronized with readers of label()).
    void set_label(std::string s) { label_ = std::move(s); }
    /// This thread drove MPI (shown in the trace's thread name).
    bool progress_thread = false;

    /// Index of the task or handler event running on this thread now (kNone: none).
    std::uint64_t context = kNone;

  private:
    struct Free {
        void operator()(Event* p) const noexcept;
    };
    std::unique_ptr<Event[], Free> events_;
    std::size_t capacity_;
    std::atomic<std::size_t> count_{0};
    std::uint64_t dropped_ = 0;
    std::uint32_t id_;
    std::string label_;
};

}  // namespace cascade::trace
