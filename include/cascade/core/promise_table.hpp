// PromiseTable<K>: remaining-promise counts of tasks that have received some but not all of
// their promises. It is split into many shards, each under its own spinlock, so concurrent
// fulfill_promise calls from different threads rarely touch the same lock (TaskTorrent
// instead forwards every such fulfill to one owner thread). A shard is one cache line: the
// lock and a few inline slots, so a fulfill from another core moves one line; only when a
// shard holds more live entries than fit inline does it spill into an open-addressing table.
// An entry lives only between a task's first promise and its last: memory follows the number
// of partially-satisfied tasks, never the size of the graph. Checked mode also remembers the
// keys that ran, to name a promise that arrives after its task ran; only the latest
// kDonePerShard of each shard (a bounded window), so a long run's memory stays flat. A late
// promise for an older key starts a new entry instead, which join() then reports as a task
// whose promises were never all fulfilled.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "cascade/core/key.hpp"
#include "cascade/core/spinlock.hpp"

namespace cascade {

/// Remaining-promise counts of the partially satisfied tasks of one Taskflow (see the top of
/// this file). Every member is thread-safe.
template <class K>
class PromiseTable {
  public:
    /// Number of shards (each with its own lock).
    static constexpr std::size_t kShards = 1024;
    /// Completed keys remembered per shard in checked mode.
    static constexpr std::size_t kDonePerShard = 256;

    /// An empty table; `track_done` (checked mode) remembers recently completed keys.
    explicit PromiseTable(bool track_done = false)
        : shards_(new Shard[kShards]), cold_(new Cold[kShards]), track_done_(track_done) {}

    /// What fulfill() did.
    enum class Outcome {
        waiting,      ///< The task still misses promises.
        ready,        ///< That was its last promise (or its only one): it may run.
        already_done  ///< Checked mode: the task already ran (a promise too many).
    };

    /// Records one promise for `k`, whose total is `indegree`. Returns ready when this was the
    /// last promise (or the only one), already_done when tracking completed keys and k ran.
    /// `remaining_out`, if given, receives the promises still missing.
    Outcome fulfill(const K& k, int indegree, int* remaining_out = nullptr) {
        const std::size_t h = KeyHash<K>{}(k);
        const std::size_t si = h % kShards;
        Shard& s = shards_[si];
        std::lock_guard<Spinlock> g(s.lock);
        Cold& c = cold_[si];
        if (track_done_ && c.done.count(k)) return Outcome::already_done;
        // Inline slots first, then the spill table.
        if (s.n_inline > 0) {
            for (unsigned i = 0; i < kInline; ++i) {
                Slot& slot = s.slots[i];
                if (slot.remaining > 0 && slot.key == k) {
                    int left = --slot.remaining;
                    if (remaining_out) *remaining_out = left;
                    if (left > 0) return Outcome::waiting;
                    --s.n_inline;
                    return finish(c, k);
                }
            }
        }
        if (c.count > 0) {
            const std::size_t mask = c.slots.size() - 1;
            for (std::size_t i = (h / kShards) & mask;; i = (i + 1) & mask) {
                Slot& slot = c.slots[i];
                if (slot.remaining == 0) break;
                if (slot.key == k) {
                    int left = --slot.remaining;
                    if (remaining_out) *remaining_out = left;
                    if (left > 0) return Outcome::waiting;
                    erase_at(c, i);
                    return finish(c, k);
                }
            }
        }
        // First promise of this task.
        if (indegree <= 1) {
            if (remaining_out) *remaining_out = 0;
            return finish(c, k);
        }
        if (remaining_out) *remaining_out = indegree - 1;
        if (s.n_inline < kInline) {
            for (unsigned i = 0; i < kInline; ++i) {
                if (s.slots[i].remaining == 0) {
                    s.slots[i] = Slot{k, indegree - 1};
                    ++s.n_inline;
                    return Outcome::waiting;
                }
            }
        }
        spill(c, h, Slot{k, indegree - 1});
        return Outcome::waiting;
    }

