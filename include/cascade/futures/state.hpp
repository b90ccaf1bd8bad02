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

#include "cascade/comm/serialization.hpp"
#include "cascade/core/errors.hpp"

namespace cascade {

// An exception thrown on another rank, carried here by its message.
class RemoteError : public std::runtime_error {
  public:
    RemoteError(int rank, const std::string& what) : std::runtime_error(what), rank_(rank) {}
    int rank() const noexcept { return rank_; }  // where it was thrown

  private:
    int rank_;
};

namespace detail {

struct Unit {};  // the value of a future<void>
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

    // True if the caller holds the only reference (no one else can read the value).
    bool unique() const noexcept { return refs_.load(std::memory_order_acquire) == 1; }
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
    // Registers cb; runs it at once (on this thread) if the state is ready.
    void on_ready(Callback* cb) noexcept;

    // Sets the value from its wire encoding (remote results and fetched shared futures).
    virtual void set_from_wire(wire::Reader& r) = 0;

    std::atomic<std::uint32_t>& word() noexcept { return word_; }
    std::atomic<bool>& waiters() noexcept { return waiters_; }

  protected:
    void publish(std::uint32_t st) noexcept;

  private:
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

    template <class... A>
    void set_value(A&&... a) {
        value_.emplace(std::forward<A>(a)...);
        publish(has_value);
    }
    V& value() noexcept { return *value_; }

    void set_from_wire(wire::Reader& r) override {
        if constexpr (std::is_void_v<T>) {
            set_value();
        } else if constexpr (wire::supported<T>) {
            set_value(r.get<T>());
        } else {
            throw UsageError("future: value type cannot travel between ranks");
        }
    }

  private:
    std::optional<V> value_;
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

}  // namespace detail
}  // namespace cascade
