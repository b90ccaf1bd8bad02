// async(where, f, args...) -> future<R>, locally or on another rank.
//
//   cascade::Futures fx(tp, &comm);                       // same point on every rank
//   auto sq = fx.make_async([](int& x) { return x * x; }, "square");   // same order everywhere
//   cascade::future<int> f = cascade::async(1, sq, 7);   // runs on rank 1
//   int y = f.get();
//
// `where` is a rank, cascade::here, or cascade::any (round robin over the ranks). Functions
// are registered like active messages (lambdas included), in the same order on every rank;
// arguments and results use the active-message wire format (trivially copyable values,
// std::vector / std::string, user types with a codec: see comm/codec.hpp) plus
// shared_future<T>. A call to this rank runs on the
// pool without serializing anything. An argument may also be a future of the parameter's
// type: the call then runs once that value is there, without blocking any thread (dataflow).
// Exceptions thrown by f reach whoever calls get(), on any rank, with their message.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "cascade/comm/active_msg.hpp"
#include "cascade/comm/communicator.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/futures/call.hpp"
#include "cascade/futures/future.hpp"
#include "cascade/futures/import_state.hpp"
#include "cascade/futures/lazy_state.hpp"
#include "cascade/futures/reply_tokens.hpp"

namespace cascade {

inline constexpr int here = -1;  // this rank
inline constexpr int any = -2;   // a rank chosen by the runtime (round robin)

struct AsyncOptions {
    // Remote calls run inside the message handler on the communication thread instead of
    // being queued on a worker: for tiny functions (saves a thread hand-off per call).
    bool run_in_handler = false;
    // The result stays on the rank that computed it until a consumer needs it: get() (or
    // then, when_all, a call on the caller's rank) fetches it; a call on another rank that
    // takes the future as an argument gets it straight from where it is (on that rank
    // itself: no copy at all). For big results passed on from call to call (tiled
    // algorithms); results under kLargeArg (128 KiB) are sent back as usual. Need the
    // value before the join() that ends the computation: no rank answers fetches after it.
    bool keep_result = false;
};

class Futures;

namespace detail {
struct FuzzFutures;  // the fuzzer's access to the message handlers (fuzz/)

template <class R, class... Ps>
struct FnRef {
    const std::function<R(Ps&...)>* f;
    R operator()(Ps&... p) const { return (*f)(p...); }
};

struct FnBase {
    virtual ~FnBase() = default;
    std::string name;
    std::uint32_t id = 0;
    std::uint32_t sig = 0;
    std::uint64_t borrow = 0;  // parameters taken by const reference (see borrow_mask)
    AsyncOptions opts;
    CallStats stats;  // of its remote calls
    virtual void on_request(Futures& fx, int source, std::uint64_t token, wire::Reader& r) = 0;
};

template <class R, class... Ps>
struct FnEntry final : FnBase {
    std::function<R(Ps&...)> f;
    void on_request(Futures& fx, int source, std::uint64_t token, wire::Reader& r) override;
};

template <class P>
constexpr bool arg_ok = [] {
    // wire::require names a type without a codec in the compiler's message.
    if constexpr (param_traits<P>::shared)
        return wire::require<typename param_traits<P>::elem> &&
               !wire::is_view<typename param_traits<P>::elem>::value;
    else
        return wire::require<P> && !wire::is_view<P>::value;
}();

// Message headers (each message is one view<char> argument of an internal active message).
struct RequestHead {
    std::int32_t rank;
    std::uint32_t fn;
    std::uint32_t sig;
    std::uint32_t pad;
    std::uint64_t token;  // the caller's result state
};
struct ReplyHead {
    std::int32_t rank;
    std::uint32_t status;  // reply_* below
    std::uint64_t token;
};
struct FetchHead {
    std::int32_t rank;
    std::uint32_t release;  // 1: only give the weight back (no answer)
    std::uint64_t id;       // exported state on the receiver
    std::uint64_t token;    // proxy state on the sender
    std::uint64_t weight;   // share of the export this fetch consumes
};
// Reply statuses.
enum : std::uint32_t {
    reply_value = 0,     // the value follows
    reply_error = 1,     // an error message follows
    reply_body = 2,      // the value follows as a body: {elements, chunk}
    reply_redirect = 3,  // fetch it from {owner, id, weight} instead
    reply_resident = 4,  // the callee keeps it: {id, weight} (AsyncOptions::keep_result)
};

}  // namespace detail

template <class Sig>
class AsyncFn;

// A registered function: pass it to async(). Copyable; valid while its Futures lives.
template <class R, class... Ps>
class AsyncFn<R(Ps...)> {
  public:
    AsyncFn() = default;
    bool valid() const noexcept { return e_ != nullptr; }
    const std::string& name() const { return e_->name; }
    Futures* context() const noexcept { return fx_; }
    // Calls the function here, synchronously.
    R operator()(Ps&... ps) const { return e_->f(ps...); }
    detail::FnEntry<R, Ps...>* entry() const noexcept { return e_; }

