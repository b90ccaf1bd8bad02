// A registered async function as the futures layer keeps it (FnEntry: the callable, its
// name, wire signature and options), and the headers of the internal messages that carry
// calls, results and fetches.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "cascade/comm/serialization.hpp"
#include "cascade/futures/async_fn.hpp"
#include "cascade/futures/detail/call.hpp"

namespace cascade {

class Futures;

namespace detail {

template <class R, class... Ps>
struct FnRef {
    const std::function<R(Ps&...)>* f;
    R operator()(Ps&... p) const { return (*f)(p...); }
};

struct FnBase {
    virtual ~FnBase() = default;
    std::string name;
    std::uint32_t id = 0;
    std::uint32_t sig = 0;
    std::uint64_t borrow = 0;  // parameters taken by const reference (see borrow_mask)
    AsyncOptions opts;
    CallStats stats;  // of its remote calls
    virtual void on_request(Futures& fx, int source, std::uint64_t token, wire::Reader& r) = 0;
};

template <class R, class... Ps>
struct FnEntry final : FnBase {
    std::function<R(Ps&...)> f;
    void on_request(Futures& fx, int source, std::uint64_t token, wire::Reader& r) override;
};

template <class P>
constexpr bool arg_ok = [] {
    // wire::require names a type without a codec in the compiler's message.
    if constexpr (param_traits<P>::shared)
        return wire::require<typename param_traits<P>::elem> &&
               !wire::is_view<typename param_traits<P>::elem>::value;
    else
        return wire::require<P> && !wire::is_view<P>::value;
}();

// Message headers (each message is one view<char> argument of an internal active message).
struct RequestHead {
    std::int32_t rank;
    std::uint32_t fn;
    std::uint32_t sig;
    std::uint32_t pad;
    std::uint64_t token;  // the caller's result state
};
struct ReplyHead {
    std::int32_t rank;
    std::uint32_t status;  // reply_* below
    std::uint64_t token;
};
struct FetchHead {
    std::int32_t rank;
    std::uint32_t release;  // 1: only give the weight back (no answer)
    std::uint64_t id;       // exported state on the receiver
    std::uint64_t token;    // proxy state on the sender
    std::uint64_t weight;   // share of the export this fetch consumes
};
// Reply statuses.
enum : std::uint32_t {
    reply_value = 0,     // the value follows
    reply_error = 1,     // an error message follows
    reply_body = 2,      // the value follows as a body: {elements, chunk}
    reply_redirect = 3,  // fetch it from {owner, id, weight} instead
    reply_resident = 4,  // the callee keeps it: {id, weight} (AsyncOptions::keep_result)
};

// Argument and result helpers (detail/args.hpp), friends of Futures.
template <class X>
void send_exported(Futures& fx, StateBase& s, int dest, std::uint64_t token);
template <class P, class A>
auto prepare(Futures& fx, A&& a);
template <class P>
void decode_arg(Futures& fx, int source, wire::Reader& r, Slot<P>& slot, BodySink& sink);
template <class T>
struct SendAfterLeaving;

}  // namespace detail
}  // namespace cascade
