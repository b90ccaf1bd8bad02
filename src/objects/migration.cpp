// Migration (packing an object with its ordering state and queued requests, installing it on
// arrival, recycled packing buffers) and destruction. See docs/objects.md.
#include "internal.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace cascade {

using detail::BodiesHead;
using detail::Entry;
using detail::ExpectedWire;
using detail::Invocation;
using detail::InvokeHead;
using detail::kSmallMigration;
using detail::MigrateHead;
using detail::Record;

namespace {

MigrateHead head_of(const Record& r, int source) {
    const double now = detail::now_s();
    const double decay =
        r.rate_at > 0 ? std::exp(-std::max(now - r.rate_at, 0.0) / Objects::kRateWindowS) : 0;
    const double idle = r.idle_since > 0 ? std::max(now - r.idle_since, 0.0) : 0.0;
    return MigrateHead{r.key,
                       r.type->hash,
                       static_cast<std::uint32_t>(r.expected.size()),
                       r.version + 1,
                       r.busy_s,
                       r.recent_s,
                       r.rate_busy * decay,
                       r.rate_idle * decay + idle,
                       r.chained,
                       r.issuing,
                       r.handled,
                       static_cast<std::uint32_t>(r.ready.size()),
                       static_cast<std::uint32_t>(r.held.size()),
                       r.pinned ? 1u : 0u,
                       std::int32_t(source)};
}

// What travels with an object besides the object itself: its ordering state and the requests
// queued on it (ready, then held).
std::size_t state_bytes(const Record& r) {
    std::size_t bytes = sizeof(MigrateHead) + r.expected.size() * sizeof(ExpectedWire);
    for (const Invocation* q : r.ready)
        bytes += sizeof(InvokeHead) + wire::size_of(q->args);
    for (const auto& [k, q] : r.held)
        bytes += sizeof(InvokeHead) + wire::size_of(q->args);
    return bytes;
}
void write_state(wire::Writer& w, const Record& r) {
    for (const auto& [sender, next] : r.expected)
        w.put(ExpectedWire{sender, 0, next});
    for (const Invocation* q : r.ready) {
        w.put(q->h);
        w.put(q->args);
    }
    for (const auto& [k, q] : r.held) {
        w.put(q->h);
        w.put(q->args);
    }
}
void drop_requests(Record& r) {
    for (Invocation* q : r.ready)
        detail::free_invocation(q);
    for (auto& [k, q] : r.held)
        detail::free_invocation(q);
    r.ready.clear();
    r.held.clear();
}

// Fills rec (a new or reset Record) from the message, checking the ranks and requests it names
// (`size`: ranks in the job).
void read_record(wire::Reader& rd, const MigrateHead& mh, const detail::ObjectType* t, Record* rec,
                 int size) {
    if (mh.key.home < 0 || mh.key.home >= size || mh.key.pad != 0)
        throw WireError("objects: migration of an object of rank " + std::to_string(mh.key.home));
    rec->key = mh.key;
    rec->type = t;
    rec->version = mh.version;
    const double loads[] = {mh.busy_s,    mh.recent_s, mh.rate_busy,
                            mh.rate_idle, mh.chained,  mh.issuing};
    for (double x : loads)
        if (!std::isfinite(x) || x < 0 || mh.chained > 1 || mh.issuing > 1)
            throw WireError("objects: migration of object " + to_string(mh.key) +
                            " carries a malformed load");
    rec->busy_s = mh.busy_s;
    rec->recent_s = mh.recent_s;
    // Its rate as it left; idle from now if no request came with it.
    rec->rate_busy = mh.rate_busy;
    rec->rate_idle = mh.rate_idle;
    rec->chained = mh.chained;
    rec->issuing = mh.issuing;
    rec->rate_at = detail::now_s();
    rec->idle_since = mh.n_ready + mh.n_held == 0 ? rec->rate_at : 0;
    rec->handled = mh.handled;
    rec->pinned = mh.pinned != 0;
    for (std::uint32_t i = 0; i < mh.n_expected; ++i) {
        const auto ew = rd.get<ExpectedWire>();
        if (ew.sender < 0 || ew.sender >= size)
            throw WireError("objects: migration of object " + to_string(mh.key) +
                            " names sender rank " + std::to_string(ew.sender));
        rec->expected.emplace_back(ew.sender, ew.next);
    }
    for (std::uint32_t i = 0; i < mh.n_ready + mh.n_held; ++i) {
        Invocation* q = detail::new_invocation();
        try {
            q->h = rd.get<InvokeHead>();
            if (!detail::head_ok(q->h, size) || q->h.key != mh.key)
                throw WireError("objects: migration of object " + to_string(mh.key) +
                                " carries a malformed request");
            const auto args = rd.get<view<char>>();  // written as a vector: the same bytes
            q->args.assign(args.data(), args.data() + args.size());
        } catch (...) {
            detail::free_invocation(q);
            throw;
        }
        if (i < mh.n_ready) {
            rec->ready.push_back(q);
        } else if (!rec->held.emplace(std::make_pair(int(q->h.sender), q->h.seq), q).second) {
            const std::string what = "objects: migration of object " + to_string(mh.key) +
                                     " carries request " + std::to_string(q->h.seq) + " of rank " +
                                     std::to_string(q->h.sender) + " twice";
            detail::free_invocation(q);
            throw WireError(what);
        }
    }
}

// The arguments of an objects.body message (never sent: the sender's completion and the
// receiver's arrival read them): the rank that sent the object and its slot on this rank.
std::vector<char> body_args(int source, std::uint32_t slot) {
    std::vector<char> a(sizeof(std::int32_t) + sizeof(std::uint64_t));
    wire::Writer w(a.data());
    w.put(std::int32_t(source));
    w.put(std::uint64_t(slot));
    return a;
}

}  // namespace

