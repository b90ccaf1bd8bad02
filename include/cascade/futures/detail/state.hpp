// Shared state of a future: a value or an exception, set once; callbacks that run when it is
// set; a futex word that blocked waiters sleep on. Reference counted by hand (intrusive), so a
// remote call can carry a reference to it across ranks as a plain 64-bit token.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "cascade/comm/detail/frames.hpp"
#include "cascade/comm/serialization.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/futures/detail/recycle.hpp"
#include "cascade/futures/remote_error.hpp"

namespace cascade {

class Futures;

namespace detail {

struct Unit {};  // the value of a future<void>

// Values that can travel as a body of their own (straight from and into their storage):
// std::vector / std::string of trivially copyable elements.
template <class X>
constexpr bool body_capable = [] {
    if constexpr (wire::is_vector<X>::value || std::is_same_v<X, std::string>)
        return std::is_trivially_copyable_v<typename X::value_type>;
    else
        return false;
}();
template <class T>
using value_t = std::conditional_t<std::is_void_v<T>, Unit, T>;

class StateBase;

// Runs once when a state becomes ready (on the thread that made it ready, or at once on the
// registering thread if it already was). Each callback owns itself (deletes itself in fire).
struct Callback {
    Callback* next = nullptr;
    virtual void fire(StateBase& s) noexcept = 0;

  protected:
    ~Callback() = default;
};

// Work the futures layer queues on the pool (a call whose arguments are ready, a
// continuation). run_job must not throw; it records failures in the state it fulfills.
struct Job {
    virtual void run_job() noexcept = 0;
    virtual void discard_job() noexcept = 0;  // the pool failed: release without running
    virtual const char* job_name() const noexcept { return "async"; }

  protected:
    ~Job() = default;
};

class StateBase {
  public:
    enum : std::uint32_t { pending = 0, has_value = 1, has_error = 2 };

    StateBase() = default;
    StateBase(const StateBase&) = delete;
    StateBase& operator=(const StateBase&) = delete;
    virtual ~StateBase() = default;

    void retain() noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
    void release() noexcept {
        if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }

    // A new reference unless the count already reached zero (the state is being destroyed).
    bool try_retain() noexcept {
        std::uint32_t n = refs_.load(std::memory_order_relaxed);
        while (n != 0)
            if (refs_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel)) return true;
        return false;
    }

    // True if the caller holds the only reference (no one else can read the value).
    bool unique() const noexcept { return refs_.load(std::memory_order_acquire) == 1; }
    // Before moving the value out of a state the caller holds alone: false if it cannot be
    // (an imported value that another call found again in the meantime).
    virtual bool release_for_move() noexcept { return true; }
    // Export id of this state on its rank (0: never exported); set under the exports' lock.
    std::uint64_t export_id = 0;
    std::uint32_t status() const noexcept { return word_.load(std::memory_order_acquire); }
    bool ready() const noexcept { return status() != pending; }
    bool failed() const noexcept { return status() == has_error; }
    const std::exception_ptr& error() const noexcept { return error_; }

    // Claims the right to set the state; a second claim is a usage error.
    void claim(const char* what) {
        if (!try_claim())
            throw UsageError(std::string("promise: ") + what + " on a state that is already set");
    }
    bool try_claim() noexcept { return !claimed_.exchange(true, std::memory_order_acq_rel); }
    void set_error(std::exception_ptr e) noexcept {
        error_ = std::move(e);
        publish(has_error);
    }
    // Registers cb; runs it at once (on this thread) if the state is ready. A lazy state
    // (a kept result, see LazyState) starts fetching its value.
    void on_ready(Callback* cb) noexcept {
        need();
        add_callback(cb);
    }
    // ready() for consumers: a lazy state starts fetching its value.
    bool poll_ready() noexcept {
        need();
        return ready();
    }
    // A consumer needs the value: a lazy state that has not asked for it does now.
    void need() noexcept {
        if (lazy_ && !ready()) demand();
    }

    // Lazy states (results kept where they were computed; futures/lazy_state.hpp) override
    // these; a plain state has its value here or gets it pushed.
    virtual void demand() noexcept {}
    // The value's owner rank, export id and a share of the weight to pass on (false: none).
    virtual bool share_residence(int& owner, std::uint64_t& id, std::uint64_t& weight) noexcept {
        (void)owner, (void)id, (void)weight;
        return false;
    }
    // A resident reply arrived (the callee keeps the value as export `id`, with `weight`).
    virtual void set_resident(int owner, std::uint64_t id, std::uint64_t weight) {
        (void)owner, (void)id, (void)weight;
        throw WireError("a kept result answered a call that did not ask for one");
    }
    // Called after the state was set by a reply (lets a lazy state answer queued fetches).
    virtual void settled() noexcept {}
    // Another rank fetches this exported state: a lazy state may send it to the value's owner
    // (true) instead of answering once the value is here (false). `send` answers with a value.
    virtual bool redirect(int dest, std::uint64_t token,
                          void (*send)(Futures&, StateBase&, int, std::uint64_t)) {
        (void)dest, (void)token, (void)send;
        return false;
    }

