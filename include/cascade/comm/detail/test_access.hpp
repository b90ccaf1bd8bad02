// CommTestAccess: what tests and fuzzers do to a Communicator that a program never does:
// inject a fault into progress() or work into raise_fence, move where the next body tag is looked
// for, drop the body receives a forged header announced. Not part of the Communicator's API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>

#include "cascade/comm/communicator.hpp"

namespace cascade::detail {

struct CommTestAccess {
    /// join()'s polls in this process that napped while a large body was in flight and
    /// nothing had moved for a while (instead of yielding the core once more).
    static std::uint64_t in_flight_naps() noexcept;
    /// `f` runs at the start of every progress() on this rank (it may throw, as a failing
    /// MPI call or allocation would). Null: none.
    static void set_progress_fault(Communicator& c, std::function<void()> f) {
        c.progress_fault_ = std::move(f);
    }
    /// `f(dest)` runs at the start of every raise_fence on this rank, before the fence is
    /// checked and raised (what another thread may do in that moment, done here). Null: none.
    static void set_fence_hook(Communicator& c, std::function<void(int)> f) {
        c.fence_hook_ = std::move(f);
    }
    /// The next new_body_tag() starts looking `n` tags further on.
    static void skip_body_tags(Communicator& c, unsigned n) noexcept { c.body_tags_.skip(n); }
    /// Cancels the body receives posted on this rank whose bodies will never be sent (a
    /// fuzzed header announced them), and tells their owners as if the body had arrived, so
    /// what they held for it is let go. Returns how many were dropped.
    static std::size_t drop_body_receives(Communicator& c) { return c.drop_body_receives(); }
    /// Messages the rank expects to run in the current epoch before its first COUNT
    /// (detail::Completion::expected()).
    static std::uint64_t expected_messages(const Communicator& c) noexcept {
        return c.completion_.expected();
    }
};

}  // namespace cascade::detail
