// LargeActiveMsg<T, Ps...>: an active message with a big body that travels straight from the
// sender's memory into memory the receiver chooses (no copy on either side).
#pragma once

#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "cascade/comm/active_msg.hpp"
#include "cascade/comm/serialization.hpp"
#include "cascade/comm/view.hpp"

namespace cascade {

/// A large active message ships one view<T> body straight from the sender's memory into a
/// buffer chosen by the receiver, plus small arguments Ps...:
///   where_to(ps...) -> T*   on the receiver, where the body goes (no intermediate copy)
///   on_arrival(ps...)       on the receiver once the body is there
///   on_sent(ps...)          on the sender once its body buffer may be reused
///   on_forwarded(ps...)     optional (set_on_forwarded), on the receiver once Cascade no
///                           longer reads the buffer: right after on_arrival, or on an inner
///                           node of a broadcast once it forwarded the body to its sub-tree
/// Made by Communicator::make_large_active_msg.
///
/// ```cpp
/// std::vector<double> tile(n * n), inbox(n * n);
/// auto* ship = comm.make_large_active_msg(
///     [&](int& k) { tf.fulfill_promise(k); },   // on_arrival (receiver)
///     [&](int&) { return inbox.data(); },       // where_to (receiver)
///     [&](int&) {},                             // on_sent (sender: tile reusable)
///     "ship");
/// ship->send_large(dest, cascade::view<double>(tile.data(), tile.size()), 7);
/// ```
template <class T, class... Ps>
class LargeActiveMsg : public ActiveMsgBase {
    static_assert(std::is_trivially_copyable_v<T>,
                  "large AM body elements must be trivially copyable");
    static_assert((wire::require<Ps> && ...), "LargeActiveMsg: an argument type cannot travel");

  public:
    /// The three callbacks described above (Communicator::make_large_active_msg makes them).
    LargeActiveMsg(std::function<void(Ps&...)> on_arrival, std::function<T*(Ps&...)> where_to,
                   std::function<void(Ps&...)> on_sent)
        : on_arrival_(std::move(on_arrival)),
          where_to_(std::move(where_to)),
          on_sent_(std::move(on_sent)) {}

    /// Sends `body` (which must stay valid until on_sent ran) and `ps` to rank `dest`.
    void send_large(int dest, view<T> body, const Ps&... ps);
    /// send_large, then (on the thread that drives MPI) moves messages until the frame has
    /// left, like ActiveMsg::blocking_send. The body may still be in flight: reuse its buffer
    /// after on_sent.
    void blocking_send_large(int dest, view<T> body, const Ps&... ps);
    /// A broadcast of one body: on every rank in dests (which may include this one, and must
    /// not repeat a rank) where_to and on_arrival run once; on_sent runs here once, when the
    /// body may be reused. Inner nodes of the tree forward from the buffer where_to gave.
    void send_large(std::span<const int> dests, view<T> body, const Ps&... ps);
    /// The same with one priority per destination (`priorities[i]` for `dests[i]`): higher
    /// priorities receive earlier.
    void send_large(std::span<const int> dests, std::span<const double> priorities, view<T> body,
                    const Ps&... ps);
    /// send_large(dest) without broadcast detection.
    void send_large_now(int dest, view<T> body, const Ps&... ps);
    /// Sets on_forwarded(ps...) (see above); set it before messages arrive.
    void set_on_forwarded(std::function<void(Ps&...)> f) { on_forwarded_ = std::move(f); }

    std::string_view types() const override { return wire::type_names<T, Ps...>(); }
    void on_frame(int source, const char* data, std::size_t size) override;

    bool is_large() const noexcept override { return true; }
    void on_body_arrived(const char* args, std::size_t size) override {
        wire::Reader r(args, size);
        auto t = wire::decode_all<Ps...>(r);
        {
            detail::HandlerScope scope;
            std::apply(on_arrival_, t);
        }
        if (on_forwarded_) std::apply(on_forwarded_, t);
    }
    void on_tree_body_arrived(const char* args, std::size_t size) override {
        wire::Reader r(args, size);
        auto t = wire::decode_all<Ps...>(r);
        detail::HandlerScope scope;
        std::apply(on_arrival_, t);
    }
    void* body_where(const char* args, std::size_t size) override {
        wire::Reader r(args, size);
        auto t = wire::decode_all<Ps...>(r);
        return std::apply(where_to_, t);
    }
    std::size_t body_element_size() const noexcept override { return sizeof(T); }
    void on_body_released(const char* args, std::size_t size) override {
        if (!on_forwarded_) return;
        wire::Reader r(args, size);
        auto t = wire::decode_all<Ps...>(r);
        std::apply(on_forwarded_, t);
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
    std::function<void(Ps&...)> on_forwarded_;
};

}  // namespace cascade
