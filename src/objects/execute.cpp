// Running requests on the pool: one task per request, the access rules released when it
// ends, and the operations (migrate, destroy) queued on an object like requests.
#include "internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace cascade {

using detail::Invocation;
using detail::InvokeHead;
using detail::now_s;
using detail::OpKind;
using detail::Record;
using detail::t_hops;

// ---- running requests -----------------------------------------------------------------------

void Objects::execute(Record* r, Invocation* inv) {
    detail::InvocationPtr guard(inv);
    switch (inv->h.kind) {
        case OpKind::rebalance: {
            bool pinned;
            {
                std::lock_guard<Spinlock> g(shard(r->key).m);
                pinned = r->pinned;
            }
            if (pinned) {
                {
                    std::lock_guard<Spinlock> g(shard(r->key).m);
                    r->rebalancing = false;
                }
                return finish(r, true);
            }
            guard.release();
            return do_migrate(r, inv);
        }
        case OpKind::pin: {
            {
                std::lock_guard<Spinlock> g(shard(r->key).m);
                r->pinned = true;
            }
            return finish(r, true);
        }
        case OpKind::migrate:
            guard.release();
            return do_migrate(r, inv);
        case OpKind::destroy:
            guard.release();
            return do_destroy(r, inv);
        default:
            break;
    }
    detail::HandlerBase* h = registry_.handler(inv->h.handler);
    const bool excl = h->access == Access::exclusive;
    const std::uint64_t waits = detail::waits_on_this_thread();
    const double t0 = now_s();
    t_hops = inv->h.hops;
    // A migrate of this object from its exclusive handler may be made when the handler ends
    // (migrate_when_handler_ends); handlers run nested on this thread name their own.
    detail::Record* const outer = detail::t_running;
    detail::t_running = excl ? r : nullptr;
    const std::uint32_t issued = detail::t_issued;
    try {
        h->run(*this, r->obj, r->key, *inv);
    } catch (...) {
        detail::t_running = outer;
        h->stats.record(false);
        finish(r, excl, t0, now_s(), detail::t_issued != issued);
        throw;
    }
    detail::t_running = outer;
    counters_.handlers_run.fetch_add(1, std::memory_order_relaxed);
    const double t1 = now_s();
    const double dt = t1 - t0;
    h->stats.record(dt * 1e9 < static_cast<double>(detail::CallStats::kShortNs) &&
                    detail::waits_on_this_thread() == waits);
    const ObjectKey key = r->key;  // r may move once finished
    finish(r, excl, t0, t1, detail::t_issued != issued);
    if (ObjectsObserver* obs = observer_.load(std::memory_order_acquire))
        obs->after_handler(key, dt);
}

void Objects::submit_op(const ObjectKey& k, OpKind kind, int arg) {
    if ((kind == OpKind::migrate || kind == OpKind::rebalance) && (arg < 0 || arg >= size_))
        throw UsageError("objects: migrate of object " + to_string(k) + " to rank " +
                         std::to_string(arg) + ", outside [0, " + std::to_string(size_) + ")");
    InvokeHead h;
    h.key = k;
    h.kind = kind;
    h.arg = arg;
    submit(h, detail::ArgWriter{});
}

bool Objects::rebalance(const ObjectKey& k, int dest) {
    if (dest < 0 || dest >= size_)
        throw UsageError("objects: migrate of object " + to_string(k) + " to rank " +
                         std::to_string(dest) + ", outside [0, " + std::to_string(size_) + ")");
    if (dest == rank_) return false;
    Shard& s = shard(k);
    Scratch scratch;
    std::vector<Pending>& out = scratch.out;
    {
        std::lock_guard<Spinlock> g(s.m);
        auto it = s.map.find(k);
        if (it == s.map.end() || !it->second.rec) return false;
        Record& r = *it->second.rec;
        if (r.pinned || r.rebalancing || r.leaving || r.migrate_to >= 0) return false;
        // A pin already issued wins over the balancing that would jump ahead of it.
        for (const Invocation* q : r.ready)
            if (q->h.kind == OpKind::pin) return false;
        for (const auto& [sk, q] : r.held)
            if (q->h.kind == OpKind::pin) return false;
        Invocation* inv = detail::new_invocation();
        inv->h = InvokeHead{};
        inv->h.key = k;
        inv->h.kind = OpKind::rebalance;
        inv->h.arg = dest;
        inv->h.sender = rank_;
        r.rebalancing = true;
        // Ahead of the queued requests (no sequence number: it is not one of the sender's
        // ordered requests); they travel with the object in their order.
        r.ready.push_front(inv);
        dispatch_locked(r, out);
    }
    start(out);
    return true;
}

