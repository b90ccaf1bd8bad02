// MessageCounts: what one Communicator counted of its messages: active messages queued
// (user messages only; any thread), active messages whose handlers ran (communication
// thread), and the MPI messages sent (communication thread). Completion detection compares
// the first two across ranks; progress() reports whether anything moved by them.
#pragma once

#include <atomic>
#include <cstdint>

namespace cascade::detail {

/// The message counters of one Communicator (see the top of this file).
class MessageCounts {
  public:
    /// `n` active messages were queued (any thread).
    void add_queued(std::uint64_t n) noexcept { queued_.fetch_add(n, std::memory_order_release); }
    /// One active message was queued (any thread).
    void queued_one() noexcept { queued_.fetch_add(1, std::memory_order_release); }
    /// Active messages queued so far (any thread).
    std::uint64_t queued() const noexcept { return queued_.load(std::memory_order_acquire); }
    /// The handlers of one active message ran.
    void processed_one() noexcept { ++processed_; }
    /// Active messages whose handlers ran so far.
    std::uint64_t processed() const noexcept { return processed_; }
    /// One MPI message was sent.
    void sent_one() noexcept { ++mpi_sends_; }
    /// MPI messages sent so far.
    std::uint64_t mpi_sends() const noexcept { return mpi_sends_; }
    /// Grows whenever a message ran or an MPI message left (progress() compares two).
    std::uint64_t moved() const noexcept { return mpi_sends_ + processed_; }

  private:
    std::atomic<std::uint64_t> queued_{0};
    std::uint64_t processed_ = 0;
    std::uint64_t mpi_sends_ = 0;
};

}  // namespace cascade::detail
