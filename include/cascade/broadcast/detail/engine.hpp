// The broadcast layer's implementation of Broadcasts (cascade/comm/broadcasts.hpp): trees of
// active messages whose headers carry the sub-lists (dynamic broadcasts paper, §3.2), large
// bodies forwarded from the receiver's own buffer, piece by piece for the pipelined shape.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cascade/broadcast/tree.hpp"
#include "cascade/comm/communicator.hpp"
#include "cascade/core/detail/task_epilogue.hpp"

namespace cascade::broadcast::detail {

// The header of every message of a broadcast.
struct Header {
    std::uint32_t am;  // the user's active message and its signature
    std::uint32_t sig;
    std::int32_t root;
    std::int32_t from;  // the rank that sent this message (large: the pieces come from it)
    std::uint32_t shape;
    std::int32_t tag;     // large: MPI tag of this message's body pieces
    std::uint64_t bytes;  // large: body size
    std::uint64_t piece;  // large: piece size (the last one may be shorter)
    std::uint64_t chunk;  // large: MPI message size limit within a piece
    std::uint64_t ack;    // large: the sender's token to acknowledge the whole body with, or 0
    std::uint64_t after;  // through an inner node: run after this many of the root's messages
};

// The values of CASCADE_BCAST_SHAPE, in BroadcastShape's order.
inline constexpr std::string_view kShapeNames[] = {"automatic", "binomial", "pipelined"};
// The largest byte count CASCADE_BCAST_PIECE, CASCADE_BCAST_PIPELINE and CASCADE_BCAST_WINDOW
// accept (1 TiB).
inline constexpr std::uint64_t kBytesMax = std::uint64_t(1) << 40;

class Engine final : public Broadcasts {
  public:
    /// Detection holds sends whose arguments take at most this many bytes (detection.cpp).
    static constexpr std::size_t kHoldMax = std::size_t(16) << 10;
    /// A body travels in at most this many pieces (a smaller piece size is raised).
    static constexpr std::size_t kMaxBroadcastPieces = std::size_t(1) << 16;

    explicit Engine(Communicator& comm);
    ~Engine() override;

    void set_shape(BroadcastShape s) noexcept override { shape_.store(s); }
    BroadcastShape shape() const noexcept override { return shape_.load(); }
    void set_piece(std::size_t bytes) noexcept override { piece_.store(bytes); }
    void set_pipeline_threshold(std::size_t bytes) noexcept override { pipeline_.store(bytes); }
    void set_window(std::size_t bytes) noexcept override { window_.store(bytes); }
    BroadcastStats stats() const override;

    void send(ActiveMsgBase& am, std::span<const int> dests, std::span<const double> priorities,
              const char* payload, std::size_t size) override {
        cascade::detail::run_task_epilogue();  // what this thread held leaves first, in order
        tree_small(am, dests, priorities, payload, size, 0);
    }
    void send_large(ActiveMsgBase& am, std::span<const int> dests,
                    std::span<const double> priorities, const void* body, std::size_t bytes,
                    std::vector<char> args) override {
        cascade::detail::run_task_epilogue();
        tree_large(am, dests, priorities, body, bytes, std::move(args), 1, 0);
    }
    char* defer_begin(ActiveMsgBase& am, int dest, std::size_t max_bytes) override;
    void defer_end(char* end) override;
    bool defer_large(ActiveMsgBase& am, int dest, const void* body, std::size_t bytes,
                     std::vector<char>& args) override;

    // A broadcast; `detected` > 0: merged from that many sends (large: on_sent runs `times`).
    void tree_small(ActiveMsgBase& am, std::span<const int> dests,
                    std::span<const double> priorities, const char* payload, std::size_t size,
                    std::size_t detected);
    void tree_large(ActiveMsgBase& am, std::span<const int> dests,
                    std::span<const double> priorities, const void* body, std::size_t bytes,
                    std::vector<char> args, std::size_t times, std::size_t detected);
    Communicator& comm() noexcept { return comm_; }

