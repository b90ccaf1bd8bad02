// The comm layer's constants, in one place: MPI tags, the sizes of receives posted ahead and
// of buffers kept for reuse, the chunk of large bodies, the delays of the completion protocol.
// (The bounds of the wire format, which a receiver checks, are frames.hpp's: kMaxMessageBytes,
// kMaxArgumentBytes, kMaxBody, kMaxPieces.)
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "cascade/comm/detail/frames.hpp"

namespace cascade::detail::comm {

// ---- MPI tags (on the Communicator's private duplicate of its MPI communicator) ----------
inline constexpr int TAG_AM = 1;      // frames (AMs, large-AM headers), messages <= kSmallMessage
inline constexpr int TAG_BODY = 2;    // large-AM bodies, matched per source in header order
inline constexpr int TAG_CTRL = 3;    // completion protocol (and abort)
inline constexpr int TAG_BIG = 4;     // frames in a bigger MPI message, announced by a TAG_AM one
inline constexpr int TAG_AM_ODD = 5;  // TAG_AM in odd completion epochs
// Bodies matched by tag (broadcasts): [kFirstBodyTag, kFirstBodyTag + kBodyTags), one per body
// stream in flight (BodyTags), below kTraceTag and the 32767 every MPI allows.
inline constexpr int kFirstBodyTag = 64, kBodyTags = 29936;
inline constexpr int kTraceTag = 0x7ace;  // the trace's clock synchronization (trace_gather)

// ---- receives and messages ----------------------------------------------------------------
// MPI messages of frames up to this size go to receives posted in advance; a bigger one is
// announced by a small message (one kAnnounce frame carrying its size) and then received
// from that rank alone, so frames from one rank still run in the order they were queued.
inline constexpr std::size_t kSmallMessage = std::size_t(32) << 10;
// Receives posted ahead: this many buffers of kSmallMessage per epoch parity for AM messages,
// this many for control messages.
inline constexpr int kAmSlots = 6, kCtrlSlots = 4;
// The largest MPI message of frames (MPI counts are ints).
inline constexpr std::size_t kMpiMessageLimit = kMaxMessageBytes;
// Large bodies travel in MPI messages of at most this many bytes (set_large_chunk).
inline constexpr std::size_t kDefaultChunk = std::size_t(1) << 30;
// join()'s polls in a row that move nothing while a transfer is in flight before the polling
// thread yields (poll_once).
inline constexpr std::uint8_t kHotInFlightPolls = 32;

// ---- buffers kept for reuse ---------------------------------------------------------------
// A big message's receive buffer is kept for the next one up to this capacity; a bigger one
// only until kIdleEpochs epochs end without a big message that fills it.
inline constexpr std::size_t kKeptRecvBuffer = std::size_t(256) << 10;
// Spare send buffers kept for reuse: at most kMaxSpareBuffers, each of at most
// kMaxSpareBufferBytes, together at most kMaxSpareBytes; plus the biggest burst's buffer
// while bursts keep coming.
inline constexpr std::size_t kMaxSpareBufferBytes = std::size_t(256) << 10;
inline constexpr std::size_t kMaxSpareBytes = std::size_t(512) << 10;
inline constexpr std::size_t kMaxSpareBuffers = 8;
// A buffer kept beyond the spares' limits goes back to the system once this many epochs
// ended without using it.
inline constexpr int kIdleEpochs = 2;

// ---- completion and errors ------------------------------------------------------------------
// After the first COUNT of an epoch a rank sends the next one once it stayed idle this long;
// the delay doubles with each further COUNT of the epoch, up to kMaxCountDelay.
inline constexpr std::chrono::steady_clock::duration kFirstCountDelay =
    std::chrono::microseconds(2);
inline constexpr std::chrono::steady_clock::duration kMaxCountDelay =
    std::chrono::microseconds(640);
// A rank that ran messages in each of the last two epochs holds its first COUNT of an epoch
// back until it ran as many (the fewer of the two), for at most kExpectWait after it was first
// idle in the epoch: an iterative code's neighbours' messages then arrive before its report,
// which takes one COUNT per rank and epoch instead of two. When they came, but later than
// that, the wait doubles for the next epochs (up to kMaxExpectWait): waiting for messages
// that come costs nothing, since the epoch cannot end before they ran.
inline constexpr std::chrono::steady_clock::duration kExpectWait = std::chrono::microseconds(100);
inline constexpr std::chrono::steady_clock::duration kMaxExpectWait =
    std::chrono::microseconds(1600);
// Up to this many ranks, each COUNT also carries the rank's counts per channel (messages
// queued for each rank, messages from each rank processed), and an epoch whose channels all
// balance ends without REQUEST and CONFIRM; with more ranks, COUNTs carry the totals alone.
inline constexpr int kChannelRanks = 32;
// A rank that ends the job waits this long at most for the others to write their traces.
inline constexpr auto kAbortWait = std::chrono::seconds(3);

}  // namespace cascade::detail::comm
