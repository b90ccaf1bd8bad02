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
#include <string>
#include <vector>

#include "cascade/comm/active_msg.hpp"
#include "cascade/comm/detail/frames.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/spinlock.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/trace/recorder.hpp"

namespace cascade {

namespace detail {
// Allocator whose resize() leaves new elements uninitialized: message buffers are written
// right after they grow, so zero-filling them first (a pass over megabytes for big
// arguments) is wasted.
template <class T>
struct UninitAllocator : std::allocator<T> {
    using value_type = T;
    template <class U>
    struct rebind {
        using other = UninitAllocator<U>;
    };
    UninitAllocator() = default;
    template <class U>
    UninitAllocator(const UninitAllocator<U>&) noexcept {}
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... A>
    void construct(U* p, A&&... a) {
        ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
    friend bool operator==(const UninitAllocator&, const UninitAllocator&) noexcept { return true; }
};
using Bytes = std::vector<char, UninitAllocator<char>>;
}  // namespace detail

struct CommunicatorOptions {
    int verb = 0;
    // Send the small messages queued for one destination as one MPI message.
    bool aggregate = true;
    // MPI thread level requested if the Communicator initializes MPI itself.
    int thread_level = MPI_THREAD_FUNNELED;
};

class Communicator : public JoinHook {
  public:
    explicit Communicator(MPI_Comm comm = MPI_COMM_WORLD, CommunicatorOptions opts = {});
    Communicator(MPI_Comm comm, int verb) : Communicator(comm, CommunicatorOptions{.verb = verb}) {}
    Communicator(const Communicator&) = delete;
    Communicator& operator=(const Communicator&) = delete;
    ~Communicator() override;

    int comm_rank() const noexcept { return rank_; }
    int comm_size() const noexcept { return size_; }
    std::string processor_name() const;
    MPI_Comm mpi_comm() const noexcept { return comm_; }

    // Registers an active message running f (any callable taking Ps&...). Must be called in
    // the same order on every rank. The Communicator owns the returned object.
    template <class F>
    auto make_active_msg(F&& f, std::string name = "");
    template <class... Ps>
    ActiveMsg<Ps...>* make_active_msg(std::function<void(Ps&...)> f, std::string name = "");

    // Registers a large active message (see LargeActiveMsg).
    template <class FArrival, class FWhere, class FSent>
    auto make_large_active_msg(FArrival&& on_arrival, FWhere&& where_to, FSent&& on_sent,
                               std::string name = "");

    // Moves messages: sends what is queued, receives and runs handlers, completes transfers,
    // then (when no handler is running on this thread) calls the after-progress function.
    // Returns true if anything happened. Must be called by the thread that talks to MPI.
    bool progress();
    // Work a higher layer left for the end of progress(), outside any handler: `fn(ctx)`
    // runs there and returns whether it did anything. One per communicator (null: none).
    using AfterProgress = bool (*)(void* ctx);
    void set_after_progress(AfterProgress fn, void* ctx) noexcept {
        after_progress_ = fn;
        after_ctx_ = ctx;
    }
    AfterProgress after_progress() const noexcept { return after_progress_; }
    // True on the communication thread while it is inside progress().
    bool in_progress() const noexcept { return progress_depth_ > 0 && on_comm_thread(); }
    // True when nothing is queued, in flight, or being received by this rank.
    bool is_done() const;

    void set_aggregation(bool on) noexcept { opts_.aggregate = on; }
    bool aggregation() const noexcept { return opts_.aggregate; }

    // AM counts (user messages only): queued here / processed here.
    std::uint64_t queued() const noexcept { return queued_.load(std::memory_order_acquire); }
    std::uint64_t processed() const noexcept { return processed_; }
    std::uint64_t mpi_messages_sent() const noexcept { return mpi_sends_; }

