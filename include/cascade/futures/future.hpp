// future<T> (one consumer, movable), shared_future<T> (copyable; also serializable, see
// futures/wire.hpp), promise<T>, make_ready_future, make_exceptional_future, and then().
//
// get() on a worker of the pool runs other ready tasks while it waits (so every worker may
// wait at once without deadlock); on the thread that drives MPI it keeps messages moving;
// any other thread sleeps. then(f) never blocks: f runs as a task of this rank's pool when
// the value is there (f takes the value, or the future itself to see its exception).
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include "cascade/futures/state.hpp"

namespace cascade {

template <class T>
class future;
template <class T>
class shared_future;

template <class T>
struct is_future : std::false_type {};
template <class T>
struct is_future<future<T>> : std::true_type {};
template <class T>
struct is_future<shared_future<T>> : std::true_type {};

namespace detail {

template <class T>
void check_valid(const Ref<State<T>>& s) {
    if (!s) throw UsageError("future: operation on a future without state (moved from?)");
}

// The continuation of then(): a state of its own, registered as a callback on the source,
// queued as a job when the source is ready.
template <class U, class T, class F, bool Consume>
class ThenJob final : public State<U>, public Callback, public Job {
  public:
    ThenJob(F f, Ref<State<T>> src) : f_(std::move(f)), src_(std::move(src)) {}

    void fire(StateBase&) noexcept override { schedule(this); }
    void run_job() noexcept override {
        try {
            if constexpr (std::is_invocable_v<F&, future<T>>) {
                invoke_and_set([&] { return f_(future<T>(std::move(src_))); });
            } else if (src_->failed()) {
                this->set_error(src_->error());
            } else if constexpr (std::is_void_v<T>) {
                invoke_and_set([&] { return f_(); });
            } else if constexpr (Consume) {
                invoke_and_set([&] { return f_(std::move(src_->value())); });
            } else {
                invoke_and_set([&] { return f_(std::as_const(src_->value())); });
            }
        } catch (...) {
            this->set_error(std::current_exception());
        }
        src_ = {};
        this->release();  // the reference the pending job held
    }
    void discard_job() noexcept override {
        this->set_error(std::make_exception_ptr(
            UsageError("future: continuation discarded (the pool failed)")));
        src_ = {};
        this->release();
    }
    const char* job_name() const noexcept override { return "future::then"; }

  private:
    template <class G>
    void invoke_and_set(G&& g) {
        if constexpr (std::is_void_v<U>) {
            g();
            this->set_value();
        } else {
            this->set_value(g());
        }
    }
    F f_;
    Ref<State<T>> src_;
};

template <class T, class F>
struct then_result {
    using type = typename  // (clang 14 needs the typename)
        std::conditional_t<std::is_invocable_v<F&, future<T>>, std::invoke_result<F&, future<T>>,
                           std::conditional_t<std::is_void_v<T>, std::invoke_result<F&>,
                                              std::invoke_result<F&, value_t<T>&&>>>::type;
};

template <bool Consume, class T, class F>
auto make_then(Ref<State<T>> src, F&& f) {
    using U = typename then_result<T, std::decay_t<F>>::type;
    auto* job = new ThenJob<U, T, std::decay_t<F>, Consume>(std::forward<F>(f), src);
    job->retain();  // one reference for the returned future, one for the pending job
    src->on_ready(job);
    return future<U>(Ref<State<U>>(job));
}

}  // namespace detail

template <class T>
class future {
  public:
    using value_type = T;
    future() = default;
    explicit future(detail::Ref<detail::State<T>> s) noexcept : s_(std::move(s)) {}
    future(future&&) noexcept = default;
    future& operator=(future&&) noexcept = default;
    future(const future&) = delete;
    future& operator=(const future&) = delete;

