#include "cascade/broadcast/detail/engine.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "cascade/core/errors.hpp"
#include "cascade/core/log.hpp"
#include "cascade/core/settings.hpp"

namespace cascade {

namespace broadcast::detail {

using cascade::detail::BodyQueue;
using cascade::detail::LayerLink;

namespace {

// Defaults chosen from the cost model, not yet measured (bench/broadcast measures them): from
// 1 MiB on, a chain of pieces should beat the binomial tree once links are the bottleneck;
// pieces of bytes/32 within [64 KiB, 1 MiB] keep the chain's fill time short without
// drowning it in messages.
constexpr std::size_t kPipelineThreshold = std::size_t(1) << 20;
constexpr std::size_t kMinPiece = std::size_t(64) << 10;
constexpr std::size_t kMaxPiece = std::size_t(1) << 20;
// From this size on, a node sends a body to its children one after the other (the biggest
// sub-tree first), not to all of them at once: copies sent at once share the node's link, so
// the first child would get its copy only when the last one does, and start forwarding that
// much later. Below it, latency, not the link, decides, and the sends overlap.
constexpr std::size_t kSerialBytes = std::size_t(64) << 10;
// A node of a pipelined chain keeps at most this many bytes of pieces in flight to its child
// (whole pieces, at least one), and sends the next piece when one is out. Unlimited, a
// node's pieces fill the queues on its link, and the control traffic of the stream it
// receives (MPI's rendezvous replies, TCP's acknowledgements) waits behind them: on
// netns-cluster (8 hosts, 200 Mbit/s, 8 MiB) that made the chain 6 times slower.
constexpr std::size_t kWindowBytes = std::size_t(256) << 10;

// Whether a node sends a one-piece body to its children one after the other: several
// children, a body of kSerialBytes or more, and a first child that forwards (children that
// forward to nobody come last and go together).
bool serial_bodies(std::size_t npieces, std::span<const Child> kids, std::size_t bytes) {
    return npieces == 1 && kids.size() > 1 && bytes >= kSerialBytes && kids[0].count > 0;
}

// The token child i of a serial node acknowledges its whole body with (0: none): every child
// that forwards, but the last (the node sends to the next child on its acknowledgement).
std::uint64_t ack_token(bool serial, std::span<const Child> kids, std::size_t i,
                        std::uint64_t token) {
    return serial && kids[i].count > 0 && i + 1 < kids.size() ? token : 0;
}

std::size_t pieces(std::size_t bytes, std::size_t piece) {
    return bytes == 0 ? 1 : (bytes + piece - 1) / piece;
}

std::string rank_str(int r) {
    return "rank " + std::to_string(r);
}

}  // namespace

// Receives the body callbacks of broadcasts (it is no registered active message: the
// Communicator calls it for the bodies the engine posts). Its arguments say what finished.
class Engine::Sink final : public ActiveMsgBase {
  public:
    enum Kind : std::uint64_t { root_sent, piece_arrived, forward_sent };
    struct Args {
        std::uint64_t kind;
        void* state;
        std::uint64_t index;
    };

    Sink(Engine& e, std::uint32_t id) : e_(e) {
        id_ = id;  // traces and errors show the broadcast's large message
        name_ = "broadcast.large";
    }
    static std::vector<char> encode(Kind k, void* state, std::uint64_t index) {
        std::vector<char> out(sizeof(Args));
        const Args a{k, state, index};
        std::memcpy(out.data(), &a, sizeof a);
        return out;
    }
    std::string_view types() const override { return "broadcast body"; }
    void on_frame(int, const char*, std::size_t) override {}
    bool is_large() const noexcept override { return true; }
    void on_body_arrived(const char* p, std::size_t n) override {
        const Args a = decode(p, n);
        e_.piece_arrived(static_cast<RecvState*>(a.state), a.index);
    }
    void on_body_sent(const char* p, std::size_t n) override {
        const Args a = decode(p, n);
        if (a.kind == root_sent)
            e_.root_sent(static_cast<RootState*>(a.state), a.index);
        else
            e_.forward_sent(static_cast<RecvState*>(a.state));
    }