void Objects::do_migrate(Record* r, Invocation* inv) {
    const int dest = inv->h.arg;
    detail::free_invocation(inv);
    if (dest == rank_) {  // already here
        {
            std::lock_guard<Spinlock> g(shard(r->key).m);
            r->leaving = false;
        }
        finish(r, true, 0);
        return;
    }
    migrate_now(r, dest);
}

bool Objects::migrate_when_handler_ends(const ObjectKey& k, int dest) {
    // Only from the exclusive handler running on k, and only when the migration would be the
    // next request to run on it anyway: nothing is queued on it, and every request this rank
    // issued to it before has arrived. Queued as a request, it would then run right after
    // the handler, as here, and the requests issued meanwhile would travel with the object.
    Record* r = detail::t_running;
    if (!r || r->key != k) return false;
    Shard& s = shard(k);
    std::lock_guard<Spinlock> g(s.m);
    if (r->migrate_to >= 0 || !r->ready.empty() || !r->held.empty()) return false;
    const auto it = s.map.find(k);
    if (it == s.map.end() || it->second.rec.get() != r) return false;
    std::uint64_t arrived = 0;  // this rank's requests run or queued here so far
    for (const auto& [sender, next] : r->expected)
        if (sender == rank_) arrived = next;
    if (arrived != it->second.next_seq) return false;
    if (dest != rank_) r->migrate_to = dest;  // to where it is: nothing happens
    return true;
}

