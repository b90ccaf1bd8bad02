// EventPool: the events of the device runtime's copies and kernels, reused once their last
// reference is gone (no allocation per operation once warm). Runtime thread only.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "cascade/device/device.hpp"

namespace cascade::device::detail {

class EventPool {
  public:
    /// A pending event with one reference; `on_finish(arg, ...)` is called around its end.
    Event* take(void (*on_finish)(void*, bool), void* arg) {
        Event* e = free_;
        if (e) {
            free_ = e->next_free;
        } else {
            all_.push_back(std::make_unique<Event>());
            e = all_.back().get();
        }
        e->state.store(Event::pending, std::memory_order_relaxed);
        e->error = nullptr;
        e->native = nullptr;
        e->t_start = e->t_end = 0;
        e->seconds = 0;
        e->refs = 1;
        e->processed = false;
        e->on_finish = on_finish;
        e->on_finish_arg = arg;
        return e;
    }
    /// Drops a reference; the last one gives the event back.
    void unref(Event* e) noexcept {
        if (--e->refs == 0) {
            e->error = nullptr;
            e->next_free = free_;
            free_ = e;
        }
    }
    /// Events made so far (the pool's size).
    std::size_t made() const noexcept { return all_.size(); }

  private:
    Event* free_ = nullptr;
    std::vector<std::unique_ptr<Event>> all_;
};

}  // namespace cascade::device::detail
