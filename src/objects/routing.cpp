// Routing of requests to mobile objects: sending invocations, updates and replies; receiving
// them, forwarding to where an object lives (lazy updates, the two-hop rule), per-sender
// ordering and dispatch under access control. See docs/objects.md.
#include "internal.hpp"

#include "cascade/core/detail/task_epilogue.hpp"

#include <algorithm>
#include <cstring>

namespace cascade {

using detail::Entry;
using detail::Invocation;
using detail::InvokeHead;
using detail::OpKind;
using detail::Record;

// ---- sending --------------------------------------------------------------------------------

void Objects::send_invocation(int dest, const InvokeHead& h, const char* args, std::size_t n,
                              bool forwarded) {
    cascade::detail::LayerLink::enqueue(comm_, dest, forwarded ? *am_.forward : *am_.invoke,
                                        sizeof(std::uint64_t) + sizeof h + n, [&](char* out) {
                                            const std::uint64_t len = sizeof h + n;
                                            std::memcpy(out, &len, sizeof len);
                                            std::memcpy(out + sizeof len, &h, sizeof h);
                                            if (n)
                                                std::memcpy(out + sizeof len + sizeof h, args, n);
                                            return out + sizeof len + len;
                                        });
}

void Objects::send_update(int dest, const ObjectKey& k, int loc, std::uint64_t ver, bool to_home) {
    if (to_home) {
        counters_.home_updates.fetch_add(1, std::memory_order_relaxed);
        am_.home_update->send(dest, k, loc, ver);
    } else {
        counters_.lazy_updates.fetch_add(1, std::memory_order_relaxed);
        am_.lazy_update->send(dest, k, loc, ver);
    }
}

void Objects::send_reply(int dest, std::uint64_t token, bool failed, const char* data,
                         std::size_t n) {
    am_.reply->send(dest, rank_, token, std::uint8_t(failed ? 1 : 0),
                    view<char>(const_cast<char*>(data), n));
}

namespace detail {
thread_local std::uint32_t t_issued = 0;
}  // namespace detail

void Objects::submit(InvokeHead h, const detail::ArgWriter& w) {
    h.sender = rank_;
    ++detail::t_issued;
    Shard& s = shard(h.key);
    Scratch scratch;
    std::vector<Pending>& out = scratch.out;
    int dest = -1;
    {
        std::lock_guard<Spinlock> g(s.m);
        auto it = s.map.find(h.key);
        if (it == s.map.end()) {
            if (h.key.home < 0 || h.key.home >= size_)
                throw UsageError("objects: request for object " + to_string(h.key) +
                                 ", which its home rank never created");
            if (const int where = destroyed_where(s, h.key); where != -2) {
                Invocation tmp{h, {}};
                error_destroyed(tmp, where);
            }
            if (h.key.home == rank_)
                throw UsageError("objects: request for object " + to_string(h.key) +
                                 ", which its home rank never created");
            it = s.map.emplace(h.key, Entry{}).first;
            it->second.loc = h.key.home;
        }
        Entry& e = it->second;
        if (e.destroyed) {
            Invocation tmp{h, {}};
            error_destroyed(tmp, e.destroyed_on);
        }
        h.seq = e.next_seq++;
        if (e.rec || e.loc == rank_) {
            Invocation* inv = detail::new_invocation();
            inv->h = h;
            if (w.bytes) {
                inv->args.resize(w.bytes);
                inv->args.resize(
                    static_cast<std::size_t>(w.write(w.ctx, inv->args.data()) - inv->args.data()));
            }
            if (e.rec) {
                deliver_locked(e, inv, out);
            } else {  // on its way here
                e.waiting.push_back(inv);
                counters_.parked.fetch_add(1, std::memory_order_relaxed);
            }
        } else {
            dest = e.loc;
            h.hint_loc = e.loc;
            h.hint_ver = e.ver;
        }
    }
    if (dest >= 0) {
        cascade::detail::LayerLink::enqueue(
            comm_, dest, *am_.invoke, sizeof(std::uint64_t) + sizeof h + w.bytes, [&](char* out_) {
                char* args = out_ + sizeof(std::uint64_t) + sizeof h;
                char* end = w.bytes ? w.write(w.ctx, args) : args;
                const std::uint64_t len =
                    static_cast<std::uint64_t>(end - (out_ + sizeof(std::uint64_t)));
                std::memcpy(out_, &len, sizeof len);
                std::memcpy(out_ + sizeof len, &h, sizeof h);
                return end;
            });
    }
    start(out);
}

// ---- receiving and routing ------------------------------------------------------------------

void Objects::check_head(const InvokeHead& h, const char* what) const {
    if (!detail::head_ok(h, size_))
        throw WireError(std::string("objects: malformed ") + what + " (sender " +
                        std::to_string(h.sender) + ", object " + std::to_string(h.key.home) + ":" +
                        std::to_string(h.key.id) + ", kind " + std::to_string(int(h.kind)) + ")");
}

void Objects::on_invoke_frame(const char* data, std::size_t size) {
    if (size < sizeof(InvokeHead)) throw WireError("objects: short request");
    Invocation* inv = detail::new_invocation();
    std::memcpy(&inv->h, data, sizeof(InvokeHead));
    detail::InvocationPtr guard(inv);
    // A balancing migration never travels as a request of its own (only queued on an object).
    check_head(inv->h, inv->h.kind == OpKind::rebalance ? "request (rebalance)" : "request");
    if (inv->h.kind == OpKind::rebalance) throw WireError("objects: a rebalance request");
    if (inv->h.kind == OpKind::handler) {
        const std::uint32_t n = registry_.handlers();
        if (inv->h.handler >= n)
            throw UsageError("objects: rank " + std::to_string(inv->h.sender) +
                             " invoked handler #" + std::to_string(inv->h.handler) + " on object " +
                             to_string(inv->h.key) + ", but rank " + std::to_string(rank_) +
                             " registered only " + std::to_string(n) +
                             " handlers (make_handler must be called in the same order on "
                             "every rank)");
        auto* h = registry_.handler(inv->h.handler);
        if (h->sig != inv->h.sig)
            throw UsageError("objects: rank " + std::to_string(inv->h.sender) +
                             " invoked handler #" + std::to_string(inv->h.handler) + " on object " +
                             to_string(inv->h.key) + ", but handler #" +
                             std::to_string(inv->h.handler) + " on rank " + std::to_string(rank_) +
                             " is '" + h->name +
                             "' with another name, access or types (make_handler must be "
                             "called in the same order on every rank)");
    }
    inv->args.assign(data + sizeof(InvokeHead), data + size);
    guard.release();
    receive(inv);
}

void Objects::count_delivery(const Invocation& inv) {
    const std::uint64_t hops = inv.h.hops;
    counters_.by_hops[std::min<std::uint64_t>(hops, 7)].fetch_add(1, std::memory_order_relaxed);
    std::uint64_t m = counters_.max_hops.load(std::memory_order_relaxed);
    while (hops > m && !counters_.max_hops.compare_exchange_weak(m, hops)) {
    }
}

void Objects::receive(Invocation* inv) {
    const ObjectKey key = inv->h.key;  // inv may run (and be freed) once delivered
    Shard& s = shard(key);
    Scratch scratch;
    std::vector<Pending>& out = scratch.out;
    int fwd = -1, update_to = -1;
    std::uint64_t update_ver = 0;
    Record* undefer_rec = nullptr;
    detail::InvocationPtr guard(inv);
    {
        std::lock_guard<Spinlock> g(s.m);
        auto it = s.map.find(inv->h.key);
        if (it == s.map.end()) {
            if (const int where = destroyed_where(s, inv->h.key); where != -2)
                error_destroyed(*inv, where);
            if (inv->h.key.home == rank_)
                throw UsageError("objects: " + what_of(*inv) + " on object " +
                                 to_string(inv->h.key) + " (from rank " +
                                 std::to_string(inv->h.sender) + "), which its home rank " +
                                 std::to_string(rank_) + " never created");
            it = s.map.emplace(inv->h.key, Entry{}).first;
            it->second.loc = inv->h.key.home;
        }
        Entry& e = it->second;
        if (e.destroyed) error_destroyed(*inv, e.destroyed_on);
        if (e.rec) {
            if (inv->h.hops > 0 && inv->h.sender != rank_) {
                update_to = inv->h.sender;
                update_ver = e.rec->version;
            }
            guard.release();
            deliver_locked(e, inv, out);
            // More requests for an object whose request waits for the end of this message:
            // a worker takes that one now and goes on with these while this thread reads on.
            if (out.empty() && e.rec->deferred) undefer_rec = e.rec.get();
        } else {
            int loc = e.loc;
            std::uint64_t ver = e.ver;
            if (inv->h.hint_ver > ver) {
                loc = inv->h.hint_loc;
                ver = inv->h.hint_ver;
            }
            if (loc == rank_) {  // the object is on its way here
                guard.release();
                e.waiting.push_back(inv);
                counters_.parked.fetch_add(1, std::memory_order_relaxed);
            } else {
                if (ver > e.ver) {  // learn from the hint
                    e.loc = loc;
                    e.ver = ver;
                }
                inv->h.hint_loc = loc;
                inv->h.hint_ver = ver;
                fwd = loc;
                // A request forwarded by the home has been through it (the two-hop rule
                // sends it there only once).
                if (rank_ == inv->h.key.home) inv->h.via_home = 1;
                if (inv->h.hops >= kMaxHopsBeforeHome && !inv->h.via_home &&
                    rank_ != inv->h.key.home) {
                    fwd = inv->h.key.home;
                    inv->h.via_home = 1;
                    std::uint64_t m = counters_.max_hops_before_home.load();
                    const std::uint64_t hops = inv->h.hops;
                    while (hops > m &&
                           !counters_.max_hops_before_home.compare_exchange_weak(m, hops)) {
                    }
                }
                inv->h.hops++;
            }
        }
    }
    if (fwd >= 0) {
        counters_.forwards.fetch_add(1, std::memory_order_relaxed);
        send_invocation(fwd, inv->h, inv->args.data(), inv->args.size(), true);
    }
    if (update_to >= 0) send_update(update_to, key, rank_, update_ver, false);
    if (undefer_rec) undefer(undefer_rec);
    start(out);
}

void Objects::deliver_locked(Entry& e, Invocation* inv, std::vector<Pending>& out) {
    Record& r = *e.rec;
    count_delivery(*inv);
    std::uint64_t& next = r.next_expected(inv->h.sender);
    if (inv->h.seq != next) {
        if (inv->h.seq < next) {
            const std::string what = what_of(*inv);
            const auto seq = inv->h.seq;
            const int sender = inv->h.sender;
            detail::free_invocation(inv);
            throw UsageError("objects: " + what + " on object " + to_string(r.key) + " from rank " +
                             std::to_string(sender) + " arrived twice (seq " + std::to_string(seq) +
                             ")");
        }
        r.held.emplace(std::make_pair(int(inv->h.sender), inv->h.seq), inv);
        return;
    }
    const int sender = inv->h.sender;
    // Issued by the exclusive handler running on this object, on this thread: a chain.
    r.chained = 0.75 * r.chained + (detail::t_running == &r ? 0.25 : 0.0);
    r.ready.push_back(inv);
    ++next;
    for (;;) {
        auto it = r.held.find({sender, next});
        if (it == r.held.end()) break;
        r.ready.push_back(it->second);
        r.held.erase(it);
        ++next;
    }
    dispatch_locked(r, out);
}

void Objects::dispatch_locked(Record& r, std::vector<Pending>& out) {
    while (!r.ready.empty()) {
        Invocation* inv = r.ready.front();
        if (exclusive(*inv)) {
            if (r.running_exclusive || r.running_shared > 0) break;
            r.running_exclusive = true;
            if (inv->h.kind == OpKind::migrate || inv->h.kind == OpKind::destroy) r.leaving = true;
            r.ready.pop_front();
            out.push_back({&r, inv});
            break;
        }
        if (r.running_exclusive) break;
        ++r.running_shared;
        r.ready.pop_front();
        out.push_back({&r, inv});
    }
}

void Objects::start_all(std::vector<Pending>& out) {
    // On the communication thread (inside a message handler), migrations and the other
    // bookkeeping requests run at once, and so do handlers that asked for it
    // (HandlerOptions::run_in_handler): no hand-off to a worker. Trusted short handlers run
    // there too when the pool is idle, right after the message's handlers (defer).
    const bool comm_thread = comm_.on_comm_thread() && tp_.current_thread() < 0;
    for (const Pending& p : out) {
        if (comm_thread) {
            // A migration whose object must ready its members first (device data whose host
            // copy it waits for) goes to a worker, which runs other tasks while it waits.
            const bool moves =
                p.inv->h.kind == OpKind::migrate || p.inv->h.kind == OpKind::rebalance;
            if (p.inv->h.kind != OpKind::handler &&
                !(moves && p.rec->obj && p.rec->type->leave_waits(p.rec->obj))) {
                const HereTask traced(this, p.rec, p.inv, nullptr);  // named before it moves
                execute(p.rec, p.inv);
                continue;
            }
            const detail::HandlerBase* h = registry_.handler(p.inv->h.handler);
            if (h->run_in_handler) {
                const HereTask traced(this, p.rec, p.inv, nullptr);
                execute(p.rec, p.inv);
                continue;
            }
            if (h->stats.trusted() && defer(p)) continue;
        }
        cascade::Task t = ObjTask::make(this, p.rec, p.inv, label_of(*p.rec, *p.inv));
        // A balancing migration runs before the handlers queued on this worker: the work it
        // carries away is what it is for.
        if (p.inv->h.kind == OpKind::rebalance) t.priority = 1.0;
        tp_.push(t, tp_.pick_thread(), false);
    }
    out.clear();
}

bool Objects::defer(const Pending& p) {
    // Only while a progress() call is on the stack (it runs run_deferred before it returns),
    // not from a deferred handler (which may wait, driving progress), and only while no
    // worker has anything to do: a busy pool would take the request as fast, and the
    // communication thread has messages to move.
    if (!deferred_.installed || deferred_.running || deferred_.n == Deferred::kMax ||
        !comm_.in_progress() || tp_.failed() || !tp_.idle())
        return false;
    p.rec->deferred = true;
    deferred_.list[deferred_.n++] = p;
    return true;
}

void Objects::undefer(Record* r) {
    // Its deferred requests hold the object's access, so r stays here until the last of them
    // is pushed, not after: a worker may run it, and a migration queued behind it, at once.
    r->deferred = false;
    for (std::size_t i = 0; i < deferred_.n; ++i) {
        Pending& p = deferred_.list[i];
        if (p.rec != r || !p.inv) continue;
        cascade::Task t = ObjTask::make(this, p.rec, p.inv, label_of(*p.rec, *p.inv));
        p.inv = nullptr;
        tp_.push(t, tp_.pick_thread(), false);
    }
}

bool Objects::run_deferred(void* self) {
    auto* o = static_cast<Objects*>(self);
    if (o->deferred_.n == 0 || o->deferred_.running) return false;
    o->deferred_.running = true;
    for (std::size_t i = 0; i < o->deferred_.n; ++i) {
        const Pending p = o->deferred_.list[i];
        if (!p.inv) continue;  // handed to a worker meanwhile (undefer)
        p.rec->deferred = false;
        if (o->tp_.failed()) {  // as the pool discards its queued tasks once one failed
            o->discard(p.rec, p.inv);
            continue;
        }
        // The record may move away once the handler finished: name it first.
        const char* label = o->label_of(*p.rec, *p.inv);
        const ObjectKey key = p.rec->key;
        o->counters_.on_comm_thread.fetch_add(1, std::memory_order_relaxed);
        try {
            const HereTask traced(o, p.rec, p.inv, label);
            o->execute(p.rec, p.inv);
            detail::run_task_epilogue();
        } catch (...) {
            // What a worker reports for a task that threw (join() rethrows it; with other
            // ranks the job ends with it).
            const std::exception_ptr e = std::current_exception();
            const std::string what = detail::describe_error(e);
            const std::string name = std::string(label) + " " + std::to_string(key.home) + ":" +
                                     std::to_string(key.id) + ")";
            o->comm_.fail_pool(std::make_exception_ptr(TaskError(name, -1, e, what, o->rank_)));
        }
    }
    o->deferred_.n = 0;
    o->deferred_.running = false;
    return true;
}

void Objects::on_update(const ObjectKey& k, int loc, std::uint64_t ver) {
    if (loc < 0 || loc >= size_ || k.home < 0 || k.home >= size_)
        throw WireError("objects: a location update names rank " + std::to_string(loc) +
                        " for object " + to_string(k));
    Shard& s = shard(k);
    std::lock_guard<Spinlock> g(s.m);
    // No entry: this rank forgot the object (destroyed) since it asked; nothing to learn.
    auto it = s.map.find(k);
    if (it == s.map.end()) return;
    Entry& e = it->second;
    if (!e.rec && !e.destroyed && ver > e.ver) {
        e.loc = loc;
        e.ver = ver;
    }
}

void Objects::on_reply(int source, std::int32_t named, std::uint64_t token, std::uint8_t failed,
                       const char* data, std::size_t size) {
    if (named != source)
        throw WireError("objects: reply received from rank " + std::to_string(source) +
                        " names rank " + std::to_string(named) + " as its sender");
    detail::StateBase* s = reply_tokens_.take(token);
    if (!s)
        throw WireError("objects: reply from rank " + std::to_string(source) +
                        " for no call waiting here (unknown or repeated token)");
    if (failed) {
        s->set_error(std::make_exception_ptr(RemoteError(source, std::string(data, size))));
    } else {
        wire::Reader r(data, size);
        s->set_from_wire(r);
    }
    s->release();
}

}  // namespace cascade
