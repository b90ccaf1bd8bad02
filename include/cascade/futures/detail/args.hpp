// How the arguments of a remote call travel: values written into the request (or, when big,
// as bodies of their own after it), futures as their value when ready, else as a
// descriptor {owner, export id, weight} the callee fetches from; and how the callee decodes
// them into the call's slots. Included by futures.hpp after class Futures.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cascade/comm/detail/leaving.hpp"

namespace cascade {

namespace detail {

enum : std::uint8_t { arg_value = 0, arg_remote = 1, arg_error = 2, arg_body = 3 };

// A sequence argument (std::vector / std::string of trivially copyable elements) of at least
// Futures::kLargeArg bytes is not copied into the request: it leaves as a body of its own
// after the request (sent from a Body the call owns until MPI is done with it) and the
// callee receives it straight into the argument.
struct Body {
    virtual ~Body() = default;
    const void* data = nullptr;
    std::size_t bytes = 0;
};
template <class X>
struct BodyOf final : Body {
    X v;
    explicit BodyOf(X x) : v(std::move(x)) {
        data = v.data();
        bytes = v.size() * sizeof(typename X::value_type);
    }
    ~BodyOf() override { Recycler<X>::give(v); }
};
// A ready state's value sent as a body straight from the state, which it keeps alive.
template <class X>
struct StateBody final : Body {
    Ref<State<X>> s;
    explicit StateBody(Ref<State<X>> r) : s(std::move(r)) {
        data = s->value().data();
        bytes = s->value().size() * sizeof(typename X::value_type);
    }
};
template <class X>
bool travels_as_body(const X& x) {
    if constexpr (body_capable<X>)
        return x.size() * sizeof(typename X::value_type) >= Futures::kLargeArg;
    else
        return false;
}
// A value whose codec must do work before it can be written (a device Data, whose freshest
// copy must reach the host: cascade/comm/device.hpp): the walk with a LeaveArchive that asks.
template <class X>
bool needs_leaving(const X& x) {
    constexpr wire::Kind k = wire::kind_of<X>();
    if constexpr (k == wire::Kind::custom || k == wire::Kind::elements) {
        LeaveArchive probe;
        probe.visit(x);
        return probe.needed();
    } else {
        (void)x;
        return false;
    }
}
// What a value took to be written (host access to its Data), given back when this goes: an
// argument's at the end of async(), once the request is written.
struct LeaveHold {
    std::unique_ptr<AfterPacking> after;
    // Done on the calling thread, outside the outbox lock; it may wait (a device-to-host copy).
    template <class X>
    void take(const X& x) {
        if (!needs_leaving(x)) return;
        after = std::make_unique<AfterPacking>();
        LeaveArchive a(after->fs);
        a.visit(x);
    }
};

inline std::vector<char> body_token(const void* p) {
    std::vector<char> t(sizeof(std::uint64_t));
    const auto v = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p));
    std::memcpy(t.data(), &v, sizeof v);
    return t;
}

