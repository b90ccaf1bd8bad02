// The mobile-object layer: directory, routing (forwarding, lazy updates, the two-hop rule),
// per-sender ordering, access control, migration and destruction. See docs/objects.md.
#include "cascade/objects/objects.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_set>

namespace cascade {

namespace detail {
const char* intern(const std::string& s) {
    static std::mutex m;
    static auto* pool = new std::unordered_set<std::string>();  // never freed: see record.hpp
    std::lock_guard<std::mutex> g(m);
    return pool->insert(s).first->c_str();
}
}  // namespace detail

using detail::Entry;
using detail::Invocation;
using detail::InvokeHead;
using detail::OpKind;
using detail::Record;

namespace {
// Header of a packed object (objects.migrate), followed by the per-sender ordering state, the
// requests queued on it (ready, then held) and the object itself.
struct MigrateHead {
    ObjectKey key;
    std::uint32_t type;
    std::uint32_t n_expected;
    std::uint64_t version;
    double busy_s;
    double recent_s;
    std::uint64_t handled;
    std::uint32_t n_ready;
    std::uint32_t n_held;
    std::uint32_t pinned;
    std::uint32_t pad;
};
struct ExpectedWire {
    std::int32_t sender;
    std::uint32_t pad;
    std::uint64_t next;
};
// Objects up to this size travel in one small active message (one copy into the message);
// bigger ones as the body of a large active message, straight from the packed buffer.
constexpr std::size_t kSmallMigration = 64 * 1024;

thread_local int t_hops = 0;  // forwards of the request running on this thread

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}
}  // namespace

struct Objects::Shard {
    alignas(64) std::mutex m;
    std::unordered_map<ObjectKey, Entry> map;
};

// Payload of a pool task running one request. Its name is read after it ran (traces), so
// it holds only the interned label and the key.
struct Objects::ObjTask {
    Objects* self;
    Record* rec;
    Invocation* inv;
    const char* label;
    std::uint64_t id;
    std::int32_t home;
    static void run(cascade::Task& t) {
        auto& p = t.as<ObjTask>();
        p.self->execute(p.rec, p.inv);
    }
    static std::string describe(const cascade::Task& t) {
        const auto& p = t.as<ObjTask>();
        return std::string(p.label) + " " + std::to_string(p.home) + ":" + std::to_string(p.id) +
               ")";
    }
    static void discard(cascade::Task& t) { delete t.as<ObjTask>().inv; }
    static constexpr TaskVTable vtable{&run, &describe, &discard};
};

