// What the Communicator knows of broadcasts: the interface the broadcast layer implements
// (src/broadcast/), its settings and its counters. Each Communicator owns one
// (Communicator::broadcasts()); ActiveMsg::send with a list of destinations and the detection
// of destination loops go through it. The broadcast layer plugs in when its library is linked
// (Cascade::broadcast, part of Cascade::cascade): it registers the function that makes one
// (detail::set_broadcasts_factory). Without it, sends to a list are refused and nothing is
// held back for detection. See docs/broadcast.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace cascade {

class ActiveMsgBase;
class Communicator;

/// How a broadcast's messages are routed.
enum class BroadcastShape {
    automatic,  ///< Binomial tree for small bodies and every small active message, pipelined
                ///< chain from the pipeline threshold on.
    binomial,   ///< Always a binomial tree.
    pipelined   ///< Bodies cut in pieces along a chain, each forwarded while the next arrives.
};

/// Broadcast counters of one rank (Broadcasts::stats()).
struct BroadcastStats {
    std::uint64_t broadcasts = 0;       ///< Rooted here (explicit and detected).
    std::uint64_t detected = 0;         ///< Of which merged from sends of one task or handler.
    std::uint64_t detected_sends = 0;   ///< Point-to-point sends those replaced.
    std::uint64_t recipients = 0;       ///< Over all broadcasts rooted here.
    std::uint64_t root_messages = 0;    ///< Messages this rank sent as a root.
    std::uint64_t forwarded = 0;        ///< Messages this rank sent as an inner node.
    std::uint64_t bodies_received = 0;  ///< Large bodies this rank received through broadcasts.
};

/// The broadcast layer as the Communicator sees it (see the top of this file): settings,
/// counters, and the entry points ActiveMsg and LargeActiveMsg use. Implemented in
/// src/broadcast/; reached through Communicator::broadcasts().
class Broadcasts {
  public:
    virtual ~Broadcasts() = default;

    /// Detection: sends of the same active message with the same argument bytes (for large
    /// ones, the same body pointer and length) made by one task or one handler leave as one
    /// broadcast when it ends. On unless CASCADE_BCAST=0; off for one AM with
    /// ActiveMsgBase::set_broadcast_detection(false). Any thread.
    void set_detection(bool on) noexcept { detect_.store(on, std::memory_order_relaxed); }
    /// Whether detection is on (see set_detection). Any thread.
    bool detection() const noexcept { return detect_.load(std::memory_order_relaxed); }

    /// Shape of large broadcasts (CASCADE_BCAST_SHAPE=binomial|pipelined).
    virtual void set_shape(BroadcastShape s) noexcept = 0;
    /// The shape set by set_shape (or CASCADE_BCAST_SHAPE).
    virtual BroadcastShape shape() const noexcept = 0;
    /// Piece size of pipelined bodies in bytes (CASCADE_BCAST_PIECE); 0: chosen by size.
    virtual void set_piece(std::size_t bytes) noexcept = 0;
    /// Body size from which `automatic` pipelines (CASCADE_BCAST_PIPELINE).
    virtual void set_pipeline_threshold(std::size_t bytes) noexcept = 0;
    /// Bytes of a pipelined body each node has in flight to its child at most, whole pieces
    /// and at least one (CASCADE_BCAST_WINDOW; default 256 KiB; 0: no limit).
    virtual void set_window(std::size_t bytes) noexcept = 0;

    /// Counters of this rank (consistent once join() returned).
    virtual BroadcastStats stats() const = 0;
    /// Called when an epoch completed on this rank: what still waits here for messages that
    /// will never come (a header from the wire that promised them), as a message naming the
    /// sender; empty when nothing does.
    virtual std::string stranded() const { return {}; }
    /// For the watchdog's state report (communication thread): what waits here and for what;
    /// empty when nothing does.
    virtual std::string describe_waits() const { return {}; }

    // ---- used by ActiveMsg / LargeActiveMsg / Communicator ------------------------------------
    /// An AM to several ranks (ActiveMsg::send with a list); `payload` is its serialized
    /// arguments (8-byte aligned), `priorities` empty or one per destination.
    virtual void send(ActiveMsgBase& am, std::span<const int> dests,
                      std::span<const double> priorities, const char* payload,
                      std::size_t size) = 0;
    /// A large AM to several ranks (LargeActiveMsg::send_large with a list): `body` of
    /// `bytes` bytes, `args` the serialized arguments.
    virtual void send_large(ActiveMsgBase& am, std::span<const int> dests,
                            std::span<const double> priorities, const void* body, std::size_t bytes,
                            std::vector<char> args) = 0;
    /// Detection: where to write at most max_bytes of arguments for a send of am to dest
    /// that is held back, or null to send now. Followed by defer_end.
    virtual char* defer_begin(ActiveMsgBase& am, int dest, std::size_t max_bytes) = 0;
    /// Detection: where the writing that defer_begin started ended.
    virtual void defer_end(char* end) = 0;
    /// Detection of large sends: true if this send was held back, false to send it now.
    virtual bool defer_large(ActiveMsgBase& am, int dest, const void* body, std::size_t bytes,
                             std::vector<char>& args) = 0;

  protected:
    /// See detection().
    std::atomic<bool> detect_{true};
};

namespace detail {
// What makes a Communicator's Broadcasts. The broadcast layer registers one while the program
// starts (src/broadcast/layer.cpp); the Communicator's constructor calls it (every rank, in the
// same order: it registers the broadcast's own active messages), or, with none registered,
// makes the stand-in that sends to one rank at a time only.
using BroadcastsFactory = std::unique_ptr<Broadcasts> (*)(Communicator& comm);
void set_broadcasts_factory(BroadcastsFactory f) noexcept;
BroadcastsFactory broadcasts_factory() noexcept;
}  // namespace detail

}  // namespace cascade
