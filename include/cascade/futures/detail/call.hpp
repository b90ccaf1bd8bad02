// One async call: its arguments (values, or futures it waits for), the function to run, and
// the state its future reads. The call is queued on the pool only once every future argument
// is ready (dataflow: no thread blocks waiting for arguments). One allocation per call.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cascade/comm/active_msg.hpp"
#include "cascade/futures/future.hpp"

namespace cascade {

class Futures;

namespace detail {

// What a parameter of type P accepts: P itself, or a future of P (dataflow); a parameter
// of type shared_future<X> receives the future itself.
template <class P>
struct param_traits {
    using elem = P;
    static constexpr bool shared = false;
};
template <class X>
struct param_traits<shared_future<X>> {
    using elem = X;
    static constexpr bool shared = true;
};

template <class A>
struct future_elem {
    static constexpr bool yes = false;
    using type = void;
};
template <class X>
struct future_elem<future<X>> {
    static constexpr bool yes = true;
    using type = X;
};
template <class X>
struct future_elem<shared_future<X>> {
    static constexpr bool yes = true;
    using type = X;
};

// Bit i set if parameter i of the (non-generic) callable F is a const lvalue reference: such
// a parameter may read a future argument's value in place instead of a copy.
template <class Declared>
struct borrow_mask_of;
template <class... A>
struct borrow_mask_of<std::tuple<A...>> {
    static constexpr std::uint64_t value = [] {
        std::uint64_t m = 0, bit = 1;
        ((m |=
          (std::is_lvalue_reference_v<A> && std::is_const_v<std::remove_reference_t<A>>) ? bit : 0,
          bit <<= 1),
         ...);
        return m;
    }();
};
template <class F>
struct borrow_mask : borrow_mask_of<typename callable_args<F>::declared> {};

// Storage of one argument of a call.
template <class P>
struct Slot {
    std::optional<P> value;
    Ref<State<P>> fut;     // a future argument, until resolve()
    bool consume = false;  // fut's value may be moved out (no one else reads it)

    // Drops the argument after the call; a big one's memory serves the next (Recycler).
    void clear() noexcept {
        if constexpr (body_capable<P>)
            if (value) Recycler<P>::give(*value);
        value.reset();
        fut = {};
    }

    StateBase* pending() const noexcept { return fut.get(); }
    // Makes the value of a future argument the call's own: moved if no one else can read it,
    // left in place if the function takes it by const reference (borrow), copied otherwise.
    void resolve(bool borrow) {
        if (!fut) return;
        const bool movable = fut->value_movable();  // false: the value is shared (an alias)
        if (borrow && !(fut->unique() && movable)) return;
        if ((consume || fut->unique()) && movable && fut->release_for_move())
            value.emplace(std::move(fut->value()));
        else
            value.emplace(fut->value());
        fut = {};
    }
    P& get() noexcept { return fut ? fut->value() : *value; }

    template <class A>
    void set(A&& a) {
        using D = std::remove_cvref_t<A>;
        if constexpr (future_elem<D>::yes) {
            static_assert(std::is_same_v<typename future_elem<D>::type, P>,
                          "async: a future argument must hold the parameter's type");
            if (!a.valid()) throw UsageError("async: argument future has no state");
            consume = std::is_same_v<D, future<P>> && !std::is_lvalue_reference_v<A>;
            if constexpr (std::is_same_v<D, future<P>>)
                fut = std::forward<A>(a).share().ref();
            else
                fut = a.ref();
        } else {
            static_assert(std::is_constructible_v<P, A&&>,
                          "async: argument not convertible to the parameter's type");
            value.emplace(std::forward<A>(a));
        }
    }
};

template <class X>
struct Slot<shared_future<X>> {
    shared_future<X> f;
    StateBase* pending() const noexcept { return nullptr; }
    void resolve(bool) noexcept {}
    shared_future<X>& get() noexcept { return f; }
    void clear() noexcept { f = {}; }
    template <class A>
    void set(A&& a) {
        using D = std::remove_cvref_t<A>;
        static_assert(std::is_same_v<D, shared_future<X>> || std::is_same_v<D, future<X>>,
                      "async: a shared_future<X> parameter takes a future<X> or shared_future<X>");
        if constexpr (std::is_same_v<D, future<X>>)
            f = std::forward<A>(a).share();
        else
            f = a;
    }
};

// A remote call waiting for argument bodies (see Body in async.hpp): expect_body() before
// start(), body_arrived() from the communication thread once each body is in place.
struct BodySink {
    virtual void expect_body() noexcept = 0;
    virtual void body_arrived() noexcept = 0;

