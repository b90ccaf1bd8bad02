// BodyTags: the MPI tags of body streams matched by tag (the bodies of broadcasts), one per
// stream in flight from this rank, handed out in turn and held until given back: no two
// streams use one tag at the same time, so a receive posted for one never matches another's
// body. Lock-free, any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

#include "cascade/comm/detail/constants.hpp"

namespace cascade::detail {

class BodyTags {
  public:
    /// The tags: [kFirst, kFirst + kCount) (constants.hpp).
    static constexpr int kFirst = comm::kFirstBodyTag, kCount = comm::kBodyTags;

    /// Whether `tag` is one take() hands out (a tag read from the wire is checked).
    static constexpr bool contains(std::int64_t tag) noexcept {
        return tag >= kFirst && tag < kFirst + kCount;
    }
    /// A free tag, now held; none when all kCount are held.
    std::optional<int> take() noexcept {
        const unsigned start = next_.fetch_add(1, std::memory_order_relaxed);
        for (unsigned i = 0; i < static_cast<unsigned>(kCount); ++i) {
            const unsigned t = (start + i) % kCount;
            const std::uint64_t bit = std::uint64_t(1) << (t % 64);
            if ((held_[t / 64].fetch_or(bit, std::memory_order_acq_rel) & bit) == 0) {
                if (i > 0) next_.fetch_add(i, std::memory_order_relaxed);
                return kFirst + static_cast<int>(t);
            }
        }
        return std::nullopt;
    }
    /// Gives back a tag from take() (anything else: nothing).
    void release(int tag) noexcept {
        if (!contains(tag)) return;
        const unsigned t = static_cast<unsigned>(tag - kFirst);
        held_[t / 64].fetch_and(~(std::uint64_t(1) << (t % 64)), std::memory_order_acq_rel);
    }
    /// The next take() starts looking `n` tags further on (tests of the wrap-around).
    void skip(unsigned n) noexcept { next_.fetch_add(n, std::memory_order_relaxed); }

  private:
    std::atomic<unsigned> next_{0};  // where the next take() starts looking
    std::unique_ptr<std::atomic<std::uint64_t>[]> held_ {
        new std::atomic<std::uint64_t>[(kCount + 63) / 64] {}
    };  // one bit per held tag
};

}  // namespace cascade::detail
