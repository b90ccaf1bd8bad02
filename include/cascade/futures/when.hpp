// when_all / when_any: futures that become ready when all / any of their inputs are. Nothing
// blocks: each input gets a callback; the last (first) one to fire sets the result on the
// thread that made that input ready. Inputs may come from any rank (remote results are
// local states fulfilled by a reply), so they compose across ranks.
//   when_all(f1, f2, ...)          -> future<std::tuple<T1, T2, ...>>
//   when_all(std::vector<future<T>>&&) -> future<std::vector<T>>   (future<void> for T = void)
//   when_any(futures...) / when_any(const std::vector<F>&) -> future<std::size_t>, the index
//   of the first input that became ready (its value is then read from that input).
// An exception in an input makes when_all's result fail with the first one seen.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <tuple>
#include <vector>

#include "cascade/futures/detail/when_all.hpp"
#include "cascade/futures/future.hpp"

namespace cascade {

/// A future of all the inputs' values: futures (moved in) and shared futures (copied).
///
/// ```cpp
/// auto both = cascade::when_all(cascade::async(0, f, 1), cascade::async(1 % n, f, 2));
/// auto [a, b] = both.get();  // std::tuple of the two results
/// ```
template <class... F>
requires(is_future<std::decay_t<F>>::value&&...) auto when_all(F&&... fs) {
    using Tup = std::tuple<detail::value_t<typename std::decay_t<F>::value_type>...>;
    constexpr bool consume =
        (!std::is_lvalue_reference_v<F> && ...) &&
        (!std::is_same_v<std::decay_t<F>, shared_future<typename std::decay_t<F>::value_type>> &&
         ...);
    auto refs = std::make_tuple(detail::state_of(fs)...);
    auto* g = std::apply(
        [](auto&... r) {
            return new detail::WhenAllTuple<consume, typename std::decay_t<F>::value_type...>(r...);
        },
        refs);
    std::apply(
        [&](auto&... r) {
            std::size_t i = 0;
            (g->watch(i++, *r), ...);
        },
        refs);
    g->finish_if_empty();
    return future<Tup>(detail::Ref<detail::State<Tup>>(g));
}

/// A future of all the values of `fs` (future<std::vector<T>>; future<void> for T = void).
template <class T>
auto when_all(std::vector<future<T>>&& fs) {
    std::vector<detail::Ref<detail::State<T>>> in;
    in.reserve(fs.size());
    for (auto& f : fs)
        in.push_back(detail::state_of(f));
    fs.clear();
    using R = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
    auto* g = new detail::WhenAllVector<T, true>(in);
    for (std::size_t i = 0; i < in.size(); ++i)
        g->watch(i, *in[i]);
    g->finish_if_empty();
    return future<R>(detail::Ref<detail::State<R>>(g));
}

/// As above, for shared futures (copied, not consumed).
template <class T>
auto when_all(const std::vector<shared_future<T>>& fs) {
    std::vector<detail::Ref<detail::State<T>>> in;
    in.reserve(fs.size());
    for (auto& f : fs)
        in.push_back(detail::state_of(f));
    using R = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
    auto* g = new detail::WhenAllVector<T, false>(in);
    for (std::size_t i = 0; i < in.size(); ++i)
        g->watch(i, *in[i]);
    g->finish_if_empty();
    return future<R>(detail::Ref<detail::State<R>>(g));
}

/// Index of the first ready input; the inputs are not consumed (read the winner afterwards).
template <class F>
future<std::size_t> when_any(const std::vector<F>& fs) {
    if (fs.empty()) throw UsageError("when_any: no input futures");
    for (const auto& f : fs)
        if (!f.valid()) throw UsageError("when_any: an input future has no state");
    auto* g = new detail::WhenAny(fs.size());
    for (std::size_t i = 0; i < fs.size(); ++i)
        g->watch(i, *fs[i].state());
    return future<std::size_t>(detail::Ref<detail::State<std::size_t>>(g));
}

/// As above, for futures given one by one.
template <class... F>
requires(is_future<F>::value&&...) future<std::size_t> when_any(const F&... fs) {
    static_assert(sizeof...(F) > 0, "when_any: no input futures");
    if ((!fs.valid() || ...)) throw UsageError("when_any: an input future has no state");
    auto* g = new detail::WhenAny(sizeof...(F));
    std::size_t i = 0;
    (g->watch(i++, *fs.state()), ...);
    return future<std::size_t>(detail::Ref<detail::State<std::size_t>>(g));
}

}  // namespace cascade
