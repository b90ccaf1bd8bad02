// future<T> (one consumer, movable), make_ready_future, make_exceptional_future, and then();
// shared_future<T> (shared_future.hpp) and promise<T> (promise.hpp) come with it.
//
// get() on a worker of the pool runs other ready tasks while it waits (so every worker may
// wait at once without deadlock); on the thread that drives MPI it keeps messages moving;
// any other thread sleeps. then(f) never blocks: f runs as a task of this rank's pool when
// the value is there (f takes the value, or the future itself to see its exception).
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include "cascade/futures/detail/state.hpp"
#include "cascade/futures/detail/then.hpp"

namespace cascade {

/// The result of an asynchronous computation (async, then, when_all, promise), read once.
///
/// ```cpp
/// cascade::future<int> f = cascade::async(cascade::here, [] { return 6 * 7; });
/// cascade::future<int> g = f.then([](int x) { return x + 1; });  // runs as a task
/// int y = g.get();                                                // 43
/// ```
template <class T>
class future {
  public:
    /// The type of the value.
    using value_type = T;
    /// A future without a state (valid() is false).
    future() = default;
    /// (The library's: a future reading state `s`.)
    explicit future(detail::Ref<detail::State<T>> s) noexcept : s_(std::move(s)) {}
    /// Takes over the other future's state (which becomes invalid). Movable, not copyable.
    future(future&&) noexcept = default;
    /// Takes over the other future's state.
    future& operator=(future&&) noexcept = default;
    future(const future&) = delete;
    future& operator=(const future&) = delete;

    /// Whether it has a state (false once get() or share() took it).
    bool valid() const noexcept { return static_cast<bool>(s_); }
    /// Whether the value (or exception) is there; never blocks.
    bool ready() const {
        detail::check_valid(s_);
        return s_->poll_ready();
    }
    /// Blocks until ready: a worker runs other tasks meanwhile, the thread that drives MPI
    /// keeps messages moving, any other thread sleeps.
    void wait() const {
        detail::check_valid(s_);
        detail::wait_ready(*s_);
    }
    /// Waits, then returns the value (moved out) or throws the exception (RemoteError for
    /// one raised on another rank); the future is empty afterwards.
    T get() {
        detail::check_valid(s_);
        detail::wait_ready(*s_);
        auto s = std::move(s_);
        if (s->failed()) std::rethrow_exception(s->error());
        if constexpr (!std::is_void_v<T>) return std::move(s->value());
    }
    /// A copyable future of the same state; this one is empty afterwards.
    shared_future<T> share() noexcept { return shared_future<T>(std::move(s_)); }

    /// f(value) or f(future<T>) runs as a task once the value is there; returns its future.
    /// Never blocks; this future is empty afterwards.
    template <class F>
    auto then(F&& f) {
        detail::check_valid(s_);
        return detail::make_then<true>(std::move(s_), std::forward<F>(f));
    }

    /// (The library's: the shared state.)
    detail::State<T>* state() const noexcept { return s_.get(); }

  private:
    detail::Ref<detail::State<T>> s_;
};

/// A future that already holds `v`.
template <class T>
future<std::decay_t<T>> make_ready_future(T&& v) {
    auto* s = new detail::State<std::decay_t<T>>();
    s->set_value(std::forward<T>(v));
    return future<std::decay_t<T>>(detail::Ref<detail::State<std::decay_t<T>>>(s));
}
/// A ready future<void>.
inline future<void> make_ready_future() {
    auto* s = new detail::State<void>();
    s->set_value();
    return future<void>(detail::Ref<detail::State<void>>(s));
}
/// A future whose get() throws `e`.
template <class T>
future<T> make_exceptional_future(std::exception_ptr e) {
    auto* s = new detail::State<T>();
    s->set_error(std::move(e));
    return future<T>(detail::Ref<detail::State<T>>(s));
}

}  // namespace cascade

#include "cascade/futures/promise.hpp"
#include "cascade/futures/shared_future.hpp"
