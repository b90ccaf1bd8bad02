// Communicator: owns a private duplicate of an MPI communicator, the registry of active
// messages, the outgoing queues (one per destination; small messages queued together are
// sent as one MPI message), the progress engine (non-blocking MPI only), and distributed
// completion detection (TaskTorrent's COUNT / REQUEST / CONFIRMATION / SHUTDOWN protocol,
// see docs/completion.md). One thread talks to MPI: the one in Threadpool::join() or the
// caller of progress(); any thread may send.
#pragma once

#include <mpi.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cascade/comm/active_msg.hpp"
#include "cascade/comm/broadcasts.hpp"
#include "cascade/comm/detail/after_progress.hpp"
#include "cascade/comm/detail/body_tags.hpp"
#include "cascade/comm/detail/buffer_cache.hpp"
#include "cascade/comm/detail/bytes.hpp"
#include "cascade/comm/detail/completion.hpp"
#include "cascade/comm/detail/constants.hpp"
#include "cascade/comm/detail/frames.hpp"
#include "cascade/comm/detail/job_state.hpp"
#include "cascade/comm/detail/large_receives.hpp"
#include "cascade/comm/detail/message_counts.hpp"
#include "cascade/comm/detail/outbox.hpp"
#include "cascade/comm/detail/receive_slots.hpp"
#include "cascade/comm/detail/send_slots.hpp"
#include "cascade/comm/detail/source_order.hpp"
#include "cascade/comm/detail/world.hpp"
#include "cascade/comm/large_active_msg.hpp"
#include "cascade/core/detail/worker_context.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/spinlock.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/trace/recorder.hpp"

namespace cascade {

namespace detail {
struct CommTestAccess;
struct LayerLink;
class BodyQueue;
}  // namespace detail

/// Settings of a Communicator.
struct CommunicatorOptions {
    /// Verbosity (TaskTorrent's `verb`): 0 quiet; higher values log more of what this rank
    /// does.
    int verb = 0;
    /// Send the small messages queued for one destination as one MPI message.
    bool aggregate = true;
    /// MPI thread level requested if the Communicator initializes MPI itself.
    int thread_level = MPI_THREAD_FUNNELED;
    /// Broadcast detection (see Broadcasts); unset: from CASCADE_BCAST (on unless "0").
    std::optional<bool> broadcast_detection = std::nullopt;
    /// Back-pressure, per destination: once this many bytes of small messages are queued or
    /// in flight to one rank, a thread other than the communication thread that sends there
    /// waits until MPI has delivered some; once this many bytes of large bodies are in flight
    /// to one rank, nothing more leaves for it until some complete. A single body bigger
    /// than this still goes. 0: no limit.
    std::size_t max_bytes_in_flight = std::size_t(128) << 20;
};

/// Counters of one rank's Communicator (Communicator::stats()).
struct CommStats {
    std::uint64_t queued = 0;  ///< Active messages queued by this rank (user messages only).
    /// Active messages whose handlers ran on this rank (user messages only).
    std::uint64_t processed = 0;
    /// MPI messages this rank sent (several active messages may share one).
    std::uint64_t mpi_messages_sent = 0;
    /// Messages of the completion protocol this rank sent to other ranks (its COUNTs and
    /// CONFIRMs; on rank 0 also REQUESTs and SHUTDOWNs): at most 32 ranks, an iterative code
    /// whose ranks run the same messages every epoch takes one COUNT per rank and epoch
    /// (docs/design/completion.md).
    std::uint64_t control_messages_sent = 0;
    /// Bytes of the buffers kept for reuse while nothing is in them: spare send buffers, the
    /// buffer of the biggest recent burst of frames, the receive buffer of big messages, and
    /// the outboxes' empty buffers. Bursts bigger than the spares' limits keep their buffers
    /// only while two epochs do not end without one that fills at least half of them.
    std::size_t kept_buffer_bytes = 0;
};

/// The distributed layer of one process (see the top of this file). Create it before the
/// pool that uses it, and destroy it after: `Threadpool tp(n, &comm)` makes the pool's
/// join() drive MPI and wait until every rank is done.
///
/// ```cpp
/// cascade::Communicator comm;                  // initializes MPI if needed
/// cascade::Threadpool tp(2, &comm);
/// cascade::Taskflow<int> tf(&tp, "t");
/// auto am = comm.make_active_msg([&](int& k) { tf.fulfill_promise(k); }, "wake");
/// tf.set_task([](int k) { std::printf("task %d\n", k); });
/// const int next = (comm.rank() + 1) % comm.ranks();
/// am->send(next, comm.rank());            // runs task <my rank> on the next rank
/// tp.join();                                   // returns once every rank is done
/// ```
class Communicator : public JoinHook {
  public:
    /// Wraps a private duplicate of `comm` (initializing MPI first if nobody did).
    explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD, CommunicatorOptions opts = {});
    /// TaskTorrent's signature.
    Communicator(MPI_Comm comm, int verb) : Communicator(comm, CommunicatorOptions{.verb = verb}) {}
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    /// Collective: all ranks destroy their Communicator (the trace is gathered here).
    ~Communicator() override;

