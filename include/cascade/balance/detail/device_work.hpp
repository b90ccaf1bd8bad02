// The device work of the objects living on a rank, as the Balancer counts it: per object, the
// device tasks its handlers submitted that have not finished, and its recent device time per
// task measured here. <cascade/balance/device.hpp> feeds it from device tasks; this layer
// itself knows nothing of devices. Shared (shared_ptr) so that a device task finishing after
// its Balancer is gone updates a table nobody reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "cascade/objects/mobile_ptr.hpp"

namespace cascade::detail {

class DeviceWork {
  public:
    /// One object's device work here.
    struct Entry {
        double seconds = -1;   ///< recent device time per task here, per device (-1: none yet)
        int in_flight = 0;     ///< its tasks submitted and not finished
        bool handled = false;  ///< a handler ran on it here (after device work was counted)
    };

    /// A handler of `key` submitted a device task.
    void submitted(const ObjectKey& key) {
        used_.store(true, std::memory_order_relaxed);
        std::lock_guard<std::mutex> g(m_);
        ++by_object_[key].in_flight;
    }
    /// A task counted by submitted() will not be after all (it could not be watched).
    void withdrawn(const ObjectKey& key) {
        std::lock_guard<std::mutex> g(m_);
        auto it = by_object_.find(key);
        if (it != by_object_.end() && it->second.in_flight > 0) --it->second.in_flight;
    }
    /// That task finished after running `seconds` on a device of which this rank has
    /// `parallel` (its time counts 1 / parallel: those devices share the work).
    void finished(const ObjectKey& key, double seconds, int parallel) {
        const double s = seconds / double(parallel > 0 ? parallel : 1);
        std::lock_guard<std::mutex> g(m_);
        Entry& e = by_object_[key];
        if (e.in_flight > 0) --e.in_flight;
        e.seconds = e.seconds < 0 ? s : 0.75 * e.seconds + 0.25 * s;
    }
    /// A handler ran on `key` here (only once device work is counted at all).
    void handled(const ObjectKey& key) {
        if (!used()) return;
        std::lock_guard<std::mutex> g(m_);
        by_object_[key].handled = true;
    }
    /// Whether any device task was counted on this rank.
    bool used() const noexcept { return used_.load(std::memory_order_relaxed); }
    /// Accelerators of this rank (told to the ranks that ask it for work, and told by them).
    void set_devices(int n) noexcept { devices_.store(n, std::memory_order_relaxed); }
    int devices() const noexcept { return devices_.load(std::memory_order_relaxed); }

    /// Calls f(key, entry) under the lock for the listed keys that have an entry, then drops
    /// entries of objects no longer listed (gone from here) with nothing in flight.
    template <class Keys, class F>
    void visit(const Keys& keys, F&& f, bool prune) {
        std::lock_guard<std::mutex> g(m_);
        for (const auto& k : keys) {
            auto it = by_object_.find(k);
            f(k, it == by_object_.end() ? nullptr : &it->second);
        }
        if (!prune) return;
        std::unordered_map<ObjectKey, Entry> kept;
        for (const auto& k : keys) {
            auto it = by_object_.find(k);
            if (it != by_object_.end()) kept.emplace(k, it->second);
        }
        for (auto& [k, e] : by_object_)
            if (e.in_flight > 0) kept.emplace(k, e);
        by_object_ = std::move(kept);
    }

  private:
    std::mutex m_;
    std::unordered_map<ObjectKey, Entry> by_object_;
    std::atomic<bool> used_{false};
    std::atomic<int> devices_{0};
};

}  // namespace cascade::detail
