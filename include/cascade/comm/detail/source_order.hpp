// SourceOrder: one rank's messages run in the order it sent them, also under nested progress.
// A handler that calls progress() (blocking_send, a get() on this thread) must not see the
// next message of the rank whose message it runs, or that rank's messages would run out of
// order and its large bodies would be matched to the wrong headers: such messages wait here
// until the handler returns. A big message being received holds its source the same way.
// Also counts the frames run from each source and the progress() calls on the stack.
// Communication thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "cascade/comm/detail/bytes.hpp"

namespace cascade::detail {

/// Per-source order of received messages (see the top of this file).
class SourceOrder {
  public:
    /// Forgets everything; `ranks` sources.
    void reset(int ranks) {
        const auto n = static_cast<std::size_t>(ranks);
        open_.assign(n, 0);
        deferred_.assign(n, {});
        seq_.assign(n, 0);
        handlers_open_ = 0;
        depth_ = 0;
        cur_seq_ = 0;
    }

    /// progress() was entered / left (calls nest).
    void enter_progress() noexcept { ++depth_; }
    void leave_progress() noexcept { --depth_; }
    /// progress() calls on the stack.
    int progress_depth() const noexcept { return depth_; }
    /// Whether a handler of a received message runs now (on any source).
    bool handler_running() const noexcept { return handlers_open_ > 0; }

    /// Whether a message of `source` must wait: one of its handlers runs, or one of its big
    /// messages is being received.
    bool is_open(int source) const noexcept { return open_[index(source)] > 0; }
    /// Keeps `m` (a message of `source` received while it is open) until it may run.
    void defer(int source, Bytes m) { deferred_[index(source)].push_back(std::move(m)); }
    /// A big message of `source` is being received: its later messages wait.
    void hold(int source) noexcept { ++open_[index(source)]; }
    /// The big message `hold(source)` waited for arrived. Returns true when a handler of
    /// `source` still runs: then `m` is kept ahead of what waits for it (it was sent first)
    /// and the caller does not run it.
    bool unhold_or_defer(int source, Bytes& m) {
        const std::size_t s = index(source);
        if (--open_[s] == 0) return false;
        deferred_[s].push_front(std::move(m));
        return true;
    }
    /// Messages of `source` kept meanwhile.
    std::size_t deferred(int source) const noexcept { return deferred_[index(source)].size(); }

    /// Runs `run(data, size)` for one message of `source` (not open), then the messages of
    /// `source` kept while it ran, oldest first (their handlers may nest again and keep more).
    template <class Run>
    void run(int source, const char* data, std::size_t size, Run&& run) {
        const std::size_t s = index(source);
        ++open_[s];
        ++handlers_open_;
        run(data, size);
        --handlers_open_;
        --open_[s];
        while (open_[s] == 0 && !deferred_[s].empty()) {
            Bytes m = std::move(deferred_[s].front());
            deferred_[s].pop_front();
            ++open_[s];
            ++handlers_open_;
            run(m.data(), m.size());
            --handlers_open_;
            --open_[s];
        }
    }

    /// The number of a frame of `source` about to run (0, 1, ... per source); it becomes
    /// current_seq().
    std::uint64_t next_frame(int source) noexcept { return cur_seq_ = seq_[index(source)]++; }
    /// The number of the frame whose handler runs now (or ran last).
    std::uint64_t current_seq() const noexcept { return cur_seq_; }
    /// How many frames of `source` began to run so far.
    std::uint64_t frames_from(int source) const noexcept { return seq_[index(source)]; }

  private:
    static std::size_t index(int source) noexcept { return static_cast<std::size_t>(source); }

    std::vector<int> open_;                    // per source: handlers running, big receives
    std::vector<std::deque<Bytes>> deferred_;  // per source: received while open
    std::vector<std::uint64_t> seq_;           // per source: frames begun
    int handlers_open_ = 0;                    // handlers running, all sources
    int depth_ = 0;                            // progress() calls on the stack
    std::uint64_t cur_seq_ = 0;                // of the frame whose handler runs now
};

}  // namespace cascade::detail