    // ---- used by ActiveMsg / LargeActiveMsg / Threadpool ----------------------------------
    struct Outbox;
    struct NoExtra {
        void operator()(Outbox&) const noexcept {}
    };
    // Appends one frame for `am` to dest's outbox; `write` serializes at most max_bytes and
    // returns the end; `extra` runs under the same lock (keeps large bodies in header order).
    template <class Write, class Extra = NoExtra>
    void enqueue(int dest, const ActiveMsgBase& am, std::size_t max_bytes, Write&& write,
                 Extra&& extra = {});
    void enqueue_large(int dest, ActiveMsgBase& am, const void* body, std::size_t bytes,
                       std::vector<char> args);
    void receive_large(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                       std::size_t chunk, std::vector<char> args);
    // Bodies attached to an ordinary active message (a frame whose handler wants more than
    // fits a message, e.g. the big arguments of an async call): the sender queues them from
    // the enqueue's `extra` with attach_body, the receiving handler posts their receives with
    // receive_body, in the same order. `am` is a large AM whose on_sent / on_arrival run when
    // the body may be reused / has arrived; the bodies do not count as messages of their own.
    static void attach_body(Outbox& o, ActiveMsgBase& am, const void* body, std::size_t bytes,
                            std::size_t chunk, std::vector<char> args);
    void receive_body(int source, ActiveMsgBase& am, void* dest, std::size_t bytes,
                      std::size_t chunk, std::vector<char> args);
    void attach(Threadpool& tp);
    void detach(Threadpool& tp) noexcept override;
    PollResult poll(Threadpool& tp) override;
    bool wants_progress() const override;
    int rank() const noexcept override { return rank_; }
    std::string describe_state() const override;
    [[noreturn]] void abort_job(const std::string& what) override;
    // Large bodies travel in MPI messages of at most this many bytes (default 1 GiB; the
    // receiver follows the sender's value). Settable for tests of the chunked path, from any
    // thread: each large send keeps the value it was queued with. 0 restores the default;
    // values above 1 GiB are clamped to it (MPI counts are ints).
    void set_large_chunk(std::size_t bytes) noexcept {
        large_chunk_.store(bytes == 0 || bytes > kDefaultChunk ? kDefaultChunk : bytes,
                           std::memory_order_relaxed);
    }
    std::size_t large_chunk() const noexcept {
        return large_chunk_.load(std::memory_order_relaxed);
    }
    // Flushes the queued messages and waits until MPI has them, bodies of large messages
    // excepted (communication thread).
    void flush_blocking();
    bool on_comm_thread() const noexcept;

    static constexpr std::size_t kDefaultChunk = std::size_t(1) << 30;

    struct LargeSend {
        ActiveMsgBase* am;
        const char* body;
        std::size_t bytes;
        std::vector<char> args;
        std::size_t chunk;  // the one written in the header: the receiver posts by it
    };
    struct alignas(64) Outbox {
        Spinlock lock;
        detail::Bytes buf;
        std::vector<LargeSend> larges;
        std::atomic<bool> nonempty{false};
        std::uint64_t seq = 0;  // frames queued to this destination so far (names them in traces)
    };

    // The watchdog of waits outside join()'s poll (flush_blocking, a future's get() on this
    // thread, draining sends, the destructor): ends the job with `what` and this rank's state
    // once nothing moved since `since` for longer than the watchdog limit (CASCADE_WATCHDOG).
    void check_stall(const char* what, std::chrono::steady_clock::time_point since);

    // For tests of fail-stop: f runs at the start of every progress() on this rank (it may
    // throw, as a failing MPI call or allocation would). Null: none.
    void set_progress_fault_for_test(std::function<void()> f) { progress_fault_ = std::move(f); }

  private:
    using Frame = detail::Frame;  // header of one message inside an MPI buffer (frames.hpp)
    struct PendingSend {
        detail::Bytes buf;
        std::vector<MPI_Request> reqs;
        std::deque<std::array<std::uint64_t, 3>> announce;  // frames announcing big messages
        std::unique_ptr<LargeSend> large;                   // on_sent to run on completion
        int dest = -1;                                      // large sends: for the trace
        std::uint64_t serial = 0;                           // frame messages, in flush order
        std::int64_t t0 = 0;
    };
    struct PendingRecv {
        ActiveMsgBase* am;
        int source;
        std::vector<MPI_Request> reqs;
        std::vector<char> args;
        std::uint64_t seq = 0;  // of the header frame, and when it arrived (for the trace)
        std::size_t bytes = 0;
        std::int64_t t0 = 0;
        bool counted = true;  // a large AM (counts as processed once here), not a body
    };
    // ABORT: the sender ends the job (a trace is recorded): write your events, then ABORT_ACK.
    enum Ctrl : std::uint32_t { COUNT = 1, REQUEST, CONFIRM, SHUTDOWN, ABORT, ABORT_ACK };
    struct CtrlMsg {
        std::uint32_t type;
        std::uint32_t epoch;
        std::uint64_t a, b, c;
    };