    /// This rank (0 .. ranks() - 1).
    int rank() const noexcept override { return world_.rank; }
    /// The number of ranks.
    int ranks() const noexcept { return world_.size; }
    /// The host's name (MPI_Get_processor_name).
    std::string processor_name() const;
    /// The private duplicate of the MPI communicator given to the constructor.
    MPI_Comm mpi_comm() const noexcept { return world_.comm; }

    /// Registers an active message running f (any non-generic callable taking its
    /// arguments by reference, Ps&...). Must be called in the same order on every rank.
    /// The Communicator owns the returned object.
    template <class F>
    auto make_active_msg(F&& f, std::string name = "");
    /// The same for a std::function; the other overload converts to this one.
    template <class... Ps>
    ActiveMsg<Ps...>* make_active_msg(std::function<void(Ps&...)> f, std::string name = "");

    /// Registers a large active message (see LargeActiveMsg): on_arrival(ps...) and
    /// where_to(ps...) -> T* on the receiver, on_sent(ps...) on the sender.
    template <class FArrival, class FWhere, class FSent>
    auto make_large_active_msg(FArrival&& on_arrival, FWhere&& where_to, FSent&& on_sent,
                               std::string name = "");

    /// Moves messages: sends what is queued, receives and runs handlers, completes transfers,
    /// calling the after-progress functions after each message's handlers and at the end
    /// (when no handler is running on this thread).
    /// Returns true if anything happened. Must be called by the thread that talks to MPI.
    bool progress();
    /// Work a higher layer left for after the handlers that queued it, outside any handler:
    /// `fn(ctx)` runs right after the handlers of each received message returned (before
    /// this thread tests for the next message) and at the end of progress(), and returns
    /// whether it did anything; what it sent leaves at once.
    using AfterProgress = detail::AfterProgressList::Fn;
    /// How many after-progress functions one communicator holds (futures, objects, ...).
    static constexpr std::size_t kMaxAfterProgress = detail::AfterProgressList::kCapacity;
    /// Adds `fn(ctx)` to the after-progress functions (called in the order they were
    /// added). Returns false (nothing added) when kMaxAfterProgress are installed. Call it
    /// from the communication thread or before join().
    bool add_after_progress(AfterProgress fn, void* ctx) noexcept;
    /// Removes `fn(ctx)` (nothing if it is not installed). Same threads as add_after_progress.
    void remove_after_progress(AfterProgress fn, void* ctx) noexcept;
    /// Whether `fn(ctx)` is installed.
    bool has_after_progress(AfterProgress fn, void* ctx) const noexcept;
    /// Records `e` as the error of the attached pool, as a task that threw would: join()
    /// rethrows it, on this rank and on every other one, and the tasks still queued are
    /// discarded. For work a layer runs on the communication thread outside any
    /// handler (an after-progress function). Without an attached pool it ends the job.
    void fail_pool(std::exception_ptr e) noexcept;
    /// True on the communication thread while it is inside progress().
    bool in_progress() const noexcept { return order_.progress_depth() > 0 && on_comm_thread(); }
    /// True when nothing is queued, in flight, or being received by this rank.
    bool is_done() const;