    bool valid() const noexcept { return static_cast<bool>(s_); }
    bool ready() const {
        detail::check_valid(s_);
        return s_->poll_ready();
    }
    void wait() const {
        detail::check_valid(s_);
        detail::wait_ready(*s_);
    }
    // Waits, then returns the value (moved out) or throws the exception; the future is
    // empty afterwards.
    T get() {
        detail::check_valid(s_);
        detail::wait_ready(*s_);
        auto s = std::move(s_);
        if (s->failed()) std::rethrow_exception(s->error());
        if constexpr (!std::is_void_v<T>) return std::move(s->value());
    }
    shared_future<T> share() noexcept { return shared_future<T>(std::move(s_)); }

    // f(value) or f(future<T>) runs as a task once the value is there; returns its future.
    template <class F>
    auto then(F&& f) {
        detail::check_valid(s_);
        return detail::make_then<true>(std::move(s_), std::forward<F>(f));
    }

    detail::State<T>* state() const noexcept { return s_.get(); }

  private:
    detail::Ref<detail::State<T>> s_;
};

template <class T>
class shared_future {
  public:
    using value_type = T;
    shared_future() = default;
    explicit shared_future(detail::Ref<detail::State<T>> s) noexcept : s_(std::move(s)) {}
    shared_future(future<T>&& f) noexcept : shared_future(f.share()) {}

    bool valid() const noexcept { return static_cast<bool>(s_); }
    bool ready() const {
        detail::check_valid(s_);
        return s_->poll_ready();
    }
    void wait() const {
        detail::check_valid(s_);
        detail::wait_ready(*s_);
    }
    // Waits, then returns a reference to the value (valid while a copy of this future
    // lives) or throws the exception.
    std::conditional_t<std::is_void_v<T>, void, const detail::value_t<T>&> get() const {
        detail::check_valid(s_);
        detail::wait_ready(*s_);
        if (s_->failed()) std::rethrow_exception(s_->error());
        if constexpr (!std::is_void_v<T>) return s_->value();
    }
    template <class F>
    auto then(F&& f) const {
        detail::check_valid(s_);
        return detail::make_then<false>(s_, std::forward<F>(f));
    }

    detail::State<T>* state() const noexcept { return s_.get(); }
    const detail::Ref<detail::State<T>>& ref() const noexcept { return s_; }

  private:
    detail::Ref<detail::State<T>> s_;
};

template <class T>
class promise {
  public:
    promise() : s_(new detail::State<T>()) {}
    promise(promise&&) noexcept = default;
    promise& operator=(promise&&) noexcept = default;
    ~promise() {
        if (s_ && s_->try_claim())
            s_->set_error(std::make_exception_ptr(
                UsageError("promise: destroyed without setting a value (broken promise)")));
    }
    future<T> get_future() {
        if (!s_ || got_) throw UsageError("promise: get_future() called twice");
        got_ = true;
        return future<T>(s_);
    }
    template <class... A>
    void set_value(A&&... a) {
        s_->claim("set_value");
        s_->set_value(std::forward<A>(a)...);
    }
    void set_exception(std::exception_ptr e) {
        s_->claim("set_exception");
        s_->set_error(std::move(e));
    }

  private:
    detail::Ref<detail::State<T>> s_;
    bool got_ = false;
};

template <class T>
future<std::decay_t<T>> make_ready_future(T&& v) {
    auto* s = new detail::State<std::decay_t<T>>();
    s->set_value(std::forward<T>(v));
    return future<std::decay_t<T>>(detail::Ref<detail::State<std::decay_t<T>>>(s));
}
inline future<void> make_ready_future() {
    auto* s = new detail::State<void>();
    s->set_value();
    return future<void>(detail::Ref<detail::State<void>>(s));
}
template <class T>
future<T> make_exceptional_future(std::exception_ptr e) {
    auto* s = new detail::State<T>();
    s->set_error(std::move(e));
    return future<T>(detail::Ref<detail::State<T>>(s));
}

}  // namespace cascade
