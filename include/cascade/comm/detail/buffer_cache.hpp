// BufferCache: the buffers a Communicator keeps for reuse, so the steady state allocates
// nothing per message: spare send buffers of moderate size; beyond the spares' limits, the
// biggest recent burst's buffer (the big spare) and big buffers left in outboxes, kept while
// bursts that fill them keep coming; the receive buffer of big messages. A buffer kept beyond
// the limits goes back to the system once kIdleEpochs epochs ended without using it (an
// iterative code that sends the same burst at every step finds its buffers mapped).
// Communication thread only (an outbox's buffer is swapped under the outbox's lock).
#pragma once

#include <cstddef>
#include <vector>

#include "cascade/comm/detail/bytes.hpp"
#include "cascade/comm/detail/constants.hpp"
#include "cascade/comm/detail/outbox.hpp"

namespace cascade::detail {

class BufferCache {
  public:
    /// A burst (or a big message received) uses a buffer kept beyond the spares' limits when
    /// it fills at least half of it: one that only much smaller bursts use goes back to the
    /// system like an idle one, and the next big burst grows a buffer of its own size.
    static bool fills(std::size_t bytes, std::size_t capacity) noexcept {
        return 2 * bytes >= capacity;
    }

    /// Keeps `b` (emptied) as a spare if the limits allow (comm::kMaxSpareBuffers,
    /// kMaxSpareBufferBytes, kMaxSpareBytes); else leaves it to its owner.
    void keep_spare(Bytes& b) {
        const std::size_t cap = b.capacity();
        if (cap == 0 || cap > comm::kMaxSpareBufferBytes ||
            spare_bufs_.size() >= comm::kMaxSpareBuffers ||
            spare_bytes_ + cap > comm::kMaxSpareBytes)
            return;
        b.clear();
        spare_bytes_ += cap;
        spare_bufs_.push_back(std::move(b));
    }
    /// Moves a spare into `out` (nothing if none).
    void take_spare(Bytes& out) {
        if (spare_bufs_.empty()) return;
        out = std::move(spare_bufs_.back());
        spare_bufs_.pop_back();
        spare_bytes_ -= out.capacity();
    }
    /// Outbox `d` (of `outboxes`) is flushed, under its lock: swaps its frames into `buf` and
    /// gives it its next buffer, the big spare for a burst bigger than a spare, else a spare.
    void swap_out(Outbox* outboxes, int d, Bytes& buf) {
        Outbox& o = outboxes[d];
        const bool big = o.buf.size() > comm::kMaxSpareBufferBytes && big_spare_.capacity() > 0;
        const bool used = big && fills(o.buf.size(), big_spare_.capacity());
        if (big) {
            buf = std::move(big_spare_);
        } else {
            take_spare(buf);
        }
        std::swap(buf, o.buf);
        if (big) track_big_outbox(outboxes, d, used);
    }
    /// The frames of `b` were sent to `dest` (< 0: a control message): keeps the buffer as
    /// a spare, or a big one in its outbox or as the big spare (keep_big_buffer).
    void keep_sent(Outbox* outboxes, int dest, Bytes& b) {
        if (b.capacity() > comm::kMaxSpareBufferBytes && dest >= 0) {
            keep_big_buffer(outboxes, dest, b);
            return;
        }
        keep_spare(b);
    }
    /// A buffer for a big message of `bytes` being received (the one kept, if any).
    Bytes take_recv_buffer(std::size_t bytes) {
        if (fills(bytes, recv_buf_.capacity())) recv_buf_idle_epochs_ = 0;
        Bytes b = std::move(recv_buf_);  // leaves recv_buf_ empty
        b.resize(bytes);
        return b;
    }
    /// A big message's buffer, once its frames ran: kept if bigger than the one kept.
    void give_recv_buffer(Bytes& b) {
        if (recv_buf_.capacity() < b.capacity()) recv_buf_ = std::move(b);
    }
    /// An epoch ended: frees the buffers beyond the limits that kIdleEpochs epochs did not
    /// use (an outbox's under its lock, unless frames were queued in it meanwhile).
    void epoch_ended(Outbox* outboxes);
    /// Bytes of the buffers kept while nothing is in them (the outboxes' empty buffers too,
    /// read under their locks; CommStats::kept_buffer_bytes).
    std::size_t kept_bytes(Outbox* outboxes, int n) const;

  private:
    void keep_big_buffer(Outbox* outboxes, int dest, Bytes& b);
    void track_big_outbox(Outbox* outboxes, int d, bool used);

    std::vector<Bytes> spare_bufs_;
    std::size_t spare_bytes_ = 0;    // their capacities' sum
    Bytes big_spare_;                // the biggest burst's frame buffer, once sent
    int big_spare_idle_epochs_ = 0;  // epochs ended since a burst filled it
    std::vector<int> big_outboxes_;  // destinations whose outbox holds a big buffer
    Bytes recv_buf_;                 // big messages' receive buffer
    int recv_buf_idle_epochs_ = 0;   // epochs ended since a big message filled it
};

}  // namespace cascade::detail
