// then(f): a state that runs f as a task of the pool once its source is ready.
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include "cascade/futures/detail/state.hpp"

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

}  // namespace cascade
