// when_all / when_any: futures that become ready when all / any of their inputs are. Nothing
// blocks: each input gets a callback; the last (first) one to fire sets the result on the
// thread that made that input ready. Inputs may come from any rank (remote results are
// local states fulfilled by a reply), so they compose across ranks.
//   when_all(f1, f2, ...)          -> future<std::tuple<T1, T2, ...>>
//   when_all(std::vector<future<T>>&&) -> future<std::vector<T>>   (future<void> for T = void)
//   when_any(futures...) / when_any(const std::vector<F>&) -> future<std::size_t>, the index
//   of the first input that became ready (its value is then read from that input).
// An exception in an input makes when_all's result fail with the first one seen.
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

// when_all over futures (moved in) and shared futures (copied).
template <class... F>
requires(is_future<std::decay_t<F>>::value&&...) auto when_all(F&&... fs) {
    using Tup = std::tuple<detail::value_t<typename std::decay_t<F>::value_type>...>;
    constexpr bool consume =
        (!std::is_lvalue_reference_v<F> && ...) &&
        (!std::is_same_v<std::decay_t<F>, shared_future<typename std::decay_t<F>::value_type>> &&
         ...);
    auto refs = std::make_tuple(detail::state_of(fs)...);
    auto* g = std::apply(
        [](auto&... r) {
            return new detail::WhenAllTuple<consume, typename std::decay_t<F>::value_type...>(r...);
        },
        refs);
    std::apply(
        [&](auto&... r) {
            std::size_t i = 0;
            (g->watch(i++, *r), ...);
        },
        refs);
    g->finish_if_empty();
    return future<Tup>(detail::Ref<detail::State<Tup>>(g));
}

template <class T>
auto when_all(std::vector<future<T>>&& fs) {
    std::vector<detail::Ref<detail::State<T>>> in;
    in.reserve(fs.size());
    for (auto& f : fs)
        in.push_back(detail::state_of(f));
    fs.clear();
    using R = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
    auto* g = new detail::WhenAllVector<T, true>(in);
    for (std::size_t i = 0; i < in.size(); ++i)
        g->watch(i, *in[i]);
    g->finish_if_empty();
    return future<R>(detail::Ref<detail::State<R>>(g));
}

template <class T>
auto when_all(const std::vector<shared_future<T>>& fs) {
    std::vector<detail::Ref<detail::State<T>>> in;
    in.reserve(fs.size());
    for (auto& f : fs)
        in.push_back(detail::state_of(f));
    using R = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
    auto* g = new detail::WhenAllVector<T, false>(in);
    for (std::size_t i = 0; i < in.size(); ++i)
        g->watch(i, *in[i]);
    g->finish_if_empty();
    return future<R>(detail::Ref<detail::State<R>>(g));
}

// Index of the first ready input; the inputs are not consumed (read the winner afterwards).
template <class F>
future<std::size_t> when_any(const std::vector<F>& fs) {
    if (fs.empty()) throw UsageError("when_any: no input futures");
    for (const auto& f : fs)
        if (!f.valid()) throw UsageError("when_any: an input future has no state");
    auto* g = new detail::WhenAny(fs.size());
    for (std::size_t i = 0; i < fs.size(); ++i)
        g->watch(i, *fs[i].state());
    return future<std::size_t>(detail::Ref<detail::State<std::size_t>>(g));
}

template <class... F>
requires(is_future<F>::value&&...) future<std::size_t> when_any(const F&... fs) {
    static_assert(sizeof...(F) > 0, "when_any: no input futures");
    if ((!fs.valid() || ...)) throw UsageError("when_any: an input future has no state");
    auto* g = new detail::WhenAny(sizeof...(F));
    std::size_t i = 0;
    (g->watch(i++, *fs.state()), ...);
    return future<std::size_t>(detail::Ref<detail::State<std::size_t>>(g));
}

}  // namespace cascade