// The pool failed and discards its tasks (every rank's join() throws the error): a request
// that will not run gives its access back, so the object's later requests are discarded in
// turn, and a call gets an error reply instead of leaving its caller waiting.
void Objects::discard(Record* r, Invocation* inv) noexcept {
    detail::InvocationPtr guard(inv);
    try {
        if (inv->h.kind == OpKind::handler && inv->h.token != 0) {
            const std::string msg = "objects: a call on rank " + std::to_string(rank_) +
                                    " was discarded: a task or handler failed there";
            if (inv->h.sender == rank_) {
                if (detail::StateBase* st = take_reply_token(inv->h.token)) {
                    st->set_error(std::make_exception_ptr(RemoteError(rank_, msg)));
                    st->release();
                }
            } else {
                send_reply(inv->h.sender, inv->h.token, true, msg.data(), msg.size());
            }
        }
    } catch (...) {  // the reply could not be sent: the job is failing already
    }
    Scratch scratch;
    std::vector<Pending>& out = scratch.out;
    {
        std::lock_guard<Spinlock> g(shard(r->key).m);
        if (exclusive(*inv)) {
            r->running_exclusive = false;
            r->leaving = false;
            if (inv->h.kind == OpKind::rebalance) r->rebalancing = false;
            if (inv->h.kind == OpKind::migrate) r->migrate_to = -1;  // a handler's, handed off
        } else {
            --r->running_shared;
        }
        dispatch_locked(*r, out);
    }
    try {
        start(out);
    } catch (...) {
    }
}

void Objects::finish(Record* r, bool excl, double start_s, double end_s, bool issued) {
    Shard& s = shard(r->key);
    Scratch scratch;
    std::vector<Pending>& out = scratch.out;
    int migrate_to = -1;
    const double seconds = end_s - start_s;
    {
        std::lock_guard<Spinlock> g(s.m);
        if (end_s > 0) {
            r->busy_s += seconds;
            // Recent handler time: what the next handlers will likely cost (a balancing
            // policy's estimate of the work queued on the object).
            if (seconds > 0)
                r->recent_s = r->recent_s > 0 ? 0.5 * (r->recent_s + seconds) : seconds;
            // Busy-time rate: this handler's time, and the time the object had no request
            // before it (from when it ran out of them to this start: an upper bound, it
            // includes the wait for a worker), both decayed over the window.
            const double decay =
                r->rate_at > 0 ? std::exp(-std::max(end_s - r->rate_at, 0.0) / kRateWindowS) : 0;
            r->rate_busy = r->rate_busy * decay + seconds;
            r->rate_idle = r->rate_idle * decay +
                           (r->idle_since > 0 ? std::max(start_s - r->idle_since, 0.0) : 0.0);
            r->rate_at = end_s;
            r->idle_since = 0;
            r->issuing = 0.75 * r->issuing + (issued ? 0.25 : 0.0);
        }
        ++r->handled;
        if (excl && r->migrate_to >= 0) {
            // The handler moved its object: the migration keeps the access the handler had,
            // and migrate_to stays set (balancing leaves the object alone) until it is gone.
            migrate_to = r->migrate_to;
        } else {
            if (excl)
                r->running_exclusive = false;
            else
                --r->running_shared;
            dispatch_locked(*r, out);
            // Nothing queued or running on it now: idle from here (its rate fades).
            if (end_s > 0 && !r->running_exclusive && r->running_shared == 0 && r->ready.empty())
                r->idle_since = end_s;
        }
    }
    if (migrate_to >= 0) {
        counters_.moved_by_handler.fetch_add(1, std::memory_order_relaxed);
        // After a handler run on the communication thread (run_in_handler, deferred): an
        // object whose members must be readied first (device data whose host copy the
        // migration waits for) leaves from a worker, as a migrate request holding the access
        // the handler had. That thread may be the only one that can receive what the device
        // work waits for.
        if (comm_.on_comm_thread() && tp_.current_thread() < 0 && r->obj &&
            r->type->leave_waits(r->obj)) {
            Invocation* inv = detail::new_invocation();
            inv->h = InvokeHead{};
            inv->h.key = r->key;
            inv->h.kind = OpKind::migrate;
            inv->h.arg = migrate_to;
            inv->h.sender = rank_;
            tp_.push(ObjTask::make(this, r, inv, label_of(*r, *inv)), tp_.pick_thread(), false);
            return;
        }
        return migrate_now(r, migrate_to);
    }
    start(out);
}

}  // namespace cascade
