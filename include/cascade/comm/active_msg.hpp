// Active messages: a function registered on every rank (in the same order, so it has the
// same id everywhere) and arguments shipped to a destination rank where the function runs.
//   auto* am = comm.make_active_msg([&](int& k, view<double>& v) { ... });
//   am->send(dest, k, view<double>(ptr, n));
// send() copies the arguments at once (the caller may reuse them on return), is thread-safe
// and may be called from tasks, from handlers and from the main thread, to any rank
// including itself. Handlers run on the thread that drives communication (the one in
// Threadpool::join(), or the caller of Communicator::progress()).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cascade/comm/serialization.hpp"
#include "cascade/comm/view.hpp"

namespace cascade {

class Communicator;

class ActiveMsgBase {
  public:
    virtual ~ActiveMsgBase() = default;
    std::uint32_t id() const noexcept { return id_; }
    std::uint32_t signature() const noexcept { return sig_; }
    const std::string& name() const noexcept { return name_; }
    // Argument types as the compiler spells them, for diagnostics.
    virtual std::string_view types() const = 0;
    // Runs the handler for one received frame (small AMs) or starts receiving the body
    // (large AMs). Throws WireError on malformed input.
    virtual void on_frame(int source, const char* data, std::size_t size) = 0;
    virtual bool is_large() const noexcept { return false; }
    // Large AMs: the body arrived (receiver) / may be reused (sender); args as serialized.
    virtual void on_body_arrived(const char*, std::size_t) {}
    virtual void on_body_sent(const char*, std::size_t) {}

  protected:
    friend class Communicator;
    Communicator* comm_ = nullptr;
    std::uint32_t id_ = 0;
    std::uint32_t sig_ = 0;
    std::string name_;
};

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

template <class... Ps>
class ActiveMsg : public ActiveMsgBase {
    // Arguments: anything the wire format carries (see serialization.hpp and codec.hpp); a
    // type without a codec fails here with a message that names it.
    static_assert((wire::require<Ps> && ...), "ActiveMsg: an argument type cannot travel");

  public:
    explicit ActiveMsg(std::function<void(Ps&...)> f) : f_(std::move(f)) {}

    // Queues the message; returns at once (the arguments are copied).
    void send(int dest, const Ps&... ps);
    // Sends and, when called from the communication thread, waits until the send completed
    // (receiving and running handlers meanwhile, so sends to itself cannot deadlock). Messages
    // from the rank whose handler is calling it wait until that handler returns: one rank's
    // messages always run in the order they were sent.
    void blocking_send(int dest, const Ps&... ps);

    std::string_view types() const override { return wire::type_names<Ps...>(); }
    void on_frame(int, const char* data, std::size_t size) override {
        wire::Reader r(data, size);
        auto args = wire::decode_all<Ps...>(r);
        std::apply(f_, args);
    }

  private:
    std::function<void(Ps&...)> f_;
};

// A large active message ships one view<T> body straight from the sender's memory into a
// buffer chosen by the receiver, plus small arguments Ps...:
//   where_to(ps...) -> T*   on the receiver, where the body goes (no intermediate copy)
//   on_arrival(ps...)       on the receiver once the body is there
//   on_sent(ps...)          on the sender once its body buffer may be reused
template <class T, class... Ps>
class LargeActiveMsg : public ActiveMsgBase {
    static_assert(std::is_trivially_copyable_v<T>,
                  "large AM body elements must be trivially copyable");
    static_assert((wire::require<Ps> && ...), "LargeActiveMsg: an argument type cannot travel");

  public:
    LargeActiveMsg(std::function<void(Ps&...)> on_arrival, std::function<T*(Ps&...)> where_to,
                   std::function<void(Ps&...)> on_sent)
        : on_arrival_(std::move(on_arrival)),
          where_to_(std::move(where_to)),
          on_sent_(std::move(on_sent)) {}

    void send_large(int dest, view<T> body, const Ps&... ps);

    std::string_view types() const override { return wire::type_names<T, Ps...>(); }
    void on_frame(int source, const char* data, std::size_t size) override;

    bool is_large() const noexcept override { return true; }
    void on_body_arrived(const char* args, std::size_t size) override {
        wire::Reader r(args, size);
        auto t = wire::decode_all<Ps...>(r);
        std::apply(on_arrival_, t);
    }
    void on_body_sent(const char* args, std::size_t size) override {
        if (!on_sent_) return;
        wire::Reader r(args, size);
        auto t = wire::decode_all<Ps...>(r);
        std::apply(on_sent_, t);
    }

  private:
    std::function<void(Ps&...)> on_arrival_;
    std::function<T*(Ps&...)> where_to_;
    std::function<void(Ps&...)> on_sent_;
};

}  // namespace cascade