    // Sets the value from its wire encoding (remote results and fetched shared futures).
    virtual void set_from_wire(wire::Reader& r) = 0;
    // A value arriving as a body: begin_body sizes it (n elements) and says where its `bytes`
    // go; end_body publishes it once they are there.
    virtual void* begin_body(std::uint64_t n, std::size_t& bytes) = 0;
    void end_body() noexcept { publish(has_value); }

    std::atomic<std::uint32_t>& word() noexcept { return word_; }
    std::atomic<bool>& waiters() noexcept { return waiters_; }

  protected:
    void publish(std::uint32_t st) noexcept;
    bool lazy_ = false;

  private:
    void add_callback(Callback* cb) noexcept;  // on_ready without asking for the value
    static Callback* closed() noexcept { return reinterpret_cast<Callback*>(std::uintptr_t(1)); }

    std::atomic<std::uint32_t> refs_{1};
    std::atomic<std::uint32_t> word_{pending};
    std::atomic<bool> waiters_{false};
    std::atomic<bool> claimed_{false};
    std::atomic<Callback*> callbacks_{nullptr};
    std::exception_ptr error_;
};

template <class T>
class State : public StateBase {
  public:
    using V = value_t<T>;
    static constexpr bool on_wire = std::is_void_v<T> || wire::supported<T>;

    State() = default;
    ~State() override {
        if (alias_) alias_->release();
        if constexpr (body_capable<T>)
            if (value_) Recycler<T>::give(*value_);
    }

    template <class... A>
    void set_value(A&&... a) {
        value_.emplace(std::forward<A>(a)...);
        publish(has_value);
    }
    V& value() noexcept { return alias_ ? alias_->value() : *value_; }
    // Becomes ready with src's value (or error) without copying it: value() then reads src's,
    // which this state keeps alive (takes one reference to src).
    void set_alias(State* src) noexcept {
        if (src->failed()) {
            set_error(src->error());
            src->release();
            return;
        }
        alias_ = src;
        publish(has_value);
    }
    // False while the value is another state's that someone else also holds.
    bool value_movable() const noexcept { return !alias_ || alias_->unique(); }

    void set_from_wire(wire::Reader& r) override {
        if constexpr (std::is_void_v<T>) {
            set_value();
        } else if constexpr (wire::supported<T>) {
            set_value(r.get<T>());
        } else {
            throw UsageError("future: value type cannot travel between ranks");
        }
    }
    void* begin_body(std::uint64_t n, std::size_t& bytes) override {
        if constexpr (body_capable<T>) {
            using E = typename T::value_type;
            value_.emplace(Recycler<T>::take(body_elements(n, sizeof(E))));
            bytes = static_cast<std::size_t>(n) * sizeof(E);
            return value_->data();
        } else {
            (void)n;
            (void)bytes;
            throw WireError("a value body for a future whose type cannot take one");
        }
    }

  private:
    std::optional<V> value_;
    State* alias_ = nullptr;
};

// Intrusive reference to a state.
template <class S>
class Ref {
  public:
    Ref() = default;
    explicit Ref(S* p, bool adopt = true) noexcept : p_(p) {
        if (p_ && !adopt) p_->retain();
    }
    Ref(const Ref& o) noexcept : p_(o.p_) {
        if (p_) p_->retain();
    }
    Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    Ref& operator=(Ref o) noexcept {
        std::swap(p_, o.p_);
        return *this;
    }
    ~Ref() {
        if (p_) p_->release();
    }
    S* get() const noexcept { return p_; }
    S* operator->() const noexcept { return p_; }
    S& operator*() const noexcept { return *p_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    S* leak() noexcept { return std::exchange(p_, nullptr); }

  private:
    S* p_ = nullptr;
};

// Blocks until s is ready: a pool worker runs other ready tasks meanwhile, the thread that
// drives MPI keeps it moving, any other thread sleeps (src/futures/wait.cpp).
void wait_ready(StateBase& s);
// Queues a job on the current Futures context's pool (runs it inline without one).
void schedule(Job* job);

// How the latest runs of one remote function went. `streak` counts consecutive runs that were short
// (under kShort) and never waited (for a future, or on device work: core/detail/waits.hpp). A call
// of a function with a streak of kTrusted or more that arrives while the pool is idle runs on the
// communication thread right after the handlers of the message that brought it, outside any
// handler: a round trip then costs no hand-off to a worker and back. A run that is long or waits
// resets the streak, so the next calls go to workers again.
struct CallStats {
    static constexpr std::int64_t kShortNs = 10000;
    static constexpr std::uint32_t kTrusted = 4;
    std::atomic<std::uint32_t> streak{0};
    void record(bool short_run) noexcept {
        const std::uint32_t s = streak.load(std::memory_order_relaxed);
        streak.store(short_run ? (s < kTrusted ? s + 1 : s) : 0, std::memory_order_relaxed);
    }
    bool trusted() const noexcept { return streak.load(std::memory_order_relaxed) >= kTrusted; }
};
// schedule() for a remote call, which may run on the communication thread (see CallStats).
void schedule_call(Job* job, const CallStats& stats);
// How many times the calling thread waited (core/detail/waits.hpp): in wait_ready for a state
// not yet ready, or on device work.
std::uint64_t waits_on_this_thread() noexcept;

}  // namespace detail
}  // namespace cascade