Objects::Objects(Threadpool& tp, Communicator& comm)
    : tp_(tp),
      comm_(comm),
      rank_(comm.comm_rank()),
      size_(comm.comm_size()),
      handlers_(new std::atomic<detail::HandlerBase*>[kMaxHandlers]),
      shards_(new Shard[kShards]) {
    // call() futures are waited on with the futures layer's get(): make sure one exists.
    Futures* cur = Futures::current();
    if (!cur || &cur->pool() != &tp) own_futures_ = std::make_unique<Futures>(tp, &comm);
    for (std::uint32_t i = 0; i < kMaxHandlers; ++i)
        handlers_[i].store(nullptr, std::memory_order_relaxed);
    invoke_am_ = comm.make_active_msg(
        [this](view<char>& v) { on_invoke_frame(v.data(), v.size()); }, "objects.invoke");
    forward_am_ = comm.make_active_msg(
        [this](view<char>& v) { on_invoke_frame(v.data(), v.size()); }, "objects.forward");
    lazy_update_am_ = comm.make_active_msg(
        [this](ObjectKey& k, std::int32_t& loc, std::uint64_t& ver) { on_update(k, loc, ver); },
        "objects.lazy_update");
    home_update_am_ = comm.make_active_msg(
        [this](ObjectKey& k, std::int32_t& loc, std::uint64_t& ver) { on_update(k, loc, ver); },
        "objects.home_update");
    reply_am_ = comm.make_active_msg(
        [this](std::int32_t& src, std::uint64_t& token, std::uint8_t& failed, view<char>& v) {
            on_reply(src, token, failed, v.data(), v.size());
        },
        "objects.reply");
    migrate_am_ = comm.make_active_msg([this](view<char>& v) { install(v.data(), v.size(), -1); },
                                       "objects.migrate");
    migrate_large_am_ = comm.make_large_active_msg(
        [this](std::int32_t& src, std::uint64_t& bytes, std::uint64_t& token) {
            std::unique_ptr<detail::Bytes> buf;
            {
                std::lock_guard<std::mutex> g(large_mutex_);
                auto it = arriving_.find({src, token});
                buf = std::move(it->second);
                arriving_.erase(it);
            }
            install(buf->data(), static_cast<std::size_t>(bytes), src);
            give_buffer(std::move(buf));
        },
        [this](std::int32_t& src, std::uint64_t& bytes, std::uint64_t& token) -> char* {
            auto buf = take_buffer(static_cast<std::size_t>(bytes));
            char* p = buf->data();
            std::lock_guard<std::mutex> g(large_mutex_);
            arriving_[{src, token}] = std::move(buf);
            return p;
        },
        [this](std::int32_t&, std::uint64_t&, std::uint64_t& serial) {
            std::unique_ptr<detail::Bytes> buf;
            {
                std::lock_guard<std::mutex> g(large_mutex_);
                auto it = sending_.find(serial);
                buf = std::move(it->second);
                sending_.erase(it);
            }
            give_buffer(std::move(buf));
        },
        "objects.migrate_large");
    destroyed_am_ = comm.make_active_msg(
        [this](ObjectKey& k, std::int32_t& where) {
            Shard& s = shard(k);
            std::lock_guard<std::mutex> g(s.m);
            Entry& e = s.map[k];
            e.destroyed = true;
            e.destroyed_on = where;
        },
        "objects.destroyed");
}

Objects::~Objects() {
    for (int i = 0; i < kShards; ++i) {
        for (auto& [k, e] : shards_[i].map) {
            for (Invocation* inv : e.waiting)
                delete inv;
            if (!e.rec) continue;
            for (Invocation* inv : e.rec->ready)
                delete inv;
            for (auto& [sk, inv] : e.rec->held)
                delete inv;
            if (e.rec->obj) e.rec->type->destroy(e.rec->obj);
        }
    }
}

Objects::Shard& Objects::shard(const ObjectKey& k) const {
    return shards_[std::hash<ObjectKey>{}(k) % kShards];
}

// ---- registration ---------------------------------------------------------------------------

void Objects::register_type_erased(detail::ObjectType t) {
    std::lock_guard<std::mutex> g(registry_mutex_);
    if (!types_.count(t.hash)) types_[t.hash] = std::make_unique<detail::ObjectType>(std::move(t));
}

const detail::ObjectType* Objects::type_of(std::uint32_t hash) const {
    std::lock_guard<std::mutex> g(registry_mutex_);
    auto it = types_.find(hash);
    return it == types_.end() ? nullptr : it->second.get();
}

detail::HandlerBase* Objects::add_handler(std::unique_ptr<detail::HandlerBase> h) {
    std::lock_guard<std::mutex> g(registry_mutex_);
    const std::uint32_t id = n_handlers_.load(std::memory_order_relaxed);
    if (id >= kMaxHandlers)
        throw UsageError("objects: more than " + std::to_string(kMaxHandlers) + " handlers");
    h->id = id;
    if (h->name.empty()) h->name = "handler#" + std::to_string(id);
    const auto* t = types_.at(h->type_hash).get();
    h->label = detail::intern(h->name + "(" + t->name);
    auto* raw = h.get();
    owned_handlers_.push_back(std::move(h));
    handlers_[id].store(raw, std::memory_order_release);
    n_handlers_.store(id + 1, std::memory_order_release);
    return raw;
}

