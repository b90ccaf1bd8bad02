// Objects: the mobile-object layer of a pool (PREMA's mobile object layer). Data lives in
// objects that can move between ranks; handlers run where the object is.
//
//   cascade::Objects objs(tp, comm);                          // same point on every rank
//   auto add = objs.make_handler<Counter>([](Counter& c, long& n) { c.value += n; });
//   cascade::mobile_ptr<Counter> p = objs.create<Counter>();  // lives here first
//   add->invoke(p, 5L);                                       // any rank, any thread
//   objs.migrate(p, 1);                                       // from any rank
//   tp.join();                                                // every invoke has run
//
// Handlers (make_handler) and object types are registered in the same order on every rank.
// A request goes to the object's last known location on the sending rank (its home rank if
// it knows nothing better); a rank that no longer holds the object forwards it, at most
// twice before sending it through the home rank, which always knows where the object is;
// the rank that runs a forwarded request tells the sender where the object is (a lazy
// update), so its next requests go straight there. Requests from one rank to one object run
// in the order they were issued, also across migrations (sequence numbers per sender travel
// with the object, as do the requests queued on it). See docs/objects.md.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cascade/comm/active_msg.hpp"
#include "cascade/comm/communicator.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/core/spinlock.hpp"
#include "cascade/core/threadpool.hpp"
#include "cascade/futures/detail/reply_tokens.hpp"
#include "cascade/futures/futures.hpp"
#include "cascade/objects/access.hpp"
#include "cascade/objects/detail/record.hpp"
#include "cascade/objects/detail/registry.hpp"
#include "cascade/objects/detail/spares.hpp"
#include "cascade/objects/detail/transit.hpp"
#include "cascade/objects/handler.hpp"
#include "cascade/objects/mobile_ptr.hpp"

namespace cascade {

class Balancer;  // cascade/balance/balancer.hpp

namespace detail {
struct MigrateHead;
struct FuzzObjects;  // the fuzzer's access to the message handlers (fuzz/)
}  // namespace detail

/// Load of one object living on this rank.
struct ObjectLoad {
    ObjectKey key;           ///< the object
    const char* type = "";   ///< its registered type name
    double load = 0;         ///< the user load function's value, else busy_s
    bool user_load = false;  ///< load comes from the user's function (Objects::set_load)
    double busy_s = 0;       ///< measured time of the handlers run on it (everywhere)
    double recent_s = 0;     ///< recent handler time (moving average; 0: none ran yet)
    /// Busy-time rate: the fraction of the last Objects::kRateWindowS one worker spent in its
    /// handlers here (the sum over a rank's objects: how busy its workers were with them).
    double busy_rate = 0;
    /// Demand: the busy-time rate it would have with a worker to itself (handler time over
    /// handler time plus the time it had no request; the wait for a worker left out): 1 for a
    /// chain or a queue of requests, 0.1 for a 1 ms handler invoked every 10 ms.
    double demand = 0;
    /// Share of its recent requests its own handler issued (1: a chain, each step invoking
    /// the next; 0: requests from elsewhere).
    double chained = 0;
    /// Share of its recent handlers that issued requests (to any object): work it generates.
    double issuing = 0;
    std::size_t pending = 0;    ///< requests queued on it here, the one running or about to
                                ///< run (given a worker) included
    bool pinned = false;        ///< Objects::pin: balancing leaves it here
    bool leaving = false;       ///< a balancing migration of it is queued or running, or a
                                ///< migrate or destroy of it is about to run
    std::uint64_t handled = 0;  ///< handlers run on it (everywhere)
};

/// Told after each handler that ran on this rank (the balancing layer's view of load).
class ObjectsObserver {
  public:
    virtual ~ObjectsObserver() = default;
    /// On the worker that ran the handler, after the object is free again.
    virtual void after_handler(const ObjectKey& key, double seconds) = 0;
};

/// Counters of this rank (read after join(), or any time for a rough view).
struct ObjectsStats {
    std::uint64_t handlers_run = 0;          ///< handlers run here
    std::uint64_t on_comm_thread = 0;        ///< of which on the communication thread, after
                                             ///< progress() (trusted short handlers)
    std::uint64_t forwards = 0;              ///< requests this rank forwarded
    std::uint64_t lazy_updates = 0;          ///< location updates this rank sent to senders
    std::uint64_t home_updates = 0;          ///< arrivals here this rank told the home of
    std::uint64_t migrations_out = 0;        ///< objects that left this rank
    std::uint64_t moved_by_handler = 0;      ///< of which moved by their own exclusive handler,
                                             ///< as it ended (see migrate)
    std::uint64_t migrations_in = 0;         ///< objects that arrived here
    std::uint64_t parked = 0;                ///< requests that arrived before their object
    std::uint64_t max_hops = 0;              ///< most forwards of a request run here
    std::uint64_t max_hops_before_home = 0;  ///< most forwards before one went to the home
    std::array<std::uint64_t, 8> by_hops{};  ///< requests run here by forwards (7: 7 or more)
    std::uint64_t directory = 0;             ///< objects this rank's directory knows now (those
                                             ///< living here, and others it sent requests to
                                             ///< or forwarded; destroyed ones are forgotten)
};

/// The mobile-object layer of a pool (see the top of this file): creates objects, registers
/// handlers, routes requests to wherever objects live, migrates them. Its members may be
/// called from any thread unless noted.
class Objects {
  public:
    /// Forwards made from stale locations before a request is sent to the object's home.
    static constexpr int kMaxHopsBeforeHome = 2;
    /// The window of ObjectLoad::busy_rate and demand (seconds; older handlers count less,
    /// exponentially).
    static constexpr double kRateWindowS = 0.05;

