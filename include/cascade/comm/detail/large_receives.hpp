// LargeReceives: the receives of a Communicator that are not posted ahead of time. Bodies of
// large active messages (and bodies attached to ordinary ones) are received straight into
// where their handler wants them, in pieces of at most the sender's chunk; big messages of
// frames (bigger than a pre-posted slot, announced by a frame) into a buffer of their size.
// Each is tested without blocking, in the order it was posted. Communication thread only.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "cascade/comm/detail/bytes.hpp"

namespace cascade {
class ActiveMsgBase;
}

namespace cascade::detail {

/// A body being received for the header of an active message.
struct PendingRecv {
    ActiveMsgBase* am;              ///< The message whose on_body_arrived runs on arrival.
    int source;                     ///< Its sender.
    std::vector<MPI_Request> reqs;  ///< One per piece.
    std::vector<char> args;         ///< The header's arguments.
    std::uint64_t seq = 0;          ///< The header frame's number (the trace).
    std::size_t bytes = 0;          ///< The body's size.
    std::int64_t t0 = 0;            ///< When it was posted (the trace).
    bool counted = true;            ///< A large AM (counts as processed), not an attached body.
};

/// A big message of frames being received (one per source at most).
struct BigRecv {
    int source;       ///< Its sender.
    Bytes buf;        ///< Of the announced size.
    MPI_Request req;  ///< Its receive.
};

/// The bodies and big messages being received (see the top of this file).
class LargeReceives {
  public:
    /// Posts the receives of `r`'s body (r.bytes into `dest`, pieces of `chunk` bytes) from
    /// r.source on `tag`, and keeps `r` until they complete. Returns the kept one.
    PendingRecv& post_body(MPI_Comm comm, PendingRecv r, void* dest, std::size_t chunk, int tag);
    /// The body posted last.
    PendingRecv& last_body() noexcept { return bodies_.back(); }
    /// Posts the receive of a big message of buf.size() bytes from `source` on `tag`.
    void post_big(MPI_Comm comm, int source, Bytes buf, int tag);

    /// Tests the big messages, oldest first; each that arrived is taken out, then
    /// `arrived(BigRecv& b, int count)` runs (count: the bytes received). Returns whether any
    /// arrived. `arrived` may post and test more (nested progress).
    template <class Arrived>
    bool test_big(Arrived&& arrived) {
        bool any = false;
        for (std::size_t i = 0; i < big_.size();) {
            int done = 0;
            MPI_Status st;
            if (const int rc = MPI_Test(&big_[i].req, &done, &st); rc != MPI_SUCCESS) [[unlikely]]
                failed(rc, "MPI_Test");
            if (!done) {
                ++i;
                continue;
            }
            BigRecv b = std::move(big_[i]);
            big_.erase(big_.begin() + static_cast<std::ptrdiff_t>(i));
            int count = 0;
            MPI_Get_count(&st, MPI_BYTE, &count);
            any = true;
            arrived(b, count);
        }
        return any;
    }

    /// Tests the bodies, oldest first; each whose pieces all arrived is taken out, then
    /// `arrived(PendingRecv& r, std::size_t got)` runs (got: the bytes received). Returns
    /// whether any arrived. `arrived` may post and test more (nested progress).
    template <class Arrived>
    bool test_bodies(Arrived&& arrived) {
        bool any = false;
        for (std::size_t i = 0; i < bodies_.size();) {
            PendingRecv& r = bodies_[i];
            int done = 1;
            std::size_t got = 0;
            if (!r.reqs.empty()) {
                statuses_.resize(r.reqs.size());
                if (const int rc = MPI_Testall(static_cast<int>(r.reqs.size()), r.reqs.data(),
                                               &done, statuses_.data());
                    rc != MPI_SUCCESS) [[unlikely]]
                    failed(rc, "MPI_Testall");
                for (std::size_t k = 0; done && k < r.reqs.size(); ++k) {
                    int n = 0;
                    MPI_Get_count(&statuses_[k], MPI_BYTE, &n);
                    got += static_cast<std::size_t>(n);
                }
            }
            if (!done) {
                ++i;
                continue;
            }
            PendingRecv finished = std::move(r);
            bodies_.erase(bodies_.begin() + static_cast<std::ptrdiff_t>(i));
            any = true;
            arrived(finished, got);
        }
        return any;
    }

    /// Cancels the receives of attached bodies (not counted ones) and takes them out, then
    /// `dropped(PendingRecv& r)` runs for each. Returns how many.
    template <class Dropped>
    std::size_t drop_attached(Dropped&& dropped) {
        std::size_t n = 0;
        for (std::size_t i = 0; i < bodies_.size();) {
            PendingRecv& r = bodies_[i];
            if (r.counted) {
                ++i;
                continue;
            }
            for (auto& q : r.reqs) {
                MPI_Cancel(&q);
                MPI_Request_free(&q);
            }
            PendingRecv dead = std::move(r);
            bodies_.erase(bodies_.begin() + static_cast<std::ptrdiff_t>(i));
            dropped(dead);
            ++n;
        }
        return n;
    }

    /// Cancels and frees every receive (at the end: nothing runs for them).
    void cancel_all() noexcept;
    /// Whether nothing is being received.
    bool empty() const noexcept { return bodies_.empty() && big_.empty(); }
    /// Bodies being received.
    std::size_t bodies() const noexcept { return bodies_.size(); }
    /// Big messages being received.
    std::size_t big_messages() const noexcept { return big_.size(); }

  private:
    [[noreturn, gnu::cold]] static void failed(int rc, const char* what);

    std::deque<PendingRecv> bodies_;
    std::vector<BigRecv> big_;
    std::vector<MPI_Status> statuses_;  // scratch for MPI_Testall
};

}  // namespace cascade::detail
