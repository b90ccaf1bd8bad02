// The states behind when_all / when_any: a Gather counts its inputs' callbacks and sets its
// result when the last (first) one fired.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <tuple>
#include <vector>

#include "cascade/futures/future.hpp"

namespace cascade {
namespace detail {

// Counts inputs; `done()` runs once all arrived. Holds one reference on itself per pending
// input, so it lives until the last callback fired.
template <class R>
class Gather : public State<R> {
  public:
    struct Node final : Callback {
        Gather* owner = nullptr;
        std::size_t index = 0;
        void fire(StateBase& s) noexcept override { owner->arrived(index, s); }
    };

    explicit Gather(std::size_t n) : nodes_(n), left_(n) {
        for (std::size_t i = 0; i < n; ++i) {
            nodes_[i].owner = this;
            nodes_[i].index = i;
            this->retain();
        }
    }
    void watch(std::size_t i, StateBase& s) noexcept { s.on_ready(&nodes_[i]); }
    // Call after all watch() calls, with no inputs: sets the result at once.
    void finish_if_empty() {
        if (nodes_.empty()) finish();
    }

  protected:
    virtual void first(std::size_t, StateBase&) noexcept {}
    virtual void finish() noexcept = 0;

  private:
    void arrived(std::size_t i, StateBase& s) noexcept {
        first(i, s);
        if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) finish();
        this->release();
    }
    std::vector<Node> nodes_;
    std::atomic<std::size_t> left_;
};

template <class T, bool Consume>
class WhenAllVector final
    : public Gather<std::conditional_t<std::is_void_v<T>, void, std::vector<T>>> {
    using Base = Gather<std::conditional_t<std::is_void_v<T>, void, std::vector<T>>>;

  public:
    explicit WhenAllVector(std::vector<Ref<State<T>>> in) : Base(in.size()), in_(std::move(in)) {}

  private:
    void finish() noexcept override {
        try {
            for (auto& s : in_)
                if (s->failed()) {
                    this->set_error(s->error());
                    in_.clear();
                    return;
                }
            if constexpr (std::is_void_v<T>) {
                this->set_value();
            } else {
                std::vector<T> out;
                out.reserve(in_.size());
                for (auto& s : in_) {
                    if constexpr (Consume)
                        out.push_back(std::move(s->value()));
                    else
                        out.push_back(s->value());
                }
                this->set_value(std::move(out));
            }
        } catch (...) {
            this->set_error(std::current_exception());
        }
        in_.clear();
    }
    std::vector<Ref<State<T>>> in_;
};

template <bool Consume, class... T>
class WhenAllTuple final : public Gather<std::tuple<value_t<T>...>> {
  public:
    explicit WhenAllTuple(Ref<State<T>>... in)
        : Gather<std::tuple<value_t<T>...>>(sizeof...(T)), in_(std::move(in)...) {}

  private:
    void finish() noexcept override {
        try {
            std::exception_ptr err;
            std::apply([&](auto&... s) { ((err = (!err && s->failed()) ? s->error() : err), ...); },
                       in_);
            if (err) {
                this->set_error(err);
            } else {
                if constexpr (Consume)
                    this->set_value(std::apply(
                        [](auto&... s) { return std::make_tuple(std::move(s->value())...); }, in_));
                else
                    this->set_value(
                        std::apply([](auto&... s) { return std::make_tuple(s->value()...); }, in_));
            }
        } catch (...) {
            this->set_error(std::current_exception());
        }
        in_ = {};
    }
    std::tuple<Ref<State<T>>...> in_;
};

class WhenAny final : public Gather<std::size_t> {
  public:
    using Gather<std::size_t>::Gather;

  private:
    void first(std::size_t i, StateBase&) noexcept override {
        if (!won_.exchange(true, std::memory_order_acq_rel)) this->set_value(i);
    }
    void finish() noexcept override {}
    std::atomic<bool> won_{false};
};

template <class T>
Ref<State<T>> state_of(future<T>& f) {
    if (!f.valid()) throw UsageError("when_all/when_any: an input future has no state");
    return f.share().ref();
}
template <class T>
Ref<State<T>> state_of(const shared_future<T>& f) {
    if (!f.valid()) throw UsageError("when_all/when_any: an input future has no state");
    return f.ref();
}

}  // namespace detail

}  // namespace cascade