ObjectKey Objects::create_erased(std::uint32_t type, void* obj) {
    const detail::ObjectType* t = type_of(type);
    ObjectKey k{rank_, 0, next_id_.fetch_add(1, std::memory_order_relaxed)};
    auto rec = std::make_unique<Record>();
    rec->key = k;
    rec->type = t;
    rec->obj = obj;
    Shard& s = shard(k);
    std::lock_guard<std::mutex> g(s.m);
    Entry& e = s.map[k];
    e.loc = rank_;
    e.ver = 0;
    e.rec = std::move(rec);
    return k;
}

// ---- names for errors and traces ------------------------------------------------------------

std::string Objects::describe(const detail::HandlerBase& h, const ObjectKey& k) const {
    const detail::ObjectType* t = type_of(h.type_hash);
    return "'" + h.name + "' (object " + (t ? t->name : "?") + " " + to_string(k) + ")";
}

std::string Objects::what_of(const Invocation& inv) const {
    switch (inv.h.kind) {
        case OpKind::migrate:
            return "migrate to rank " + std::to_string(inv.h.arg);
        case OpKind::destroy:
            return "destroy";
        case OpKind::pin:
            return "pin";
        case OpKind::rebalance:
            return "rebalance to rank " + std::to_string(inv.h.arg);
        default: {
            auto* h = inv.h.handler < n_handlers_.load(std::memory_order_acquire)
                          ? handlers_[inv.h.handler].load(std::memory_order_acquire)
                          : nullptr;
            return h ? "handler '" + h->name + "'" : "handler #" + std::to_string(inv.h.handler);
        }
    }
}

const char* Objects::label_of(const Record& r, const Invocation& inv) const {
    switch (inv.h.kind) {
        case OpKind::migrate:
            return r.type->migrate_label;
        case OpKind::destroy:
            return r.type->destroy_label;
        case OpKind::pin:
            return r.type->pin_label;
        case OpKind::rebalance:
            return r.type->migrate_label;
        default:
            return handlers_[inv.h.handler].load(std::memory_order_acquire)->label;
    }
}

bool Objects::exclusive(const Invocation& inv) const {
    if (inv.h.kind != OpKind::handler) return true;
    return handlers_[inv.h.handler].load(std::memory_order_acquire)->access == Access::exclusive;
}

void Objects::error_destroyed(const Invocation& inv, int destroyed_on) const {
    throw UsageError("objects: " + what_of(inv) + " on object " + to_string(inv.h.key) +
                     ", which was destroyed" +
                     (destroyed_on >= 0 ? " on rank " + std::to_string(destroyed_on) : "") +
                     " (request issued by rank " + std::to_string(inv.h.sender) +
                     ", arrived at rank " + std::to_string(rank_) + ")");
}

// ---- sending --------------------------------------------------------------------------------

void Objects::send_invocation(int dest, const InvokeHead& h, const char* args, std::size_t n,
                              bool forwarded) {
    comm_.enqueue(dest, forwarded ? *forward_am_ : *invoke_am_,
                  sizeof(std::uint64_t) + sizeof h + n, [&](char* out) {
                      const std::uint64_t len = sizeof h + n;
                      std::memcpy(out, &len, sizeof len);
                      std::memcpy(out + sizeof len, &h, sizeof h);
                      if (n) std::memcpy(out + sizeof len + sizeof h, args, n);
                      return out + sizeof len + len;
                  });
}

void Objects::send_update(int dest, const ObjectKey& k, int loc, std::uint64_t ver, bool to_home) {
    if (to_home) {
        home_update_am_->send(dest, k, loc, ver);
    } else {
        counters_.lazy_updates.fetch_add(1, std::memory_order_relaxed);
        lazy_update_am_->send(dest, k, loc, ver);
    }
}

void Objects::send_reply(int dest, std::uint64_t token, bool failed, const char* data,
                         std::size_t n) {
    reply_am_->send(dest, rank_, token, std::uint8_t(failed ? 1 : 0),
                    view<char>(const_cast<char*>(data), n));
}

