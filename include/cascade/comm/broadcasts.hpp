// What the Communicator knows of broadcasts: the interface the broadcast layer implements
// (src/broadcast/), its settings and its counters. Each Communicator owns one
// (Communicator::broadcasts()); ActiveMsg::send with a list of destinations and the detection
// of destination loops go through it. See docs/broadcast.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace cascade {

class ActiveMsgBase;
class Communicator;

// How a broadcast's messages are routed. automatic: binomial tree for small bodies and every
// small active message, pipelined chain (bodies cut in pieces, each forwarded while the next
// arrives) from pipeline_threshold bytes on.
enum class BroadcastShape { automatic, binomial, pipelined };

struct BroadcastCounters {
    std::uint64_t broadcasts = 0;       // rooted here (explicit and detected)
    std::uint64_t detected = 0;         // of which merged from sends of one task or handler
    std::uint64_t detected_sends = 0;   // point-to-point sends those replaced
    std::uint64_t recipients = 0;       // over all broadcasts rooted here
    std::uint64_t root_messages = 0;    // messages this rank sent as a root
    std::uint64_t forwarded = 0;        // messages this rank sent as an inner node
    std::uint64_t bodies_received = 0;  // large bodies this rank received through broadcasts
};

class Broadcasts {
  public:
    virtual ~Broadcasts() = default;

    // Detection: sends of the same active message with the same argument bytes (for large
    // ones, the same body pointer and length) made by one task or one handler leave as one
    // broadcast when it ends. On unless CASCADE_BCAST=0; off for one AM with
    // ActiveMsgBase::set_broadcast_detection(false).
    void set_detection(bool on) noexcept { detect_.store(on, std::memory_order_relaxed); }
    bool detection() const noexcept { return detect_.load(std::memory_order_relaxed); }

    // Shape and piece size of large broadcasts (CASCADE_BCAST_SHAPE=binomial|pipelined,
    // CASCADE_BCAST_PIECE=bytes, CASCADE_BCAST_PIPELINE=bytes). piece 0: chosen by size.
    virtual void set_shape(BroadcastShape s) noexcept = 0;
    virtual BroadcastShape shape() const noexcept = 0;
    virtual void set_piece(std::size_t bytes) noexcept = 0;
    virtual void set_pipeline_threshold(std::size_t bytes) noexcept = 0;

    // Counters of this rank (consistent once join() returned).
    virtual BroadcastCounters counters() const = 0;

    // ---- used by ActiveMsg / LargeActiveMsg / Communicator ------------------------------------
    // An AM to several ranks; payload is its serialized arguments (8-byte aligned).
    virtual void send(ActiveMsgBase& am, std::span<const int> dests,
                      std::span<const double> priorities, const char* payload,
                      std::size_t size) = 0;
    virtual void send_large(ActiveMsgBase& am, std::span<const int> dests,
                            std::span<const double> priorities, const void* body, std::size_t bytes,
                            std::vector<char> args) = 0;
    // Detection. defer_begin: where to write at most max_bytes of arguments for a send of am
    // to dest that is held back, or null to send now; defer_end: where the writing ended.
    virtual char* defer_begin(ActiveMsgBase& am, int dest, std::size_t max_bytes) = 0;
    virtual void defer_end(char* end) = 0;
    // A large send held back (true), or to send now (false).
    virtual bool defer_large(ActiveMsgBase& am, int dest, const void* body, std::size_t bytes,
                             std::vector<char>& args) = 0;

  protected:
    std::atomic<bool> detect_{true};
};

namespace detail {
// Defined by the broadcast layer; the Communicator's constructor calls it (every rank, in the
// same order: it registers the broadcast's own active messages).
std::unique_ptr<Broadcasts> make_broadcasts(Communicator& comm);
}  // namespace detail

}  // namespace cascade
