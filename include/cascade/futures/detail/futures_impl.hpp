// Futures' member templates: registering functions, local and remote calls, sending values
// and kept results. Included by futures.hpp after class Futures.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "cascade/futures/detail/args.hpp"

namespace cascade {

template <class F>
auto Futures::make_async(F&& f, std::string name, AsyncOptions opts) {
    using Args = typename detail::callable_args<std::decay_t<F>>::tuple;
    return make_async_impl(std::forward<F>(f), std::move(name), opts, static_cast<Args*>(nullptr));
}

template <class F, class... Ps>
auto Futures::make_async_impl(F&& f, std::string name, AsyncOptions opts, std::tuple<Ps...>*) {
    using R = std::invoke_result_t<std::decay_t<F>&, Ps&...>;
    static_assert(wire::require<detail::value_t<R>>,
                  "async function result must be void or a type that can travel (trivially "
                  "copyable, std::vector / std::string, or a type with a codec)");
    static_assert((detail::arg_ok<Ps> && ...),
                  "async function parameters must be types that can travel (trivially copyable, "
                  "std::vector / std::string, or a type with a codec), or shared_future<T> of "
                  "those (not view<T>)");
    auto e = std::make_unique<detail::FnEntry<R, Ps...>>();
    e->f = std::function<R(Ps & ...)>(std::forward<F>(f));
    e->borrow = detail::borrow_mask<std::decay_t<F>>::value;
    e->opts = opts;
    std::lock_guard<std::mutex> g(register_mutex_);
    const std::uint32_t id = n_fns_.load(std::memory_order_relaxed);
    if (id >= kMaxFunctions)
        throw UsageError("make_async: more than " + std::to_string(kMaxFunctions) + " functions");
    e->id = id;
    e->name = name.empty() ? "async#" + std::to_string(id) : std::move(name);
    // Name and types: two functions of the same types registered in different orders on
    // two ranks are told apart too.
    e->sig = wire::signature_of(e->name, wire::type_names<R, Ps...>());
    auto* raw = e.get();
    owned_.push_back(std::move(e));
    fns_[id].store(raw, std::memory_order_release);
    n_fns_.store(id + 1, std::memory_order_release);
    return AsyncFn<R(Ps...)>(this, raw);
}

template <class R, class... Ps, class... A>
future<R> Futures::async(int where, const AsyncFn<R(Ps...)>& fn, A&&... args) {
    static_assert(sizeof...(A) == sizeof...(Ps), "async: wrong number of arguments");
    if (!fn.valid()) throw UsageError("async: function handle not initialized (use make_async)");
    const int dest = place(where);
    if (dest != rank_) return remote(dest, *fn.entry(), std::forward<A>(args)...);
    auto* c = new detail::Call<detail::FnRef<R, Ps...>, R, Ps...>(
        detail::FnRef<R, Ps...>{&fn.entry()->f}, fn.entry()->borrow);
    detail::Ref<detail::State<R>> ref(c);
    detail::fill_slots(c->slots(), std::index_sequence_for<Ps...>{}, std::forward<A>(args)...);
    c->start(false);
    return future<R>(std::move(ref));
}

template <class F, class... A>
auto Futures::async_local(F&& f, A&&... args) {
    using Fn = std::decay_t<F>;
    using R = std::invoke_result_t<Fn&, std::decay_t<A>&...>;
    auto* c = new detail::Call<Fn, R, std::decay_t<A>...>(std::forward<F>(f),
                                                          detail::borrow_mask<Fn>::value);
    detail::Ref<detail::State<R>> ref(c);
    detail::fill_slots(c->slots(), std::index_sequence_for<A...>{}, std::forward<A>(args)...);
    c->start(false);
    return future<R>(std::move(ref));
}

template <class R, class... Ps, class... A>
future<R> Futures::remote(int dest, detail::FnEntry<R, Ps...>& e, A&&... args) {
    auto prep = std::make_tuple(detail::prepare<Ps>(*this, std::forward<A>(args))...);
    const std::size_t bytes =
        sizeof(detail::RequestHead) +
        std::apply([](auto&... p) { return (std::size_t(0) + ... + p.size()); }, prep);
    detail::State<R>* st;
    if (e.opts.keep_result && !std::is_void_v<R>)
        st = new detail::LazyState<R>(this);
    else
        st = new detail::State<R>();
    detail::Ref<detail::State<R>> ref(st);
    st->retain();  // named by the request's token, adopted by the reply
    const detail::RequestHead h{rank_, e.id, e.sig, 0, tokens_.add(st)};
    remote_calls_.fetch_add(1, std::memory_order_relaxed);
    const std::size_t chunk = comm_->large_chunk();
    send_frame(
        dest, request_msg, bytes,
        [&](char* out) {
            wire::Writer w(out);
            w.put(h);
            std::apply([&](auto&... p) { (p.write(w, chunk), ...); }, prep);
            return w.position();
        },
        [&](detail::BodyQueue& q) {
            std::apply([&](auto&... p) { (p.attach(q, *body_am_, chunk), ...); }, prep);
        });
    return future<R>(std::move(ref));
}

namespace detail {
// Sends a value from a pool worker once its codec's leaving step is done (it may wait: a
// device-to-host copy), then gives back what that step took.
template <class T>
struct SendAfterLeaving final : Job {
    Futures* fx = nullptr;
    int dest = 0;
    std::uint64_t token = 0;
    Ref<State<T>> s;
    const std::string* fn = nullptr;
    void run_job() noexcept override {
        {
            AfterPacking after;
            bool left = false;
            try {
                LeaveArchive a(after.fs);
                a.visit(s->value());
                left = true;
            } catch (...) {
                Ref<State<T>> failed(new State<T>());
                failed->set_error(std::current_exception());
                fx->send_value(dest, token, *failed, fn, true);
            }
            if (left) fx->send_value(dest, token, *s, fn, true);
        }
        delete this;
    }
    void discard_job() noexcept override { delete this; }
    const char* job_name() const noexcept override { return "async(send Data)"; }
};
}  // namespace detail

template <class T>
void Futures::send_value(int dest, std::uint64_t token, detail::State<T>& s, const std::string* fn,
                         bool left) {
    if constexpr (!std::is_void_v<T>) {
        if (!left && !s.failed() && detail::needs_leaving(s.value())) {
            auto* job = new detail::SendAfterLeaving<T>();
            job->fx = this;
            job->dest = dest;
            job->token = token;
            job->s = detail::Ref<detail::State<T>>(&s, false);
            job->fn = fn;
            detail::schedule(job);
            return;
        }
    }
    detail::ReplyHead h{rank_, s.failed() ? detail::reply_error : detail::reply_value, token};
    std::string msg;
    std::size_t bytes = sizeof h;
    bool body = false;
    if (s.failed()) {
        msg = fn ? "async '" + *fn + "' on rank " + std::to_string(rank_) +
                       " threw: " + detail::describe_error(s.error())
                 : detail::describe_error(s.error());
        bytes += wire::size_of(msg);
    } else if constexpr (!std::is_void_v<T>) {
        body = detail::travels_as_body(s.value());
        if (body) {
            h.status = detail::reply_body;  // the value follows as a body, straight from s
            bytes += 2 * sizeof(std::uint64_t);
        } else {
            bytes += wire::size_of(s.value());
        }
    }
    const std::size_t chunk = comm_->large_chunk();
    send_frame(
        dest, reply_msg, bytes,
        [&](char* out) {
            wire::Writer w(out);
            w.put(h);
            if (s.failed()) {
                w.put(msg);
            } else if constexpr (!std::is_void_v<T>) {
                if constexpr (detail::body_capable<T>) {
                    if (body) {
                        w.put(static_cast<std::uint64_t>(s.value().size()));
                        w.put(static_cast<std::uint64_t>(chunk));
                        return w.position();
                    }
                }
                w.put(s.value());
            }
            return w.position();
        },
        [&](detail::BodyQueue& q) {
            if constexpr (detail::body_capable<T>) {
                if (!body) return;
                detail::Body* b =
                    new detail::StateBody<T>(detail::Ref<detail::State<T>>(&s, false));
                q.attach(*body_am_, b->data, b->bytes, chunk, detail::body_token(b));
            } else {
                (void)q;
            }
        });
}

template <class X>
detail::Ref<detail::State<X>> Futures::import(int owner, std::uint64_t id, std::uint64_t weight) {
    const detail::ImportKey key{owner, id};
    {
        std::lock_guard<std::mutex> g(imports_mutex_);
        auto it = imports_.find(key);
        if (it != imports_.end() && it->second->try_retain()) {
            imports_shared_.fetch_add(1, std::memory_order_relaxed);
            static_cast<detail::ImportState<X>*>(it->second)->add_weight(weight);
            return detail::Ref<detail::State<X>>(static_cast<detail::State<X>*>(it->second));
        }
    }
    auto* p = new detail::ImportState<X>(this, key);
    {
        std::lock_guard<std::mutex> g(imports_mutex_);
        imports_[key] = p;
    }
    detail::Ref<detail::State<X>> ref(p);
    fetch(owner, id, p, weight);
    return ref;
}

template <class T>
void Futures::send_resident(int dest, std::uint64_t token, detail::State<T>& s) {
    const std::uint64_t id =
        export_state(&s, &detail::send_exported<T>, &detail::alias_exported<T>, kResidentWeight);
    const detail::ReplyHead h{rank_, detail::reply_resident, token};
    send_frame(dest, reply_msg, sizeof h + 2 * sizeof(std::uint64_t), [&](char* out) {
        wire::Writer w(out);
        w.put(h);
        w.put(id);
        w.put(kResidentWeight);
        return w.position();
    });
}

template <class W, class Extra>
void Futures::send_frame(int dest, Msg which, std::size_t max_bytes, W&& write, Extra&& extra) {
    // The frame is one view<char>: a 64-bit count, then the bytes (already 8-byte aligned).
    detail::LayerLink::enqueue(
        *comm_, dest, *ams_[which], sizeof(std::uint64_t) + max_bytes,
        [&](char* out) {
            char* begin = out + sizeof(std::uint64_t);
            char* end = write(begin);
            const std::uint64_t n = static_cast<std::uint64_t>(end - begin);
            std::memcpy(out, &n, sizeof n);
            return end;
        },
        std::forward<Extra>(extra));
}

}  // namespace cascade