  protected:
    ~BodySink() = default;
};

// Where a finished remote call sends its result (see Futures::send_value).
struct ReplyTo {
    Futures* fx = nullptr;
    int rank = -1;
    std::uint64_t token = 0;
    const std::string* name = nullptr;
    bool keep = false;  // keep a value here, reply where it is (AsyncOptions::keep_result)
};
template <class T>
void send_result(const ReplyTo& to, State<T>& s) noexcept;

template <class Fn, class R, class... Ps>
class Call final : public State<R>, public Job, public BodySink {
  public:
    static constexpr std::size_t N = sizeof...(Ps);

    // borrow: bit i set if the function takes parameter i by const reference.
    explicit Call(Fn fn, std::uint64_t borrow = 0) : fn_(std::move(fn)), borrow_(borrow) {
        for (std::size_t i = 0; i < N; ++i)
            wakes_[i].call = this;
    }
    std::tuple<Slot<Ps>...>& slots() noexcept { return slots_; }

    // Sends the result to `to` once set (remote calls).
    void reply_to(ReplyTo to) noexcept {
        reply_.to = to;
        this->retain();  // the reply callback holds one reference
        this->on_ready(&reply_);
    }
    // Waits for the future arguments, then queues the call (or runs it here if inline).
    void start(bool inline_run) noexcept {
        inline_ = inline_run;
        this->retain();  // the job's reference, dropped after it ran
        pending_.store(1 + bodies_, std::memory_order_relaxed);
        watch(std::index_sequence_for<Ps...>{});
        input_ready(nullptr);
    }

    // Remote calls: runs are timed into `stats` (see CallStats).
    void set_stats(CallStats* stats) noexcept { stats_ = stats; }

    void run_job() noexcept override {
        if (input_failed_.load(std::memory_order_acquire)) {
            this->set_error(input_error_);
        } else if (stats_) {
            const std::uint64_t waits = waits_on_this_thread();
            const auto t0 = std::chrono::steady_clock::now();
            try {
                invoke(std::index_sequence_for<Ps...>{});
            } catch (...) {
                this->set_error(std::current_exception());
            }
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - t0)
                                .count();
            stats_->record(ns < CallStats::kShortNs && waits_on_this_thread() == waits);
        } else {
            try {
                invoke(std::index_sequence_for<Ps...>{});
            } catch (...) {
                this->set_error(std::current_exception());
            }
        }
        std::apply([](auto&... s) { (s.clear(), ...); }, slots_);
        this->release();
    }
    void expect_body() noexcept override {
        ++bodies_;
        this->retain();  // held until the body arrived
    }
    void body_arrived() noexcept override {
        input_ready(nullptr);
        this->release();
    }
    void discard_job() noexcept override {
        this->set_error(
            std::make_exception_ptr(UsageError("async: call discarded (the pool failed)")));
        this->release();
    }

  private:
    struct Wake final : Callback {
        Call* call = nullptr;
        void fire(StateBase& s) noexcept override { call->input_ready(&s); }
    };
    struct Reply final : Callback {
        ReplyTo to;
        void fire(StateBase& s) noexcept override {
            send_result(to, static_cast<State<R>&>(s));
            s.release();
        }
    };

    template <std::size_t... I>
    void watch(std::index_sequence<I...>) noexcept {
        (watch_one(I, std::get<I>(slots_).pending()), ...);
    }
    void watch_one(std::size_t i, StateBase* s) noexcept {
        if (!s) return;
        pending_.fetch_add(1, std::memory_order_relaxed);
        s->on_ready(&wakes_[i]);
    }
    void input_ready(StateBase* s) noexcept {
        if (s && s->failed() && !input_claimed_.exchange(true, std::memory_order_acq_rel)) {
            input_error_ = s->error();
            input_failed_.store(true, std::memory_order_release);
        }
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
        if (inline_)
            run_job();
        else if (stats_)
            schedule_call(this, *stats_);
        else
            schedule(this);
    }
    template <std::size_t... I>
    void invoke(std::index_sequence<I...>) {
        if (!input_failed_.load(std::memory_order_acquire))
            (std::get<I>(slots_).resolve((borrow_ >> I) & 1u), ...);
        if constexpr (std::is_void_v<R>) {
            fn_(std::get<I>(slots_).get()...);
            this->set_value();
        } else {
            this->set_value(fn_(std::get<I>(slots_).get()...));
        }
    }

    Fn fn_;
    CallStats* stats_ = nullptr;
    std::uint64_t borrow_;
    std::tuple<Slot<Ps>...> slots_;
    std::array<Wake, N> wakes_;
    Reply reply_;
    std::atomic<int> pending_{0};
    int bodies_ = 0;  // argument bodies to wait for (remote calls)
    std::atomic<bool> input_claimed_{false};
    std::atomic<bool> input_failed_{false};
    std::exception_ptr input_error_;
    bool inline_ = false;
};

}  // namespace detail
}  // namespace cascade