    ActiveMsgBase* register_am(std::unique_ptr<ActiveMsgBase> am, std::string name);
    void post_receives();
    void post_am_slot(int parity, int slot);
    void post_ctrl_slot(int slot);
    void send_segment(PendingSend& ps, int dest, std::size_t begin, std::size_t end);
    void receive_big(int source, const detail::FrameRef& announce);
    bool test_big_recvs();
    PollResult poll_once(Threadpool& tp);
    std::vector<std::string> am_names() const;
    void write_trace_of_rank() noexcept;
    void tell_peers_of_abort() noexcept;
    void sent_from_outside(const ActiveMsgBase& am);
    [[noreturn]] void progress_failed(const char* where, std::exception_ptr e);
    void flush();
    void test_sends();
    bool receive();
    void run_message(int source, const char* data, std::size_t size);
    void run_frames(int source, const char* data, std::size_t size);
    void run_frame(int source, const detail::FrameRef& fr);
    bool test_large_recvs();
    void send_ctrl(int dest, CtrlMsg m);
    void on_ctrl(int source, const CtrlMsg& m);
    bool locally_idle(Threadpool& tp) const;
    void handler_failed(const ActiveMsgBase& am, int source, std::exception_ptr e,
                        const char* which);
    bool completion_step(Threadpool& tp);
    void reset_epoch();
    void trace_ctrl(int peer, const CtrlMsg& m, bool received);

    MPI_Comm comm_ = MPI_COMM_NULL;
    CommunicatorOptions opts_;
    bool owns_mpi_ = false;
    int rank_ = 0, size_ = 1;
    std::vector<std::unique_ptr<ActiveMsgBase>> ams_;
    std::unique_ptr<Outbox[]> outbox_;
    std::atomic<int> outbox_pending_{0};
    std::deque<PendingSend> sends_;
    std::deque<PendingRecv> large_recvs_;
    std::vector<MPI_Status> statuses_;  // scratch for MPI_Testall
    std::vector<detail::Bytes> spare_bufs_;
    // Receives posted ahead of time (cheaper than probing): small AM messages land in one of
    // kAmSlots buffers, control messages in one of kCtrlSlots; each kind is processed in the
    // order its receives were posted, which is the order messages from one rank arrive in.
    // AM messages carry the parity of their sender's completion epoch in their tag, and
    // there is one set of slots per parity: a rank that finished an epoch first may send
    // messages of the next one, which wait until this rank has finished the epoch too.
    static constexpr int kAmSlots = 6, kCtrlSlots = 4;
    struct AmSlots {
        std::unique_ptr<std::uint64_t[]> buf[kAmSlots];
        MPI_Request req[kAmSlots];
        int order[kAmSlots] = {};  // posted slots, oldest first (a ring of `count` entries)
        int head = 0, count = 0;
    };
    AmSlots am_[2];
    CtrlMsg ctrl_buf_[kCtrlSlots] = {};
    MPI_Request ctrl_req_[kCtrlSlots];
    int ctrl_head_ = 0;
    detail::Bytes recv_buf_;  // big messages (announced in a small one), kept when small enough
    // Big messages being received, one per source at most: that source's later messages
    // wait in deferred_ (open_ counts the receive) until it arrived and ran.
    struct BigRecv {
        int source;
        detail::Bytes buf;
        MPI_Request req;
    };
    std::vector<BigRecv> big_recvs_;
    std::atomic<std::size_t> large_chunk_{kDefaultChunk};
    // Per-source FIFO under nested progress: a handler that calls progress() (blocking_send,
    // a get() on this thread) must not see the next message of the rank whose message it
    // runs, or that rank's messages would run out of order and its large bodies would be
    // matched to the wrong headers. Such messages wait in deferred_ until the handler returns.
    std::vector<int> open_;   // messages of each source running now
    int handlers_open_ = 0;   // their sum
    int progress_depth_ = 0;  // progress() calls on the stack
    AfterProgress after_progress_ = nullptr;
    void* after_ctx_ = nullptr;
    std::vector<std::deque<detail::Bytes>> deferred_;  // received meanwhile, per source
    int pending_large_sends_ = 0;
    std::function<void()> progress_fault_;  // set_progress_fault_for_test
    // join() runs (from its first poll until it returns): a send from a thread outside the
    // pool then could change the counts after completion was confirmed (checked mode says so).
    std::atomic<bool> joining_{false};
    bool abandoned_ = false;        // the pool was destroyed by an exception, work unfinished
    bool trace_written_ = false;    // this rank's events were written on the way to an abort
    std::uint64_t joins_done_ = 0;  // join()s that completed
    std::uint64_t settled_q_ = 0, settled_p_ = 0;  // counts when the last one completed
    std::uint64_t send_serial_ = 1;                // next frame message's PendingSend::serial
    Threadpool* tp_ = nullptr;

