// BufferCache: big buffers kept in outboxes or as the big spare, released when idle.
#include "cascade/comm/detail/buffer_cache.hpp"

#include <mutex>
#include <utility>

namespace cascade::detail {

// A big buffer whose frames were sent, whatever their size (a small burst may have been
// written into the outbox's big buffer): back to its outbox if that waits empty with a
// smaller one, so that the next burst is written straight into mapped memory (a code whose
// main thread queues a whole burst before join() finds it there); else the big spare if it
// is bigger than the one kept. Only a big burst that fills it counts as using the buffer
// (epoch_ended frees it kIdleEpochs epochs after the last one).
void BufferCache::keep_big_buffer(Outbox* outboxes, int dest, Bytes& b) {
    const bool burst = b.size() > comm::kMaxSpareBufferBytes && fills(b.size(), b.capacity());
    b.clear();
    Outbox& o = outboxes[dest];
    {
        std::lock_guard<Spinlock> g(o.lock);
        if (o.buf.empty() && o.buf.capacity() < b.capacity()) std::swap(o.buf, b);
    }
    if (b.capacity() > comm::kMaxSpareBufferBytes) {  // the outbox was busy (or held a big one)
        if (b.capacity() > big_spare_.capacity()) {
            big_spare_ = std::move(b);
            if (burst) big_spare_idle_epochs_ = 0;
        }
        return;
    }
    track_big_outbox(outboxes, dest, burst);
    keep_spare(b);
}

// Outbox d holds a big buffer: epoch_ended watches it from now on; `used`: a big burst used
// it in this epoch.
void BufferCache::track_big_outbox(Outbox* outboxes, int d, bool used) {
    Outbox& o = outboxes[d];
    if (o.big_idle_epochs < 0) {
        big_outboxes_.push_back(d);
        o.big_idle_epochs = 0;
    } else if (used) {
        o.big_idle_epochs = 0;
    }
}

void BufferCache::epoch_ended(Outbox* outboxes) {
    // A counter is reset while its epoch uses the buffer, so that epoch's end counts 1: the
    // buffer goes once kIdleEpochs epochs after it ended without using it.
    // (x = {} would keep the capacity: it assigns an empty initializer list.)
    if (big_spare_.capacity() && ++big_spare_idle_epochs_ > comm::kIdleEpochs)
        Bytes().swap(big_spare_);
    if (recv_buf_.capacity() > comm::kKeptRecvBuffer && ++recv_buf_idle_epochs_ > comm::kIdleEpochs)
        Bytes().swap(recv_buf_);
    for (std::size_t i = 0; i < big_outboxes_.size();) {
        Outbox& o = outboxes[big_outboxes_[i]];
        if (++o.big_idle_epochs <= comm::kIdleEpochs) {
            ++i;
            continue;
        }
        Bytes old;  // freed after the lock is released
        {
            std::lock_guard<Spinlock> g(o.lock);
            if (o.buf.empty()) std::swap(old, o.buf);  // else its frames leave at the next flush
        }
        o.big_idle_epochs = -1;
        big_outboxes_[i] = big_outboxes_.back();
        big_outboxes_.pop_back();
    }
}

std::size_t BufferCache::kept_bytes(Outbox* outboxes, int n) const {
    std::size_t bytes = big_spare_.capacity() + recv_buf_.capacity() + spare_bytes_;
    for (int d = 0; d < n; ++d) {
        Outbox& o = outboxes[d];
        std::lock_guard<Spinlock> g(o.lock);
        if (o.buf.empty()) bytes += o.buf.capacity();
    }
    return bytes;
}

}  // namespace cascade::detail
