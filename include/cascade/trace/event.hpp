// trace::Event: one fixed-size record in a thread's trace buffer. Task identities are kept as
// the task's vtable and payload bytes (a Taskflow pointer and a key) and turned into names
// only later (see recorder.hpp), so recording a task costs two clock reads and a copy.
#pragma once

#include <chrono>
#include <cstdint>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include "cascade/core/task.hpp"

namespace cascade::trace {

enum class Kind : std::uint8_t {
    task = 1,    // a task ran: t0..t1, identity in vt/payload
    idle,        // a worker found nothing to do: t0..t1
    steal,       // a worker stole a task: t0, peer = victim thread
    send,        // an active message was queued: t0..t1, peer = dest, a = seq, b = bytes
    am_run,      // an active message handler ran: t0..t1, peer = source, a = seq, b = bytes
    large_send,  // a large body was on its way: t0..t1, peer = dest, b = bytes
    large_recv,  // a large body was being received: t0..t1, peer = source, a = seq, b = bytes
    progress,    // a progress() call that moved something: t0..t1
    ctrl,        // completion protocol message: t0, peer, a = type, b = 0 sent / 1 received
    edge,        // fulfill_promise: t0, callee identity in vt/payload, c = caller context
};

// "No event": a context or reference that does not point into a buffer.
inline constexpr std::uint64_t kNone = ~std::uint64_t(0);

// Trivial on purpose: buffers are allocated uninitialized (pages are touched when used);
// the recording thread sets every field of the events it writes (Buffer::reserve).
struct Event {
    std::int64_t t0, t1;  // stamp() values
    std::uint64_t a, b;   // kind-specific (see Kind)
    std::uint64_t c;      // context: index of the task / handler event it happened in, or kNone
    const TaskVTable* vt;
    std::int32_t peer;
    std::uint32_t am;               // active message id
    std::uint32_t name, flow, key;  // interned strings, once resolved (flags & kResolved)
    Kind kind;
    std::uint8_t flags;
    alignas(8) unsigned char payload[Task::payload_size];

    static constexpr std::uint8_t kResolved = 1;
};
static_assert(std::is_trivial_v<Event>);

inline std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Event time stamps. On x86 the time-stamp counter: about half the cost of steady_clock on
// the machines here (a task takes two), converted to steady_clock nanoseconds when the
// trace is written (a linear fit between a sample taken when recording started and one
// taken then; see recorder.cpp). Elsewhere steady_clock nanoseconds directly.
inline std::int64_t stamp() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    return static_cast<std::int64_t>(__rdtsc());
#else
    return now_ns();
#endif
}

}  // namespace cascade::trace
