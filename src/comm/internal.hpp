// Internals shared by the Communicator's source files: MPI tags, message limits, helpers.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "cascade/comm/detail/frames.hpp"

namespace cascade {
class Broadcasts;
class Communicator;
namespace comm_detail {

constexpr int TAG_AM = 1;      // frames (AMs, large-AM headers) in MPI messages of <= kSmallMessage
constexpr int TAG_BODY = 2;    // large-AM bodies, matched per source in header order
constexpr int TAG_CTRL = 3;    // completion protocol
constexpr int TAG_BIG = 4;     // frames in a bigger MPI message, announced by a TAG_AM one
constexpr int TAG_AM_ODD = 5;  // TAG_AM in odd completion epochs

inline int am_tag(std::uint32_t epoch) {
    return (epoch & 1) ? TAG_AM_ODD : TAG_AM;
}
// MPI messages of frames up to this size go to receives posted in advance; a bigger one is
// announced by a small message (one kAnnounce frame carrying its size) and then received
// from that rank alone, so frames from one rank still run in the order they were queued.
constexpr std::size_t kSmallMessage = std::size_t(32) << 10;
// A big message's receive buffer is kept for the next one up to this capacity; a bigger one
// only until two epochs end without a big message that fills it (see fills() below;
// Communicator::release_idle_buffers).
constexpr std::size_t kKeptRecvBuffer = std::size_t(256) << 10;
// Spare send buffers kept for reuse: at most kMaxSpareBuffers, each of at most
// kMaxSpareBufferBytes, together at most kMaxSpareBytes; plus the biggest burst's buffer
// while bursts keep coming (Communicator::big_spare_).
constexpr std::size_t kMaxSpareBufferBytes = std::size_t(256) << 10;
constexpr std::size_t kMaxSpareBytes = std::size_t(512) << 10;
constexpr int kMaxMessagesPerProgress = 64;
constexpr std::size_t kMaxSpareBuffers = 8;
// A burst (or a big message received) uses a buffer kept beyond the spares' limits when it
// fills at least half of it: one that only much smaller bursts use goes back to the system
// like an idle one, and the next big burst grows a buffer of its own size.
inline bool fills(std::size_t bytes, std::size_t capacity) {
    return 2 * bytes >= capacity;
}
constexpr std::size_t kMpiMessageLimit = detail::kMaxMessageBytes;

// The Communicator whose progress this thread drives (set in progress() / poll()).
extern thread_local const Communicator* tls_comm_thread;

// The Communicator's Broadcasts: the broadcast layer's when it is linked (it registered its
// factory), else a stand-in without detection that refuses sends to a list (broadcasts.cpp).
std::unique_ptr<Broadcasts> make_broadcasts(Communicator& comm);

inline std::size_t round8(std::size_t n) {
    return (n + 7) & ~std::size_t(7);
}

inline void check_mpi(int rc, const char* what) {
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        throw std::runtime_error(std::string("cascade: ") + what + " failed: " + msg);
    }
}

}  // namespace comm_detail
}  // namespace cascade