    std::atomic<std::uint64_t> queued_{0};
    std::uint64_t processed_ = 0;
    std::uint64_t mpi_sends_ = 0;
    std::vector<std::uint64_t> recv_seq_;  // frames received from each source so far
    std::uint64_t cur_seq_ = 0;            // of the frame whose handler runs now

    // Completion detection state (see docs/completion.md).
    std::uint32_t epoch_ = 0;
    std::uint64_t last_q_ = ~0ull, last_p_ = ~0ull;  // counts last reported (COUNT)
    bool have_request_ = false;                      // latest REQUEST not yet confirmed
    std::uint64_t req_q_ = 0, req_p_ = 0, req_tag_ = 0;
    bool shutdown_ = false;
    std::optional<std::chrono::steady_clock::time_point> idle_since_;  // idle stretch start
    std::chrono::steady_clock::duration count_delay_ = std::chrono::microseconds(20);
    std::vector<std::pair<int, CtrlMsg>> early_ctrl_;  // control messages of a later epoch
    // rank 0 only
    std::vector<std::uint64_t> cnt_q_, cnt_p_;
    std::vector<bool> reported_;
    int n_reported_ = 0;
    bool counts_changed_ = false;
    std::uint64_t tag_ = 0;
    std::vector<std::uint64_t> confirmed_;  // latest tag confirmed by each rank
};

// ---- templates -----------------------------------------------------------------------------

template <class... Ps>
ActiveMsg<Ps...>* Communicator::make_active_msg(std::function<void(Ps&...)> f, std::string name) {
    return static_cast<ActiveMsg<Ps...>*>(
        register_am(std::make_unique<ActiveMsg<Ps...>>(std::move(f)), std::move(name)));
}

namespace detail {
template <class Tuple>
struct am_from_tuple;
template <class... Ps>
struct am_from_tuple<std::tuple<Ps...>> {
    using type = ActiveMsg<Ps...>;
    using fn = std::function<void(Ps&...)>;
};
template <class T, class Tuple>
struct large_am_from_tuple;
template <class T, class... Ps>
struct large_am_from_tuple<T, std::tuple<Ps...>> {
    using type = LargeActiveMsg<T, Ps...>;
    using fn = std::function<void(Ps&...)>;
    using where = std::function<T*(Ps&...)>;
};
}  // namespace detail

template <class F>
auto Communicator::make_active_msg(F&& f, std::string name) {
    using Tr = detail::am_from_tuple<typename detail::callable_args<std::decay_t<F>>::tuple>;
    return static_cast<typename Tr::type*>(register_am(
        std::make_unique<typename Tr::type>(typename Tr::fn(std::forward<F>(f))), std::move(name)));
}

template <class FArrival, class FWhere, class FSent>
auto Communicator::make_large_active_msg(FArrival&& on_arrival, FWhere&& where_to, FSent&& on_sent,
                                         std::string name) {
    using Args = typename detail::callable_args<std::decay_t<FArrival>>::tuple;
    using Ptr = std::invoke_result_t<decltype(std::apply<FWhere&, Args&>), FWhere&, Args&>;
    using T = std::remove_pointer_t<Ptr>;
    using Tr = detail::large_am_from_tuple<T, Args>;
    return static_cast<typename Tr::type*>(register_am(
        std::make_unique<typename Tr::type>(typename Tr::fn(std::forward<FArrival>(on_arrival)),
                                            typename Tr::where(std::forward<FWhere>(where_to)),
                                            typename Tr::fn(std::forward<FSent>(on_sent))),
        std::move(name)));
}

template <class Write, class Extra>
void Communicator::enqueue(int dest, const ActiveMsgBase& am, std::size_t max_bytes, Write&& write,
                           Extra&& extra) {
    if (dest < 0 || dest >= size_)
        throw UsageError("active message '" + am.name() + "': destination rank " +
                         std::to_string(dest) + " outside [0, " + std::to_string(size_) + ")");
    if (max_bytes > (std::size_t(1) << 30))
        throw UsageError("active message '" + am.name() + "': " + std::to_string(max_bytes) +
                         " bytes of arguments; use a large active message for big payloads");
    if (joining_.load(std::memory_order_relaxed)) [[unlikely]]
        if (tp_ && tp_->checked() && !on_comm_thread() && tp_->current_thread() < 0)
            sent_from_outside(am);
    Outbox& o = outbox_[dest];
    trace::Buffer* tb = trace::recording() ? trace::this_thread() : nullptr;
    const std::int64_t t0 = tb ? trace::stamp() : 0;
    std::uint64_t seq = 0;
    std::size_t len = 0;
    {
        std::lock_guard<Spinlock> g(o.lock);
        const std::size_t at = o.buf.size();
        o.buf.resize(at + sizeof(Frame) + max_bytes + 7);
        char* payload = o.buf.data() + at + sizeof(Frame);
        char* end = write(payload);
        len = static_cast<std::size_t>(end - payload);
        std::memset(end, 0, detail::round8(len) - len);  // padding never carries stale bytes
        seq = o.seq++;
        Frame fr{am.id(), am.signature(), len};
        std::memcpy(o.buf.data() + at, &fr, sizeof fr);
        o.buf.resize(at + sizeof(Frame) + ((len + 7) & ~std::size_t(7)));
        extra(o);
        queued_.fetch_add(1, std::memory_order_release);
        if (!o.nonempty.exchange(true, std::memory_order_acq_rel))
            outbox_pending_.fetch_add(1, std::memory_order_release);
    }
    if (tb) [[unlikely]] {
        if (trace::Event* e = tb->reserve(trace::Kind::send)) {
            e->t0 = t0;
            e->t1 = trace::stamp();
            e->peer = dest;
            e->am = am.id();
            e->a = seq;
            e->b = len;
            tb->commit();
        }
    }
    if (tp_ && !on_comm_thread()) tp_->wake_joiner();
}

template <class... Ps>
void ActiveMsg<Ps...>::send(int dest, const Ps&... ps) {
    const std::size_t bytes = (std::size_t(0) + ... + wire::size_of(ps));
    comm_->enqueue(dest, *this, bytes, [&](char* out) {
        wire::Writer w(out);
        (w.put(ps), ...);
        return w.position();
    });
}

template <class... Ps>
void ActiveMsg<Ps...>::blocking_send(int dest, const Ps&... ps) {
    send(dest, ps...);
    if (comm_->on_comm_thread()) comm_->flush_blocking();
}

template <class T, class... Ps>
void LargeActiveMsg<T, Ps...>::send_large(int dest, view<T> body, const Ps&... ps) {
    std::vector<char> args((std::size_t(0) + ... + wire::size_of(ps)) + 8);
    // Align the args copy like a frame payload so views inside decode aligned.
    wire::Writer w(args.data());
    (w.put(ps), ...);
    args.resize(static_cast<std::size_t>(w.position() - args.data()));
    comm_->enqueue_large(dest, *this, body.data(), body.size() * sizeof(T), std::move(args));
}

template <class T, class... Ps>
void LargeActiveMsg<T, Ps...>::on_frame(int source, const char* data, std::size_t size) {
    wire::Reader r(data, size);
    const auto bytes = r.get<std::uint64_t>();
    const auto chunk = r.get<std::uint64_t>();
    std::vector<char> args(data + (size - r.remaining()), data + size);
    wire::Reader ra(args.data(), args.size());
    auto t = wire::decode_all<Ps...>(ra);
    T* where = std::apply(where_to_, t);
    if (bytes > 0 && where == nullptr)
        throw UsageError("large active message '" + name() + "': where_to returned null for a " +
                         std::to_string(bytes) + "-byte body");
    comm_->receive_large(source, *this, where, bytes, chunk, std::move(args));
}

}  // namespace cascade
