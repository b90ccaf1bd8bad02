// callable_args<F>: the parameter types of a non-generic callable (what make_active_msg and
// make_async register).
#pragma once

#include <tuple>
#include <type_traits>

namespace cascade {

namespace detail {
template <class T>
using arg_t = std::remove_cv_t<std::remove_reference_t<T>>;

// Argument types of a (non-generic) callable.
template <class F>
struct callable_args : callable_args<decltype(&F::operator())> {};
template <class R, class... A>
struct callable_args<R (*)(A...)> {
    using tuple = std::tuple<arg_t<A>...>;  // parameter values
    using declared = std::tuple<A...>;      // parameters as declared (references kept)
};
template <class R, class... A>
struct callable_args<R(A...)> : callable_args<R (*)(A...)> {};
template <class C, class R, class... A>
struct callable_args<R (C::*)(A...)> : callable_args<R (*)(A...)> {};
template <class C, class R, class... A>
struct callable_args<R (C::*)(A...) const> : callable_args<R (*)(A...)> {};
template <class C, class R, class... A>
struct callable_args<R (C::*)(A...) noexcept> : callable_args<R (*)(A...)> {};
template <class C, class R, class... A>
struct callable_args<R (C::*)(A...) const noexcept> : callable_args<R (*)(A...)> {};
}  // namespace detail

}  // namespace cascade