  private:
    friend class Futures;
    AsyncFn(Futures* fx, detail::FnEntry<R, Ps...>* e) : fx_(fx), e_(e) {}
    Futures* fx_ = nullptr;
    detail::FnEntry<R, Ps...>* e_ = nullptr;
};

// The futures layer of one pool (and communicator): registry of async functions, the
// messages that carry calls, results and shared-future values, and the exported states.
// The latest Futures constructed is the current one (what get() and then() use).
class Futures {
  public:
    explicit Futures(Threadpool& tp, Communicator* comm = nullptr);
    Futures(const Futures&) = delete;
    Futures& operator=(const Futures&) = delete;
    ~Futures();

    template <class F>
    auto make_async(F&& f, std::string name = "", AsyncOptions opts = {});

    template <class R, class... Ps, class... A>
    future<R> async(int where, const AsyncFn<R(Ps...)>& fn, A&&... args);
    // Any callable, run on this rank's pool (where must be here, any, or this rank).
    template <class F, class... A>
    auto async_local(F&& f, A&&... args);

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    Threadpool& pool() noexcept { return tp_; }
    Communicator* comm() noexcept { return comm_; }
    // The rank `where` designates (resolves here / any; checks the range).
    int place(int where);
    static Futures* current() noexcept;

    // Statistics.
    std::uint64_t remote_calls() const noexcept { return remote_calls_.load(); }
    // Argument bodies received here (arguments of kLargeArg bytes or more).
    std::uint64_t bodies_received() const noexcept { return bodies_received_.load(); }
    std::size_t exported() const;
    // States waiting for a reply from another rank (calls and fetches in flight).
    std::size_t awaiting_replies() const noexcept { return tokens_.size(); }

    // ---- used by the templates -------------------------------------------------------------
    using SendExported = detail::SendValueFn;
    // Makes a ready exported state's value a proxy's, here (see detail::alias_exported).
    using ShareExported = void (*)(detail::StateBase& from, detail::StateBase& to);
    // Exports s (holding a reference) for descriptors worth `weight` in all.
    std::uint64_t export_state(detail::StateBase* s, SendExported send, ShareExported share,
                               std::uint64_t weight = 1);
    // Takes `weight` of export `id` here and returns its state (one reference, adopt it).
    detail::StateBase* take_export(std::uint64_t id, std::uint64_t weight, int from);
    // Fetches export `id` of `owner` into `proxy` (shared in place if owner is this rank).
    void fetch(int owner, std::uint64_t id, detail::StateBase* proxy, std::uint64_t weight = 1);
    void release_export(int owner, std::uint64_t id, std::uint64_t weight);
    // The state receiving future {owner, id} here: the live one if this rank already imports
    // it (the descriptor's weight is kept for the owner), else a new one, fetched.
    template <class X>
    detail::Ref<detail::State<X>> import(int owner, std::uint64_t id, std::uint64_t weight);
    void send_redirect(int dest, std::uint64_t token, int owner, std::uint64_t id,
                       std::uint64_t weight);
    // Sends s's value to dest's state `token` once s is ready.
    void answer_when_ready(detail::StateBase& s, SendExported send, int dest, std::uint64_t token);
    template <class T>
    void send_value(int dest, std::uint64_t token, detail::State<T>& s, const std::string* fn);
    template <class T>
    void send_resident(int dest, std::uint64_t token, detail::State<T>& s);
    static constexpr std::uint64_t kResidentWeight = std::uint64_t(1) << 40;
    // Future arguments resolved here without a copy: their value was kept on this rank
    // (AsyncOptions::keep_result) and came back to it, named directly or by a redirect.
    std::uint64_t kept_in_place() const noexcept { return kept_in_place_.load(); }
    // Future arguments that found their value already imported here (no second fetch).
    std::uint64_t imports_shared() const noexcept { return imports_shared_.load(); }
    // Big arguments travel as bodies after the request, straight into the callee's argument.
    static constexpr std::size_t kLargeArg = detail::kLargeBytes;
    void receive_body(int source, void* dest, std::size_t bytes, std::size_t chunk,
                      detail::BodySink* sink);
    ActiveMsgBase& body_msg() noexcept { return *body_am_; }
    // Keeps `job` (a remote call, see detail::CallStats) for the communication thread to run
    // at the end of the progress() call it is in; false when that cannot be (then queue it).
    bool defer_to_comm_thread(detail::Job* job);
    // Remote calls run by the communication thread so far (statistics).
    std::uint64_t calls_on_comm_thread() const noexcept { return calls_on_comm_thread_; }