    /// The layer for pool `tp` and its communicator `comm`; created at the same point on
    /// every rank (it registers active messages). Makes a Futures for `tp` if there is none
    /// (call()'s futures need one).
    Objects(Threadpool& tp, Communicator& comm);
    Objects(const Objects&) = delete;
    Objects& operator=(const Objects&) = delete;
    ~Objects();

    /// Registers a handler for objects of type T: f(T& obj, Ps&... args) -> R (or const T&
    /// for shared access). Same order on every rank. The Objects owns the handler.
    template <class T, class F>
    auto make_handler(F&& f, HandlerOptions opts = {});

    /// Registers T as a mobile object type (make_handler<T> and create<T> do it too). Types
    /// that migrate to a rank must be registered there: register them on every rank.
    template <class T>
    void register_type();

    /// Creates a T here from args; this rank is its home.
    template <class T, class... A>
    mobile_ptr<T> create(A&&... args);

    /// Moves *p to rank dest, with the requests queued on it, after the requests this rank
    /// issued to it before (ordered like an exclusive handler). From any rank; to the rank
    /// that holds it: nothing happens. From the exclusive handler running on *p, when no
    /// request waits on it and every request this rank issued to it before has arrived, the
    /// object leaves as the handler ends, without a request of its own (the queued one would
    /// run next anyway); requests the handler issues to it after this follow it.
    template <class T>
    void migrate(mobile_ptr<T> p, int dest);

    /// Deletes *p where it lives, after the requests this rank issued to it before. Later
    /// requests to it fail the job, naming handler, object and ranks.
    template <class T>
    void destroy(mobile_ptr<T> p);

    /// Keeps *p where it is from now on as far as balancing policies are concerned
    /// (rebalance requests skip it; migrate still moves it). Ordered like migrate.
    template <class T>
    void pin(mobile_ptr<T> p) {
        submit_op(p.key(), detail::OpKind::pin, -1);
    }
    /// A migration asked by a balancing policy for an object living here: it goes ahead of
    /// the requests queued on the object (they travel with it, in order) and runs as soon as
    /// the handlers running on it end. Returns false, and nothing happens, if the object does
    /// not live here, is pinned (or a pin is queued on it) or is already about to move.
    bool rebalance(const ObjectKey& k, int dest);
    /// Tells `obs` about every handler run here (null: nobody). Set before work starts.
    void set_observer(ObjectsObserver* obs) noexcept { observer_.store(obs); }
    /// The Balancer balancing these objects: the one the program made, else the one made
    /// with this Objects when CASCADE_BALANCE names a policy (rotate, diffusion,
    /// master_worker); null when nothing balances them (CASCADE_BALANCE unset or none).
    Balancer* balancer() const noexcept { return balancer_.load(std::memory_order_acquire); }
    /// (Balancer) the Balancer that balances these objects from now on (null: none).
    void set_balancer(Balancer* b) noexcept { balancer_.store(b, std::memory_order_release); }

