// Handler<T, R, Ps...>: a function registered to run on objects of type T wherever they live
// (made by Objects::make_handler, the same order on every rank).
//
//   auto add = objs.make_handler<Counter>([](Counter& c, long& n) { c.value += n; });
//   add->invoke(p, 5L);                     // fire and forget, from any thread
//   auto peek = objs.make_handler<Counter>([](const Counter& c) { return c.value; },
//                                          {.access = cascade::Access::shared, .name = "peek"});
//   long v = peek->call(p).get();           // cascade::future<long>
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cascade/comm/serialization.hpp"
#include "cascade/futures/future.hpp"
#include "cascade/objects/access.hpp"
#include "cascade/objects/detail/invocation.hpp"
#include "cascade/objects/mobile_ptr.hpp"

namespace cascade {

class Objects;

namespace detail {

// Writes a request's arguments (type-erased so the routing code is not a template).
struct ArgWriter {
    const void* ctx = nullptr;
    std::size_t bytes = 0;  // upper bound
    char* (*write)(const void* ctx, char* out) = nullptr;
};

struct HandlerBase {
    virtual ~HandlerBase() = default;
    std::string name;
    const char* label = "";  // "<name>(<type>", interned (task names)
    Access access = Access::exclusive;
    bool run_in_handler = false;
    std::uint32_t id = 0;
    std::uint32_t sig = 0;
    std::uint32_t type_hash = 0;
    // Its latest runs: a handler whose runs were short and never waited is trusted, and a
    // request for it that arrives while the pool is idle runs on the communication thread
    // right after the handlers of its message (see Objects::start).
    CallStats stats;
    // Decodes the arguments and runs the handler on obj; answers call()s.
    virtual void run(Objects& objs, void* obj, const ObjectKey& key, Invocation& inv) = 0;
};

template <class... Ps>
ArgWriter arg_writer(const std::tuple<const Ps&...>& t) {
    ArgWriter w;
    w.ctx = &t;
    w.bytes =
        std::apply([](const auto&... x) { return (std::size_t(0) + ... + wire::size_of(x)); }, t);
    w.write = [](const void* c, char* out) {
        wire::Writer wr(out);
        std::apply([&](const auto&... x) { (wr.put(x), ...); },
                   *static_cast<const std::tuple<const Ps&...>*>(c));
        return wr.position();
    };
    return w;
}

}  // namespace detail

/// A function registered to run on objects of type T wherever they live, with arguments
/// Ps... and result R (see the top of this file). Made by Objects::make_handler, which
/// owns it.
template <class T, class R, class... Ps>
class Handler final : public detail::HandlerBase {
  public:
    /// The type of the objects it runs on.
    using object_type = T;
    /// The handler's result (what call()'s future holds).
    using result_type = R;

    /// Runs the handler on *p wherever it lives, with copies of ps. Returns at once; any
    /// thread. Two invokes of one object issued one after the other on a rank run in that
    /// order. An exception thrown by the handler fails the job, naming handler and object.
    void invoke(mobile_ptr<T> p, const Ps&... ps);
    /// Like invoke, and the handler's result (or exception) arrives in the future.
    future<R> call(mobile_ptr<T> p, const Ps&... ps);

    /// (Objects::make_handler makes them.) Runs `f` on objects of `objs`.
    explicit Handler(Objects& objs, std::function<R(T&, Ps&...)> f)
        : objs_(objs), f_(std::move(f)) {}
    /// Decodes the arguments in `inv` and runs the handler on `obj` (the object named
    /// `key`); answers call()s. Called by Objects on the thread that runs the request.
    void run(Objects& objs, void* obj, const ObjectKey& key, detail::Invocation& inv) override;

  private:
    Objects& objs_;
    std::function<R(T&, Ps&...)> f_;
};

}  // namespace cascade