    /// Broadcasts: detection switch, shape settings, counters (see cascade/comm/broadcasts.hpp).
    Broadcasts& broadcasts() noexcept { return *bcast_; }
    /// Read-only broadcasts(): settings and counters.
    const Broadcasts& broadcasts() const noexcept { return *bcast_; }

    /// Turns aggregation of small messages per destination on or off
    /// (CommunicatorOptions::aggregate). Not synchronized: set it while nothing is sent.
    void set_aggregation(bool on) noexcept { opts_.aggregate = on; }
    /// Whether small messages to one destination are sent together as one MPI message.
    bool aggregation() const noexcept { return opts_.aggregate; }

    /// This rank's counters (see CommStats). On the communication thread or after join().
    CommStats stats() const;
    /// The back-pressure window (CommunicatorOptions::max_bytes_in_flight; 0: none).
    std::size_t max_bytes_in_flight() const noexcept { return opts_.max_bytes_in_flight; }
    /// Bytes of small messages queued for `dest` or handed to MPI and not yet delivered: what
    /// CommunicatorOptions::max_bytes_in_flight bounds (any thread; a snapshot).
    std::size_t bytes_in_flight(int dest) const;
    /// Bytes of large bodies queued for `dest` or handed to MPI and not yet delivered (any
    /// thread; a snapshot): at most max_bytes_in_flight plus one body after a send returns.
    std::size_t body_bytes_in_flight(int dest) const;

    /// Large bodies travel in MPI messages of at most this many bytes (default 1 GiB; the
    /// receiver follows the sender's value). Settable for tests of the chunked path, from any
    /// thread: each large send keeps the value it was queued with. 0 restores the default;
    /// values above 1 GiB are clamped to it (MPI counts are ints). A body travels in at most
    /// 1024 messages (more only above 1 TiB): for a bigger body the chunk is raised to
    /// bytes / 1024, on both sides.
    void set_large_chunk(std::size_t bytes) noexcept {
        large_chunk_.store(bytes == 0 || bytes > kDefaultChunk ? kDefaultChunk : bytes,
                           std::memory_order_relaxed);
    }
    /// The current chunk size for large bodies, in bytes (see set_large_chunk).
    std::size_t large_chunk() const noexcept {
        return large_chunk_.load(std::memory_order_relaxed);
    }
    /// Flushes the queued messages and waits until MPI has them, bodies of large messages
    /// excepted (communication thread).
    void flush_blocking();
    /// On the communication thread, hands what is queued to MPI now instead of at the end of
    /// this round of progress (for a message whose latency matters more than aggregating it
    /// with the next ones); elsewhere nothing (the communication thread sends it soon).
    void send_queued() {
        if (on_comm_thread()) flush();
    }
    /// Whether the calling thread is the one that talks to MPI.
    bool on_comm_thread() const noexcept;