  private:
    static Args decode(const char* p, std::size_t n) {
        Args a{};
        if (n == sizeof a) std::memcpy(&a, p, sizeof a);
        return a;
    }
    Engine& e_;
};

// A child a node sends a large body to: its rank, the MPI tag of its body, and whether it
// forwards to nobody.
struct Engine::BodyDest {
    int rank;
    int tag;
    bool leaf;
};

// The root of a large broadcast: on_sent runs (`times` times) when every body send is done.
struct Engine::RootState {
    ActiveMsgBase* am = nullptr;
    std::vector<char> args;
    std::size_t times = 0;
    std::size_t sends_left = 0;
    // Bodies sent one after the other (kSerialBytes): the children still to send to.
    const void* body = nullptr;
    Header h{};
    std::vector<BodyDest> later;
    std::size_t next_later = 0;
    std::uint64_t token = 0;  // acknowledgements of the children that forward
    std::vector<int> tags;    // of every body stream (released once all are sent)
    // Chain: the pieces go to the one child, at most `window` at a time.
    BodyDest chain{-1, 0, true};
    std::size_t next_piece = 0, npieces = 0, window = 0;
};

// A large broadcast being received here: the body lands piece by piece in the buffer where_to
// gave; each piece is forwarded to the children (in order) as soon as it is here.
struct Engine::RecvState {
    ActiveMsgBase* am = nullptr;
    Header h{};
    std::vector<char> args;  // the user's arguments (kept for on_arrival and on_forwarded)
    char* where = nullptr;
    std::size_t npieces = 0, next = 0, sends_left = 0;
    std::vector<bool> arrived;
    std::vector<BodyDest> kids;
    bool serial = false;       // one child after the other (one piece, kSerialBytes)
    std::size_t next_kid = 0;  // serial: the next child to send to
    std::uint64_t token = 0;   // serial: acknowledgements of the children that forward
    bool chain = false;        // one child, several pieces: at most `window` in flight
    std::size_t sent = 0, in_flight = 0, window = 0;
    bool delivered = false;

    std::size_t offset(std::size_t k) const { return k * h.piece; }
    std::size_t length(std::size_t k) const {
        return std::min<std::size_t>(h.piece, h.bytes - std::min<std::size_t>(h.bytes, offset(k)));
    }
};

Engine::Engine(Communicator& comm) : comm_(comm), me_(comm.rank()), size_(comm.ranks()) {
    small_ = comm.make_active_msg([this](Header& h, view<const Recipient>& sub,
                                         view<const char>& payload) { on_small(h, sub, payload); },
                                  "broadcast");
    large_ = comm.make_active_msg([this](Header& h, view<const Recipient>& sub,
                                         view<const char>& args) { on_large(h, sub, args); },
                                  "broadcast.large");
    small_->set_broadcast_detection(false);
    ack_ = comm.make_active_msg([this](std::uint64_t& token) { on_ack(token); }, "broadcast.ack");
    delivered_ =
        comm.make_active_msg([this](int& rank) { on_delivered(rank); }, "broadcast.delivered");
    delivered_->set_broadcast_detection(false);
    large_->set_broadcast_detection(false);
    ack_->set_broadcast_detection(false);
    sink_ = std::make_unique<Sink>(*this, large_->id());
    static constexpr BroadcastShape kShapeValues[] = {
        BroadcastShape::automatic, BroadcastShape::binomial, BroadcastShape::pipelined};
    shape_ = kShapeValues[settings::choice("CASCADE_BCAST_SHAPE", 0, kShapeNames)];
    piece_ = settings::count("CASCADE_BCAST_PIECE", 0, 0, kBytesMax);
    pipeline_ = settings::count("CASCADE_BCAST_PIPELINE", kPipelineThreshold, 0, kBytesMax);
    window_ = settings::count("CASCADE_BCAST_WINDOW", kWindowBytes, 0, kBytesMax);
    set_detection(settings::flag("CASCADE_BCAST", true));  // the Communicator's option overrides
}

Engine::~Engine() = default;

BroadcastStats Engine::stats() const {
    BroadcastStats c;
    c.broadcasts = n_.broadcasts.load();
    c.detected = n_.detected.load();
    c.detected_sends = n_.detected_sends.load();
    c.recipients = n_.recipients.load();
    c.root_messages = n_.root_messages.load();
    c.forwarded = n_.forwarded.load();
    c.bodies_received = n_.bodies_received.load();
    return c;
}

// This thread's Split for the current nesting level of broadcast sends (see Split): taken
// in the constructor, given back in the destructor; allocated once per level and thread.
class Engine::Scratch {
  public:
    Scratch() {
        if (depth_ == levels_.size()) levels_.push_back(std::make_unique<Split>());
        sp_ = levels_[depth_++].get();
    }
    ~Scratch() { --depth_; }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    Split& operator*() const noexcept { return *sp_; }

