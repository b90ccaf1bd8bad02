// JobState: where this rank stands in the job, as the Communicator's error handling needs
// it: whether join() runs, the counts when the last one returned, whether the pool's error
// of this epoch was told to the other ranks (or came from one of them), whether the last
// join() ended with such an error, and whether the rank left the job unfinished. No MPI.
#pragma once

#include <atomic>
#include <cstdint>

namespace cascade::detail {

class JobState {
  public:
    /// join() runs (from its first poll until it returns). Any thread.
    bool joining() const noexcept { return joining_.load(std::memory_order_relaxed); }
    /// A poll of join() begins.
    void join_polled() noexcept { joining_.store(true, std::memory_order_relaxed); }
    /// join() returns with this rank's counts (queued, processed) then.
    void join_done(std::uint64_t queued, std::uint64_t processed) noexcept {
        joining_.store(false, std::memory_order_relaxed);
        ++joins_done_;
        settled_q_ = queued;
        settled_p_ = processed;
    }
    /// Nothing moved since a join() returned: no join() runs, and the counts are the same.
    bool settled(std::uint64_t queued, std::uint64_t processed) const noexcept {
        return joins_done_ > 0 && !joining_.load() && queued == settled_q_ &&
               processed == settled_p_;
    }

    /// The pool failed in this epoch: true once, when the other ranks are to be told (not
    /// when the error came from one of them).
    bool tell_error() noexcept {
        if (told_) return false;
        told_ = true;
        return !from_peer_;
    }
    /// tell_error() was called in this epoch.
    bool error_handled() const noexcept { return told_; }
    /// Another rank told this one of its error (this epoch's join() throws it).
    void error_from_peer() noexcept { from_peer_ = true; }
    /// The epoch ended: remembers whether its join() ended with an error, and forgets it.
    void epoch_ended() noexcept {
        last_join_failed_ = told_ || from_peer_;
        told_ = false;
        from_peer_ = false;
    }
    /// The last join() ended with an error of a task or handler (here or elsewhere), and
    /// nothing moved since: every rank threw the same error in the same place.
    bool after_job_error(std::uint64_t queued, std::uint64_t processed) const noexcept {
        return last_join_failed_ && settled(queued, processed);
    }

    /// The pool was destroyed by an exception with work this rank never finished a join()
    /// for: the other ranks may wait for it.
    void abandon() noexcept { abandoned_ = true; }
    /// Whether abandon() was called.
    bool abandoned() const noexcept { return abandoned_; }

    /// True the first time only: this rank's events are written once on the way to an abort.
    bool first_trace_write() noexcept {
        const bool first = !trace_written_;
        trace_written_ = true;
        return first;
    }

  private:
    std::atomic<bool> joining_{false};
    std::uint64_t joins_done_ = 0;                 // join()s that completed
    std::uint64_t settled_q_ = 0, settled_p_ = 0;  // counts when the last one completed
    bool told_ = false;                            // this epoch's error told to the others
    bool from_peer_ = false;                       // this epoch's error came from another rank
    bool last_join_failed_ = false;
    bool abandoned_ = false;
    bool trace_written_ = false;
};

}  // namespace cascade::detail