void Objects::migrate_now(Record* r, int dest) {
    // This migration runs alone on the object: nothing else reads or writes it meanwhile.
    Shard& s = shard(r->key);
    std::unique_ptr<Record> rec;
    {
        std::lock_guard<Spinlock> g(s.m);
        Entry& e = s.map.at(r->key);
        rec = std::move(e.rec);
        e.loc = dest;
        e.ver = rec->version + 1;
    }
    // From here on, requests arriving for it are forwarded to dest. Its members get ready to
    // be written without waiting (a device Data's host copy: leaving.hpp), here, outside the
    // outbox's lock that packing runs under; what they took is given back once it is packed
    // (`after` goes out of scope).
    detail::AfterPacking after;
    rec->type->leave(rec->obj, after.fs);
    if (send_with_bodies(rec, dest)) {
        counters_.migrations_out.fetch_add(1, std::memory_order_relaxed);
        give_record(std::move(rec));
        return;
    }
    const std::size_t bound = state_bytes(*rec) + rec->type->size(rec->obj) + 8;
    counters_.migrations_out.fetch_add(1, std::memory_order_relaxed);
    if (bound <= kSmallMigration) {
        // Small: packed straight into the outbox, as the argument of one message (a view:
        // its length, then the bytes).
        cascade::detail::LayerLink::enqueue(
            comm_, dest, *am_.migrate, sizeof(std::uint64_t) + bound, [&](char* out) {
                char* begin = out + sizeof(std::uint64_t);
                wire::Writer w(begin);
                w.put(head_of(*rec, rank_));
                write_state(w, *rec);
                char* end = rec->type->pack(rec->obj, w.position());
                const std::uint64_t len = static_cast<std::uint64_t>(end - begin);
                std::memcpy(out, &len, sizeof len);
                return end;
            });
        comm_.send_queued();
        drop_requests(*rec);
        rec->type->destroy(rec->obj);
        give_record(std::move(rec));
        return;
    }
    // The object and its state packed into one buffer, sent as one large message.
    auto buf = spares_.take_buffer(bound);
    wire::Writer w(buf->data());
    w.put(head_of(*rec, rank_));
    write_state(w, *rec);
    drop_requests(*rec);
    char* end = rec->type->pack(rec->obj, w.position());
    rec->type->destroy(rec->obj);
    const std::size_t n = static_cast<std::size_t>(end - buf->data());
    {
        char* data = buf->data();
        std::uint64_t serial;
        serial = transit_.keep_sending(std::move(buf));
        am_.migrate_large->send_large(dest, view<char>(data, n), std::int32_t(rank_),
                                      std::uint64_t(n), serial);
        comm_.send_queued();
    }
    give_record(std::move(rec));
}

void Objects::give_record(std::unique_ptr<Record> r) noexcept {
    reset(*r);
    spares_.give_record(std::move(r));
}

const detail::ObjectType& Objects::arriving_type(std::uint32_t hash, const ObjectKey& k) const {
    const detail::ObjectType* t = type_of(hash);
    if (!t)
        throw UsageError("objects: rank " + std::to_string(rank_) + " received object " +
                         to_string(k) +
                         " of a type it never registered (register_type<T>, make_handler<T> or "
                         "create<T> on every rank)");
    return *t;
}

void Objects::check_source(const MigrateHead& mh, int source, int named) const {
    if (mh.source != source || named != source)
        throw WireError("objects: migration of object " + to_string(mh.key) +
                        " received from rank " + std::to_string(source) + " names rank " +
                        std::to_string(mh.source != source ? mh.source : named) + " as its sender");
}

void Objects::check_requests(const Record& r) const {
    const std::uint32_t n = registry_.handlers();
    auto ok = [&](const Invocation* q) {
        if (q->h.kind != detail::OpKind::handler) return true;
        return q->h.handler < n && registry_.handler(q->h.handler)->sig == q->h.sig;
    };
    bool good = true;
    for (const Invocation* q : r.ready)
        good = good && ok(q);
    for (const auto& [k, q] : r.held)
        good = good && ok(q);
    if (!good)
        throw WireError("objects: migration of object " + to_string(r.key) +
                        " carries a request for a handler not registered here as it is there");
}

void Objects::install(int source, const char* data, std::size_t size) {
    wire::Reader rd(data, size);
    const auto mh = rd.get<MigrateHead>();
    check_source(mh, source, source);
    const detail::ObjectType& t = arriving_type(mh.type, mh.key);
    auto rec = spares_.take_record();
    try {
        read_record(rd, mh, &t, rec.get(), size_);
        check_requests(*rec);
        rec->obj = t.unpack(rd);
        rd.expect_end();
    } catch (...) {
        if (rec->obj) t.destroy(rec->obj);
        drop_requests(*rec);
        give_record(std::move(rec));
        throw;
    }
    place(std::move(rec), mh.source);
}

