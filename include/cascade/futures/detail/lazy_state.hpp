// A kept result (AsyncOptions::keep_result): the callee keeps the value and answers the call
// with where it lives; the caller's state stays pending and lazy. It fetches the value only
// when a consumer here needs it (get, wait, ready, then, when_all, a local call), and a call
// on another rank that takes it as an argument gets it straight from the owner: the caller
// passes on the owner's address with a share of its weight (weighted reference counting, so
// the owner knows when the last holder is gone without any extra message), or, while the
// address is not known yet, redirects the fetch once it is. Unused weight goes back when
// the state dies.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "cascade/futures/detail/state.hpp"

namespace cascade {

class Futures;

namespace detail {

// Sends a ready state's value (or error) to `dest`, fulfilling its state `token` there.
using SendValueFn = void (*)(Futures&, StateBase& s, int dest, std::uint64_t token);
// Makes a ready exported state's value a proxy's, here (see detail::alias_exported).
using ShareValueFn = void (*)(StateBase& from, StateBase& to);

// Where a lazy state's value lives, and what waits for that to be known.
struct Residence {
    Futures* fx = nullptr;
    std::mutex m;
    int owner = -1;  // -1: the resident reply has not arrived
    std::uint64_t id = 0;
    std::uint64_t weight = 0;  // share of the owner's export this rank still holds
    bool demanded = false;     // this rank asked for the value
    struct Waiting {
        int dest;
        std::uint64_t token;
        SendValueFn send;
    };
    std::vector<Waiting> waiting;  // fetches from other ranks to redirect to the owner

    void demand(StateBase& s) noexcept;
    bool share(int& owner, std::uint64_t& id, std::uint64_t& weight) noexcept;
    bool redirect(StateBase& s, int dest, std::uint64_t token, SendValueFn send);
    void set(StateBase& s, int owner, std::uint64_t id, std::uint64_t weight);
    void settled(StateBase& s) noexcept;
    void leave() noexcept;
};

template <class T>
class LazyState final : public State<T> {
  public:
    explicit LazyState(Futures* fx) {
        r_.fx = fx;
        this->lazy_ = true;
    }
    ~LazyState() override { r_.leave(); }
    void demand() noexcept override { r_.demand(*this); }
    bool share_residence(int& owner, std::uint64_t& id, std::uint64_t& weight) noexcept override {
        return r_.share(owner, id, weight);
    }
    void set_resident(int owner, std::uint64_t id, std::uint64_t weight) override {
        r_.set(*this, owner, id, weight);
    }
    void settled() noexcept override { r_.settled(*this); }
    bool redirect(int dest, std::uint64_t token, SendValueFn send) override {
        return r_.redirect(*this, dest, token, send);
    }

  private:
    Residence r_;
};

}  // namespace detail
}  // namespace cascade
