// Outbox: what one Communicator queued for one destination and not yet handed to MPI (frames
// of small messages, large bodies after them), with the destination's back-pressure counts
// and fences. LargeSend: one large body queued.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cascade/comm/detail/bytes.hpp"
#include "cascade/core/spinlock.hpp"

namespace cascade {
class ActiveMsgBase;
namespace detail {

/// A large body queued for one destination, sent after the frames queued before it.
struct LargeSend {
    ActiveMsgBase* am;       ///< The large AM whose on_body_sent runs on completion.
    const char* body;        ///< The body (the sender's memory, valid until on_sent).
    std::size_t bytes;       ///< Body size in bytes.
    std::vector<char> args;  ///< The serialized arguments (passed to on_body_sent).
    std::size_t chunk;       ///< The one written in the header: the receiver posts by it.
    int tag = -1;            ///< MPI tag from new_body_tag(); < 0: the ordered body tag.
};

/// What is queued for one destination (one per rank, on its own cache line).
struct alignas(64) Outbox {
    Spinlock lock;                      ///< Guards buf, larges, seq and body_bytes_queued.
    Bytes buf;                          ///< Frames not yet sent.
    std::vector<LargeSend> larges;      ///< Large bodies to post after these frames.
    std::atomic<bool> nonempty{false};  ///< Something is queued (read without the lock).
    /// Frames queued to this destination so far (names them in traces).
    std::uint64_t seq = 0;
    /// Back-pressure: bytes of frames handed to MPI and not yet delivered.
    std::atomic<std::size_t> frame_bytes_in_flight{0};
    /// Back-pressure: bytes of large bodies posted to MPI and not yet delivered.
    std::atomic<std::size_t> body_bytes_in_flight{0};
    std::size_t body_bytes_queued = 0;  ///< Bytes of the bodies in `larges`.
    std::size_t bodies_queued = 0;      ///< Number of bodies in `larges`.
    /// Epochs since the big buffer it holds (the big spare, see BufferCache) was last filled;
    /// -1: it holds none. Communication thread only.
    int big_idle_epochs = -1;
    /// Fences (Communicator::raise_fence): messages routed to this rank through other ranks
    /// and not yet acknowledged, at most one at a time. While there is one, what was queued
    /// after it waits: frames from byte fence_bytes of buf on, bodies from fence_larges of
    /// larges on.
    std::atomic<int> fences{0};
    std::size_t fence_bytes = 0;   ///< Frames before this byte of buf leave (fenced).
    std::size_t fence_larges = 0;  ///< Bodies before this index of larges leave (fenced).
    /// Stretches of fences so far: one more each time `fences` goes from 0 to 1.
    std::uint64_t fence_stretch = 0;
};

}  // namespace detail
}  // namespace cascade
