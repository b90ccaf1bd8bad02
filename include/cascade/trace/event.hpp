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

/// What an Event records (the fields each kind uses are listed with it).
enum class Kind : std::uint8_t {
    task = 1,    ///< A task ran: t0..t1, identity in vt/payload.
    idle,        ///< A worker found nothing to do: t0..t1.
    steal,       ///< A worker stole a task: t0, peer = victim thread.
    send,        ///< An active message was queued: t0..t1, peer = dest, a = seq, b = bytes.
    am_run,      ///< A handler ran: t0..t1, peer = source, a = seq, b = bytes.
    large_send,  ///< A large body was on its way: t0..t1, peer = dest, b = bytes.
    large_recv,  ///< A large body was being received: t0..t1, peer = source, a = seq, b = bytes.
    progress,    ///< A progress() call that moved something: t0..t1.
    ctrl,        ///< Completion protocol message: t0, peer, a = type, b = 0 sent / 1 received.
    edge,        ///< fulfill_promise: t0, callee identity in vt/payload, c = caller context.
    link,        ///< One step of a transfer followed across layers and ranks (a piece of a Data
                 ///< body): t0..t1, a = link id (link_id), b = the step (LinkStep), peer =
                 ///< the other rank (-1: none).
};

/// The steps of a linked transfer, in order (Kind::link's b): the trace joins the events of
/// one link id by a flow arrow in this order.
enum class LinkStep : std::uint8_t {
    device_to_host = 0,  ///< the copy out of the sender's device (a device track's slice)
    send = 1,            ///< the message leaves (the sender's thread)
    arrive = 2,          ///< the message is here (the receiver's handler)
    host_to_device = 3,  ///< the copy onto the receiver's device (a device track's slice)
};

/// The link id of piece `piece` of the transfer `base` (any number both ends agree on, e.g.
/// made of the sender's rank and a sequence number): never 0, which means "no link".
inline std::uint64_t link_id(std::uint64_t base, std::uint64_t piece) noexcept {
    std::uint64_t z = base * 0x9e3779b97f4a7c15ull + piece + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z == 0 ? 1 : z;
}

/// "No event": a context or reference that does not point into a buffer.
inline constexpr std::uint64_t kNone = ~std::uint64_t(0);

/// One record of a thread's trace (see the top of this file). Trivial on purpose: buffers
/// are allocated uninitialized (pages are touched when used); the recording thread sets
/// every field of the events it writes (Buffer::reserve).
struct Event {
    std::int64_t t0;       ///< Start: a stamp() value.
    std::int64_t t1;       ///< End: a stamp() value (0 for instants).
    std::uint64_t a;       ///< Kind-specific (see Kind).
    std::uint64_t b;       ///< Kind-specific (see Kind).
    std::uint64_t c;       ///< Context: index of the enclosing task / handler event, or kNone.
    const TaskVTable* vt;  ///< Task identity: the task's vtable (task, edge), else null.
    std::int32_t peer;     ///< Other rank or thread (see Kind), else -1.
    std::uint32_t am;      ///< Active message id (message events).
    std::uint32_t name;    ///< Interned task name, once resolved (flags & kResolved).
    std::uint32_t flow;    ///< Interned taskflow name, once resolved.
    std::uint32_t key;     ///< Interned key text, once resolved.
    Kind kind;             ///< What this event records.
    std::uint8_t flags;    ///< kResolved or 0.
    /// Task identity: the task's payload bytes (a Taskflow pointer and a key).
    alignas(8) unsigned char payload[Task::payload_size];

    /// Flag: name, flow and key hold interned strings.
    static constexpr std::uint8_t kResolved = 1;
};
static_assert(std::is_trivial_v<Event>);

/// steady_clock now, in nanoseconds.
inline std::int64_t now_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/// Event time stamps. On x86 the time-stamp counter: about half the cost of steady_clock on
/// the machines here (a task takes two), converted to steady_clock nanoseconds when the
/// trace is written (a linear fit between a sample taken when recording started and one
/// taken then; see recorder.cpp). Elsewhere steady_clock nanoseconds directly.
inline std::int64_t stamp() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    return static_cast<std::int64_t>(__rdtsc());
#else
    return now_ns();
#endif
}

}  // namespace cascade::trace