    // ---- the JoinHook a pool calls (Threadpool tp(n, &comm)) -------------------------------
    /// One poll of join()'s loop: progress, then the completion protocol (public for
    /// diagnostics that drive it in a tight loop).
    PollResult poll(Threadpool& tp) override;
    /// True while this Communicator has work for the communication thread.
    bool wants_progress() const override;
    /// Between the tasks a joining worker runs: what they queued goes to MPI now (flush);
    /// true unless some of it is held back (fences, back-pressure), which a poll handles.
    bool hand_on_queued() override;
    /// A thread waiting for the pool's workers to take its tasks: the communication thread
    /// drives progress (workers' sends may wait for it), except inside a handler, where it
    /// never waits; other threads nap.
    Waiting how_to_wait() const noexcept override {
        if (!on_comm_thread()) return Waiting::napping;
        return order_.progress_depth() > 0 ? Waiting::never : Waiting::driving;
    }
    /// One round of progress (how_to_wait() said driving).
    bool help_while_waiting() override { return progress(); }
    /// This rank's index among the ranks of its node (node_local_rank at construction).
    int node_rank() const noexcept override { return world_.node_rank; }
    /// What this rank waits for (messages in flight, completion state), for the watchdog.
    std::string describe_state() const override;
    /// Prints `what` and ends the whole job (MPI_Abort).
    [[noreturn]] void abort_job(const std::string& what) override;

  protected:
    /// The watchdog of waits outside join()'s poll (flush_blocking, a future's get() on this
    /// thread, draining sends, the destructor): ends the job with `what` and this rank's state
    /// once nothing moved since `since` for longer than the watchdog limit (CASCADE_WATCHDOG).
    void check_stall(const char* what, std::chrono::steady_clock::time_point since);