    /// The load of a T: f(obj) instead of the measured handler time (for the load queries
    /// below and the balancing layer). f may run while handlers run on the object.
    template <class T>
    void set_load(std::function<double(const T&)> f);

    /// True if the object lives on this rank now.
    bool is_local(const ObjectKey& k) const;
    /// True if *p lives on this rank now.
    template <class T>
    bool is_local(mobile_ptr<T> p) const {
        return is_local(p.key());
    }
    /// Load of each object living here.
    std::vector<ObjectLoad> local_objects() const;
    /// This rank's load: the sum of ObjectLoad::load over local_objects().
    double rank_load() const;
    /// The local object behind p (null if it does not live here). Only for inspection
    /// while no handler runs on it (e.g. after join()).
    template <class T>
    T* local(mobile_ptr<T> p) const {
        return static_cast<T*>(local_object(p.key()));
    }

    /// This rank's counters (see ObjectsStats).
    ObjectsStats stats() const;
    /// Forwards the request whose handler runs on the calling thread took (0: it went
    /// straight to the object's rank). For diagnostics and benchmarks.
    static int current_hops() noexcept;
    /// This rank.
    int rank() const noexcept { return rank_; }
    /// The number of ranks.
    int ranks() const noexcept { return size_; }
    /// The pool handlers run on.
    Threadpool& pool() noexcept { return tp_; }
    /// The communicator requests travel through.
    Communicator& comm() noexcept { return comm_; }

    /// Issues an operation other than a handler on object `k` (migrate with `arg` = the
    /// destination, destroy, pin), ordered after this rank's earlier requests to it.
    void submit_op(const ObjectKey& k, detail::OpKind kind, int arg);

    // ---- used by Handler ----------------------------------------------------------------
    /// Issues the request `h` (object, handler, kind) with the arguments `w` writes: runs or
    /// queues it here if the object lives here, else sends it where the object is thought
    /// to be.
    void submit(detail::InvokeHead h, const detail::ArgWriter& w);
    /// Sends a call()'s result (or, `failed`, its error) of `n` bytes at `data` to rank
    /// `dest`, for the sender's state `token`.
    void send_reply(int dest, std::uint64_t token, bool failed, const char* data, std::size_t n);
    /// A token naming `s` (a call()'s result state) until its reply takes it: what the
    /// request carries instead of an address (a reply naming no waiting call is refused).
    std::uint64_t add_reply_token(detail::StateBase* s) { return reply_tokens_.add(s); }
    /// The state `token` names, forgotten now; null if it names none (forged or repeated).
    detail::StateBase* take_reply_token(std::uint64_t token) noexcept {
        return reply_tokens_.take(token);
    }
    /// "'<handler name>' (object <type> <home>:<id>)", for errors.
    std::string describe(const detail::HandlerBase& h, const ObjectKey& k) const;

  private:
    friend struct detail::FuzzObjects;
    struct Shard;
    struct Pending {  // a request that may start now
        detail::Record* rec;
        detail::Invocation* inv;
    };
    struct ObjTask;
    struct HereTask;
    class Scratch;

    void register_type_erased(detail::ObjectType t);
    detail::HandlerBase* add_handler(std::unique_ptr<detail::HandlerBase> h);
    ObjectKey create_erased(std::uint32_t type, void* obj);
    void* local_object(const ObjectKey& k) const;
    Shard& shard(const ObjectKey& k) const;
    const detail::ObjectType* type_of(std::uint32_t hash) const;
    const detail::ObjectType& arriving_type(std::uint32_t hash, const ObjectKey& k) const;

