// PromiseTable<K>: remaining-promise counts of tasks that have received some but not all of
// their promises. It is split into many shards, each a small open-addressing hash table under
// its own spinlock, so concurrent fulfill_promise calls from different threads rarely touch
// the same lock (TaskTorrent instead forwards every such fulfill to one owner thread).
// An entry lives only between a task's first promise and its last: memory follows the number
// of partially-satisfied tasks, never the size of the graph.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "cascade/core/key.hpp"
#include "cascade/core/spinlock.hpp"

namespace cascade {

template <class K>
class PromiseTable {
public:
    static constexpr std::size_t kShards = 256;

    explicit PromiseTable(bool track_done = false)
        : shards_(new Shard[kShards]), track_done_(track_done) {}

    enum class Outcome { waiting, ready, already_done };

    // Records one promise for `k`, whose total is `indegree` (called only when > 1 or when
    // tracking completed keys). Returns ready when this was the last promise.
    Outcome fulfill(const K& k, int indegree, int* remaining_out = nullptr) {
        const std::size_t h = KeyHash<K>{}(k);
        Shard& s = shards_[h % kShards];
        std::lock_guard<Spinlock> g(s.lock);
        if (track_done_ && s.done.count(k)) return Outcome::already_done;
        std::size_t mask = s.slots.size() - 1;
        std::size_t i = s.slots.empty() ? 0 : (h / kShards) & mask;
        if (!s.slots.empty()) {
            for (;; i = (i + 1) & mask) {
                Slot& slot = s.slots[i];
                if (!slot.used) break;
                if (slot.key == k) {
                    int left = --slot.remaining;
                    if (remaining_out) *remaining_out = left;
                    if (left > 0) return Outcome::waiting;
                    erase_at(s, i);
                    if (track_done_) s.done.insert(k);
                    return Outcome::ready;
                }
            }
        }
        // First promise of this task.
        if (indegree <= 1) {
            if (remaining_out) *remaining_out = 0;
            if (track_done_) s.done.insert(k);
            return Outcome::ready;
        }
        if ((s.count + 1) * 4 > s.slots.size() * 3) {
            grow(s);
            mask = s.slots.size() - 1;
            i = (h / kShards) & mask;
            while (s.slots[i].used) i = (i + 1) & mask;
        }
        s.slots[i] = Slot{k, indegree - 1, true};
        ++s.count;
        if (remaining_out) *remaining_out = indegree - 1;
        return Outcome::waiting;
    }

    // Number of partially-fulfilled tasks; appends up to `max_names` of their keys.
    std::size_t pending(std::size_t max_keys, std::vector<std::pair<K, int>>& keys) const {
        std::size_t total = 0;
        for (std::size_t si = 0; si < kShards; ++si) {
            Shard& s = shards_[si];
            std::lock_guard<Spinlock> g(s.lock);
            total += s.count;
            for (const Slot& slot : s.slots)
                if (slot.used && keys.size() < max_keys) keys.emplace_back(slot.key, slot.remaining);
        }
        return total;
    }

private:
    struct Slot {
        K key{};
        int remaining = 0;
        bool used = false;
    };
    struct alignas(64) Shard {
        Spinlock lock;
        std::vector<Slot> slots;
        std::size_t count = 0;
        std::unordered_set<K, KeyHash<K>> done;  // checked mode only
    };

    static void grow(Shard& s) {
        std::vector<Slot> old = std::move(s.slots);
        s.slots.assign(old.empty() ? 16 : old.size() * 2, Slot{});
        const std::size_t mask = s.slots.size() - 1;
        for (Slot& o : old) {
            if (!o.used) continue;
            std::size_t j = (KeyHash<K>{}(o.key) / kShards) & mask;
            while (s.slots[j].used) j = (j + 1) & mask;
            s.slots[j] = o;
        }
    }

    // Backward-shift deletion keeps probe sequences intact without tombstones.
    static void erase_at(Shard& s, std::size_t i) {
        const std::size_t mask = s.slots.size() - 1;
        std::size_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            if (!s.slots[j].used) break;
            std::size_t home = (KeyHash<K>{}(s.slots[j].key) / kShards) & mask;
            // Move j into the hole at i if its home is not in (i, j] cyclically.
            bool in_between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
            if (!in_between) {
                s.slots[i] = s.slots[j];
                i = j;
            }
        }
        s.slots[i] = Slot{};
        --s.count;
    }

    std::unique_ptr<Shard[]> shards_;
    bool track_done_;
};

}  // namespace cascade