bool Objects::send_with_bodies(std::unique_ptr<Record>& rec, int dest) {
    std::size_t n_bodies = 0;
    const std::size_t obj_bytes = rec->type->measure_bodies(rec->obj, &n_bodies);
    if (n_bodies == 0) return false;
    const std::size_t bytes = state_bytes(*rec) + sizeof(BodiesHead) + obj_bytes + 8;
    const std::size_t chunk = comm_.large_chunk();
    // Its slot until the last body has left. Its place stays put (a deque), so it is filled
    // below without the lock: on_body_sent reads it only after a body it names has left.
    const std::uint32_t slot = transit_.reserve_leaving();
    detail::Transit::Leaving* leaving = &transit_.leaving(slot);
    // The bodies' places (the thread's own list: its capacity stays for the next migration).
    thread_local std::vector<detail::BodyRef> t_bodies;
    std::vector<detail::BodyRef>& bodies = t_bodies;
    bodies.clear();
    bodies.reserve(n_bodies);
    std::vector<char> args = body_args(rank_, slot);
    // The message and, after it, the bodies straight from the object's members; the object
    // stays here until the last body has left (on_body_sent).
    try {
        cascade::detail::LayerLink::enqueue(
            comm_, dest, *am_.migrate_bodies, sizeof(std::uint64_t) + bytes,
            [&](char* out) {
                char* begin = out + sizeof(std::uint64_t);
                wire::Writer w(begin);
                w.put(head_of(*rec, rank_));
                char* bh_at = w.position();
                w.put(BodiesHead{});
                write_state(w, *rec);
                char* end = rec->type->pack_bodies(rec->obj, w.position(), bodies);
                const BodiesHead bh{std::int32_t(rank_), static_cast<std::uint32_t>(bodies.size()),
                                    chunk};
                std::memcpy(bh_at, &bh, sizeof bh);
                const std::uint64_t len = static_cast<std::uint64_t>(end - begin);
                std::memcpy(out, &len, sizeof len);
                return end;
            },
            [&](cascade::detail::BodyQueue& q) {
                *leaving = detail::Transit::Leaving{rec->type, rec->obj, bodies.size()};
                for (std::size_t i = 0; i + 1 < bodies.size(); ++i)
                    q.attach(*am_.body, bodies[i].data, bodies[i].bytes, chunk, args);
                q.attach(*am_.body, bodies.back().data, bodies.back().bytes, chunk,
                         std::move(args));
            });
    } catch (...) {
        transit_.cancel_leaving(slot);
        throw;
    }
    // Requests wait for the object where it goes: it leaves now, not after the rest of this
    // round of progress (on the communication thread; elsewhere that thread sends it soon).
    comm_.send_queued();
    rec->obj = nullptr;
    drop_requests(*rec);
    return true;
}

void Objects::on_migrate_bodies(int source, const char* data, std::size_t size) {
    wire::Reader rd(data, size);
    const auto mh = rd.get<MigrateHead>();
    const auto bh = rd.get<BodiesHead>();
    // The bodies are received from the rank that sent this message, never one it names.
    check_source(mh, source, bh.source);
    if (bh.chunk > cascade::detail::LayerLink::kDefaultChunk)
        throw WireError("objects: body chunk of " + std::to_string(bh.chunk) + " bytes");
    const detail::ObjectType& t = arriving_type(mh.type, mh.key);
    auto rec = spares_.take_record();
    thread_local std::vector<detail::BodyRef> t_bodies;  // as in send_with_bodies
    std::vector<detail::BodyRef>& bodies = t_bodies;
    bodies.clear();
    try {
        read_record(rd, mh, &t, rec.get(), size_);
        check_requests(*rec);
        detail::BodyReader br(data + (size - rd.remaining()), rd.remaining(), bodies);
        rec->obj = t.unpack_bodies(br);
        if (br.remaining() != 0 || bodies.size() != bh.n_bodies || bh.n_bodies == 0)
            throw WireError("objects: object " + to_string(mh.key) + " from rank " +
                            std::to_string(source) + " announced " + std::to_string(bh.n_bodies) +
                            " bodies; its members take " + std::to_string(bodies.size()) +
                            ", and " + std::to_string(br.remaining()) + " bytes are left over");
    } catch (...) {
        if (rec->obj) t.destroy(rec->obj);
        drop_requests(*rec);
        give_record(std::move(rec));
        throw;
    }
    const std::uint32_t slot = transit_.add_arriving(std::move(rec), bodies.size());
    std::vector<char> args = body_args(source, slot);
    const auto chunk = static_cast<std::size_t>(bh.chunk);
    for (std::size_t i = 0; i + 1 < bodies.size(); ++i)
        cascade::detail::LayerLink::receive_body(comm_, source, *am_.body, bodies[i].data,
                                                 bodies[i].bytes, chunk, args);
    cascade::detail::LayerLink::receive_body(comm_, source, *am_.body, bodies.back().data,
                                             bodies.back().bytes, chunk, std::move(args));
}

