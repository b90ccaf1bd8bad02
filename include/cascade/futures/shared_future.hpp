// shared_future<T>: a copyable future (see future.hpp for how waiting works).
#pragma once

#include <type_traits>
#include <utility>

#include "cascade/futures/future.hpp"

namespace cascade {

/// A copyable future: any number of copies, on any thread, may wait for and read the value.
/// It can also be an async argument (the callee gets the future itself) and be sent to
/// other ranks, which fetch the value from its owner when they need it.
///
/// ```cpp
/// cascade::shared_future<int> s = cascade::make_ready_future(5).share();
/// auto a = s.then([](int x) { return x + 1; });
/// auto b = s.then([](int x) { return x * 2; });
/// int sum = a.get() + b.get() + s.get();  // 6 + 10 + 5
/// ```
template <class T>
class shared_future {
  public:
    /// The type of the value.
    using value_type = T;
    /// A future without a state (valid() is false).
    shared_future() = default;
    /// (The library's: a future reading state `s`.)
    explicit shared_future(detail::Ref<detail::State<T>> s) noexcept : s_(std::move(s)) {}
    /// Takes over `f`'s state.
    shared_future(future<T>&& f) noexcept : shared_future(f.share()) {}

    /// Whether it has a state (false for a default-constructed one).
    bool valid() const noexcept { return static_cast<bool>(s_); }
    /// Whether the value (or exception) is there; never blocks.
    bool ready() const {
        detail::check_valid(s_);
        return s_->poll_ready();
    }
    /// Blocks until the value (or exception) is there, as future<T>::wait().
    void wait() const {
        detail::check_valid(s_);
        detail::wait_ready(*s_);
    }
    /// Waits, then returns a reference to the value (valid while a copy of this future
    /// lives) or throws the exception.
    std::conditional_t<std::is_void_v<T>, void, const detail::value_t<T>&> get() const {
        detail::check_valid(s_);
        detail::wait_ready(*s_);
        if (s_->failed()) std::rethrow_exception(s_->error());
        if constexpr (!std::is_void_v<T>) return s_->value();
    }
    /// f(value) or f(shared_future<T>) runs as a task once the value is there.
    template <class F>
    auto then(F&& f) const {
        detail::check_valid(s_);
        return detail::make_then<false>(s_, std::forward<F>(f));
    }

    /// (The library's: the shared state.)
    detail::State<T>* state() const noexcept { return s_.get(); }
    /// (The library's: the reference to the shared state.)
    const detail::Ref<detail::State<T>>& ref() const noexcept { return s_; }

  private:
    detail::Ref<detail::State<T>> s_;
};

}  // namespace cascade
