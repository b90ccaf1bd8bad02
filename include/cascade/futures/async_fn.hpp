// AsyncFn<R(Ps...)>: the handle Futures::make_async returns for a registered function, and
// AsyncOptions, how calls to it run.
#pragma once

#include <string>
#include <type_traits>

namespace cascade {

class Futures;
namespace detail {
template <class R, class... Ps>
struct FnEntry;
}  // namespace detail

/// How calls to an async function run (Futures::make_async).
struct AsyncOptions {
    /// Remote calls run inside the message handler on the communication thread instead of
    /// being queued on a worker: for tiny functions (saves a thread hand-off per call).
    bool run_in_handler = false;
    /// The result stays on the rank that computed it until a consumer needs it: get() (or
    /// then, when_all, a call on the caller's rank) fetches it; a call on another rank that
    /// takes the future as an argument gets it straight from where it is (on that rank
    /// itself: no copy at all). For big results passed on from call to call (tiled
    /// algorithms); results under kLargeArg (128 KiB) are sent back as usual. Need the
    /// value before the join() that ends the computation: no rank answers fetches after it.
    bool keep_result = false;
};

template <class Sig>
class AsyncFn;

/// A registered function (Futures::make_async): pass it to async(). Copyable; valid while
/// its Futures lives.
///
/// ```cpp
/// cascade::AsyncFn<double(std::vector<double>)> norm = fx.make_async(
///     [](std::vector<double>& v) { double s = 0; for (double x : v) s += x * x; return s; },
///     "norm");
/// cascade::future<double> n = cascade::async(cascade::any, norm, std::vector<double>{3, 4});
/// ```
template <class R, class... Ps>
class AsyncFn<R(Ps...)> {
  public:
    /// An empty handle (valid() is false).
    AsyncFn() = default;
    /// Whether it refers to a registered function (false for a default-constructed one).
    bool valid() const noexcept { return e_ != nullptr; }
    /// The name given to make_async (or "async#<id>").
    const std::string& name() const { return e_->name; }
    /// The Futures it was registered with.
    Futures* context() const noexcept { return fx_; }
    /// Calls the function here, synchronously.
    R operator()(Ps&... ps) const { return e_->f(ps...); }
    /// (The library's: the registry entry.)
    detail::FnEntry<R, Ps...>* entry() const noexcept { return e_; }

  private:
    friend class Futures;
    AsyncFn(Futures* fx, detail::FnEntry<R, Ps...>* e) : fx_(fx), e_(e) {}
    Futures* fx_ = nullptr;
    detail::FnEntry<R, Ps...>* e_ = nullptr;
};

/// Whether T is an AsyncFn.
template <class T>
struct is_async_fn : std::false_type {};
template <class Sig>
struct is_async_fn<AsyncFn<Sig>> : std::true_type {};

}  // namespace cascade