  private:
    static bool run_deferred(void* self);
    enum Msg { request_msg, reply_msg, fetch_msg };
    void send_fetch(int owner, const detail::FetchHead& h);  // a fetch or a release
    template <class W, class Extra = Communicator::NoExtra>
    void send_frame(int dest, Msg which, std::size_t max_bytes, W&& write, Extra&& extra = {});
    template <class R, class... Ps, class... A>
    future<R> remote(int dest, detail::FnEntry<R, Ps...>& e, A&&... args);
    template <class F, class... Ps>
    auto make_async_impl(F&& f, std::string name, AsyncOptions opts, std::tuple<Ps...>*);

    void on_request(const char* data, std::size_t size);
    void on_reply(const char* data, std::size_t size);
    void on_fetch(const char* data, std::size_t size);
    [[noreturn]] void fatal(const std::string& what);
    friend struct detail::FuzzFutures;

    static constexpr std::size_t kMaxFunctions = 4096;

    Threadpool& tp_;
    Communicator* comm_;
    int rank_ = 0, size_ = 1;
    std::vector<detail::Job*> deferred_;  // communication thread only
    bool running_deferred_ = false;
    std::uint64_t calls_on_comm_thread_ = 0;
    ActiveMsg<view<char>>* ams_[3] = {nullptr, nullptr, nullptr};
    ActiveMsgBase* body_am_ = nullptr;  // futures.body: big arguments (see detail::Body)
    std::unique_ptr<std::atomic<detail::FnBase*>[]> fns_;
    std::atomic<std::uint32_t> n_fns_{0};
    std::vector<std::unique_ptr<detail::FnBase>> owned_;
    std::mutex register_mutex_;
    std::atomic<unsigned> round_robin_{0};
    std::atomic<std::uint64_t> remote_calls_{0};
    std::atomic<std::uint64_t> bodies_received_{0};
    std::atomic<std::uint64_t> kept_in_place_{0};
    std::atomic<std::uint64_t> imports_shared_{0};
    // States waiting for a reply, named by the tokens requests and fetches carry.
    detail::ReplyTokens<detail::StateBase> tokens_;
    std::uint64_t next_export_id_ = 1;  // export ids are never reused (import tables key on them)
    friend void detail::forget_import(Futures*, const detail::ImportKey&, detail::StateBase*,
                                      std::uint64_t) noexcept;
    friend bool detail::unlist_import(Futures*, const detail::ImportKey&,
                                      detail::StateBase*) noexcept;
    std::mutex imports_mutex_;
    std::unordered_map<detail::ImportKey, detail::StateBase*, detail::ImportKeyHash> imports_;
    struct Export {
        detail::StateBase* state;  // one reference held while count > 0
        std::uint64_t count;       // weight of the descriptors sent, not yet fetched
        SendExported send;
        ShareExported share;
    };
    Export take(std::uint64_t id, std::uint64_t weight, int from);
    mutable std::mutex exports_mutex_;
    std::unordered_map<std::uint64_t, Export> exports_;
    Futures* previous_ = nullptr;
};

// ---- free functions ------------------------------------------------------------------------

template <class R, class... Ps, class... A>
future<R> async(int where, const AsyncFn<R(Ps...)>& fn, A&&... args) {
    if (!fn.valid()) throw UsageError("async: function handle not initialized (use make_async)");
    return fn.context()->async(where, fn, std::forward<A>(args)...);
}

template <class T>
struct is_async_fn : std::false_type {};
template <class Sig>
struct is_async_fn<AsyncFn<Sig>> : std::true_type {};

template <class F, class... A>
requires(!is_async_fn<std::decay_t<F>>::value) auto async(int where, F&& f, A&&... args) {
    Futures* fx = Futures::current();
    if (!fx) throw UsageError("async: no cascade::Futures context exists");
    if (where != here && where != any && where != fx->rank())
        throw UsageError(
            "async: a function that is not registered (make_async) can only run "
            "on this rank; rank " +
            std::to_string(where) + " requested");
    return fx->async_local(std::forward<F>(f), std::forward<A>(args)...);
}

// ---- argument encoding ---------------------------------------------------------------------

namespace detail {

enum : std::uint8_t { arg_value = 0, arg_remote = 1, arg_error = 2, arg_body = 3 };

// A sequence argument (std::vector / std::string of trivially copyable elements) of at least
// Futures::kLargeArg bytes is not copied into the request: it leaves as a body of its own
// after the request (sent from a Body the call owns until MPI is done with it) and the
// callee receives it straight into the argument.
struct Body {
    virtual ~Body() = default;
    const void* data = nullptr;
    std::size_t bytes = 0;
};
template <class X>
struct BodyOf final : Body {
    X v;
    explicit BodyOf(X x) : v(std::move(x)) {
        data = v.data();
        bytes = v.size() * sizeof(typename X::value_type);
    }
    ~BodyOf() override { Recycler<X>::give(v); }
};
// A ready state's value sent as a body straight from the state, which it keeps alive.
template <class X>
struct StateBody final : Body {
    Ref<State<X>> s;
    explicit StateBody(Ref<State<X>> r) : s(std::move(r)) {
        data = s->value().data();
        bytes = s->value().size() * sizeof(typename X::value_type);
    }
};
template <class X>
bool travels_as_body(const X& x) {
    if constexpr (body_capable<X>)
        return x.size() * sizeof(typename X::value_type) >= Futures::kLargeArg;
    else
        return false;
}
inline std::vector<char> body_token(const void* p) {
    std::vector<char> t(sizeof(std::uint64_t));
    const auto v = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
    std::memcpy(t.data(), &v, sizeof v);
    return t;
}

// Argument written into the request, either whole or as a count + a body.
template <class X>
struct ValArg {
    std::unique_ptr<Body> body;  // set when the argument travels as a body
    std::size_t size_of(const X& x) const {
        return body ? 1 + 2 * sizeof(std::uint64_t) : 1 + wire::size_of(x);
    }
    void write(wire::Writer& w, const X& x, std::size_t chunk) const {
        if constexpr (body_capable<X>) {
            if (body) {
                w.put(arg_body);
                w.put(static_cast<std::uint64_t>(x.size()));
                w.put(static_cast<std::uint64_t>(chunk));
                return;
            }
        }
        w.put(arg_value);
        w.put(x);
    }
    // Under the outbox lock, right after the request frame.
    void attach(Communicator::Outbox& o, ActiveMsgBase& am, std::size_t chunk) {
        if (!body) return;
        Body* b = body.release();  // freed by futures.body's on_sent
        Communicator::attach_body(o, am, b->data, b->bytes, chunk, body_token(b));
    }
};
template <class P>
struct ValRef : ValArg<P> {  // an argument of the parameter's own type, written from where it is
    const P* p;
    ValRef(const P* x, bool body_ok) : p(x) {
        if constexpr (body_capable<P>)
            if (body_ok && p->size() * sizeof(typename P::value_type) >= Futures::kLargeArg)
                this->body =
                    std::make_unique<BodyOf<P>>(Recycler<P>::copy(*p));  // the caller may reuse *p
    }
    const P& value() const { return this->body ? static_cast<BodyOf<P>&>(*this->body).v : *p; }
    std::size_t size() const { return this->size_of(value()); }
    void write(wire::Writer& w, std::size_t chunk) const { ValArg<P>::write(w, value(), chunk); }
};
template <class P>
struct ValOwn : ValArg<P> {  // an argument converted to the parameter's type
    P v;
    ValOwn(P x, bool body_ok) : v(std::move(x)) {
        if constexpr (body_capable<P>)
            if (body_ok && v.size() * sizeof(typename P::value_type) >= Futures::kLargeArg)
                this->body = std::make_unique<BodyOf<P>>(std::move(v));
    }
    const P& value() const { return this->body ? static_cast<BodyOf<P>&>(*this->body).v : v; }
    std::size_t size() const { return this->size_of(value()); }
    void write(wire::Writer& w, std::size_t chunk) const { ValArg<P>::write(w, value(), chunk); }
};
template <class X>
struct FutArg {  // a future argument: its value if ready, else where to fetch it
    Ref<State<X>> s;
    std::uint8_t tag = arg_remote;
    std::int32_t owner = 0;
    std::uint64_t id = 0;
    std::uint64_t weight = 1;
    std::string msg;
    std::size_t size() const {
        if (tag == arg_body) return 1 + 2 * sizeof(std::uint64_t);
        if (tag == arg_value) return 1 + wire::size_of(s->value());
        if (tag == arg_error) return 1 + wire::size_of(msg);
        return 1 + sizeof owner + sizeof id + sizeof weight;
    }
    // Under the outbox lock, right after the request frame.
    void attach(Communicator::Outbox& o, ActiveMsgBase& am, std::size_t chunk) {
        if constexpr (body_capable<X>) {
            if (tag != arg_body) return;
            Body* b = new StateBody<X>(s);  // freed by futures.body's on_sent
            Communicator::attach_body(o, am, b->data, b->bytes, chunk, body_token(b));
        } else {
            (void)o;
            (void)am;
            (void)chunk;
        }
    }
    void write(wire::Writer& w, std::size_t chunk) const {
        w.put(tag);
        if (tag == arg_body) {
            if constexpr (body_capable<X>) {
                w.put(static_cast<std::uint64_t>(s->value().size()));
                w.put(static_cast<std::uint64_t>(chunk));
            }
        } else if (tag == arg_value) {
            w.put(s->value());
        } else if (tag == arg_error) {
            w.put(msg);
        } else {
            w.put(owner);
            w.put(id);
            w.put(weight);
        }
    }
};

template <class X>
void send_exported(Futures& fx, StateBase& s, int dest, std::uint64_t token) {
    fx.send_value<X>(dest, token, static_cast<State<X>&>(s), nullptr);
}
// A proxy here takes the value of an exported state here without a copy (an alias).
template <class X>
void alias_exported(StateBase& from, StateBase& to) {
    from.retain();
    static_cast<State<X>&>(to).set_alias(&static_cast<State<X>&>(from));
}

template <class P, class A>
auto prepare(Futures& fx, A&& a) {
    using D = std::remove_cvref_t<A>;
    using X = typename param_traits<P>::elem;
    if constexpr (future_elem<D>::yes) {
        static_assert(std::is_same_v<typename future_elem<D>::type, X>,
                      "async: a future argument must hold the parameter's type");
        if (!a.valid()) throw UsageError("async: argument future has no state");
        FutArg<X> out;
        if constexpr (std::is_same_v<D, future<X>>)
            out.s = a.share().ref();
        else
            out.s = a.ref();
        if (out.s->ready()) {
            if (out.s->failed()) {
                out.tag = arg_error;
                out.msg = describe_error(out.s->error());
            } else {
                // A big value leaves as a body straight from the state (not into a shared
                // parameter: the callee builds a state of its own for those).
                out.tag = !param_traits<P>::shared && travels_as_body(out.s->value()) ? arg_body
                                                                                      : arg_value;
            }
        } else if (!out.s->share_residence(out.owner, out.id, out.weight)) {
            // Pending here (a kept result whose owner is known is named directly instead).
            out.owner = fx.rank();
            out.id = fx.export_state(out.s.get(), &send_exported<X>, &alias_exported<X>);
        }
        return out;
    } else if constexpr (std::is_same_v<D, X> && !std::is_rvalue_reference_v<A&&>) {
        return ValRef<X>(&a, !param_traits<P>::shared);
    } else {
        static_assert(std::is_constructible_v<X, A&&>,
                      "async: argument not convertible to the parameter's type");
        return ValOwn<X>(X(std::forward<A>(a)), !param_traits<P>::shared);
    }
}

template <class P>
void decode_arg(Futures& fx, int source, wire::Reader& r, Slot<P>& slot, BodySink& sink) {
    using X = typename param_traits<P>::elem;
    const auto tag = r.get<std::uint8_t>();
    Ref<State<X>> s;
    bool exclusive = true;  // s is this call's alone (false: an export here, shared)
    if (tag == arg_body) {
        const auto n = r.get<std::uint64_t>();
        const auto chunk = r.get<std::uint64_t>();
        if constexpr (body_capable<X> && !param_traits<P>::shared) {
            using E = typename X::value_type;
            if (n > (std::uint64_t(1) << 62) / sizeof(E)) throw WireError("bad body size");
            slot.value.emplace(Recycler<X>::take(static_cast<std::size_t>(n)));
            sink.expect_body();
            fx.receive_body(source, slot.value->data(), static_cast<std::size_t>(n) * sizeof(E),
                            static_cast<std::size_t>(chunk), &sink);
            return;
        } else {
            throw WireError("argument body for a parameter that cannot take one");
        }
    }
    if (tag == arg_value) {
        if constexpr (!param_traits<P>::shared) {
            slot.value.emplace(r.get<X>());
            return;
        } else {
            s = Ref<State<X>>(new State<X>());
            s->set_value(r.get<X>());
        }
    } else if (tag == arg_error) {
        s = Ref<State<X>>(new State<X>());
        s->set_error(std::make_exception_ptr(RemoteError(source, r.get<std::string>())));
    } else if (tag == arg_remote) {
        const auto owner = r.get<std::int32_t>();
        const auto id = r.get<std::uint64_t>();
        const auto weight = r.get<std::uint64_t>();
        if (owner < 0 || owner >= fx.size()) throw WireError("future owned by no rank");
        if (owner == fx.rank()) {  // kept here: use it in place
            s = Ref<State<X>>(static_cast<State<X>*>(fx.take_export(id, weight, source)));
            exclusive = false;  // moved out only if no one else holds it (Slot::resolve)
        } else {
            s = fx.import <X>(owner, id, weight);
            exclusive = false;  // other calls here may share it (Slot::resolve)
        }
    } else {
        throw WireError("bad argument tag " + std::to_string(tag));
    }
    if constexpr (param_traits<P>::shared) {
        slot.f = shared_future<X>(std::move(s));
    } else {
        slot.fut = std::move(s);
        slot.consume = exclusive;
    }
}

template <class R, class... Ps>
void FnEntry<R, Ps...>::on_request(Futures& fx, int source, std::uint64_t token, wire::Reader& r) {
    auto* c = new Call<FnRef<R, Ps...>, R, Ps...>(FnRef<R, Ps...>{&f}, borrow);
    Ref<State<R>> hold(c);
    std::apply([&](auto&... slot) { (decode_arg(fx, source, r, slot, *c), ...); }, c->slots());
    r.expect_end();
    c->reply_to(ReplyTo{&fx, source, token, &name, opts.keep_result && !std::is_void_v<R>});
    if (!opts.run_in_handler) c->set_stats(&stats);
    c->start(opts.run_in_handler);
}

template <class T>
void send_result(const ReplyTo& to, State<T>& s) noexcept {
    // Only big values are kept: a small one costs less to send now than to fetch later.
    if (to.keep && !s.failed() && travels_as_body(s.value()))
        to.fx->send_resident<T>(to.rank, to.token, s);
    else
        to.fx->send_value<T>(to.rank, to.token, s, to.name);
}

template <class Tup, class... A, std::size_t... I>
void fill_slots(Tup& slots, std::index_sequence<I...>, A&&... a) {
    (std::get<I>(slots).set(std::forward<A>(a)), ...);
}

}  // namespace detail

// ---- Futures templates ---------------------------------------------------------------------

template <class F>
auto Futures::make_async(F&& f, std::string name, AsyncOptions opts) {
    using Args = typename detail::callable_args<std::decay_t<F>>::tuple;
    return make_async_impl(std::forward<F>(f), std::move(name), opts, static_cast<Args*>(nullptr));
}

template <class F, class... Ps>
auto Futures::make_async_impl(F&& f, std::string name, AsyncOptions opts, std::tuple<Ps...>*) {
    using R = std::invoke_result_t<std::decay_t<F>&, Ps&...>;
    static_assert(wire::require<detail::value_t<R>>,
                  "async function result must be void or a type that can travel (trivially "
                  "copyable, std::vector / std::string, or a type with a codec)");
    static_assert((detail::arg_ok<Ps> && ...),
                  "async function parameters must be types that can travel (trivially copyable, "
                  "std::vector / std::string, or a type with a codec), or shared_future<T> of "
                  "those (not view<T>)");
    auto e = std::make_unique<detail::FnEntry<R, Ps...>>();
    e->f = std::function<R(Ps & ...)>(std::forward<F>(f));
    e->borrow = detail::borrow_mask<std::decay_t<F>>::value;
    e->opts = opts;
    std::lock_guard<std::mutex> g(register_mutex_);
    const std::uint32_t id = n_fns_.load(std::memory_order_relaxed);
    if (id >= kMaxFunctions)
        throw UsageError("make_async: more than " + std::to_string(kMaxFunctions) + " functions");
    e->id = id;
    e->name = name.empty() ? "async#" + std::to_string(id) : std::move(name);
    // Name and types: two functions of the same types registered in different orders on
    // two ranks are told apart too.
    e->sig = wire::signature_of(e->name, wire::type_names<R, Ps...>());
    auto* raw = e.get();
    owned_.push_back(std::move(e));
    fns_[id].store(raw, std::memory_order_release);
    n_fns_.store(id + 1, std::memory_order_release);
    return AsyncFn<R(Ps...)>(this, raw);
}

template <class R, class... Ps, class... A>
future<R> Futures::async(int where, const AsyncFn<R(Ps...)>& fn, A&&... args) {
    static_assert(sizeof...(A) == sizeof...(Ps), "async: wrong number of arguments");
    if (!fn.valid()) throw UsageError("async: function handle not initialized (use make_async)");
    const int dest = place(where);
    if (dest != rank_) return remote(dest, *fn.entry(), std::forward<A>(args)...);
    auto* c = new detail::Call<detail::FnRef<R, Ps...>, R, Ps...>(
        detail::FnRef<R, Ps...>{&fn.entry()->f}, fn.entry()->borrow);
    detail::Ref<detail::State<R>> ref(c);
    detail::fill_slots(c->slots(), std::index_sequence_for<Ps...>{}, std::forward<A>(args)...);
    c->start(false);
    return future<R>(std::move(ref));
}

template <class F, class... A>
auto Futures::async_local(F&& f, A&&... args) {
    using Fn = std::decay_t<F>;
    using R = std::invoke_result_t<Fn&, std::decay_t<A>&...>;
    auto* c = new detail::Call<Fn, R, std::decay_t<A>...>(std::forward<F>(f),
                                                          detail::borrow_mask<Fn>::value);
    detail::Ref<detail::State<R>> ref(c);
    detail::fill_slots(c->slots(), std::index_sequence_for<A...>{}, std::forward<A>(args)...);
    c->start(false);
    return future<R>(std::move(ref));
}

template <class R, class... Ps, class... A>
future<R> Futures::remote(int dest, detail::FnEntry<R, Ps...>& e, A&&... args) {
    auto prep = std::make_tuple(detail::prepare<Ps>(*this, std::forward<A>(args))...);
    const std::size_t bytes =
        sizeof(detail::RequestHead) +
        std::apply([](auto&... p) { return (std::size_t(0) + ... + p.size()); }, prep);
    detail::State<R>* st;
    if (e.opts.keep_result && !std::is_void_v<R>)
        st = new detail::LazyState<R>(this);
    else
        st = new detail::State<R>();
    detail::Ref<detail::State<R>> ref(st);
    st->retain();  // named by the request's token, adopted by the reply
    const detail::RequestHead h{rank_, e.id, e.sig, 0, tokens_.add(st)};
    remote_calls_.fetch_add(1, std::memory_order_relaxed);
    const std::size_t chunk = comm_->large_chunk();
    send_frame(
        dest, request_msg, bytes,
        [&](char* out) {
            wire::Writer w(out);
            w.put(h);
            std::apply([&](auto&... p) { (p.write(w, chunk), ...); }, prep);
            return w.position();
        },
        [&](Communicator::Outbox& o) {
            std::apply([&](auto&... p) { (p.attach(o, *body_am_, chunk), ...); }, prep);
        });
    return future<R>(std::move(ref));
}

template <class T>
void Futures::send_value(int dest, std::uint64_t token, detail::State<T>& s,
                         const std::string* fn) {
    detail::ReplyHead h{rank_, s.failed() ? detail::reply_error : detail::reply_value, token};
    std::string msg;
    std::size_t bytes = sizeof h;
    bool body = false;
    if (s.failed()) {
        msg = fn ? "async '" + *fn + "' on rank " + std::to_string(rank_) +
                       " threw: " + detail::describe_error(s.error())
                 : detail::describe_error(s.error());
        bytes += wire::size_of(msg);
    } else if constexpr (!std::is_void_v<T>) {
        body = detail::travels_as_body(s.value());
        if (body) {
            h.status = detail::reply_body;  // the value follows as a body, straight from s
            bytes += 2 * sizeof(std::uint64_t);
        } else {
            bytes += wire::size_of(s.value());
        }
    }
    const std::size_t chunk = comm_->large_chunk();
    send_frame(
        dest, reply_msg, bytes,
        [&](char* out) {
            wire::Writer w(out);
            w.put(h);
            if (s.failed()) {
                w.put(msg);
            } else if constexpr (!std::is_void_v<T>) {
                if constexpr (detail::body_capable<T>) {
                    if (body) {
                        w.put(static_cast<std::uint64_t>(s.value().size()));
                        w.put(static_cast<std::uint64_t>(chunk));
                        return w.position();
                    }
                }
                w.put(s.value());
            }
            return w.position();
        },
        [&](Communicator::Outbox& o) {
            if constexpr (detail::body_capable<T>) {
                if (!body) return;
                detail::Body* b =
                    new detail::StateBody<T>(detail::Ref<detail::State<T>>(&s, false));
                Communicator::attach_body(o, *body_am_, b->data, b->bytes, chunk,
                                          detail::body_token(b));
            } else {
                (void)o;
            }
        });
}

template <class X>
detail::Ref<detail::State<X>> Futures::import(int owner, std::uint64_t id, std::uint64_t weight) {
    const detail::ImportKey key{owner, id};
    {
        std::lock_guard<std::mutex> g(imports_mutex_);
        auto it = imports_.find(key);
        if (it != imports_.end() && it->second->try_retain()) {
            imports_shared_.fetch_add(1, std::memory_order_relaxed);
            static_cast<detail::ImportState<X>*>(it->second)->add_weight(weight);
            return detail::Ref<detail::State<X>>(static_cast<detail::State<X>*>(it->second));
        }
    }
    auto* p = new detail::ImportState<X>(this, key);
    {
        std::lock_guard<std::mutex> g(imports_mutex_);
        imports_[key] = p;
    }
    detail::Ref<detail::State<X>> ref(p);
    fetch(owner, id, p, weight);
    return ref;
}

template <class T>
void Futures::send_resident(int dest, std::uint64_t token, detail::State<T>& s) {
    const std::uint64_t id =
        export_state(&s, &detail::send_exported<T>, &detail::alias_exported<T>, kResidentWeight);
    const detail::ReplyHead h{rank_, detail::reply_resident, token};
    send_frame(dest, reply_msg, sizeof h + 2 * sizeof(std::uint64_t), [&](char* out) {
        wire::Writer w(out);
        w.put(h);
        w.put(id);
        w.put(kResidentWeight);
        return w.position();
    });
}

template <class W, class Extra>
void Futures::send_frame(int dest, Msg which, std::size_t max_bytes, W&& write, Extra&& extra) {
    // The frame is one view<char>: a 64-bit count, then the bytes (already 8-byte aligned).
    comm_->enqueue(
        dest, *ams_[which], sizeof(std::uint64_t) + max_bytes,
        [&](char* out) {
            char* begin = out + sizeof(std::uint64_t);
            char* end = write(begin);
            const std::uint64_t n = static_cast<std::uint64_t>(end - begin);
            std::memcpy(out, &n, sizeof n);
            return end;
        },
        std::forward<Extra>(extra));
}

}  // namespace cascade