  private:
    static inline thread_local std::vector<std::unique_ptr<Split>> levels_;
    static inline thread_local std::size_t depth_ = 0;
    Split* sp_;
};

void Engine::split(Split& sp, const ActiveMsgBase& am, std::span<const int> dests,
                   std::span<const double> priorities) {
    thread_local std::vector<std::uint32_t> mark;
    thread_local std::uint32_t generation = 0;
    if (!priorities.empty() && priorities.size() != dests.size())
        throw UsageError("active message '" + am.name() +
                         "': " + std::to_string(priorities.size()) + " priorities for " +
                         std::to_string(dests.size()) + " destinations");
    if (mark.size() < static_cast<std::size_t>(size_))
        mark.assign(static_cast<std::size_t>(size_), 0);
    if (++generation == 0) {
        std::fill(mark.begin(), mark.end(), 0);
        generation = 1;
    }
    sp.others.clear();
    sp.priorities.clear();
    sp.self = false;
    for (std::size_t i = 0; i < dests.size(); ++i) {
        const int d = dests[i];
        if (d < 0 || d >= size_)
            throw UsageError("active message '" + am.name() + "': destination rank " +
                             std::to_string(d) + " outside [0, " + std::to_string(size_) +
                             ") in a list of " + std::to_string(dests.size()) + " destinations");
        auto& m = mark[static_cast<std::size_t>(d)];
        if (m == generation)
            throw UsageError("active message '" + am.name() + "': rank " + std::to_string(d) +
                             " appears twice in one list of destinations (a broadcast reaches "
                             "each rank once)");
        m = generation;
        if (d == me_) {
            sp.self = true;
            continue;
        }
        sp.others.push_back(d);
        if (!priorities.empty()) sp.priorities.push_back(priorities[i]);
    }
}

Shape Engine::choose(std::size_t bytes, std::size_t recipients) const noexcept {
    switch (shape_.load(std::memory_order_relaxed)) {
        case BroadcastShape::binomial:
            return Shape::binomial;
        case BroadcastShape::pipelined:
            return Shape::pipelined;
        default:
            return bytes >= pipeline_.load(std::memory_order_relaxed) && recipients >= 2
                       ? Shape::pipelined
                       : Shape::binomial;
    }
}

std::size_t Engine::piece_for(std::size_t bytes) const noexcept {
    // Never more than kMaxBroadcastPieces pieces (receivers refuse more), whatever is forced.
    const std::size_t floor = bytes / kMaxBroadcastPieces + (bytes % kMaxBroadcastPieces != 0);
    const std::size_t forced = piece_.load(std::memory_order_relaxed);
    const std::size_t piece = forced > 0 ? forced : std::clamp(bytes / 32, kMinPiece, kMaxPiece);
    return std::max({piece, floor, std::size_t(1)});
}

std::size_t Engine::window_pieces(std::size_t piece) const noexcept {
    const std::size_t w = window_.load(std::memory_order_relaxed);
    if (w == 0) return ~std::size_t(0);
    return std::max<std::size_t>(1, w / std::max<std::size_t>(piece, 1));
}

// ---- per-sender order across routes -----------------------------------------------------------
// A rank's messages to one rank keep the order they were sent in, also when one of them is a
// broadcast that reaches it through an inner node. The root fences every rank its tree reaches
// through another rank: what it queues for that rank afterwards waits until the rank says the
// broadcast arrived (on_delivered). A rank that is fenced already, or has messages of this rank
// queued, is reached through no other rank: the root sends it the broadcast itself. The root's
// headers to its children are in order once the tree is routed: one queued later (after
// back-pressure ran handlers that broadcast, or while another thread broadcast) goes ahead of
// the fences raised on that child since, or the two trees could each wait for the other's
// acknowledgement.

void Engine::route(Shape shape, std::vector<Recipient>& list, std::vector<Child>& kids,
                   std::vector<std::uint64_t>& since) {
    // A recipient the tree would reach through another rank but that must be sent to directly
    // moves to the end of the list, a child of the root; the tree is made again over the ones
    // before it (each round takes one out, and usually there is no second round). The check
    // is a snapshot: another thread may fence a rank between it and raise_fence, which then
    // refuses (a second fence could wait for a message held behind the first); the fences
    // raised so far are lowered again and that rank moves too.
    std::size_t tree = list.size();
    for (;;) {
        children(shape, tree, kids);
        std::size_t moved = tree;
        for (const Child& c : kids) {
            for (std::size_t i = c.at + 1; i < c.at + 1 + c.count && moved == tree; ++i)
                if (LayerLink::must_send_directly(comm_, list[i].rank)) moved = i;
            if (moved != tree) break;
        }
        if (moved != tree) {
            std::rotate(list.begin() + static_cast<std::ptrdiff_t>(moved),
                        list.begin() + static_cast<std::ptrdiff_t>(moved) + 1, list.end());
            --tree;
            continue;
        }
        // The tree is in order from here on: the children's fence stretches are taken before
        // any fence of this tree is raised.
        since.clear();
        for (const Child& c : kids)
            since.push_back(LayerLink::fence_stretch(comm_, list[c.at].rank));
        for (std::size_t k = 0; k < kids.size() && moved == tree; ++k) {
            const Child& c = kids[k];
            for (std::size_t i = c.at + 1; i < c.at + 1 + c.count; ++i) {
                if (LayerLink::raise_fence(comm_, list[i].rank, list[i].after)) continue;
                moved = i;
                for (std::size_t kk = 0; kk <= k; ++kk) {
                    const std::size_t end =
                        kk < k ? kids[kk].at + 1 + kids[kk].count : moved;  // those raised
                    for (std::size_t j = kids[kk].at + 1; j < end; ++j)
                        LayerLink::lower_fence(comm_, list[j].rank);
                }
                break;
            }
        }
        if (moved == tree) break;
        std::rotate(list.begin() + static_cast<std::ptrdiff_t>(moved),
                    list.begin() + static_cast<std::ptrdiff_t>(moved) + 1, list.end());
        --tree;
    }
    for (std::size_t i = tree; i < list.size(); ++i) {
        kids.push_back(Child{i, 0});
        since.push_back(LayerLink::fence_stretch(comm_, list[i].rank));
    }
    for (const Child& c : kids)
        list[c.at].after = 0;  // a child of the root: its messages arrive in order
}

template <class... Ps>
void Engine::send_protocol(std::uint64_t since, int dest, ActiveMsg<Ps...>& am, const Ps&... ps) {
    const std::size_t bytes = (std::size_t(0) + ... + wire::size_of(ps));
    LayerLink::enqueue_past_fence(
        comm_, dest, am, bytes,
        [&](char* out) {
            wire::Writer w(out);
            (w.put(ps), ...);
            return w.position();
        },
        since);
}

void Engine::on_delivered(int rank) {
    if (rank != cascade::detail::tls_frame_source)
        throw WireError("broadcast: rank " + std::to_string(cascade::detail::tls_frame_source) +
                        " acknowledged a delivery for rank " + std::to_string(rank));
    LayerLink::lower_fence(comm_, rank);
}

// Sends the root the acknowledgement route() waits for, when this rank got a broadcast
// through an inner node (also when the handler threw: the root must not wait forever).
struct Engine::Delivered {
    Engine& e;
    const Header& h;
    ~Delivered() {
        if (h.from == h.root) return;
        try {
            e.send_protocol(0, h.root, *e.delivered_, e.me_);
        } catch (...) {  // the rank is going down with the error that is propagating
        }
    }
};

// A broadcast that came through an inner node runs after the messages its root queued for
// this rank before it (Header::after, counted by the root when it fenced this rank): one
// that arrives first, or while an earlier one of its root waits, waits here, and runs from an
// after-progress function once this rank has run those messages. Without it, a message the
// root had already handed to MPI could be overtaken by the inner node's forward (MPI keeps
// the order of one pair of ranks only).
bool Engine::must_wait(const Header& h) const {
    if (h.from == h.root) return false;
    if (LayerLink::frames_run_from(comm_, h.root) < h.after) return true;
    return std::any_of(waiting_.begin(), waiting_.end(),
                       [&](const Waiting& w) { return w.h.root == h.root; });
}

void Engine::wait(bool large, const Header& h, const view<const Recipient>& sub,
                  const view<const char>& payload) {
    if (!waiting_installed_ && !comm_.add_after_progress(&Engine::run_waiting, this)) {
        // Every after-progress slot is taken (many Objects on one communicator): run it now,
        // out of order, rather than never.
        log::warn("broadcast: no after-progress slot left to keep a broadcast in order");
        if (large)
            run_large(h, sub, payload);
        else
            run_small(h, sub, payload);
        return;
    }
    waiting_installed_ = true;
    waiting_.push_back(Waiting{large, h, std::vector<Recipient>(sub.begin(), sub.end()),
                               std::vector<char>(payload.begin(), payload.end())});
}

// Once every message sent in the epoch ran, the root's messages a waiting broadcast counts
// on have all run here: one still waiting came with a forged `after`.
std::string Engine::stranded() const {
    if (waiting_.empty()) return {};
    const Waiting& w = waiting_.front();
    return std::string("malformed active message '") + (w.large ? "broadcast.large" : "broadcast") +
           "' from " + rank_str(w.h.from) + ": broadcast header from " + rank_str(w.h.from) +
           ": runs after " + std::to_string(w.h.after) + " messages of root " + rank_str(w.h.root) +
           ", and the epoch ended with " +
           std::to_string(LayerLink::frames_run_from(comm_, w.h.root)) + " of them run here (" +
           std::to_string(waiting_.size()) + " broadcast(s) would never run)";
}

std::string Engine::describe_waits() const {
    if (waiting_.empty()) return {};
    const Waiting& w = waiting_.front();
    return std::to_string(waiting_.size()) +
           " broadcast(s) waiting for earlier messages of their " + "root, the first from root " +
           rank_str(w.h.root) + " through " + rank_str(w.h.from) + " (" +
           std::to_string(LayerLink::frames_run_from(comm_, w.h.root)) + " of its " +
           std::to_string(w.h.after) + " run here)";
}

bool Engine::run_waiting(void* self) {
    auto* e = static_cast<Engine*>(self);
    bool ran = false;
    for (std::size_t i = 0; i < e->waiting_.size();) {
        const Waiting& w = e->waiting_[i];
        bool earlier = false;  // an earlier one of its root still waits
        for (std::size_t j = 0; j < i && !earlier; ++j)
            earlier = e->waiting_[j].h.root == w.h.root;
        if (earlier || LayerLink::frames_run_from(e->comm_, w.h.root) < w.h.after) {
            ++i;
            continue;
        }
        Waiting now = std::move(e->waiting_[i]);
        e->waiting_.erase(e->waiting_.begin() + static_cast<std::ptrdiff_t>(i));
        ran = true;
        const view<const Recipient> sub(now.sub.data(), now.sub.size());
        const view<const char> payload(now.payload.data(), now.payload.size());
        try {
            if (now.large)
                e->run_large(now.h, sub, payload);
            else
                e->run_small(now.h, sub, payload);
        } catch (...) {
            e->comm_.fail_pool(std::current_exception());
        }
        i = 0;  // the next one of its root may run now
    }
    return ran;
}

// ---- small active messages -------------------------------------------------------------------

void Engine::tree_small(ActiveMsgBase& am, std::span<const int> dests,
                        std::span<const double> priorities, const char* payload, std::size_t size,
                        std::size_t detected) {
    const Scratch scratch;
    Split& sp = *scratch;
    split(sp, am, dests, priorities);
    auto plain = [&](int dest) {
        LayerLink::enqueue(comm_, dest, am, size, [&](char* out) {
            if (size) std::memcpy(out, payload, size);
            return out + size;
        });
    };
    n_.broadcasts.fetch_add(1, std::memory_order_relaxed);
    n_.recipients.fetch_add(sp.others.size() + (sp.self ? 1 : 0), std::memory_order_relaxed);
    if (detected) {
        n_.detected.fetch_add(1, std::memory_order_relaxed);
        n_.detected_sends.fetch_add(detected, std::memory_order_relaxed);
    }
    if (sp.others.size() == 1) {  // a tree of one: the plain message
        plain(sp.others[0]);
        n_.root_messages.fetch_add(1, std::memory_order_relaxed);
    } else if (!sp.others.empty()) {
        std::vector<Recipient>& list = sp.list;
        std::vector<Child>& kids = sp.kids;
        arrange(Shape::binomial, sp.others, sp.priorities, rotation_.fetch_add(1), list);
        route(Shape::binomial, list, kids, sp.since);
        const Header h{am.id(),
                       am.signature(),
                       me_,
                       me_,
                       static_cast<std::uint32_t>(Shape::binomial),
                       -1,
                       0,
                       0,
                       0,
                       0,
                       0};
        const view<const char> body(payload, size);
        const LayerLink::RoomWaitsDeferred whole_tree;
        for (std::size_t i = 0; i < kids.size(); ++i)
            send_protocol(sp.since[i], list[kids[i].at].rank, *small_, h,
                          view<const Recipient>(list.data() + kids[i].at + 1, kids[i].count), body);
        // (h.after stays 0: the root's children get the broadcast straight from it.)
        n_.root_messages.fetch_add(kids.size(), std::memory_order_relaxed);
    }
    if (sp.self) plain(me_);
}

ActiveMsgBase& Engine::user_am(const Header& h, bool large) {
    ActiveMsgBase* am = LayerLink::find_am(comm_, h.am);
    if (!am || am->signature() != h.sig || am->is_large() != large)
        comm_.abort_job(rank_str(me_) + ": a broadcast from " + rank_str(h.root) +
                        " carries active message #" + std::to_string(h.am) +
                        (am ? " ('" + am->name() + "' here, with other argument types)"
                            : " (not registered here)") +
                        "; active messages must be created in the same order with the same "
                        "argument types on every rank");
    return *am;
}

// A broadcast header from the wire, checked before anything is done with it: ranks inside
// the job, `from` the rank it really came from, each recipient once and never the root or
// this rank; for a body, its size, pieces and tag as a sender computes them.
void Engine::check(const Header& h, view<const Recipient>& sub, bool large) const {
    const int source = cascade::detail::tls_frame_source;
    auto bad = [&](const std::string& what) {
        throw WireError("broadcast header from " + rank_str(source) + ": " + what);
    };
    // A root delivers to itself through its own outbox (large bodies), with an empty list.
    if (h.root < 0 || h.root >= size_ ||
        (h.root == me_ && (source != me_ || !sub.empty() || h.ack != 0)))
        bad("root " + std::to_string(h.root));
    if (h.from != source)
        bad("says it comes from " + std::to_string(h.from) + ", not " + std::to_string(source));
    if (h.from == h.root && h.after != 0) bad("a direct message that waits for others");
    if (h.shape > static_cast<std::uint32_t>(Shape::pipelined))
        bad("shape " + std::to_string(h.shape));
    if (sub.size() >= static_cast<std::size_t>(size_))
        bad(std::to_string(sub.size()) + " recipients");
    for (const Recipient& r : sub)
        if (r.rank < 0 || r.rank >= size_ || r.rank == me_ || r.rank == h.root)
            bad("recipient " + std::to_string(r.rank));
    if (!large) return;
    if (h.bytes > cascade::detail::kMaxBody) bad("body of " + std::to_string(h.bytes) + " bytes");
    if (h.piece == 0 || pieces(h.bytes, h.piece) > kMaxBroadcastPieces)
        bad("piece of " + std::to_string(h.piece) + " bytes for a body of " +
            std::to_string(h.bytes));
    if (!LayerLink::is_body_tag(h.tag)) bad("body tag " + std::to_string(h.tag));
}

void Engine::on_small(Header& h, view<const Recipient>& sub, view<const char>& payload) {
    check(h, sub, false);
    if (must_wait(h)) {
        wait(false, h, sub, payload);
        return;
    }
    run_small(h, sub, payload);
}

void Engine::run_small(const Header& h, const view<const Recipient>& sub,
                       const view<const char>& payload) {
    ActiveMsgBase& am = user_am(h, false);
    const Delivered delivered{*this, h};
    // Forward first: the sub-tree's messages are queued inside this handler, so this rank's
    // queued count covers them before its processed count covers this message.
    const Scratch scratch;
    std::vector<Child>& kids = (*scratch).kids;
    children(static_cast<Shape>(h.shape), sub.size(), kids);
    Header f = h;
    f.from = me_;
    for (const Child& c : kids) {
        f.after = sub[c.at].after;
        send_protocol(0, sub[c.at].rank, *small_, f,
                      view<const Recipient>(sub.data() + c.at + 1, c.count), payload);
    }
    n_.forwarded.fetch_add(kids.size(), std::memory_order_relaxed);
    try {
        am.on_frame(h.root, payload.data(), payload.size());
    } catch (const WireError&) {
        throw;
    } catch (...) {
        throw std::runtime_error(
            "'" + am.name() + "' (broadcast from " + rank_str(h.root) +
            ") threw: " + cascade::detail::describe_error(std::current_exception()));
    }
}

// ---- large active messages -------------------------------------------------------------------

void Engine::post(int dest, const Header& h, std::span<const Recipient> sub,
                  std::span<const char> args, RootState* root, const void* body, std::size_t attach,
                  std::uint64_t mark, std::uint64_t since) {
    const view<const Recipient> s(sub.data(), sub.size());
    const view<const char> a(args.data(), args.size());
    const std::size_t bytes = wire::size_of(h) + wire::size_of(s) + wire::size_of(a);
    auto write = [&](char* out) {
        wire::Writer w(out);
        w.put(h);
        w.put(s);
        w.put(a);
        return w.position();
    };
    if (!root) {  // forwarded by an inner node
        LayerLink::enqueue_past_fence(comm_, dest, *large_, bytes, write);
        return;
    }
    if (attach == 0) {
        LayerLink::enqueue_past_fence(comm_, dest, *large_, bytes, write, since);
        return;
    }
    // The root's pieces go with the header, under the same lock.
    LayerLink::enqueue_past_fence(comm_, dest, *large_, bytes, write, since, [&](BodyQueue& q) {
        const std::size_t n = std::min(attach, pieces(h.bytes, h.piece));
        for (std::size_t k = 0; k < n; ++k) {
            const std::size_t off = k * h.piece;
            const std::size_t len =
                std::min<std::size_t>(h.piece, h.bytes - std::min<std::size_t>(h.bytes, off));
            q.attach(*sink_, static_cast<const char*>(body) + off, len, h.chunk,
                     Sink::encode(Sink::root_sent, root, mark), h.tag);
        }
    });
}

void Engine::tree_large(ActiveMsgBase& am, std::span<const int> dests,
                        std::span<const double> priorities, const void* body, std::size_t bytes,
                        std::vector<char> args, std::size_t times, std::size_t detected) {
    const Scratch scratch;
    Split& sp = *scratch;
    split(sp, am, dests, priorities);
    n_.broadcasts.fetch_add(1, std::memory_order_relaxed);
    n_.recipients.fetch_add(sp.others.size() + (sp.self ? 1 : 0), std::memory_order_relaxed);
    if (detected) {
        n_.detected.fetch_add(1, std::memory_order_relaxed);
        n_.detected_sends.fetch_add(detected, std::memory_order_relaxed);
    }
    if (sp.others.size() == 1 && !sp.self && times == 1) {  // a tree of one: the plain message
        n_.root_messages.fetch_add(1, std::memory_order_relaxed);
        LayerLink::enqueue_large(comm_, sp.others[0], am, body, bytes, std::move(args));
        return;
    }
    if (sp.others.empty() && !sp.self) {  // nobody: the buffer is free at once
        for (std::size_t t = 0; t < times; ++t)
            am.on_body_sent(args.data(), args.size());
        return;
    }
    const Shape shape = choose(bytes, sp.others.size());
    const std::size_t piece =
        shape == Shape::pipelined ? piece_for(bytes) : std::max<std::size_t>(bytes, 1);
    const std::size_t n = pieces(bytes, piece);
    std::vector<Recipient>& list = sp.list;
    std::vector<Child>& kids = sp.kids;
    arrange(shape, sp.others, sp.priorities, rotation_.fetch_add(1), list);
    route(shape, list, kids, sp.since);
    auto* st = new RootState;
    st->am = &am;
    st->args = std::move(args);
    st->times = times;
    st->sends_left = (kids.size() + (sp.self ? 1 : 0)) * n;
    Header h{am.id(), am.signature(),      me_, me_, static_cast<std::uint32_t>(shape), 0, bytes,
             piece,   comm_.large_chunk(), 0,   0};
    // Every child's header leaves now. With serial bodies only the first child's body goes
    // with it; the next one leaves when the previous child acknowledges its whole body
    // (on_ack): a send that is out has only reached the network stack, which may still hold
    // megabytes of it, and the next send would share the link with that tail. Children that
    // forward to nobody come last and go together: in turn they would all finish no earlier
    // than the last one does at once, and where copies run in parallel (shared memory) they
    // finish sooner.
    const bool serial = serial_bodies(n, kids, bytes);
    const std::size_t window = window_pieces(piece);
    const bool chain = kids.size() == 1 && n > window;
    // Everything the communication thread may read once the first body is out is set first.
    std::vector<int>& tags = sp.tags;
    tags.clear();
    for (std::size_t i = 0; i < kids.size(); ++i)
        tags.push_back(LayerLink::new_body_tag(comm_));
    st->tags.assign(tags.begin(), tags.end());
    if (sp.self) st->tags.push_back(LayerLink::new_body_tag(comm_));
    if (serial || chain) {
        st->body = body;
        st->h = h;
    }
    if (serial) {
        for (std::size_t i = 1; i < kids.size(); ++i)
            st->later.push_back(BodyDest{list[kids[i].at].rank, tags[i], kids[i].count == 0});
        st->token = new_ack_token(st, nullptr);
    }
    if (chain) {
        st->npieces = n;
        st->next_piece = window;
        st->chain = BodyDest{list[kids[0].at].rank, tags[0], kids[0].count == 0};
    }
    const LayerLink::RoomWaitsDeferred whole_tree;
    for (std::size_t i = 0; i < kids.size(); ++i) {
        const Child& c = kids[i];
        h.tag = tags[i];
        h.ack = ack_token(serial, kids, i, st->token);
        post(list[c.at].rank, h, std::span<const Recipient>(list.data() + c.at + 1, c.count),
             st->args, st, body,
             serial && i > 0 ? 0
             : chain         ? window
                             : n,
             chain ? 2 : 0, sp.since[i]);
    }
    h.ack = 0;
    n_.root_messages.fetch_add(kids.size(), std::memory_order_relaxed);
    if (sp.self) {
        h.tag = st->tags.back();
        post(me_, h, {}, st->args, st, body, n, 0, 0);
    }
}

void Engine::on_large(Header& h, view<const Recipient>& sub, view<const char>& args) {
    check(h, sub, true);
    if (must_wait(h)) {
        wait(true, h, sub, args);
        return;
    }
    run_large(h, sub, args);
}

void Engine::run_large(const Header& h, const view<const Recipient>& sub,
                       const view<const char>& args) {
    ActiveMsgBase& am = user_am(h, true);
    const Delivered delivered{*this, h};
    auto st = std::make_unique<RecvState>();
    st->am = &am;
    st->h = h;
    st->args.assign(args.begin(), args.end());
    void* where = am.body_where(st->args.data(), st->args.size());
    if (h.bytes > 0 && where == nullptr)
        throw UsageError("large active message '" + am.name() + "': where_to returned null for a " +
                         std::to_string(h.bytes) + "-byte body (broadcast from " +
                         rank_str(h.root) + ")");
    st->where = static_cast<char*>(where);
    st->npieces = pieces(h.bytes, h.piece);
    st->arrived.assign(st->npieces, false);
    // The children's headers leave now, from inside this handler (so they are counted before
    // this message is); their pieces follow as ours arrive.
    const Scratch scratch;
    std::vector<Child>& kids = (*scratch).kids;
    children(static_cast<Shape>(h.shape), sub.size(), kids);
    st->serial = serial_bodies(st->npieces, kids, h.bytes);
    if (st->serial) st->token = new_ack_token(nullptr, st.get());
    Header f = h;
    f.from = me_;
    for (std::size_t i = 0; i < kids.size(); ++i) {
        const Child& c = kids[i];
        f.tag = LayerLink::new_body_tag(comm_);
        f.ack = ack_token(st->serial, kids, i, st->token);
        f.after = sub[c.at].after;
        post(sub[c.at].rank, f, std::span<const Recipient>(sub.data() + c.at + 1, c.count),
             st->args, nullptr, nullptr, 0, 0, 0);
        st->kids.push_back(BodyDest{sub[c.at].rank, f.tag, c.count == 0});
    }
    n_.forwarded.fetch_add(kids.size(), std::memory_order_relaxed);
    st->sends_left = st->kids.size() * st->npieces;
    st->window = window_pieces(h.piece);
    st->chain = st->kids.size() == 1 && st->npieces > st->window;
    RecvState* raw = st.release();
    for (std::size_t k = 0; k < raw->npieces; ++k)
        LayerLink::receive_body(comm_, h.from, *sink_, raw->where + raw->offset(k), raw->length(k),
                                h.chunk, Sink::encode(Sink::piece_arrived, raw, k), h.tag);
}

void Engine::piece_arrived(RecvState* st, std::size_t k) {
    st->arrived[k] = true;
    // Pieces leave in order: a child matches them to its receives by order on their tag.
    for (; st->next < st->npieces && st->arrived[st->next]; ++st->next) {
        const std::size_t p = st->next;
        if (st->serial) {  // the first child now, the others from on_ack
            forward_next(st);
            continue;
        }
        if (st->chain) continue;  // pump() below
        for (const BodyDest& kid : st->kids)
            LayerLink::send_body_now(comm_, kid.rank, *sink_, st->where + st->offset(p),
                                     st->length(p), st->h.chunk,
                                     Sink::encode(Sink::forward_sent, st, p), kid.tag);
    }
    if (st->chain) pump(st);
    if (st->next == st->npieces && !st->delivered) {
        st->delivered = true;
        // The sender waits for this before it sends to its next child (serial bodies).
        if (st->h.ack != 0) send_protocol(0, st->h.from, *ack_, st->h.ack);
        n_.bodies_received.fetch_add(1, std::memory_order_relaxed);
        try {
            st->am->on_tree_body_arrived(st->args.data(), st->args.size());
        } catch (...) {
            throw std::runtime_error(
                "'" + st->am->name() + "' (on_arrival, broadcast from " + rank_str(st->h.root) +
                ") threw: " + cascade::detail::describe_error(std::current_exception()));
        }
        maybe_release(st);
    }
}

void Engine::forward_next(RecvState* st) {
    send_in_turn(st->kids, st->next_kid, st->token, st->where, st->length(0), st->h.chunk,
                 Sink::encode(Sink::forward_sent, st, 0));
}

void Engine::send_next_root(RootState* st) {
    send_in_turn(st->later, st->next_later, st->token, st->body, st->h.bytes, st->h.chunk,
                 Sink::encode(Sink::root_sent, st, 0));
}

void Engine::send_in_turn(const std::vector<BodyDest>& dests, std::size_t& next,
                          std::uint64_t token, const void* body, std::size_t bytes,
                          std::size_t chunk, const std::vector<char>& args) {
    // The next child, and with a leaf every leaf after it (see tree_large); the rest when
    // that child acknowledges (on_ack).
    const std::size_t end = dests[next].leaf ? dests.size() : next + 1;
    if (end == dests.size()) drop_ack_token(token);
    for (; next < end; ++next)
        LayerLink::send_body_now(comm_, dests[next].rank, *sink_, body, bytes, chunk, args,
                                 dests[next].tag);
}

std::uint64_t Engine::new_ack_token(RootState* root, RecvState* recv) {
    std::lock_guard<std::mutex> g(ack_mutex_);
    const std::uint64_t t = next_ack_++;
    acks_.emplace(t, AckTarget{root, recv});
    return t;
}

void Engine::drop_ack_token(std::uint64_t token) {
    if (token == 0) return;
    std::lock_guard<std::mutex> g(ack_mutex_);
    acks_.erase(token);
}

void Engine::on_ack(std::uint64_t token) {
    AckTarget t;
    {
        std::lock_guard<std::mutex> g(ack_mutex_);
        auto it = acks_.find(token);
        if (it == acks_.end())
            throw WireError("broadcast: acknowledgement for no broadcast body in flight here");
        t = it->second;
    }
    if (t.root)
        send_next_root(t.root);
    else
        forward_next(t.recv);
}

void Engine::pump(RecvState* st) {
    for (; st->sent < st->next && st->in_flight < st->window; ++st->sent, ++st->in_flight) {
        const BodyDest& kid = st->kids[0];
        LayerLink::send_body_now(comm_, kid.rank, *sink_, st->where + st->offset(st->sent),
                                 st->length(st->sent), st->h.chunk,
                                 Sink::encode(Sink::forward_sent, st, st->sent), kid.tag);
    }
}

void Engine::forward_sent(RecvState* st) {
    --st->sends_left;
    if (st->chain) {
        --st->in_flight;
        pump(st);
    }
    maybe_release(st);
}

void Engine::maybe_release(RecvState* st) {
    if (!st->delivered || st->sends_left > 0) return;
    std::unique_ptr<RecvState> done(st);
    for (const BodyDest& kid : done->kids)
        LayerLink::release_body_tag(comm_, kid.tag);
    done->am->on_body_released(done->args.data(), done->args.size());
}

void Engine::root_sent(RootState* st, std::uint64_t mark) {
    if (mark == 2 && st->next_piece < st->npieces) {
        const std::size_t k = st->next_piece++;
        const std::size_t off = k * st->h.piece;
        const std::size_t len = std::min<std::size_t>(st->h.piece, st->h.bytes - off);
        LayerLink::send_body_now(comm_, st->chain.rank, *sink_,
                                 static_cast<const char*>(st->body) + off, len, st->h.chunk,
                                 Sink::encode(Sink::root_sent, st, 2), st->chain.tag);
    }
    if (--st->sends_left > 0) return;
    std::unique_ptr<RootState> done(st);
    for (int tag : done->tags)
        LayerLink::release_body_tag(comm_, tag);
    for (std::size_t t = 0; t < done->times; ++t)
        done->am->on_body_sent(done->args.data(), done->args.size());
}

}  // namespace broadcast::detail

}  // namespace cascade