  private:
    // What the layers built on active messages (broadcast, futures, objects) use, through
    // detail::LayerLink (comm/detail/layer_link.hpp), and the active messages themselves.
    friend struct detail::LayerLink;
    friend class detail::BodyQueue;
    template <class... Ps>
    friend class ActiveMsg;
    using Outbox = detail::Outbox;  ///< What is queued for one destination (outbox.hpp).
    /// The default `extra` of enqueue(): nothing more under the outbox lock.
    struct NoExtra {
        /// Does nothing.
        void operator()(Outbox&) const noexcept {}
    };
    /// Appends one frame for `am` to dest's outbox; `write(char* out)` serializes at most
    /// max_bytes and returns the end; `extra(outbox)` runs under the same lock (keeps large
    /// bodies in header order). Thread-safe.
    template <class Write, class Extra = NoExtra>
    void enqueue(int dest, const ActiveMsgBase& am, std::size_t max_bytes, Write&& write,
                 Extra&& extra = {});
    /// One small message's serialized arguments, for enqueue_many.
    struct HeldArgs {
        const ActiveMsgBase* am;  ///< Its active message.
        const char* data;         ///< Its arguments, as enqueue()'s `write` would write them.
        std::size_t len;          ///< Their bytes.
    };
    /// Appends the frames of `msgs`, in order, to dest's outbox under one lock: what a task
    /// or handler held back for broadcast detection and sends to one rank. Thread-safe.
    void enqueue_many(int dest, std::span<const HeldArgs> msgs);
    /// Bodies attached to an ordinary active message (a frame whose handler wants more than
    /// fits a message, e.g. the big arguments of an async call): the sender queues them from
    /// the enqueue's `extra` with attach_body, the receiving handler posts their receives with
    /// receive_body, in the same order. `am` is a large AM whose on_sent / on_arrival run when
    /// the body may be reused / has arrived; the bodies do not count as messages of their own.
    static void attach_body(Outbox& o, ActiveMsgBase& am, const void* body, std::size_t bytes,
                            std::size_t chunk, std::vector<char> args);
    /// tag < 0: the ordered body tag; otherwise a tag from new_body_tag() (bodies of
    /// broadcasts, matched by tag instead of by order, so an inner node may queue them as
    /// pieces arrive).
    void receive_body(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                      std::size_t chunk, std::vector<char> args, int tag = -1);
    /// attach_body on a tag from new_body_tag() (tag < 0: the ordered body tag), for bodies
    /// matched by tag (broadcasts).
    static void attach_body(Outbox& o, ActiveMsgBase& am, const void* body, std::size_t bytes,
                            std::size_t chunk, std::vector<char> args, int tag);
    /// Per-sender order across routes: a message of this rank reaches `dest` through other
    /// ranks (a broadcast's inner node), so what this rank queues for `dest` from now on waits
    /// until `dest` acknowledges that delivery (lower_fence, any thread); what was queued
    /// before leaves as usual. `after`: how many messages this rank queued for `dest` before
    /// (frames_run_from() on `dest` reaches it once they all ran there). Returns false, and
    /// raises nothing, when `dest` is fenced already: a message queued behind that fence
    /// would be counted in `after` and wait for this delivery's acknowledgement, which waits
    /// for it (the message must then go to `dest` directly). Checked and raised under the
    /// outbox's lock, so two threads routing trees at once never both fence one rank.
    bool raise_fence(int dest, std::uint64_t& after);
    /// How many messages from `source` this rank began to run so far (communication thread).
    std::uint64_t frames_run_from(int source) const noexcept { return order_.frames_from(source); }
    /// `dest` acknowledged one delivery that raise_fence announced.
    void lower_fence(int dest);
    /// While one lives, back-pressure waits of this thread's sends are put off; the last one
    /// to end makes them (the thread waits for room for each destination that was full).
    /// The messages of one broadcast tree are all queued before the thread waits for room for
    /// any of them: a handler that runs while it waits may broadcast and fence a child of the
    /// tree not yet sent to, and each tree would wait for the other.
    class RoomWaitsDeferred {
      public:
        RoomWaitsDeferred() noexcept;
        ~RoomWaitsDeferred() noexcept(false);
        RoomWaitsDeferred(const RoomWaitsDeferred&) = delete;
        RoomWaitsDeferred& operator=(const RoomWaitsDeferred&) = delete;
    };
    /// The stretch of fences `dest` is in (0: none). A message taken in order at this moment
    /// and queued later is queued ahead of the fences raised since (enqueue_past_fence).
    std::uint64_t fence_stretch(int dest) const;
    /// enqueue() for a message that goes ahead of the fences of its destination raised in any
    /// stretch but `since` (0: ahead of all of them), with the bodies that `extra` attaches:
    /// a message that is not this rank's own but part of a protocol (a broadcast forwarded by
    /// an inner node, an acknowledgement), or a broadcast's header to a child of the root,
    /// taken in order when the tree was routed. So fences never wait for each other.
    template <class Write, class Extra = NoExtra>
    void enqueue_past_fence(int dest, const ActiveMsgBase& am, std::size_t max_bytes, Write&& write,
                            std::uint64_t since = 0, Extra&& extra = Extra{});
    /// Whether a message of this rank for `dest` must go to it directly rather than through
    /// other ranks: earlier messages to it are fenced, queued here, or not yet completed by
    /// MPI, and a message by another route could overtake them (any thread; a snapshot).
    bool must_send_directly(int dest) const;
    /// Posts a body send at once (communication thread), on a tag from new_body_tag().
    void send_body_now(int dest, ActiveMsgBase& am, const void* body, std::size_t bytes,
                       std::size_t chunk, std::vector<char> args, int tag);
    /// An MPI tag for one body stream matched by tag (broadcasts), held until
    /// release_body_tag(): no two streams of this rank use one tag at the same time, so a
    /// receive posted for one stream never matches another's body. Thread-safe. Throws when
    /// every tag is held (that many bodies in flight from one rank).
    int new_body_tag();
    /// Gives back a tag from new_body_tag() once every piece of its stream was sent.
    void release_body_tag(int tag) noexcept;
    /// Whether `tag` is one new_body_tag() hands out (a tag read from the wire is checked).
    static constexpr bool is_body_tag(std::int64_t tag) noexcept {
        return detail::BodyTags::contains(tag);
    }

