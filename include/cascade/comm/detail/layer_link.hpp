// LayerLink: what the layers built on active messages (broadcast, futures, objects) ask of a
// Communicator beyond its public API: queue a frame of an internal message with the bodies
// that follow it, receive a body into a buffer, send a body at once, body tags, fences and
// the lookups a broadcast needs. A friend of Communicator; not part of its API. Every
// function forwards to one private member of Communicator, so the layers never hold its
// outboxes or take its locks themselves.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "cascade/comm/communicator.hpp"

namespace cascade::detail {

/// The bodies that follow one frame (LayerLink::enqueue's `bodies` callback): attached in
/// order right after the frame, under the outbox's lock that the Communicator holds while
/// the callback runs. The receiving handler posts their receives with
/// LayerLink::receive_body, in the same order.
class BodyQueue {
  public:
    explicit BodyQueue(Outbox& o) noexcept : o_(o) {}
    /// Attaches `bytes` at `body`, sent in pieces of at most `chunk` bytes. `am` is a large
    /// AM whose on_sent runs with `args` once the body may be reused. tag < 0: the ordered
    /// body tag; otherwise a tag from LayerLink::new_body_tag() (bodies matched by tag).
    void attach(ActiveMsgBase& am, const void* body, std::size_t bytes, std::size_t chunk,
                std::vector<char> args, int tag = -1) {
        Communicator::attach_body(o_, am, body, bytes, chunk, std::move(args), tag);
    }

  private:
    Outbox& o_;
};

struct LayerLink {
    /// The default `bodies` of enqueue(): none.
    struct NoBodies {
        /// Attaches nothing.
        void operator()(BodyQueue&) const noexcept {}
    };
    /// One small message's serialized arguments, for enqueue_many.
    using HeldArgs = Communicator::HeldArgs;
    /// While one lives, back-pressure waits of this thread's sends are put off (see
    /// Communicator::RoomWaitsDeferred).
    using RoomWaitsDeferred = Communicator::RoomWaitsDeferred;
    /// The default (and largest) chunk size of large bodies.
    static constexpr std::size_t kDefaultChunk = Communicator::kDefaultChunk;

    /// Queues one frame of `am` for `dest`: `write(char* out)` serializes at most `max_bytes`
    /// and returns the end; `bodies(BodyQueue&)` attaches the bodies that follow it.
    /// Thread-safe.
    template <class Write, class Bodies = NoBodies>
    static void enqueue(Communicator& c, int dest, const ActiveMsgBase& am, std::size_t max_bytes,
                        Write&& write, Bodies&& bodies = {}) {
        if constexpr (std::is_same_v<std::decay_t<Bodies>, NoBodies>) {
            c.enqueue(dest, am, max_bytes, std::forward<Write>(write));
        } else {
            c.enqueue(dest, am, max_bytes, std::forward<Write>(write), [&](Outbox& o) {
                BodyQueue q(o);
                bodies(q);
            });
        }
    }
    /// enqueue() for a message that goes ahead of the fences of `dest` raised in any stretch
    /// but `since` (see Communicator::enqueue_past_fence).
    template <class Write, class Bodies = NoBodies>
    static void enqueue_past_fence(Communicator& c, int dest, const ActiveMsgBase& am,
                                   std::size_t max_bytes, Write&& write, std::uint64_t since = 0,
                                   Bodies&& bodies = {}) {
        c.enqueue_past_fence(dest, am, max_bytes, std::forward<Write>(write), since,
                             [&](Outbox& o) {
                                 if constexpr (!std::is_same_v<std::decay_t<Bodies>, NoBodies>) {
                                     BodyQueue q(o);
                                     bodies(q);
                                 } else {
                                     (void)o;
                                 }
                             });
    }
    /// Queues the frames of `msgs`, in order, for `dest` under one lock. Thread-safe.
    static void enqueue_many(Communicator& c, int dest, std::span<const HeldArgs> msgs) {
        c.enqueue_many(dest, msgs);
    }
    /// A large message to one rank (what LargeActiveMsg::send_large queues).
    static void enqueue_large(Communicator& c, int dest, ActiveMsgBase& am, const void* body,
                              std::size_t bytes, std::vector<char> args) {
        c.enqueue_large(dest, am, body, bytes, std::move(args));
    }
    /// Posts the receive of a body attached to the frame from `source` that runs now, into
    /// `dest`. tag < 0: the ordered body tag; otherwise a tag from new_body_tag().
    static void receive_body(Communicator& c, int source, ActiveMsgBase& am, void* dest,
                             std::size_t bytes, std::size_t chunk, std::vector<char> args,
                             int tag = -1) {
        c.receive_body(source, am, dest, bytes, chunk, std::move(args), tag);
    }
    /// Posts a body send at once (communication thread), on a tag from new_body_tag().
    static void send_body_now(Communicator& c, int dest, ActiveMsgBase& am, const void* body,
                              std::size_t bytes, std::size_t chunk, std::vector<char> args,
                              int tag) {
        c.send_body_now(dest, am, body, bytes, chunk, std::move(args), tag);
    }
    /// An MPI tag for one body stream matched by tag, held until release_body_tag().
    static int new_body_tag(Communicator& c) { return c.new_body_tag(); }
    /// Gives back a tag from new_body_tag().
    static void release_body_tag(Communicator& c, int tag) noexcept { c.release_body_tag(tag); }
    /// Whether `tag` is one new_body_tag() hands out.
    static constexpr bool is_body_tag(std::int64_t tag) noexcept {
        return Communicator::is_body_tag(tag);
    }
    /// Raises a fence towards `dest` unless it is fenced already (see
    /// Communicator::raise_fence).
    static bool raise_fence(Communicator& c, int dest, std::uint64_t& after) {
        return c.raise_fence(dest, after);
    }
    /// `dest` acknowledged one delivery that raise_fence announced.
    static void lower_fence(Communicator& c, int dest) { c.lower_fence(dest); }
    /// The stretch of fences `dest` is in (0: none).
    static std::uint64_t fence_stretch(const Communicator& c, int dest) {
        return c.fence_stretch(dest);
    }
    /// Whether a message of this rank for `dest` must go to it directly.
    static bool must_send_directly(const Communicator& c, int dest) {
        return c.must_send_directly(dest);
    }
    /// How many messages from `source` this rank began to run so far (communication thread).
    static std::uint64_t frames_run_from(const Communicator& c, int source) noexcept {
        return c.frames_run_from(source);
    }
    /// The active message registered with this id, or null.
    static ActiveMsgBase* find_am(const Communicator& c, std::uint32_t id) noexcept {
        return c.find_am(id);
    }
    /// The pool attached to the Communicator, or null.
    static Threadpool* pool(const Communicator& c) noexcept { return c.pool(); }
    /// Ends the job once nothing moved since `since` for longer than the watchdog limit.
    static void check_stall(Communicator& c, const char* what,
                            std::chrono::steady_clock::time_point since) {
        c.check_stall(what, since);
    }
};

}  // namespace cascade::detail
