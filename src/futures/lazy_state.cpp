#include "cascade/futures/detail/lazy_state.hpp"

#include "cascade/futures/async.hpp"

namespace cascade::detail {

void Residence::demand(StateBase& s) noexcept {
    int o;
    std::uint64_t i, w;
    {
        std::lock_guard<std::mutex> g(m);
        if (demanded) return;
        demanded = true;
        if (owner < 0) return;  // fetched when the resident reply arrives (set)
        o = owner, i = id, w = weight;
        weight = 0;
    }
    fx->fetch(o, i, &s, w);
}

bool Residence::share(int& o, std::uint64_t& i, std::uint64_t& w) noexcept {
    std::lock_guard<std::mutex> g(m);
    if (owner < 0 || demanded || weight < 2) return false;
    o = owner, i = id, w = weight / 2;
    weight -= w;
    return true;
}

bool Residence::redirect(StateBase& s, int dest, std::uint64_t token, SendValueFn send) {
    int o;
    std::uint64_t i, w;
    {
        std::lock_guard<std::mutex> g(m);
        if (s.ready() || demanded) return false;  // the value comes here: answer from here
        if (owner < 0) {
            waiting.push_back({dest, token, send});
            return true;
        }
        if (weight < 2) return false;
        o = owner, i = id, w = weight / 2;
        weight -= w;
    }
    fx->send_redirect(dest, token, o, i, w);
    return true;
}

void Residence::set(StateBase& s, int o, std::uint64_t i, std::uint64_t w) {
    std::vector<Waiting> queued;
    bool fetch_now;
    {
        std::lock_guard<std::mutex> g(m);
        owner = o, id = i, weight = w;
        queued.swap(waiting);
        fetch_now = demanded;
    }
    for (auto& q : queued) {
        std::uint64_t share = 0;
        {
            std::lock_guard<std::mutex> g(m);
            if (weight >= 2) {
                share = weight / 2;
                weight -= share;
            }
        }
        if (share)
            fx->send_redirect(q.dest, q.token, o, i, share);
        else
            fx->answer_when_ready(s, q.send, q.dest, q.token);  // demands the value
    }
    if (fetch_now) {
        std::uint64_t rest;
        {
            std::lock_guard<std::mutex> g(m);
            rest = weight;
            weight = 0;
        }
        fx->fetch(o, i, &s, rest);
    }
}

void Residence::settled(StateBase& s) noexcept {
    std::vector<Waiting> queued;
    {
        std::lock_guard<std::mutex> g(m);
        queued.swap(waiting);
    }
    for (auto& q : queued)
        fx->answer_when_ready(s, q.send, q.dest, q.token);
}

void Residence::leave() noexcept {
    // Unused weight goes back so the owner can free the value; not once this rank's Futures
    // is gone (its exports were released with it).
    if (owner >= 0 && weight > 0 && Futures::current() == fx) fx->release_export(owner, id, weight);
}

}  // namespace cascade::detail