    /// A large message to one rank (what LargeActiveMsg::send_large queues).
    void enqueue_large(int dest, ActiveMsgBase& am, const void* body, std::size_t bytes,
                       std::vector<char> args);
    /// The active message registered with this id here, or null.
    ActiveMsgBase* find_am(std::uint32_t id) const noexcept {
        return id < ams_.size() ? ams_[id].get() : nullptr;
    }
    /// The pool attached to this Communicator (Threadpool tp(n, &comm)), or null.
    Threadpool* pool() const noexcept { return tp_; }
    /// Broadcast detection: where to write the arguments of a send held back, or null.
    char* held_send(ActiveMsgBase& am, int dest, std::size_t max_bytes) {
        // Sends are held on pool workers and in handlers only: other threads (the main
        // thread seeding a graph) skip the detection's lookups (~100 instructions a send).
        if (!detail::tls_worker.pool && detail::tls_handler_depth == 0) return nullptr;
        if (!am.broadcast_detection() || !bcast_->detection()) return nullptr;
        return bcast_->defer_begin(am, dest, max_bytes);
    }

    /// The default (and largest) chunk size of large bodies: 1 GiB.
    static constexpr std::size_t kDefaultChunk = detail::comm::kDefaultChunk;

    /// A large body queued for one destination, sent after the frames queued before it.
    using LargeSend = detail::LargeSend;

  protected:
    /// Active messages queued by this rank so far (user messages only). Any thread.
    std::uint64_t queued() const noexcept { return counts_.queued(); }
    /// Active messages whose handlers ran on this rank so far (communication thread).
    std::uint64_t processed() const noexcept { return counts_.processed(); }

  private:
    friend struct detail::CommTestAccess;  // what tests do (comm/detail/test_access.hpp)
    std::size_t drop_body_receives();      // CommTestAccess::drop_body_receives
    std::size_t kept_buffer_bytes() const;
    template <class T, class... Ps>
    friend class LargeActiveMsg;
    // The pool's constructor attaches it; its destructor detaches it (JoinHook).
    void attach(Threadpool& tp) override;
    void detach(Threadpool& tp) noexcept override;
    void receive_large(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                       std::size_t chunk, std::vector<char> args, int tag = -1);

    using Frame = detail::Frame;  // header of one message inside an MPI buffer (frames.hpp)
    using PendingSend = detail::PendingSend;  // one send handed to MPI (send_slots.hpp)
    using CtrlMsg = detail::CtrlMsg;          // a control message (completion, abort)

    ActiveMsgBase* register_am(std::unique_ptr<ActiveMsgBase> am, std::string name);
    [[noreturn, gnu::cold]] static void too_many_argument_bytes(const ActiveMsgBase& am,
                                                                std::size_t bytes);
    void send_segment(PendingSend& ps, int dest, std::size_t begin, std::size_t end);
    void post_large(int dest, LargeSend l);
    void receive_big(int source, const detail::FrameRef& announce);
    bool test_big_recvs();
    PollResult poll_once(Threadpool& tp);
    std::vector<std::string> am_names() const;
    void write_trace_of_rank() noexcept;
    void tell_peers_of_abort() noexcept;
    void tell_peers_of_error(std::exception_ptr e);
    void banner(const Threadpool& tp) const;
    void on_peer_error(int rank, int thread, std::string task, std::string what);
    void sent_from_outside(const ActiveMsgBase& am);
    [[noreturn]] void progress_failed(const char* where, std::exception_ptr e);
    void flush();
    void take_before_fence(Outbox& o, detail::Bytes& buf, std::vector<LargeSend>& larges);
    static void move_before_fence(Outbox& o, std::size_t frame_at, std::size_t larges_at);
    void split_at_fence(Outbox& o, detail::Bytes& rest, std::vector<LargeSend>& rest_larges);
    void send_frames(int d, detail::Bytes buf);
    bool run_after_progress();  // the after-progress functions, outside handlers
    void test_sends();
    void finish_send(PendingSend& finished);
    void wait_for_room(int dest);
    std::ptrdiff_t room_left(int dest) const;
    struct InFlight {
        std::size_t frames = 0;         // bytes of frames queued or in flight
        std::size_t bodies = 0;         // bytes of bodies queued or in flight
        std::size_t bodies_flying = 0;  // of which in flight
        std::size_t bodies_queued = 0;  // bodies queued (a count)
    };
    InFlight in_flight(int dest, const char* what) const;
    bool receive();
    void run_message(int source, const char* data, std::size_t size);
    void run_frames(int source, const char* data, std::size_t size);
    void run_frame(int source, const detail::FrameRef& fr);
    void run_frame_traced(int source, const detail::FrameRef& fr, ActiveMsgBase& am);
    // A frame of an unregistered message or with another signature: ends the job.
    [[noreturn, gnu::cold, gnu::noinline]] void unknown_frame(int source,
                                                              const detail::FrameRef& fr);
    // A handler threw (or its arguments were malformed): ends the job or records the error.
    [[gnu::cold, gnu::noinline]] void frame_failed(int source, const ActiveMsgBase& am,
                                                   std::exception_ptr e);
    bool test_large_recvs();
    void send_ctrl(int dest, CtrlMsg m);
    void on_ctrl(int source, const CtrlMsg& m);
    [[noreturn, gnu::cold]] void unknown_ctrl(int source, const CtrlMsg& m);
    bool locally_idle(Threadpool& tp) const;
    bool channel_counts(std::uint64_t* sent, std::uint64_t* processed) const;
    void handler_failed(const ActiveMsgBase& am, int source, std::exception_ptr e,
                        const char* which);
    void reset_epoch();
    void trace_ctrl(int peer, const CtrlMsg& m, bool received);

