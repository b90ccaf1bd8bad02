// Active messages: a function registered on every rank (in the same order, so it has the
// same id everywhere) and arguments shipped to a destination rank where the function runs.
//   auto* am = comm.make_active_msg([&](int& k, view<double>& v) { ... });
//   am->send(dest, k, view<double>(ptr, n));
// send() copies the arguments at once (the caller may reuse them on return), is thread-safe
// and may be called from tasks, from handlers and from the main thread, to any rank
// including itself. Handlers run on the thread that drives communication (the one in
// Threadpool::join(), or the caller of Communicator::progress()).
// send() and send_large() also take a list of destinations: one broadcast, routed as a tree
// through the recipients (see docs/broadcast.md).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cascade/comm/detail/callable.hpp"
#include "cascade/comm/serialization.hpp"
#include "cascade/comm/view.hpp"
#include "cascade/core/detail/task_epilogue.hpp"

namespace cascade {

class Communicator;

/// What every active message has: an id (its registration order, the same on every rank),
/// a signature (a hash of its argument types, checked on arrival) and a name.
class ActiveMsgBase {
  public:
    virtual ~ActiveMsgBase() = default;
    /// Registration order: the same on every rank, the id messages carry on the wire.
    std::uint32_t id() const noexcept { return id_; }
    /// Hash of the argument types; a frame whose signature differs is rejected on arrival.
    std::uint32_t signature() const noexcept { return sig_; }
    /// The name given at registration (diagnostics, traces).
    const std::string& name() const noexcept { return name_; }
    /// Argument types as the compiler spells them, for diagnostics.
    virtual std::string_view types() const = 0;
    /// Runs the handler for one frame received from rank `source` (small AMs) or starts
    /// receiving the body (large AMs); `data`/`size` are the serialized arguments. Called by
    /// the Communicator on the communication thread. Throws WireError on malformed input.
    virtual void on_frame(int source, const char* data, std::size_t size) = 0;
    /// True for a LargeActiveMsg (a body travels after the arguments).
    virtual bool is_large() const noexcept { return false; }
    /// Large AMs, receiver: the body arrived; runs on_arrival with the arguments (given as
    /// serialized: pointer and size). Communication thread.
    virtual void on_body_arrived(const char*, std::size_t) {}
    /// Large AMs, sender: the body may be reused; runs on_sent with the serialized arguments.
    virtual void on_body_sent(const char*, std::size_t) {}
    /// Large AMs received through a broadcast: where the body goes (the result of where_to
    /// for these serialized arguments); null for other messages.
    virtual void* body_where(const char*, std::size_t) { return nullptr; }
    /// Large AMs received through a broadcast: the body arrived; runs on_arrival only (the
    /// buffer may still be read to forward it, see on_body_released).
    virtual void on_tree_body_arrived(const char*, std::size_t) {}
    /// Size in bytes of one element of the body (sizeof(T) for a LargeActiveMsg<T, ...>).
    virtual std::size_t body_element_size() const noexcept { return 1; }
    /// Large AMs received through a broadcast: Cascade no longer reads the body buffer (it
    /// was forwarded to every child); runs on_forwarded.
    virtual void on_body_released(const char*, std::size_t) {}

    /// Broadcast detection for this AM (on by default when the Communicator's is on): its
    /// sends made by one task or handler are held until it ends and those with the same
    /// arguments leave as one broadcast. Turn it off for messages that must leave at once (a
    /// task that sends and then waits for a reply without running other tasks). Set it before
    /// sending; not synchronized with concurrent sends.
    void set_broadcast_detection(bool on) noexcept { detect_ = on; }
    /// Whether broadcast detection applies to this AM (see set_broadcast_detection).
    bool broadcast_detection() const noexcept { return detect_; }

