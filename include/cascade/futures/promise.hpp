// promise<T>: the writing end of a future.
#pragma once

#include <exception>
#include <utility>

#include "cascade/core/errors.hpp"
#include "cascade/futures/future.hpp"

namespace cascade {

/// The writing end of a future: set its value or exception from anywhere, once.
///
/// ```cpp
/// cascade::promise<int> p;
/// cascade::future<int> f = p.get_future();
/// std::thread t([&] { p.set_value(42); });
/// int v = f.get();  // 42
/// t.join();
/// ```
template <class T>
class promise {
  public:
    /// A promise with a fresh shared state.
    promise() : s_(new detail::State<T>()) {}
    /// Takes over the other promise's state (movable, not copyable).
    promise(promise&&) noexcept = default;
    /// Takes over the other promise's state.
    promise& operator=(promise&&) noexcept = default;
    /// Destroyed without a value: the future throws UsageError ("broken promise").
    ~promise() {
        if (s_ && s_->try_claim())
            s_->set_error(std::make_exception_ptr(
                UsageError("promise: destroyed without setting a value (broken promise)")));
    }
    /// The future reading this promise (once).
    future<T> get_future() {
        if (!s_ || got_) throw UsageError("promise: get_future() called twice");
        got_ = true;
        return future<T>(s_);
    }
    /// Sets the value (once; a second set_value or set_exception throws UsageError).
    template <class... A>
    void set_value(A&&... a) {
        s_->claim("set_value");
        s_->set_value(std::forward<A>(a)...);
    }
    /// Makes the future's get() throw `e`.
    void set_exception(std::exception_ptr e) {
        s_->claim("set_exception");
        s_->set_error(std::move(e));
    }

  private:
    detail::Ref<detail::State<T>> s_;
    bool got_ = false;
};

}  // namespace cascade