// Argument written into the request, either whole or as a count + a body.
template <class X>
struct ValArg {
    std::unique_ptr<Body> body;  // set when the argument travels as a body
    LeaveHold leave;             // what writing it needs, held until it is written
    std::size_t size_of(const X& x) const {
        return body ? 1 + 2 * sizeof(std::uint64_t) : 1 + wire::size_of(x);
    }
    void write(wire::Writer& w, const X& x, std::size_t chunk) const {
        if constexpr (body_capable<X>) {
            if (body) {
                w.put(arg_body);
                w.put(static_cast<std::uint64_t>(x.size()));
                w.put(static_cast<std::uint64_t>(chunk));
                return;
            }
        }
        w.put(arg_value);
        w.put(x);
    }
    // Under the outbox lock, right after the request frame.
    void attach(BodyQueue& q, ActiveMsgBase& am, std::size_t chunk) {
        if (!body) return;
        Body* b = body.release();  // freed by futures.body's on_sent
        q.attach(am, b->data, b->bytes, chunk, body_token(b));
    }
};
template <class P>
struct ValRef : ValArg<P> {  // an argument of the parameter's own type, written from where it is
    const P* p;
    ValRef(const P* x, bool body_ok) : p(x) {
        if constexpr (body_capable<P>)
            if (body_ok && p->size() * sizeof(typename P::value_type) >= Futures::kLargeArg)
                this->body =
                    std::make_unique<BodyOf<P>>(Recycler<P>::copy(*p));  // the caller may reuse *p
        this->leave.take(*p);
    }
    const P& value() const { return this->body ? static_cast<BodyOf<P>&>(*this->body).v : *p; }
    std::size_t size() const { return this->size_of(value()); }
    void write(wire::Writer& w, std::size_t chunk) const { ValArg<P>::write(w, value(), chunk); }
};
template <class P>
struct ValOwn : ValArg<P> {  // an argument converted to the parameter's type
    P v;
    ValOwn(P x, bool body_ok) : v(std::move(x)) {
        if constexpr (body_capable<P>)
            if (body_ok && v.size() * sizeof(typename P::value_type) >= Futures::kLargeArg)
                this->body = std::make_unique<BodyOf<P>>(std::move(v));
        this->leave.take(value());
    }
    const P& value() const { return this->body ? static_cast<BodyOf<P>&>(*this->body).v : v; }
    std::size_t size() const { return this->size_of(value()); }
    void write(wire::Writer& w, std::size_t chunk) const { ValArg<P>::write(w, value(), chunk); }
};
template <class X>
struct FutArg {  // a future argument: its value if ready, else where to fetch it
    Ref<State<X>> s;
    std::uint8_t tag = arg_remote;
    std::int32_t owner = 0;
    std::uint64_t id = 0;
    std::uint64_t weight = 1;
    std::string msg;
    LeaveHold leave;  // a ready value's: what writing it needs
    std::size_t size() const {
        if (tag == arg_body) return 1 + 2 * sizeof(std::uint64_t);
        if (tag == arg_value) return 1 + wire::size_of(s->value());
        if (tag == arg_error) return 1 + wire::size_of(msg);
        return 1 + sizeof owner + sizeof id + sizeof weight;
    }
    // Under the outbox lock, right after the request frame.
    void attach(BodyQueue& q, ActiveMsgBase& am, std::size_t chunk) {
        if constexpr (body_capable<X>) {
            if (tag != arg_body) return;
            Body* b = new StateBody<X>(s);  // freed by futures.body's on_sent
            q.attach(am, b->data, b->bytes, chunk, body_token(b));
        } else {
            (void)q;
            (void)am;
            (void)chunk;
        }
    }
    void write(wire::Writer& w, std::size_t chunk) const {
        w.put(tag);
        if (tag == arg_body) {
            if constexpr (body_capable<X>) {
                w.put(static_cast<std::uint64_t>(s->value().size()));
                w.put(static_cast<std::uint64_t>(chunk));
            }
        } else if (tag == arg_value) {
            w.put(s->value());
        } else if (tag == arg_error) {
            w.put(msg);
        } else {
            w.put(owner);
            w.put(id);
            w.put(weight);
        }
    }
};

template <class X>
void send_exported(Futures& fx, StateBase& s, int dest, std::uint64_t token) {
    fx.send_value<X>(dest, token, static_cast<State<X>&>(s), nullptr);
}
// A proxy here takes the value of an exported state here without a copy (an alias).
template <class X>
void alias_exported(StateBase& from, StateBase& to) {
    from.retain();
    static_cast<State<X>&>(to).set_alias(&static_cast<State<X>&>(from));
}

template <class P, class A>
auto prepare(Futures& fx, A&& a) {
    using D = std::remove_cvref_t<A>;
    using X = typename param_traits<P>::elem;
    if constexpr (future_elem<D>::yes) {
        static_assert(std::is_same_v<typename future_elem<D>::type, X>,
                      "async: a future argument must hold the parameter's type");
        if (!a.valid()) throw UsageError("async: argument future has no state");
        FutArg<X> out;
        if constexpr (std::is_same_v<D, future<X>>)
            out.s = a.share().ref();
        else
            out.s = a.ref();
        if (out.s->ready()) {
            if (out.s->failed()) {
                out.tag = arg_error;
                out.msg = describe_error(out.s->error());
            } else {
                // A big value leaves as a body straight from the state (not into a shared
                // parameter: the callee builds a state of its own for those).
                out.tag = !param_traits<P>::shared && travels_as_body(out.s->value()) ? arg_body
                                                                                      : arg_value;
                if (out.tag == arg_value) out.leave.take(out.s->value());
            }
        } else if (!out.s->share_residence(out.owner, out.id, out.weight)) {
            // Pending here (a kept result whose owner is known is named directly instead).
            out.owner = fx.rank();
            out.id = fx.export_state(out.s.get(), &send_exported<X>, &alias_exported<X>);
        }
        return out;
    } else if constexpr (std::is_same_v<D, X> && !std::is_rvalue_reference_v<A&&>) {
        return ValRef<X>(&a, !param_traits<P>::shared);
    } else {
        static_assert(std::is_constructible_v<X, A&&>,
                      "async: argument not convertible to the parameter's type");
        return ValOwn<X>(X(std::forward<A>(a)), !param_traits<P>::shared);
    }
}