  protected:
    friend class Communicator;
    /// The Communicator that registered this AM (set at registration).
    Communicator* comm_ = nullptr;
    /// See id().
    std::uint32_t id_ = 0;
    /// See signature().
    std::uint32_t sig_ = 0;
    /// See broadcast_detection().
    bool detect_ = true;
    /// See name().
    std::string name_;
};

namespace detail {
// Depth of handlers running on this thread. Sends a handler makes are held back (broadcast
// detection) until the outermost one returns; then they leave.
inline thread_local int tls_handler_depth = 0;
struct HandlerScope {
    HandlerScope() noexcept { ++tls_handler_depth; }
    ~HandlerScope() {
        if (--tls_handler_depth == 0) run_task_epilogue();
    }
    HandlerScope(const HandlerScope&) = delete;
    HandlerScope& operator=(const HandlerScope&) = delete;
};
// The rank whose message the innermost handler running on this thread received (the MPI
// source, not a rank named in the arguments); -1 outside handlers. Layers whose messages name
// a rank check it against this one.
inline thread_local int tls_frame_source = -1;
struct FrameSourceScope {
    int outer;
    explicit FrameSourceScope(int source) noexcept : outer(tls_frame_source) {
        tls_frame_source = source;
    }
    ~FrameSourceScope() { tls_frame_source = outer; }
    FrameSourceScope(const FrameSourceScope&) = delete;
    FrameSourceScope& operator=(const FrameSourceScope&) = delete;
};

}  // namespace detail

/// A function registered on every rank that another rank runs by sending it arguments
/// (see the top of this file). Made by Communicator::make_active_msg.
///
/// ```cpp
/// std::vector<double> got;
/// auto* put = comm.make_active_msg(
///     [&](int& from, cascade::view<double>& v) { got.assign(v.begin(), v.end()); }, "put");
/// std::vector<double> mine(100, 1.0);
/// put->send(0, comm.rank(), cascade::view<double>(mine.data(), mine.size()));
/// ```
template <class... Ps>
class ActiveMsg : public ActiveMsgBase {
    // Arguments: anything the wire format carries (see serialization.hpp and codec.hpp); a
    // type without a codec fails here with a message that names it.
    static_assert((wire::require<Ps> && ...), "ActiveMsg: an argument type cannot travel");

  public:
    /// (Communicator::make_active_msg makes them.)
    explicit ActiveMsg(std::function<void(Ps&...)> f) : f_(std::move(f)) {}

    /// Queues the message for rank `dest` (any rank, this one included); returns at once
    /// (the arguments are copied). Thread-safe.
    void send(int dest, const Ps&... ps);
    /// Every rank in `dests` (which may include this one, and must not repeat a rank) runs
    /// the handler once with these arguments: one broadcast tree. A std::vector<int>
    /// converts. Thread-safe; returns at once.
    void send(std::span<const int> dests, const Ps&... ps);
    /// The same with one priority per destination (`priorities[i]` for `dests[i]`): higher
    /// priorities receive earlier.
    void send(std::span<const int> dests, std::span<const double> priorities, const Ps&... ps);
    /// send(dest, ps...) without broadcast detection: the message is queued at once, even
    /// inside a task or handler. Thread-safe.
    void send_now(int dest, const Ps&... ps);
    /// Sends and, when called from the communication thread, waits until the send completed
    /// (receiving and running handlers meanwhile, so sends to itself cannot deadlock).
    /// Messages from the rank whose handler is calling it wait until that handler returns:
    /// one rank's messages always run in the order they were sent.
    void blocking_send(int dest, const Ps&... ps);

    std::string_view types() const override { return wire::type_names<Ps...>(); }
    /// Decodes the arguments and runs the handler (communication thread).
    void on_frame(int source, const char* data, std::size_t size) override {
        wire::Reader r(data, size);
        auto args = wire::decode_all<Ps...>(r);
        const detail::FrameSourceScope from(source);
        detail::HandlerScope scope;
        std::apply(f_, args);
    }

  private:
    std::function<void(Ps&...)> f_;
};

}  // namespace cascade
