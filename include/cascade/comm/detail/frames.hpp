// The framing of active messages inside one MPI message, as a pure function (no MPI, no
// state): the receiver checks every byte of what arrived before a handler sees it, and the
// fuzzer (fuzz/) feeds it arbitrary bytes.
//
// An MPI message of active messages is a sequence of frames, each a 16-byte header
// {id, signature, payload length} followed by the payload and zero padding up to a multiple
// of 8 bytes (so every frame starts 8-byte aligned). A frame whose id is kAnnounce carries
// only the size of a bigger MPI message of frames that follows from the same rank.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "cascade/comm/serialization.hpp"

namespace cascade::detail {

struct Frame {
    std::uint32_t id;
    std::uint32_t sig;
    std::uint64_t len;
};
static_assert(sizeof(Frame) == 16);

inline constexpr std::uint32_t kAnnounce = 0xffffffffu;

// The largest MPI message of frames (MPI counts are ints): a receiver refuses a bigger one.
inline constexpr std::size_t kMaxMessageBytes = std::size_t(1) << 30;
// The most argument bytes one active message may carry: its frame alone fills a message.
// Senders check against this, so nothing they accept is refused on arrival.
inline constexpr std::size_t kMaxArgumentBytes = kMaxMessageBytes - sizeof(Frame);

inline constexpr std::size_t round8(std::size_t n) noexcept {
    return (n + 7) & ~std::size_t(7);
}

// One frame of a message: its header and where its payload is (inside the message).
struct FrameRef {
    std::uint32_t id;
    std::uint32_t sig;
    const char* payload;
    std::size_t len;
};

// Calls f(FrameRef) for each frame of data[0, size), in order, after checking it: header and
// padded payload inside the message, padding zero. Throws WireError at the first malformed
// frame (frames before it were already passed to f: a handler may have run).
template <class F>
void for_each_frame(const char* data, std::size_t size, F&& f) {
    std::size_t off = 0;
    while (off < size) {
        const std::size_t left = size - off;
        if (left < sizeof(Frame))
            throw WireError("truncated frame header (" + std::to_string(left) + " stray bytes)");
        Frame fr;
        std::memcpy(&fr, data + off, sizeof fr);
        const std::size_t room = left - sizeof(Frame);
        if (fr.len > room || round8(fr.len) > room)
            throw WireError("frame of " + std::to_string(fr.len) + " bytes with " +
                            std::to_string(room) + " left");
        const char* payload = data + off + sizeof(Frame);
        for (std::size_t i = fr.len; i < round8(fr.len); ++i)
            if (payload[i] != 0) throw WireError("non-zero frame padding");
        f(FrameRef{fr.id, fr.sig, payload, static_cast<std::size_t>(fr.len)});
        off += sizeof(Frame) + round8(fr.len);
    }
}

// Largest body, in bytes, a header may announce: 2^46 (64 TiB). The receiver sizes its
// buffer from the announced count before the body arrives, so the count is bounded first.
// Fuzzing builds (FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, see fuzz/) use 16 MiB: under
// AddressSanitizer a failed operator new is reported as a crash, not thrown as bad_alloc.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
inline constexpr std::uint64_t kMaxBody = std::uint64_t(1) << 24;
#else
inline constexpr std::uint64_t kMaxBody = std::uint64_t(1) << 46;
#endif

// The element count of an announced body of `n` elements of `elem` bytes each, once checked
// against kMaxBody.
inline std::size_t body_elements(std::uint64_t n, std::size_t elem) {
    if (elem == 0 || n > kMaxBody / elem)
        throw WireError("body of " + std::to_string(n) + " x " + std::to_string(elem) +
                        " bytes (at most " + std::to_string(kMaxBody) + " bytes)");
    return static_cast<std::size_t>(n);
}

// The bytes of each MPI message a body of `bytes` travels in, for the chunk its sender chose
// (0: the default, `max_chunk`): never more than `max_chunk` (MPI counts are ints), and large
// enough that a body needs at most kMaxPieces messages unless `max_chunk` forces more.
// Sender and receiver both compute it from the header's values, so they post the same pieces;
// a tiny chunk cannot make a receiver post millions of receives for one body.
inline constexpr std::size_t kMaxPieces = 1024;
inline std::size_t piece_bytes(std::size_t bytes, std::size_t chunk, std::size_t max_chunk) {
    if (chunk == 0 || chunk > max_chunk) chunk = max_chunk;
    const std::size_t floor = bytes / kMaxPieces + (bytes % kMaxPieces != 0);
    return std::min(max_chunk, std::max(chunk, floor));
}

// The size announced by a kAnnounce frame: more than `small` (it would have been sent
// directly) and at most `limit` bytes, a whole number of frames (a multiple of 8).
inline std::size_t announced_size(const FrameRef& fr, std::size_t small, std::size_t limit) {
    if (fr.sig != 0 || fr.len != sizeof(std::uint64_t)) throw WireError("malformed announce frame");
    std::uint64_t bytes = 0;
    std::memcpy(&bytes, fr.payload, sizeof bytes);
    if (bytes <= small || bytes > limit || bytes % 8 != 0)
        throw WireError("announced message of " + std::to_string(bytes) + " bytes (expected " +
                        std::to_string(small) + " < bytes <= " + std::to_string(limit) +
                        ", a multiple of 8)");
    return static_cast<std::size_t>(bytes);
}

}  // namespace cascade::detail