  private:
    class Sink;
    struct BodyDest;
    struct RootState;
    struct RecvState;
    // The scratch of one call that sends a broadcast (the destinations other than this rank,
    // their list and the root's children): one per nesting level of such calls on a thread,
    // since a send may run progress() (back-pressure), whose handlers broadcast again.
    struct Split {
        std::vector<int> others;
        std::vector<double> priorities;
        bool self = false;
        std::vector<Recipient> list;
        std::vector<Child> kids;
        std::vector<std::uint64_t> since;  // per child of the root: its fence stretch at route
        std::vector<int> tags;
    };
    class Scratch;
    void split(Split& sp, const ActiveMsgBase& am, std::span<const int> dests,
               std::span<const double> priorities);
    Shape choose(std::size_t bytes, std::size_t recipients) const noexcept;
    std::size_t piece_for(std::size_t bytes) const noexcept;
    std::size_t window_pieces(std::size_t piece) const noexcept;
    bool holding_here() const noexcept;
    ActiveMsgBase& user_am(const Header& h, bool large);
    void check(const Header& h, view<const Recipient>& sub, bool large) const;
    struct Delivered;
    void route(Shape shape, std::vector<Recipient>& list, std::vector<Child>& kids,
               std::vector<std::uint64_t>& since);
    void on_delivered(int rank);
    void run_small(const Header& h, const view<const Recipient>& sub,
                   const view<const char>& payload);
    void run_large(const Header& h, const view<const Recipient>& sub, const view<const char>& args);
    std::string stranded() const override;
    std::string describe_waits() const override;
    bool must_wait(const Header& h) const;
    void wait(bool large, const Header& h, const view<const Recipient>& sub,
              const view<const char>& payload);
    static bool run_waiting(void* self);
    struct Waiting {
        bool large;
        Header h;
        std::vector<Recipient> sub;
        std::vector<char> payload;
    };
    std::deque<Waiting> waiting_;  // communication thread only (must_wait)
    bool waiting_installed_ = false;
    // A message of the broadcast protocol (a forward, an acknowledgement): past fences; a
    // root's header to a child: past the fences raised since the tree was routed (`since`).
    template <class... Ps>
    void send_protocol(std::uint64_t since, int dest, ActiveMsg<Ps...>& am, const Ps&... ps);
    void post(int dest, const Header& h, std::span<const Recipient> sub, std::span<const char> args,
              RootState* root, const void* body, std::size_t attach, std::uint64_t mark,
              std::uint64_t since);
    void on_small(Header& h, view<const Recipient>& sub, view<const char>& payload);
    void on_large(Header& h, view<const Recipient>& sub, view<const char>& args);
    void piece_arrived(RecvState* st, std::size_t k);
    void forward_next(RecvState* st);
    void pump(RecvState* st);
    void forward_sent(RecvState* st);
    void root_sent(RootState* st, std::uint64_t mark);
    void on_ack(std::uint64_t token);
    std::uint64_t new_ack_token(RootState* root, RecvState* recv);
    void send_next_root(RootState* st);
    // Serial bodies: the next of `dests` (and the leaves after it), from `next` on.
    void send_in_turn(const std::vector<BodyDest>& dests, std::size_t& next, std::uint64_t token,
                      const void* body, std::size_t bytes, std::size_t chunk,
                      const std::vector<char>& args);
    void drop_ack_token(std::uint64_t token);
    void maybe_release(RecvState* st);

    Communicator& comm_;
    const int me_;
    const int size_;
    ActiveMsg<Header, view<const Recipient>, view<const char>>* small_ = nullptr;
    ActiveMsg<Header, view<const Recipient>, view<const char>>* large_ = nullptr;
    ActiveMsg<std::uint64_t>* ack_ = nullptr;
    ActiveMsg<int>* delivered_ = nullptr;  // a broadcast arrived through an inner node
    // Bodies sent one child after the other wait for the previous child's acknowledgement:
    // the senders waiting for one, by token.
    struct AckTarget {
        RootState* root = nullptr;
        RecvState* recv = nullptr;
    };
    std::mutex ack_mutex_;
    std::unordered_map<std::uint64_t, AckTarget> acks_;
    std::uint64_t next_ack_ = 1;
    std::unique_ptr<Sink> sink_;
    std::atomic<BroadcastShape> shape_{BroadcastShape::automatic};
    std::atomic<std::size_t> piece_{0};
    std::atomic<std::size_t> pipeline_{0};
    std::atomic<std::size_t> window_{0};
    std::atomic<std::uint64_t> rotation_{0};
    struct Counters {
        std::atomic<std::uint64_t> broadcasts{0}, detected{0}, detected_sends{0}, recipients{0},
            root_messages{0}, forwarded{0}, bodies_received{0};
    } n_;
};

}  // namespace cascade::broadcast::detail
