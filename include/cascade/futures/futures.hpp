// Futures: the futures layer of one pool (and communicator): async(where, f, args...) ->
// future<R>, locally or on another rank.
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
#include "cascade/futures/async_fn.hpp"
#include "cascade/futures/detail/call.hpp"
#include "cascade/futures/detail/fn.hpp"
#include "cascade/futures/detail/import_state.hpp"
#include "cascade/futures/detail/lazy_state.hpp"
#include "cascade/futures/detail/recycle.hpp"
#include "cascade/futures/detail/reply_tokens.hpp"
#include "cascade/futures/future.hpp"

namespace cascade {

namespace detail {
struct FuzzFutures;  // the fuzzer's access to the message handlers (fuzz/)
}

/// async(where, ...): this rank.
inline constexpr int here = -1;
/// async(where, ...): a rank chosen by the runtime (round robin over the ranks).
inline constexpr int any = -2;

/// The futures layer of one pool (and communicator): the registry of async functions, the
/// messages that carry calls, results and shared-future values, and the states exported to
/// other ranks. Create one at the same point on every rank, after the pool and the
/// communicator; the latest Futures constructed is the current one (what get(), then() and
/// the free async() use).
///
/// ```cpp
/// cascade::Communicator comm;
/// cascade::Threadpool tp(2, &comm);
/// cascade::Futures fx(tp, &comm);
/// auto sq = fx.make_async([](int& x) { return x * x; }, "square");  // same order everywhere
/// if (comm.rank() == 0) {
///     cascade::future<int> f = cascade::async(1 % comm.ranks(), sq, 7);
///     std::printf("%d\n", f.get());  // 49
/// }
/// tp.join();
/// ```
class Futures {
  public:
    /// Futures over `tp`, and over `comm` for calls to other ranks (null: this rank only).
    explicit Futures(Threadpool& tp, Communicator* comm = nullptr);
    Futures(const Futures&) = delete;
    Futures& operator=(const Futures&) = delete;
    ~Futures();

    /// Registers `f` (any callable taking its parameters by reference) as an async function;
    /// must be called in the same order on every rank. Parameters and result must travel on
    /// the wire (see comm/serialization.hpp), parameters may also be shared_future<T>.
    template <class F>
    auto make_async(F&& f, std::string name = "", AsyncOptions opts = {});

    /// Calls `fn` on rank `where` (a rank, cascade::here or cascade::any) with `args`, each
    /// a value of its parameter's type or a future of it (the call then waits for it).
    template <class R, class... Ps, class... A>
    future<R> async(int where, const AsyncFn<R(Ps...)>& fn, A&&... args);
    /// Any callable, run on this rank's pool.
    template <class F, class... A>
    auto async_local(F&& f, A&&... args);

    /// This rank (0 without a communicator).
    int rank() const noexcept { return rank_; }
    /// The number of ranks (1 without a communicator).
    int ranks() const noexcept { return size_; }
    /// The pool futures' tasks run on.
    Threadpool& pool() noexcept { return tp_; }
    /// The communicator remote calls travel through, or null.
    Communicator* comm() noexcept { return comm_; }
    /// The rank `where` designates (resolves here / any; checks the range).
    int place(int where);
    /// The latest Futures constructed and not yet destroyed, or null.
    static Futures* current() noexcept;

    /// Calls sent to other ranks from here.
    std::uint64_t remote_calls() const noexcept { return remote_calls_.load(); }
    /// Argument bodies received here (arguments of kLargeArg bytes or more).
    std::uint64_t bodies_received() const noexcept { return bodies_received_.load(); }
    /// States of this rank that other ranks may still fetch.
    std::size_t exported() const;
    /// Future arguments resolved here without a copy: their value was kept on this rank
    /// (AsyncOptions::keep_result) and came back to it, named directly or by a redirect.
    std::uint64_t kept_in_place() const noexcept { return kept_in_place_.load(); }
    /// Future arguments that found their value already imported here (no second fetch).
    std::uint64_t imports_shared() const noexcept { return imports_shared_.load(); }
    /// Remote calls run by the communication thread so far (short calls arriving at an idle
    /// pool, see docs/futures.md).
    std::uint64_t calls_on_comm_thread() const noexcept { return calls_on_comm_thread_; }
    /// From this size on (bytes), a std::vector or std::string argument or result travels as
    /// a body of its own, straight into the callee's argument.
    static constexpr std::size_t kLargeArg = detail::kLargeBytes;
    /// States waiting for a reply from another rank (calls and fetches in flight).
    std::size_t awaiting_replies() const noexcept { return tokens_.size(); }

  private:
    // The library's side: exporting, importing and fetching states, sending values.
    template <class X>
    friend void detail::send_exported(Futures&, detail::StateBase&, int, std::uint64_t);
    template <class P, class A>
    friend auto detail::prepare(Futures&, A&&);
    template <class P>
    friend void detail::decode_arg(Futures&, int, wire::Reader&, detail::Slot<P>&,
                                   detail::BodySink&);
    template <class T>
    friend void detail::send_result(const detail::ReplyTo&, detail::State<T>&) noexcept;
    template <class T>
    friend struct detail::SendAfterLeaving;
    friend struct detail::Residence;
    friend void detail::schedule_call(detail::Job*, const detail::CallStats&);

    using SendExported = detail::SendValueFn;
    using ShareExported = detail::ShareValueFn;
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
    // A value that needs work before it is written (detail::needs_leaving: a device Data's
    // host copy, which may wait) is sent from a pool worker, never from this thread, which
    // may be the communication thread; `left`: that work is done.
    template <class T>
    void send_value(int dest, std::uint64_t token, detail::State<T>& s, const std::string* fn,
                    bool left = false);
    template <class T>
    void send_resident(int dest, std::uint64_t token, detail::State<T>& s);
    static constexpr std::uint64_t kResidentWeight = std::uint64_t(1) << 40;
    // Big arguments travel as bodies after the request, straight into the callee's argument.
    void receive_body(int source, void* dest, std::size_t bytes, std::size_t chunk,
                      detail::BodySink* sink);
    // Keeps `job` (a remote call, see detail::CallStats) for the communication thread to run
    // before the progress() call it is in returns (after the handlers of the message being
    // read); false when that cannot be (then queue it).
    bool defer_to_comm_thread(detail::Job* job);
    static bool run_deferred(void* self);

    enum Msg { request_msg, reply_msg, fetch_msg };
    void send_fetch(int owner, const detail::FetchHead& h);  // a fetch or a release
    template <class W, class Extra = detail::LayerLink::NoBodies>
    void send_frame(int dest, Msg which, std::size_t max_bytes, W&& write, Extra&& extra = {});
    template <class R, class... Ps, class... A>
    future<R> remote(int dest, detail::FnEntry<R, Ps...>& e, A&&... args);
    template <class F, class... Ps>
    auto make_async_impl(F&& f, std::string name, AsyncOptions opts, std::tuple<Ps...>*);

    void on_request(int source, const char* data, std::size_t size);
    void on_reply(int source, const char* data, std::size_t size);
    void on_fetch(int source, const char* data, std::size_t size);
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

}  // namespace cascade

// Template definitions, then the rest of the layer (async(), when_all), so that including
// this header is enough to use futures.
#include "cascade/futures/detail/futures_impl.hpp"
// (after the class: they need it complete)
#include "cascade/futures/async.hpp"
#include "cascade/futures/when.hpp"
