// async(where, fn, args...) -> future<R>: calls a registered function (Futures::make_async)
// on rank `where` (a rank, cascade::here, or cascade::any), or any callable on this rank.
//
//   cascade::Futures fx(tp, &comm);
//   auto sq = fx.make_async([](int& x) { return x * x; }, "square");
//   cascade::future<int> f = cascade::async(1, sq, 7);   // runs on rank 1
//   int y = f.get();                                     // 49
#pragma once

#include <string>
#include <type_traits>
#include <utility>

#include "cascade/core/errors.hpp"
#include "cascade/futures/futures.hpp"

namespace cascade {

/// Calls the registered function `fn` on rank `where` (a rank, here, or any) with `args`
/// (values of its parameters' types, or futures of them: the call waits for those).
template <class R, class... Ps, class... A>
future<R> async(int where, const AsyncFn<R(Ps...)>& fn, A&&... args) {
    if (!fn.valid()) throw UsageError("async: function handle not initialized (use make_async)");
    return fn.context()->async(where, fn, std::forward<A>(args)...);
}

/// Runs any callable `f(args...)` as a task of this rank's pool (`where`: here, any, or
/// this rank), through the current Futures.
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

}  // namespace cascade