    // Routing and ordering (shard locked where noted).
    void receive(detail::Invocation* inv);
    void deliver_locked(detail::Entry& e, detail::Invocation* inv, std::vector<Pending>& out);
    void dispatch_locked(detail::Record& r, std::vector<Pending>& out);
    void start(std::vector<Pending>& out) {
        if (!out.empty()) start_all(out);
    }
    void start_all(std::vector<Pending>& out);
    bool defer(const Pending& p);
    void undefer(detail::Record* r);
    static bool run_deferred(void* self);
    void forward(detail::Invocation* inv, int dest, bool to_home);
    void send_invocation(int dest, const detail::InvokeHead& h, const char* args, std::size_t n,
                         bool forwarded);
    void send_update(int dest, const ObjectKey& k, int loc, std::uint64_t ver, bool to_home);
    void on_update(const ObjectKey& k, int loc, std::uint64_t ver);
    [[noreturn]] void error_destroyed(const detail::Invocation& inv, int destroyed_on) const;
    // An object no entry names: -2 if it may exist, else where it was destroyed (-1: unknown).
    int destroyed_where(const Shard& s, const ObjectKey& k) const;
    // Drops the entry of a destroyed object (locked; kept while requests wait on it).
    void forget_locked(Shard& s, const ObjectKey& k, int destroyed_on);

    // Running requests (pool tasks).
    void execute(detail::Record* r, detail::Invocation* inv);
    // The handler (if any) ran from start_s to end_s (detail::now_s()) and `issued` requests
    // or not: the object's load.
    void finish(detail::Record* r, bool exclusive, double start_s = 0, double end_s = 0,
                bool issued = false);
    void discard(detail::Record* r, detail::Invocation* inv) noexcept;
    void do_migrate(detail::Record* r, detail::Invocation* inv);
    void migrate_now(detail::Record* r, int dest);
    bool migrate_when_handler_ends(const ObjectKey& k, int dest);
    void do_destroy(detail::Record* r, detail::Invocation* inv);
    void install(int source, const char* data, std::size_t size);
    void check_source(const detail::MigrateHead& mh, int source, int named) const;
    void check_requests(const detail::Record& r) const;
    void place(std::unique_ptr<detail::Record> rec, int source);
    bool send_with_bodies(std::unique_ptr<detail::Record>& rec, int dest);
    void on_migrate_bodies(int source, const char* data, std::size_t size);
    void on_body_arrived(int source, std::uint64_t slot);
    void on_body_sent(std::uint64_t slot);
    void on_invoke_frame(const char* data, std::size_t size);
    void on_reply(int source, std::int32_t named, std::uint64_t token, std::uint8_t failed,
                  const char* data, std::size_t size);
    void check_head(const detail::InvokeHead& h, const char* what) const;
    bool exclusive(const detail::Invocation& inv) const;
    const char* label_of(const detail::Record& r, const detail::Invocation& inv) const;
    std::string what_of(const detail::Invocation& inv) const;
    void count_delivery(const detail::Invocation& inv);

    Threadpool& tp_;
    Communicator& comm_;
    int rank_ = 0, size_ = 1;
    std::unique_ptr<Futures> own_futures_;  // when no Futures of this pool exists: for get()
    // The layer's messages, made once by the constructor.
    struct Messages {
        ActiveMsg<view<char>>* invoke = nullptr;
        ActiveMsg<view<char>>* forward = nullptr;
        ActiveMsg<ObjectKey, std::int32_t, std::uint64_t>* lazy_update = nullptr;
        ActiveMsg<ObjectKey, std::int32_t, std::uint64_t>* home_update = nullptr;
        ActiveMsg<std::int32_t, std::uint64_t, std::uint8_t, view<char>>* reply = nullptr;
        ActiveMsg<view<char>>* migrate = nullptr;
        LargeActiveMsg<char, std::int32_t, std::uint64_t, std::uint64_t>* migrate_large = nullptr;
        ActiveMsg<view<char>>* migrate_bodies = nullptr;
        LargeActiveMsg<char, std::int32_t, std::uint64_t>* body = nullptr;
        ActiveMsg<ObjectKey, std::int32_t>* destroyed = nullptr;
    };
    Messages am_;
    detail::Registry registry_;
    std::atomic<std::uint64_t> next_id_{1};

    static constexpr int kShards = 64;
    std::unique_ptr<Shard[]> shards_;

