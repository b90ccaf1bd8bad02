// Communicator's member templates and those of the active messages that need it complete
// (send, blocking_send, send_large, on_frame). Included by communicator.hpp at its end.
#pragma once

#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace cascade {

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
    // Per-sender order: what this thread holds back for broadcast detection was sent before
    // this message, so it leaves first (a thread-local load when nothing is held).
    detail::run_task_epilogue();
    if (dest < 0 || dest >= world_.size)
        throw UsageError("active message '" + am.name() + "': destination rank " +
                         std::to_string(dest) + " outside [0, " + std::to_string(world_.size) +
                         ")");
    if (max_bytes > detail::kMaxArgumentBytes) [[unlikely]]
        too_many_argument_bytes(am, max_bytes);
    if (job_.joining()) [[unlikely]]
        if (tp_ && tp_->checked() && !on_comm_thread() && tp_->current_thread() < 0 &&
            !tp_->in_external_scope())
            sent_from_outside(am);
    Outbox& o = outbox_[dest];
    trace::Buffer* tb = trace::recording() ? trace::this_thread() : nullptr;
    const std::int64_t t0 = tb ? trace::stamp() : 0;
    std::uint64_t seq = 0;
    std::size_t len = 0;
    bool full = false;  // back-pressure: this destination's queue and MPI hold enough
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
        counts_.queued_one();
        if (!o.nonempty.exchange(true, std::memory_order_acq_rel))
            outbox_pending_.fetch_add(1, std::memory_order_release);
        const std::size_t cap = opts_.max_bytes_in_flight;
        full = cap != 0 &&
               o.buf.size() + o.frame_bytes_in_flight.load(std::memory_order_relaxed) > cap;
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
    if (full) [[unlikely]]
        wait_for_room(dest);
}

template <class Write, class Extra>
void Communicator::enqueue_past_fence(int dest, const ActiveMsgBase& am, std::size_t max_bytes,
                                      Write&& write, std::uint64_t since, Extra&& extra) {
    const char* payload = nullptr;
    enqueue(
        dest, am, max_bytes,
        [&](char* out) {
            payload = out;
            return write(out);
        },
        [&](Outbox& o) {
            const std::size_t larges_at = o.larges.size();
            extra(o);
            if (o.fences.load(std::memory_order_relaxed) > 0 && o.fence_stretch != since)
                [[unlikely]]
                move_before_fence(
                    o, static_cast<std::size_t>(payload - o.buf.data()) - sizeof(detail::Frame),
                    larges_at);
        });
}

template <class... Ps>
void ActiveMsg<Ps...>::send_now(int dest, const Ps&... ps) {
    const std::size_t bytes = (std::size_t(0) + ... + wire::size_of(ps));
    comm_->enqueue(dest, *this, bytes, [&](char* out) {
        wire::Writer w(out);
        (w.put(ps), ...);
        return w.position();
    });
}

template <class... Ps>
void ActiveMsg<Ps...>::send(int dest, const Ps&... ps) {
    const std::size_t bytes = (std::size_t(0) + ... + wire::size_of(ps));
    if (char* out = comm_->held_send(*this, dest, bytes)) [[unlikely]] {
        wire::Writer w(out);
        (w.put(ps), ...);
        comm_->broadcasts().defer_end(w.position());
        return;
    }
    send_now(dest, ps...);
}

namespace detail {
// The serialized arguments of a broadcast, in a buffer taken from this thread's spare (8-byte
// aligned) and given back when done: a broadcast sent while another one is being sent on the
// same thread (a handler run by back-pressure's progress) takes a buffer of its own.
class ArgsBuffer {
  public:
    template <class... Ps>
    explicit ArgsBuffer(const Ps&... ps) : buf_(std::move(spare())) {
        buf_.resize((std::size_t(0) + ... + wire::size_of(ps)) + 8);
        wire::Writer w(buf_.data());
        (w.put(ps), ...);
        buf_.resize(static_cast<std::size_t>(w.position() - buf_.data()));
    }
    ~ArgsBuffer() {
        if (buf_.capacity() > spare().capacity()) spare() = std::move(buf_);
    }
    ArgsBuffer(const ArgsBuffer&) = delete;
    ArgsBuffer& operator=(const ArgsBuffer&) = delete;
    const char* data() const noexcept { return buf_.data(); }
    std::size_t size() const noexcept { return buf_.size(); }

  private:
    static std::vector<char>& spare() {
        thread_local std::vector<char> s;
        return s;
    }
    std::vector<char> buf_;
};
}  // namespace detail

template <class... Ps>
void ActiveMsg<Ps...>::send(std::span<const int> dests, const Ps&... ps) {
    send(dests, std::span<const double>{}, ps...);
}

template <class... Ps>
void ActiveMsg<Ps...>::send(std::span<const int> dests, std::span<const double> priorities,
                            const Ps&... ps) {
    const detail::ArgsBuffer payload(ps...);
    comm_->broadcasts().send(*this, dests, priorities, payload.data(), payload.size());
}

template <class... Ps>
void ActiveMsg<Ps...>::blocking_send(int dest, const Ps&... ps) {
    detail::run_task_epilogue();  // what this thread held back leaves first, in order
    send_now(dest, ps...);
    if (comm_->on_comm_thread()) comm_->flush_blocking();
}

namespace detail {
template <class... Ps>
std::vector<char> large_args(const Ps&... ps) {
    std::vector<char> args((std::size_t(0) + ... + wire::size_of(ps)) + 8);
    // Align the args copy like a frame payload so views inside decode aligned.
    wire::Writer w(args.data());
    (w.put(ps), ...);
    args.resize(static_cast<std::size_t>(w.position() - args.data()));
    return args;
}
}  // namespace detail

template <class T, class... Ps>
void LargeActiveMsg<T, Ps...>::send_large_now(int dest, view<T> body, const Ps&... ps) {
    comm_->enqueue_large(dest, *this, body.data(), body.size() * sizeof(T),
                         detail::large_args(ps...));
}

template <class T, class... Ps>
void LargeActiveMsg<T, Ps...>::send_large(int dest, view<T> body, const Ps&... ps) {
    std::vector<char> args = detail::large_args(ps...);
    if (broadcast_detection() && comm_->broadcasts().detection() &&
        comm_->broadcasts().defer_large(*this, dest, body.data(), body.size() * sizeof(T), args))
        return;
    comm_->enqueue_large(dest, *this, body.data(), body.size() * sizeof(T), std::move(args));
}

template <class T, class... Ps>
void LargeActiveMsg<T, Ps...>::blocking_send_large(int dest, view<T> body, const Ps&... ps) {
    detail::run_task_epilogue();  // what this thread held back leaves first, in order
    send_large_now(dest, body, ps...);
    if (comm_->on_comm_thread()) comm_->flush_blocking();
}

template <class T, class... Ps>
void LargeActiveMsg<T, Ps...>::send_large(std::span<const int> dests, view<T> body,
                                          const Ps&... ps) {
    send_large(dests, std::span<const double>{}, body, ps...);
}

template <class T, class... Ps>
void LargeActiveMsg<T, Ps...>::send_large(std::span<const int> dests,
                                          std::span<const double> priorities, view<T> body,
                                          const Ps&... ps) {
    comm_->broadcasts().send_large(*this, dests, priorities, body.data(), body.size() * sizeof(T),
                                   detail::large_args(ps...));
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