void Objects::on_body_arrived(int source, std::uint64_t slot) {
    if (std::unique_ptr<Record> rec = transit_.body_arrived(slot, source))
        place(std::move(rec), source);
}

void Objects::on_body_sent(std::uint64_t slot) {
    const detail::Transit::Leaving l = transit_.body_sent(slot);
    if (!l.type) return;
    l.type->donate(l.obj);  // its big members receive the next bodies (Recycler)
    l.type->destroy(l.obj);
}

void Objects::place(std::unique_ptr<Record> rec, int source) {
    counters_.migrations_in.fetch_add(1, std::memory_order_relaxed);
    const ObjectKey key = rec->key;
    const std::uint64_t version = rec->version;
    Shard& s = shard(key);
    Scratch scratch;
    std::vector<Pending>& out = scratch.out;
    std::vector<int> updates;
    {
        std::lock_guard<Spinlock> g(s.m);
        auto it = s.map.find(key);
        if (it == s.map.end()) {
            it = s.map.emplace(key, Entry{}).first;
        }
        Entry& e = it->second;
        if (e.rec || e.destroyed) {  // it lives here already, or was destroyed: malformed
            drop_requests(*rec);
            if (rec->obj) rec->type->destroy(rec->obj);
            rec->obj = nullptr;
            throw WireError("objects: object " + to_string(key) + " arrived from rank " +
                            std::to_string(source) + " while it " +
                            (e.rec ? "lives here" : "was destroyed"));
        }
        e.rec = std::move(rec);
        e.loc = rank_;
        e.ver = std::max(e.ver, version);
        std::vector<Invocation*> waiting;
        waiting.swap(e.waiting);
        dispatch_locked(*e.rec, out);
        for (Invocation* q : waiting) {
            if (q->h.hops > 0 && q->h.sender != rank_) updates.push_back(q->h.sender);
            deliver_locked(e, q, out);
        }
    }
    start(out);
    std::sort(updates.begin(), updates.end());
    updates.erase(std::unique(updates.begin(), updates.end()), updates.end());
    for (int u : updates)
        send_update(u, key, rank_, version, false);
    // The home knows already when it sent the object here (do_migrate set its location).
    if (key.home != rank_ && source != key.home) send_update(key.home, key, rank_, version, true);
}

void Objects::do_destroy(Record* r, Invocation* inv) {
    detail::InvocationPtr guard(inv);
    Shard& s = shard(r->key);
    std::unique_ptr<Record> rec;
    std::vector<std::int32_t> lived;  // at the home: the ranks it lived on forget it too
    {
        std::lock_guard<Spinlock> g(s.m);
        Entry& e = s.map.at(r->key);
        rec = std::move(e.rec);
        lived.swap(e.lived);
        forget_locked(s, rec->key, rank_);
    }
    rec->type->destroy(rec->obj);
    rec->obj = nullptr;
    // The home and the ranks that sent it requests forget it too (their directories would
    // otherwise keep it forever); a later request from them fails as here.
    if (rec->key.home != rank_) am_.destroyed->send(rec->key.home, rec->key, std::int32_t(rank_));
    for (const auto& [sender, next] : rec->expected)
        if (sender != rank_ && sender != rec->key.home)
            am_.destroyed->send(sender, rec->key, std::int32_t(rank_));
    // Requests issued after the destruction: the first one is the error.
    Invocation* late = !rec->ready.empty()  ? rec->ready.front()
                       : !rec->held.empty() ? rec->held.begin()->second
                                            : nullptr;
    std::string msg;
    if (late) {
        try {
            error_destroyed(*late, rank_);
        } catch (const UsageError& e) {
            msg = e.what();
        }
    }
    for (const std::int32_t l : lived)
        am_.destroyed->send(l, rec->key, std::int32_t(rank_));
    drop_requests(*rec);
    give_record(std::move(rec));
    if (late) throw UsageError(msg);
}

}  // namespace cascade
