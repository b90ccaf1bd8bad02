// SendSlots: the MPI sends of one Communicator in flight. Each send (a buffer of frames, a
// large body, a control message) has a slot; the requests of all of them are in one array
// that one MPI_Testsome tests, whatever the number in flight. Communication thread only.
#pragma once

#include <mpi.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <vector>

#include "cascade/comm/detail/bytes.hpp"
#include "cascade/comm/detail/outbox.hpp"

namespace cascade::detail {

/// The requests of one send: two in place (a message of frames and the announce of a big
/// one), more on the heap (the pieces of a large body), so a send of frames allocates nothing.
class SendRequests {
  public:
    void push_back(MPI_Request r) {
        if (n_ < kInPlace)
            in_place_[n_] = r;
        else
            more_.push_back(r);
        ++n_;
    }
    std::size_t size() const noexcept { return n_; }
    MPI_Request operator[](std::size_t i) const noexcept {
        return i < kInPlace ? in_place_[i] : more_[i - kInPlace];
    }
    void clear() noexcept {
        n_ = 0;
        more_.clear();
    }

  private:
    static constexpr std::size_t kInPlace = 2;
    MPI_Request in_place_[kInPlace] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    std::vector<MPI_Request> more_;
    std::size_t n_ = 0;
};

/// One send handed to MPI: its buffer (or body) and its requests until they complete.
struct PendingSend {
    Bytes buf;          ///< Frames (or a control message) MPI sends from.
    SendRequests reqs;  ///< Its requests, until SendSlots::track takes them.
    /// Frames announcing big messages: MPI sends from them, so they never move (a list also
    /// makes and moves an empty PendingSend without allocating, unlike a deque).
    std::list<std::array<std::uint64_t, 3>> announce;
    std::unique_ptr<LargeSend> large;  ///< A large body: on_sent to run on completion.
    int dest = -1;                     ///< Destination rank (-1: a control message).
    std::size_t bytes = 0;             ///< Frame bytes (back-pressure).
    std::uint64_t serial = 0;          ///< Frame messages, in flush order.
    std::size_t outstanding = 0;       ///< Its requests not yet complete.
    bool live = false;                 ///< A slot in use.
    std::int64_t t0 = 0;               ///< When a large body was posted (the trace).

    /// Empty again, for the next send in its slot.
    void reset() {
        if (buf.capacity()) Bytes().swap(buf);
        reqs.clear();
        announce.clear();
        large.reset();
        dest = -1;
        bytes = 0;
        serial = 0;
        outstanding = 0;
        live = false;
        t0 = 0;
    }
};

/// The sends in flight (see the top of this file). A send is built in its slot (open, fill
/// it and post its requests into PendingSend::reqs, track), and finished there (pop_done,
/// then release): it is never moved.
class SendSlots {
  public:
    /// A free slot for a new send, empty; fill it (at), then track it.
    std::uint32_t open() {
        if (!free_.empty()) {
            const std::uint32_t slot = free_.back();
            free_.pop_back();
            return slot;
        }
        sends_.emplace_back();
        return static_cast<std::uint32_t>(sends_.size() - 1);
    }
    /// The send in slot `slot` (its address stays while slots are opened).
    PendingSend& at(std::uint32_t slot) noexcept { return sends_[slot]; }
    /// Takes the requests of the send in `slot` (PendingSend::reqs); a send without requests
    /// is done at the next test().
    void track(std::uint32_t slot) {
        PendingSend& ps = sends_[slot];
        ps.outstanding = ps.reqs.size();
        ps.live = true;
        for (std::size_t k = 0; k < ps.reqs.size(); ++k) {
            reqs_.push_back(ps.reqs[k]);
            req_slot_.push_back(slot);
        }
        ps.reqs.clear();
        if (ps.outstanding == 0) done_.push_back(slot);
        ++live_;
    }
    /// Tests the requests in flight (one MPI_Testsome); the sends whose requests all
    /// completed are then taken with pop_done(). Throws when MPI fails.
    void test();
    /// A send whose requests all completed, in its slot `slot` (null when none is left):
    /// no longer in flight; release(slot) once it is finished with. Of the sends tracked
    /// meanwhile (by what finishing it runs), one without requests is given too; the others'
    /// requests are tested at the next test().
    PendingSend* pop_done(std::uint32_t& slot) {
        if (done_.empty()) return nullptr;
        slot = done_.back();
        done_.pop_back();
        PendingSend& ps = sends_[slot];
        ps.live = false;
        --live_;
        return &ps;
    }
    /// Frees slot `slot` (given by pop_done) for another send.
    void release(std::uint32_t slot) {
        sends_[slot].reset();
        free_.push_back(slot);
    }
    /// Whether pop_done() has a send to give.
    bool any_done() const noexcept { return !done_.empty(); }
    /// Sends in flight (tracked and not yet popped).
    std::size_t live() const noexcept { return live_; }
    /// Whether a message of frames flushed before `serial` (PendingSend::serial) is in flight.
    bool frames_in_flight_before(std::uint64_t serial) const noexcept {
        for (const PendingSend& s : sends_)
            if (s.live && !s.large && s.serial < serial) return true;
        return false;
    }
    /// Every request not yet completed (and completed ones as MPI_REQUEST_NULL), for the
    /// Communicator's destructor to wait for.
    std::vector<MPI_Request>& requests() noexcept { return reqs_; }

  private:
    std::deque<PendingSend> sends_;        // slots (a deque: their addresses stay)
    std::vector<std::uint32_t> free_;      // free slots
    std::size_t live_ = 0;                 // slots in use
    std::vector<MPI_Request> reqs_;        // requests of every slot, tested together
    std::vector<std::uint32_t> req_slot_;  // the slot of each request
    std::size_t null_reqs_ = 0;            // completed entries of reqs_ not yet compacted
    std::vector<int> testsome_idx_;        // scratch for MPI_Testsome
    std::vector<std::uint32_t> done_;      // slots whose requests all completed
};

}  // namespace cascade::detail