template <class P>
void decode_arg(Futures& fx, int source, wire::Reader& r, Slot<P>& slot, BodySink& sink) {
    using X = typename param_traits<P>::elem;
    const auto tag = r.get<std::uint8_t>();
    Ref<State<X>> s;
    bool exclusive = true;  // s is this call's alone (false: an export here, shared)
    if (tag == arg_body) {
        const auto n = r.get<std::uint64_t>();
        const auto chunk = r.get<std::uint64_t>();
        if constexpr (body_capable<X> && !param_traits<P>::shared) {
            using E = typename X::value_type;
            slot.value.emplace(Recycler<X>::take(body_elements(n, sizeof(E))));
            sink.expect_body();
            fx.receive_body(source, slot.value->data(), static_cast<std::size_t>(n) * sizeof(E),
                            static_cast<std::size_t>(chunk), &sink);
            return;
        } else {
            throw WireError("argument body for a parameter that cannot take one");
        }
    }
    if (tag == arg_value) {
        if constexpr (!param_traits<P>::shared) {
            slot.value.emplace(r.get<X>());
            return;
        } else {
            s = Ref<State<X>>(new State<X>());
            s->set_value(r.get<X>());
        }
    } else if (tag == arg_error) {
        s = Ref<State<X>>(new State<X>());
        s->set_error(std::make_exception_ptr(RemoteError(source, r.get<std::string>())));
    } else if (tag == arg_remote) {
        const auto owner = r.get<std::int32_t>();
        const auto id = r.get<std::uint64_t>();
        const auto weight = r.get<std::uint64_t>();
        if (owner < 0 || owner >= fx.ranks()) throw WireError("future owned by no rank");
        if (owner == fx.rank()) {  // kept here: use it in place
            s = Ref<State<X>>(static_cast<State<X>*>(fx.take_export(id, weight, source)));
            exclusive = false;  // moved out only if no one else holds it (Slot::resolve)
        } else {
            s = fx.import <X>(owner, id, weight);
            exclusive = false;  // other calls here may share it (Slot::resolve)
        }
    } else {
        throw WireError("bad argument tag " + std::to_string(tag));
    }
    if constexpr (param_traits<P>::shared) {
        slot.f = shared_future<X>(std::move(s));
    } else {
        slot.fut = std::move(s);
        slot.consume = exclusive;
    }
}

template <class R, class... Ps>
void FnEntry<R, Ps...>::on_request(Futures& fx, int source, std::uint64_t token, wire::Reader& r) {
    auto* c = new Call<FnRef<R, Ps...>, R, Ps...>(FnRef<R, Ps...>{&f}, borrow);
    Ref<State<R>> hold(c);
    std::apply([&](auto&... slot) { (decode_arg(fx, source, r, slot, *c), ...); }, c->slots());
    r.expect_end();
    c->reply_to(ReplyTo{&fx, source, token, &name, opts.keep_result && !std::is_void_v<R>});
    if (!opts.run_in_handler) c->set_stats(&stats);
    c->start(opts.run_in_handler);
}

template <class T>
void send_result(const ReplyTo& to, State<T>& s) noexcept {
    // Only big values are kept: a small one costs less to send now than to fetch later.
    if (to.keep && !s.failed() && travels_as_body(s.value()))
        to.fx->send_resident<T>(to.rank, to.token, s);
    else
        to.fx->send_value<T>(to.rank, to.token, s, to.name);
}

template <class Tup, class... A, std::size_t... I>
void fill_slots(Tup& slots, std::index_sequence<I...>, A&&... a) {
    (std::get<I>(slots).set(std::forward<A>(a)), ...);
}

}  // namespace detail

}  // namespace cascade