void Objects::submit(InvokeHead h, const detail::ArgWriter& w) {
    h.sender = rank_;
    Shard& s = shard(h.key);
    std::vector<Pending> out;
    int dest = -1;
    {
        std::lock_guard<std::mutex> g(s.m);
        auto it = s.map.find(h.key);
        if (it == s.map.end()) {
            if (h.key.home == rank_ || h.key.home < 0 || h.key.home >= size_)
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
            auto* inv = new Invocation{h, {}};
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
        comm_.enqueue(dest, *invoke_am_, sizeof(std::uint64_t) + sizeof h + w.bytes,
                      [&](char* out_) {
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

void Objects::on_invoke_frame(const char* data, std::size_t size) {
    if (size < sizeof(InvokeHead)) throw WireError("objects: short request");
    auto* inv = new Invocation;
    std::memcpy(&inv->h, data, sizeof(InvokeHead));
    std::unique_ptr<Invocation> guard(inv);
    if (inv->h.kind == OpKind::handler) {
        const std::uint32_t n = n_handlers_.load(std::memory_order_acquire);
        if (inv->h.handler >= n)
            throw UsageError("objects: rank " + std::to_string(inv->h.sender) +
                             " invoked handler #" + std::to_string(inv->h.handler) + " on object " +
                             to_string(inv->h.key) + ", but rank " + std::to_string(rank_) +
                             " registered only " + std::to_string(n) +
                             " handlers (make_handler must be called in the same order on "
                             "every rank)");
        auto* h = handlers_[inv->h.handler].load(std::memory_order_acquire);
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
    std::vector<Pending> out;
    int fwd = -1, update_to = -1;
    std::uint64_t update_ver = 0;
    std::unique_ptr<Invocation> guard(inv);
    {
        std::lock_guard<std::mutex> g(s.m);
        auto it = s.map.find(inv->h.key);
        if (it == s.map.end()) {
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
            delete inv;
            throw UsageError("objects: " + what + " on object " + to_string(r.key) + " from rank " +
                             std::to_string(sender) + " arrived twice (seq " + std::to_string(seq) +
                             ")");
        }
        r.held.emplace(std::make_pair(int(inv->h.sender), inv->h.seq), inv);
        return;
    }
    const int sender = inv->h.sender;
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
    while (!r.migrating && !r.ready.empty()) {
        Invocation* inv = r.ready.front();
        if (exclusive(*inv)) {
            if (r.running_exclusive || r.running_shared > 0) break;
            r.running_exclusive = true;
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

void Objects::start(std::vector<Pending>& out) {
    // On the communication thread (inside a message handler), migrations and the other
    // bookkeeping requests run at once, and so do handlers that asked for it
    // (HandlerOptions::run_in_handler): no hand-off to a worker.
    const bool comm_thread = comm_.on_comm_thread() && tp_.current_thread() < 0;
    for (const Pending& p : out) {
        if (comm_thread &&
            (p.inv->h.kind != OpKind::handler ||
             handlers_[p.inv->h.handler].load(std::memory_order_acquire)->run_in_handler)) {
            execute(p.rec, p.inv);
            continue;
        }
        cascade::Task t;
        t.vt = &ObjTask::vtable;
        t.emplace<ObjTask>(
            ObjTask{this, p.rec, p.inv, label_of(*p.rec, *p.inv), p.rec->key.id, p.rec->key.home});
        // A balancing migration runs before the handlers queued on this worker: the work it
        // carries away is what it is for.
        if (p.inv->h.kind == OpKind::rebalance) t.priority = 1.0;
        tp_.push(t, tp_.pick_thread(), false);
    }
    out.clear();
}

void Objects::on_update(const ObjectKey& k, int loc, std::uint64_t ver) {
    Shard& s = shard(k);
    std::lock_guard<std::mutex> g(s.m);
    auto it = s.map.find(k);
    if (it == s.map.end()) {
        it = s.map.emplace(k, Entry{}).first;
        it->second.loc = k.home;
    }
    Entry& e = it->second;
    if (!e.rec && !e.destroyed && ver > e.ver) {
        e.loc = loc;
        e.ver = ver;
    }
}

void Objects::on_reply(int source, std::uint64_t token, std::uint8_t failed, const char* data,
                       std::size_t size) {
    auto* s = reinterpret_cast<detail::StateBase*>(static_cast<std::uintptr_t>(token));
    if (failed) {
        s->set_error(std::make_exception_ptr(RemoteError(source, std::string(data, size))));
    } else {
        wire::Reader r(data, size);
        s->set_from_wire(r);
    }
    s->release();
}

// ---- running requests -----------------------------------------------------------------------

void Objects::execute(Record* r, Invocation* inv) {
    std::unique_ptr<Invocation> guard(inv);
    switch (inv->h.kind) {
        case OpKind::rebalance: {
            bool pinned;
            {
                std::lock_guard<std::mutex> g(shard(r->key).m);
                pinned = r->pinned;
            }
            if (pinned) {
                {
                    std::lock_guard<std::mutex> g(shard(r->key).m);
                    r->rebalancing = false;
                }
                return finish(r, true, 0);
            }
            guard.release();
            return do_migrate(r, inv);
        }
        case OpKind::pin: {
            {
                std::lock_guard<std::mutex> g(shard(r->key).m);
                r->pinned = true;
            }
            return finish(r, true, 0);
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
    detail::HandlerBase* h = handlers_[inv->h.handler].load(std::memory_order_acquire);
    const bool excl = h->access == Access::exclusive;
    const double t0 = now_s();
    t_hops = inv->h.hops;
    try {
        h->run(*this, r->obj, r->key, *inv);
    } catch (...) {
        finish(r, excl, now_s() - t0);
        throw;
    }
    counters_.handlers_run.fetch_add(1, std::memory_order_relaxed);
    const double dt = now_s() - t0;
    const ObjectKey key = r->key;  // r may move once finished
    finish(r, excl, dt);
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
    std::vector<Pending> out;
    {
        std::lock_guard<std::mutex> g(s.m);
        auto it = s.map.find(k);
        if (it == s.map.end() || !it->second.rec) return false;
        Record& r = *it->second.rec;
        if (r.pinned || r.rebalancing || r.migrating) return false;
        // A pin already issued wins over the balancing that would jump ahead of it.
        for (const Invocation* q : r.ready)
            if (q->h.kind == OpKind::pin) return false;
        for (const auto& [sk, q] : r.held)
            if (q->h.kind == OpKind::pin) return false;
        auto* inv = new Invocation;
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

void Objects::finish(Record* r, bool excl, double seconds) {
    Shard& s = shard(r->key);
    std::vector<Pending> out;
    {
        std::lock_guard<std::mutex> g(s.m);
        if (excl)
            r->running_exclusive = false;
        else
            --r->running_shared;
        r->busy_s += seconds;
        // Recent handler time: what the next handlers will likely cost (a balancing policy's
        // estimate of the work queued on the object).
        if (seconds > 0) r->recent_s = r->recent_s > 0 ? 0.5 * (r->recent_s + seconds) : seconds;
        ++r->handled;
        dispatch_locked(*r, out);
    }
    start(out);
}

void Objects::do_migrate(Record* r, Invocation* inv) {
    std::unique_ptr<Invocation> guard(inv);
    const int dest = inv->h.arg;
    if (dest == rank_) {  // already here
        finish(r, true, 0);
        return;
    }
    // This request runs alone on the object: nothing else reads or writes it meanwhile.
    const std::size_t obj_bytes = r->type->size(r->obj);
    Shard& s = shard(r->key);
    std::unique_ptr<Record> rec;
    {
        std::lock_guard<std::mutex> g(s.m);
        Entry& e = s.map.at(r->key);
        rec = std::move(e.rec);
        e.loc = dest;
        e.ver = rec->version + 1;
    }
    // From here on, requests arriving for it are forwarded to dest.
    std::size_t bytes =
        sizeof(MigrateHead) + rec->expected.size() * sizeof(ExpectedWire) + obj_bytes + 8;
    for (Invocation* q : rec->ready)
        bytes += sizeof(InvokeHead) + wire::size_of(q->args);
    for (auto& [k, q] : rec->held)
        bytes += sizeof(InvokeHead) + wire::size_of(q->args);
    auto buf = take_buffer(bytes);
    wire::Writer w(buf->data());
    MigrateHead mh{rec->key,
                   rec->type->hash,
                   static_cast<std::uint32_t>(rec->expected.size()),
                   rec->version + 1,
                   rec->busy_s,
                   rec->recent_s,
                   rec->handled,
                   static_cast<std::uint32_t>(rec->ready.size()),
                   static_cast<std::uint32_t>(rec->held.size()),
                   rec->pinned ? 1u : 0u,
                   0u};
    w.put(mh);
    for (auto& [sender, next] : rec->expected)
        w.put(ExpectedWire{sender, 0, next});
    for (Invocation* q : rec->ready) {
        w.put(q->h);
        w.put(q->args);
        delete q;
    }
    for (auto& [k, q] : rec->held) {
        w.put(q->h);
        w.put(q->args);
        delete q;
    }
    char* end = rec->type->pack(rec->obj, w.position());
    rec->type->destroy(rec->obj);
    const std::size_t n = static_cast<std::size_t>(end - buf->data());
    counters_.migrations_out.fetch_add(1, std::memory_order_relaxed);
    if (n <= kSmallMigration) {
        migrate_am_->send(dest, view<char>(buf->data(), n));
        give_buffer(std::move(buf));
    } else {
        char* data = buf->data();
        std::uint64_t serial;
        {
            std::lock_guard<std::mutex> g(large_mutex_);
            serial = next_serial_++;
            sending_[serial] = std::move(buf);
        }
        migrate_large_am_->send_large(dest, view<char>(data, n), std::int32_t(rank_),
                                      std::uint64_t(n), serial);
    }
}

std::unique_ptr<detail::Bytes> Objects::take_buffer(std::size_t bytes) {
    {
        std::lock_guard<std::mutex> g(spare_mutex_);
        for (auto& b : spare_) {
            if (b->capacity() >= bytes) {
                auto out = std::move(b);
                b = std::move(spare_.back());
                spare_.pop_back();
                out->resize(bytes);  // no zero-fill (detail::Bytes)
                return out;
            }
        }
    }
    auto out = std::make_unique<detail::Bytes>();
    out->resize(bytes);
    return out;
}

void Objects::give_buffer(std::unique_ptr<detail::Bytes> b) noexcept {
    constexpr std::size_t kMaxSpare = 8, kMaxSpareBytes = std::size_t(256) << 20;
    std::lock_guard<std::mutex> g(spare_mutex_);
    std::size_t total = b->capacity();
    for (auto& x : spare_)
        total += x->capacity();
    if (spare_.size() < kMaxSpare && total <= kMaxSpareBytes) spare_.push_back(std::move(b));
}

void Objects::install(const char* data, std::size_t size, int) {
    wire::Reader rd(data, size);
    const auto mh = rd.get<MigrateHead>();
    const detail::ObjectType* t = type_of(mh.type);
    if (!t)
        throw UsageError("objects: rank " + std::to_string(rank_) + " received object " +
                         to_string(mh.key) +
                         " of a type it never registered (register_type<T>, make_handler<T> or "
                         "create<T> on every rank)");
    auto rec = std::make_unique<Record>();
    rec->key = mh.key;
    rec->type = t;
    rec->version = mh.version;
    rec->busy_s = mh.busy_s;
    rec->recent_s = mh.recent_s;
    rec->handled = mh.handled;
    rec->pinned = mh.pinned != 0;
    for (std::uint32_t i = 0; i < mh.n_expected; ++i) {
        const auto ew = rd.get<ExpectedWire>();
        rec->expected.emplace_back(ew.sender, ew.next);
    }
    for (std::uint32_t i = 0; i < mh.n_ready + mh.n_held; ++i) {
        auto* q = new Invocation;
        q->h = rd.get<InvokeHead>();
        q->args = rd.get<std::vector<char>>();
        if (i < mh.n_ready)
            rec->ready.push_back(q);
        else
            rec->held.emplace(std::make_pair(int(q->h.sender), q->h.seq), q);
    }
    rec->obj = t->unpack(rd);
    counters_.migrations_in.fetch_add(1, std::memory_order_relaxed);
    Shard& s = shard(mh.key);
    std::vector<Pending> out;
    std::vector<int> updates;
    {
        std::lock_guard<std::mutex> g(s.m);
        auto it = s.map.find(mh.key);
        if (it == s.map.end()) {
            it = s.map.emplace(mh.key, Entry{}).first;
        }
        Entry& e = it->second;
        e.rec = std::move(rec);
        e.loc = rank_;
        e.ver = std::max(e.ver, mh.version);
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
        send_update(u, mh.key, rank_, mh.version, false);
    if (mh.key.home != rank_) send_update(mh.key.home, mh.key, rank_, mh.version, true);
}

void Objects::do_destroy(Record* r, Invocation* inv) {
    std::unique_ptr<Invocation> guard(inv);
    Shard& s = shard(r->key);
    std::unique_ptr<Record> rec;
    {
        std::lock_guard<std::mutex> g(s.m);
        Entry& e = s.map.at(r->key);
        rec = std::move(e.rec);
        e.destroyed = true;
        e.destroyed_on = rank_;
    }
    rec->type->destroy(rec->obj);
    rec->obj = nullptr;
    if (rec->key.home != rank_) destroyed_am_->send(rec->key.home, rec->key, std::int32_t(rank_));
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
    for (Invocation* q : rec->ready)
        delete q;
    for (auto& [k, q] : rec->held)
        delete q;
    if (late) throw UsageError(msg);
}

// ---- queries --------------------------------------------------------------------------------

bool Objects::is_local(const ObjectKey& k) const {
    Shard& s = shard(k);
    std::lock_guard<std::mutex> g(s.m);
    auto it = s.map.find(k);
    return it != s.map.end() && it->second.rec != nullptr;
}

void* Objects::local_object(const ObjectKey& k) const {
    Shard& s = shard(k);
    std::lock_guard<std::mutex> g(s.m);
    auto it = s.map.find(k);
    return it != s.map.end() && it->second.rec ? it->second.rec->obj : nullptr;
}

std::vector<ObjectLoad> Objects::local_objects() const {
    std::vector<ObjectLoad> v;
    for (int i = 0; i < kShards; ++i) {
        Shard& s = shards_[i];
        std::lock_guard<std::mutex> g(s.m);
        for (auto& [k, e] : s.map) {
            if (!e.rec) continue;
            const Record& r = *e.rec;
            ObjectLoad l;
            l.key = k;
            l.type = r.type->name;
            l.busy_s = r.busy_s;
            l.recent_s = r.recent_s;
            l.user_load = static_cast<bool>(r.type->load);
            l.load = l.user_load ? r.type->load(r.obj) : r.busy_s;
            l.pending = r.ready.size() + r.held.size();
            l.pinned = r.pinned;
            l.leaving = r.rebalancing;
            l.handled = r.handled;
            v.push_back(l);
        }
    }
    return v;
}

double Objects::rank_load() const {
    double sum = 0;
    for (const auto& l : local_objects())
        sum += l.load;
    return sum;
}

int Objects::current_hops() noexcept {
    return t_hops;
}

ObjectsStats Objects::stats() const {
    ObjectsStats s;
    s.handlers_run = counters_.handlers_run.load();
    s.forwards = counters_.forwards.load();
    s.lazy_updates = counters_.lazy_updates.load();
    s.migrations_out = counters_.migrations_out.load();
    s.migrations_in = counters_.migrations_in.load();
    s.parked = counters_.parked.load();
    s.max_hops = counters_.max_hops.load();
    s.max_hops_before_home = counters_.max_hops_before_home.load();
    for (int i = 0; i < 8; ++i)
        s.by_hops[i] = counters_.by_hops[i].load();
    return s;
}

}  // namespace cascade