    detail::World world_;  // the MPI communicator, this rank, its node (world.hpp)
    CommunicatorOptions opts_;
    std::vector<std::unique_ptr<ActiveMsgBase>> ams_;
    std::unique_ptr<Outbox[]> outbox_;
    std::atomic<int> outbox_pending_{0};
    detail::SendSlots sends_;          // MPI sends in flight, tested together
    detail::ReceiveSlots slots_;       // receives posted ahead (receive_slots.hpp)
    detail::LargeReceives large_;      // bodies and big messages being received
    detail::SourceOrder order_;        // per-source order under nested progress
    detail::BufferCache buffers_;      // buffers kept for reuse (buffer_cache.hpp)
    detail::AfterProgressList after_;  // add_after_progress (after_progress.hpp)
    std::atomic<std::size_t> large_chunk_{kDefaultChunk};
    detail::BodyTags body_tags_;  // tags of bodies matched by tag (broadcasts)
    std::unique_ptr<Broadcasts> bcast_;
    int pending_large_sends_ = 0;
    int held_ = 0;  // destinations the last flush() held back (bodies in flight, back-pressure)
    std::function<void()> progress_fault_;  // CommTestAccess::set_progress_fault
    std::function<void(int)> fence_hook_;   // CommTestAccess::set_fence_hook
    // An error of a task or handler of one rank, told to the others (poll_once).
    ActiveMsg<int, int, std::string, std::string>* error_am_ = nullptr;
    // join() runs, how the last one ended, this epoch's error told or received (job_state.hpp).
    detail::JobState job_;
    // join()'s polls in a row that moved nothing while a transfer was in flight (poll_once).
    std::uint8_t quiet_in_flight_ = 0;
    std::uint64_t send_serial_ = 1;  // next frame message's PendingSend::serial
    Threadpool* tp_ = nullptr;
    detail::MessageCounts counts_;  // messages queued, run, sent (message_counts.hpp)

    // Completion detection (docs/design/completion.md): its epoch, the counts reported, rank
    // 0's view of every rank's; driven by poll() (join.cpp).
    detail::Completion completion_;
    std::uint64_t ctrl_sent_ = 0;  // control messages sent to other ranks (stats())
};

}  // namespace cascade

// Template definitions (make_active_msg, enqueue, ActiveMsg::send, ...).
#include "cascade/comm/detail/communicator_impl.hpp"
// What the layers above ask of a Communicator (detail::LayerLink).
#include "cascade/comm/detail/layer_link.hpp"