    /// Number of partially-fulfilled tasks; appends up to `max_keys` of them to `keys`, with
    /// the number of promises they still miss.
    std::size_t pending(std::size_t max_keys, std::vector<std::pair<K, int>>& keys) const {
        std::size_t total = 0;
        for (std::size_t si = 0; si < kShards; ++si) {
            Shard& s = shards_[si];
            std::lock_guard<Spinlock> g(s.lock);
            const Cold& c = cold_[si];
            total += s.n_inline + c.count;
            for (const Slot& slot : s.slots)
                if (slot.remaining > 0 && keys.size() < max_keys)
                    keys.emplace_back(slot.key, slot.remaining);
            for (const Slot& slot : c.slots)
                if (slot.remaining > 0 && keys.size() < max_keys)
                    keys.emplace_back(slot.key, slot.remaining);
        }
        return total;
    }

    /// Completed keys remembered now (checked mode), at most kShards * kDonePerShard.
    std::size_t completed_remembered() const {
        std::size_t n = 0;
        for (std::size_t si = 0; si < kShards; ++si) {
            std::lock_guard<Spinlock> g(shards_[si].lock);
            n += cold_[si].done.size();
        }
        return n;
    }

  private:
    struct Slot {
        K key{};
        int remaining = 0;  // 0: free
    };
    static constexpr std::size_t kInline = sizeof(Slot) <= 56 ? (64 - 8) / sizeof(Slot) : 1;
    struct alignas(64) Shard {
        Spinlock lock;
        unsigned n_inline = 0;
        Slot slots[kInline];
    };
    struct Cold {  // rarely touched: spill table, completed keys (checked mode)
        std::vector<Slot> slots;
        std::size_t count = 0;
        std::unordered_set<K, KeyHash<K>> done;
        std::vector<K> done_order;  // the keys in `done`, a ring: oldest at done_next
        std::size_t done_next = 0;
    };

    Outcome finish(Cold& c, const K& k) {
        if (track_done_ && c.done.insert(k).second) {
            if (c.done_order.size() < kDonePerShard) {
                c.done_order.push_back(k);
            } else {  // forget the oldest
                c.done.erase(c.done_order[c.done_next]);
                c.done_order[c.done_next] = k;
                c.done_next = (c.done_next + 1) % kDonePerShard;
            }
        }
        return Outcome::ready;
    }

    static void spill(Cold& c, std::size_t h, const Slot& slot) {
        if ((c.count + 1) * 4 > c.slots.size() * 3) grow(c);
        const std::size_t mask = c.slots.size() - 1;
        std::size_t i = (h / kShards) & mask;
        while (c.slots[i].remaining != 0)
            i = (i + 1) & mask;
        c.slots[i] = slot;
        ++c.count;
    }

    static void grow(Cold& c) {
        std::vector<Slot> old = std::move(c.slots);
        c.slots.assign(old.empty() ? 16 : old.size() * 2, Slot{});
        const std::size_t mask = c.slots.size() - 1;
        for (Slot& o : old) {
            if (o.remaining == 0) continue;
            std::size_t j = (KeyHash<K>{}(o.key) / kShards) & mask;
            while (c.slots[j].remaining != 0)
                j = (j + 1) & mask;
            c.slots[j] = o;
        }
    }

    // Backward-shift deletion keeps probe sequences intact without tombstones.
    static void erase_at(Cold& c, std::size_t i) {
        const std::size_t mask = c.slots.size() - 1;
        std::size_t j = i;
        for (;;) {
            j = (j + 1) & mask;
            if (c.slots[j].remaining == 0) break;
            std::size_t home = (KeyHash<K>{}(c.slots[j].key) / kShards) & mask;
            bool in_between = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
            if (!in_between) {
                c.slots[i] = c.slots[j];
                i = j;
            }
        }
        c.slots[i] = Slot{};
        --c.count;
    }

    std::unique_ptr<Shard[]> shards_;
    std::unique_ptr<Cold[]> cold_;
    bool track_done_;
};

}  // namespace cascade