    // Requests of trusted handlers (short runs, never waited) that arrived while the pool was
    // idle: they run on the communication thread right after the handlers of the message that
    // brought them (Communicator::add_after_progress), outside any handler, with their
    // object's access already granted. Communication thread only; a fixed array (no
    // allocation), the rest go to workers.
    struct Deferred {
        static constexpr std::size_t kMax = 32;
        std::array<Pending, kMax> list{};
        std::size_t n = 0;
        bool running = false;
        bool installed = false;  // run_deferred is installed on the communicator
    };
    Deferred deferred_;

    detail::Transit transit_;  // migrations in flight
    detail::Spares spares_;    // buffers and records kept for the next migrations
    // Resets `r` and keeps it for the next arrival (spares_).
    void give_record(std::unique_ptr<detail::Record> r) noexcept;

    struct Counters {
        std::atomic<std::uint64_t> handlers_run{0}, on_comm_thread{0}, forwards{0}, lazy_updates{0},
            home_updates{0}, migrations_out{0}, moved_by_handler{0}, migrations_in{0}, parked{0},
            max_hops{0}, max_hops_before_home{0};
        std::array<std::atomic<std::uint64_t>, 8> by_hops{};
    };
    mutable Counters counters_;
    std::atomic<ObjectsObserver*> observer_{nullptr};
    // The result states of this rank's call()s waiting for a reply from another rank.
    detail::ReplyTokens<detail::StateBase> reply_tokens_;
    // The Balancer made for CASCADE_BALANCE (the balance layer makes and frees it: it stays
    // switched off once a program's own Balancer took over), and the one balancing now.
    struct FreeBalancer {
        void operator()(Balancer* b) const noexcept;
    };
    std::unique_ptr<Balancer, FreeBalancer> implicit_balancer_;
    std::atomic<Balancer*> balancer_{nullptr};
};

// ---- templates -------------------------------------------------------------------------------

namespace detail {
template <class T, class Tuple>
struct handler_from;
template <class T, class A0, class... As>
struct handler_from<T, std::tuple<A0, As...>> {
    static_assert(std::is_same_v<std::remove_cvref_t<A0>, T>,
                  "make_handler<T>: the first parameter must be T& (or const T&)");
    template <class F>
    using result = std::invoke_result_t<F&, T&, std::remove_cvref_t<As>&...>;
    template <class F>
    using type = Handler<T, result<F>, std::remove_cvref_t<As>...>;
    template <class F>
    using fn = std::function<result<F>(T&, std::remove_cvref_t<As>&...)>;
};
}  // namespace detail

template <class T>
void Objects::register_type() {
    static_assert(wire::require<T>, "a mobile object type must be able to travel");
    register_type_erased(detail::make_object_type<T>());
}

template <class T, class F>
auto Objects::make_handler(F&& f, HandlerOptions opts) {
    using Fn = std::decay_t<F>;
    using From = detail::handler_from<T, typename detail::callable_args<Fn>::declared>;
    using H = typename From::template type<Fn>;
    using R = typename From::template result<Fn>;
    static_assert(wire::require<detail::value_t<R>>,
                  "call(): the handler's result must be able to travel");
    register_type<T>();
    auto h = std::make_unique<H>(*this, typename From::template fn<Fn>(std::forward<F>(f)));
    h->name = std::move(opts.name);
    h->access = opts.access;
    h->run_in_handler = opts.run_in_handler;
    h->type_hash = wire::hash_name(wire::type_names<T>());
    h->sig = wire::hash_name(wire::type_names<H>()) ^ wire::hash_name(h->name) ^
             (opts.access == Access::shared ? 0x5bd1e995u : 0u);
    return static_cast<H*>(add_handler(std::move(h)));
}

template <class T, class... A>
mobile_ptr<T> Objects::create(A&&... args) {
    register_type<T>();
    T* obj = new T(std::forward<A>(args)...);
    return mobile_ptr<T>(create_erased(wire::hash_name(wire::type_names<T>()), obj));
}

template <class T>
void Objects::migrate(mobile_ptr<T> p, int dest) {
    if (dest < 0 || dest >= size_)
        throw UsageError("objects: migrate of object " + to_string(p.key()) + " to rank " +
                         std::to_string(dest) + ", outside [0, " + std::to_string(size_) + ")");
    if (migrate_when_handler_ends(p.key(), dest)) return;
    detail::InvokeHead h;
    h.key = p.key();
    h.kind = detail::OpKind::migrate;
    h.arg = dest;
    submit(h, detail::ArgWriter{});
}

template <class T>
void Objects::destroy(mobile_ptr<T> p) {
    detail::InvokeHead h;
    h.key = p.key();
    h.kind = detail::OpKind::destroy;
    submit(h, detail::ArgWriter{});
}

template <class T>
void Objects::set_load(std::function<double(const T&)> f) {
    register_type<T>();
    registry_.set_load(wire::hash_name(wire::type_names<T>()),
                       [f = std::move(f)](const void* p) { return f(*static_cast<const T*>(p)); });
}

template <class T, class R, class... Ps>
void Handler<T, R, Ps...>::invoke(mobile_ptr<T> p, const Ps&... ps) {
    if (!p) throw UsageError("objects: handler '" + name + "' invoked on a null mobile_ptr");
    detail::InvokeHead h;
    h.key = p.key();
    h.handler = id;
    h.sig = sig;
    const std::tuple<const Ps&...> args(ps...);
    objs_.submit(h, detail::arg_writer(args));
}

template <class T, class R, class... Ps>
future<R> Handler<T, R, Ps...>::call(mobile_ptr<T> p, const Ps&... ps) {
    if (!p) throw UsageError("objects: handler '" + name + "' called on a null mobile_ptr");
    auto* st = new detail::State<R>();
    detail::Ref<detail::State<R>> ref(st);
    detail::InvokeHead h;
    h.key = p.key();
    h.handler = id;
    h.sig = sig;
    const std::tuple<const Ps&...> args(ps...);
    st->retain();  // carried by the request, released by the reply
    try {
        h.token = objs_.add_reply_token(st);
    } catch (...) {
        st->release();
        throw;
    }
    try {
        objs_.submit(h, detail::arg_writer(args));
    } catch (...) {
        if (objs_.take_reply_token(h.token)) st->release();
        throw;
    }
    return future<R>(std::move(ref));
}

template <class T, class R, class... Ps>
void Handler<T, R, Ps...>::run(Objects& objs, void* obj, const ObjectKey& key,
                               detail::Invocation& inv) {
    wire::Reader r(inv.args.data(), inv.args.size());
    auto args = wire::decode<Ps...>(r);
    T& o = *static_cast<T*>(obj);
    auto apply = [&]() -> R {
        return std::apply([&](Ps&... a) -> R { return f_(o, a...); }, args);
    };
    if (inv.h.token == 0) {
        apply();
        return;
    }
    const bool here = inv.h.sender == objs.rank();
    // Issued here: its state, named by a token of this rank's table.
    detail::State<R>* st = nullptr;
    if (here) {
        st = static_cast<detail::State<R>*>(objs.take_reply_token(inv.h.token));
        if (!st)
            throw WireError("objects: a request of rank " + std::to_string(objs.rank()) +
                            " names no call waiting here (unknown or repeated token)");
    }
    try {
        if constexpr (std::is_void_v<R>) {
            apply();
            if (here) {
                st->set_value();
                st->release();
            } else {
                objs.send_reply(inv.h.sender, inv.h.token, false, nullptr, 0);
            }
        } else {
            R res = apply();
            if (here) {
                st->set_value(std::move(res));
                st->release();
            } else {
                std::vector<char> buf(wire::size_of(res) + 8);
                wire::Writer w(buf.data());
                w.put(res);
                objs.send_reply(inv.h.sender, inv.h.token, false, buf.data(),
                                static_cast<std::size_t>(w.position() - buf.data()));
            }
        }
    } catch (...) {
        const std::string msg = "objects: handler " + objs.describe(*this, key) + " on rank " +
                                std::to_string(objs.rank()) +
                                " threw: " + detail::describe_error(std::current_exception());
        if (here) {
            st->set_error(std::make_exception_ptr(RemoteError(objs.rank(), msg)));
            st->release();
        } else {
            objs.send_reply(inv.h.sender, inv.h.token, true, msg.data(), msg.size());
        }
    }
}

}  // namespace cascade
