// The mobile-object layer: construction, registration, names for errors and traces, and the
// queries the balance layer reads. Routing is in routing.cpp, running requests in execute.cpp,
// migration and destruction in migration.cpp. See docs/objects.md.
#include "internal.hpp"

#include "cascade/objects/detail/balancing.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <unordered_set>

namespace cascade {

using detail::Entry;
using detail::Invocation;
using detail::OpKind;
using detail::Record;

namespace detail {
namespace {
std::atomic<const ImplicitBalancing*> g_implicit_balancing{nullptr};
}  // namespace

void set_implicit_balancing(const ImplicitBalancing* b) noexcept {
    g_implicit_balancing.store(b, std::memory_order_release);
}

thread_local int t_hops = 0;
thread_local Record* t_running = nullptr;

const char* intern(const std::string& s) {
    static std::mutex m;
    static auto* pool = new std::unordered_set<std::string>();  // never freed: see record.hpp
    std::lock_guard<std::mutex> g(m);
    return pool->insert(s).first->c_str();
}
}  // namespace detail

Objects::Objects(Threadpool& tp, Communicator& comm)
    : tp_(tp), comm_(comm), rank_(comm.rank()), size_(comm.ranks()), shards_(new Shard[kShards]) {
    // call() futures are waited on with the futures layer's get(): make sure one exists.
    Futures* cur = Futures::current();
    if (!cur || &cur->pool() != &tp) own_futures_ = std::make_unique<Futures>(tp, &comm);
    am_.invoke = comm.make_active_msg(
        [this](view<char>& v) { on_invoke_frame(v.data(), v.size()); }, "objects.invoke");
    am_.forward = comm.make_active_msg(
        [this](view<char>& v) { on_invoke_frame(v.data(), v.size()); }, "objects.forward");
    am_.lazy_update = comm.make_active_msg(
        [this](ObjectKey& k, std::int32_t& loc, std::uint64_t& ver) { on_update(k, loc, ver); },
        "objects.lazy_update");
    am_.home_update = comm.make_active_msg(
        [this](ObjectKey& k, std::int32_t& loc, std::uint64_t& ver) {
            on_update(k, loc, ver);
            Shard& s = shard(k);
            std::lock_guard<Spinlock> g(s.m);
            auto it = s.map.find(k);
            if (it == s.map.end() || loc == rank_) return;
            auto& lived = it->second.lived;
            if (std::find(lived.begin(), lived.end(), loc) == lived.end()) lived.push_back(loc);
        },
        "objects.home_update");
    am_.reply = comm.make_active_msg(
        [this](std::int32_t& src, std::uint64_t& token, std::uint8_t& failed, view<char>& v) {
            on_reply(detail::tls_frame_source, src, token, failed, v.data(), v.size());
        },
        "objects.reply");
    am_.migrate = comm.make_active_msg(
        [this](view<char>& v) { install(detail::tls_frame_source, v.data(), v.size()); },
        "objects.migrate");
    am_.migrate_large = comm.make_large_active_msg(
        [this](std::int32_t& src, std::uint64_t& bytes, std::uint64_t& token) {
            std::unique_ptr<detail::Bytes> buf = transit_.arrived(src, token);
            if (bytes > buf->size()) throw WireError("objects: a big migration outgrew its buffer");
            install(src, buf->data(), static_cast<std::size_t>(bytes));
            spares_.give_buffer(std::move(buf));
        },
        [this](std::int32_t& src, std::uint64_t& bytes, std::uint64_t& token) -> char* {
            auto buf = spares_.take_buffer(detail::body_elements(bytes, 1));
            char* p = buf->data();
            transit_.expect(src, token, std::move(buf));
            return p;
        },
        [this](std::int32_t&, std::uint64_t&, std::uint64_t& serial) {
            if (std::unique_ptr<detail::Bytes> buf = transit_.sent(serial))
                spares_.give_buffer(std::move(buf));
        },
        "objects.migrate_large");
    am_.destroyed = comm.make_active_msg(
        [this](ObjectKey& k, std::int32_t& where) {
            // From the rank that destroyed it, or passed on by its home.
            const int from = detail::tls_frame_source;
            if ((where != from && from != k.home) || k.home < 0 || k.home >= size_ || where < 0 ||
                where >= size_)
                throw WireError("objects: a destruction of object " + to_string(k) +
                                " received from rank " + std::to_string(from) + " names rank " +
                                std::to_string(where));
            std::vector<std::int32_t> lived;
            {
                Shard& s = shard(k);
                std::lock_guard<Spinlock> g(s.m);
                if (k.home == rank_) {
                    auto it = s.map.find(k);
                    if (it != s.map.end()) lived.swap(it->second.lived);
                }
                forget_locked(s, k, where);
            }
            for (const std::int32_t r : lived)
                if (r != where) am_.destroyed->send(r, k, where);
        },
        "objects.destroyed");
    // Objects with big members: the message, then the members as bodies (detail/bodies.hpp).
    am_.migrate_bodies = comm.make_active_msg(
        [this](view<char>& v) { on_migrate_bodies(detail::tls_frame_source, v.data(), v.size()); },
        "objects.migrate_bodies");
    am_.body = comm.make_large_active_msg(
        [this](std::int32_t& src, std::uint64_t& serial) { on_body_arrived(src, serial); },
        // Bodies are posted by the handler of the message they belong to: one arriving as a
        // message of its own is malformed.
        [](std::int32_t&, std::uint64_t&) -> char* {
            throw WireError("objects.body sent as a message of its own");
        },
        [this](std::int32_t&, std::uint64_t& serial) { on_body_sent(serial); }, "objects.body");
    // The layer's own messages leave as they are made, never held for broadcast detection:
    // a reply (futures, never held) must not overtake the lazy update a handler sent before
    // it, nor a forward the request it follows.
    for (ActiveMsgBase* am : std::initializer_list<ActiveMsgBase*>{
             am_.invoke, am_.forward, am_.lazy_update, am_.home_update, am_.reply, am_.migrate,
             am_.migrate_large, am_.destroyed, am_.migrate_bodies, am_.body})
        am->set_broadcast_detection(false);
    deferred_.installed = comm.add_after_progress(&Objects::run_deferred, this);
    // Balancing with no code: CASCADE_BALANCE names the policy (same on every rank, so its
    // message is registered at the same point everywhere).
    if (const detail::ImplicitBalancing* b =
            detail::g_implicit_balancing.load(std::memory_order_acquire))
        implicit_balancer_.reset(b->make(*this));
}

void Objects::FreeBalancer::operator()(Balancer* b) const noexcept {
    // Only made with a registered ImplicitBalancing (above), which is never unregistered.
    detail::g_implicit_balancing.load(std::memory_order_acquire)->free(b);
}

Objects::~Objects() {
    implicit_balancer_.reset();
    if (deferred_.installed) {
        run_deferred(this);  // none expected: progress() runs them before it returns
        comm_.remove_after_progress(&Objects::run_deferred, this);
    }
    auto free_record = [](detail::Record& r) {
        for (Invocation* inv : r.ready)
            detail::free_invocation(inv);
        for (auto& [sk, inv] : r.held)
            detail::free_invocation(inv);
        if (r.obj) r.type->destroy(r.obj);
    };
    // None after join(): bodies still in flight.
    transit_.clear(free_record, [](detail::Transit::Leaving& l) { l.type->destroy(l.obj); });
    for (int i = 0; i < kShards; ++i) {
        for (auto& [k, e] : shards_[i].map) {
            for (Invocation* inv : e.waiting)
                detail::free_invocation(inv);
            if (e.rec) free_record(*e.rec);
        }
    }
}

Objects::Shard& Objects::shard(const ObjectKey& k) const {
    return shards_[std::hash<ObjectKey>{}(k) % kShards];
}

// ---- registration ---------------------------------------------------------------------------

void Objects::register_type_erased(detail::ObjectType t) {
    registry_.add_type(std::move(t));
}

const detail::ObjectType* Objects::type_of(std::uint32_t hash) const {
    return registry_.type(hash);
}

detail::HandlerBase* Objects::add_handler(std::unique_ptr<detail::HandlerBase> h) {
    return registry_.add_handler(std::move(h));
}

ObjectKey Objects::create_erased(std::uint32_t type, void* obj) {
    const detail::ObjectType* t = type_of(type);
    ObjectKey k{rank_, 0, next_id_.fetch_add(1, std::memory_order_relaxed)};
    auto rec = std::make_unique<Record>();
    rec->key = k;
    rec->type = t;
    rec->obj = obj;
    Shard& s = shard(k);
    std::lock_guard<Spinlock> g(s.m);
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
            auto* h = registry_.find_handler(inv.h.handler);
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
            return registry_.handler(inv.h.handler)->label;
    }
}

bool Objects::exclusive(const Invocation& inv) const {
    if (inv.h.kind != OpKind::handler) return true;
    return registry_.handler(inv.h.handler)->access == Access::exclusive;
}

void Objects::error_destroyed(const Invocation& inv, int destroyed_on) const {
    throw UsageError("objects: " + what_of(inv) + " on object " + to_string(inv.h.key) +
                     ", which was destroyed" +
                     (destroyed_on >= 0 ? " on rank " + std::to_string(destroyed_on) : "") +
                     " (request issued by rank " + std::to_string(inv.h.sender) +
                     ", arrived at rank " + std::to_string(rank_) + ")");
}

int Objects::destroyed_where(const Shard& s, const ObjectKey& k) const {
    for (const auto& [key, where] : s.gone)
        if (key == k) return where;
    // The home made every id below its next one; what it no longer knows was destroyed.
    if (k.home == rank_ && k.id >= 1 && k.id < next_id_.load(std::memory_order_relaxed)) return -1;
    return -2;
}

void Objects::forget_locked(Shard& s, const ObjectKey& k, int destroyed_on) {
    auto it = s.map.find(k);
    if (it != s.map.end()) {
        Entry& e = it->second;
        if (e.rec || !e.waiting.empty()) {  // requests wait for it here: they fail on arrival
            e.destroyed = true;
            e.destroyed_on = destroyed_on;
            return;
        }
        s.map.erase(it);
    }
    s.gone[s.next_gone] = {k, destroyed_on};
    s.next_gone = (s.next_gone + 1) % Shard::kGone;
}

// ---- queries --------------------------------------------------------------------------------

bool Objects::is_local(const ObjectKey& k) const {
    Shard& s = shard(k);
    std::lock_guard<Spinlock> g(s.m);
    auto it = s.map.find(k);
    return it != s.map.end() && it->second.rec != nullptr;
}

void* Objects::local_object(const ObjectKey& k) const {
    Shard& s = shard(k);
    std::lock_guard<Spinlock> g(s.m);
    auto it = s.map.find(k);
    return it != s.map.end() && it->second.rec ? it->second.rec->obj : nullptr;
}

std::vector<ObjectLoad> Objects::local_objects() const {
    std::vector<ObjectLoad> v;
    const double now = detail::now_s();
    for (int i = 0; i < kShards; ++i) {
        Shard& s = shards_[i];
        std::lock_guard<Spinlock> g(s.m);
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
            // The request running or handed to a worker holds the object's access: it is
            // work left too (a chain has no other).
            l.pending = r.ready.size() + r.held.size() + std::size_t(r.running_shared) +
                        (r.running_exclusive ? 1 : 0);
            // Busy-time rate and demand over the window; both fade once the object has had
            // no request for a few of its cycles (handler plus usual idle time).
            if (r.rate_busy > 0) {
                const double decay = std::exp(-std::max(now - r.rate_at, 0.0) / kRateWindowS);
                const double busy = r.rate_busy * decay;
                const double demand = r.rate_busy / (r.rate_busy + r.rate_idle);
                double fade = 1;
                if (r.idle_since > 0) {
                    const double cycle = std::max(r.recent_s, 1e-4) / std::max(demand, 0.05);
                    fade = std::exp(-std::max(now - r.idle_since, 0.0) / (4 * cycle));
                }
                l.busy_rate = busy / kRateWindowS * fade;
                l.demand = demand * fade;
            }
            l.chained = r.chained;
            l.issuing = r.issuing;
            l.pinned = r.pinned;
            l.leaving = r.rebalancing || r.leaving;
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
    return detail::t_hops;
}

ObjectsStats Objects::stats() const {
    ObjectsStats s;
    s.handlers_run = counters_.handlers_run.load();
    s.on_comm_thread = counters_.on_comm_thread.load();
    s.forwards = counters_.forwards.load();
    s.lazy_updates = counters_.lazy_updates.load();
    s.home_updates = counters_.home_updates.load();
    s.migrations_out = counters_.migrations_out.load();
    s.moved_by_handler = counters_.moved_by_handler.load();
    s.migrations_in = counters_.migrations_in.load();
    s.parked = counters_.parked.load();
    s.max_hops = counters_.max_hops.load();
    s.max_hops_before_home = counters_.max_hops_before_home.load();
    for (int i = 0; i < 8; ++i)
        s.by_hops[i] = counters_.by_hops[i].load();
    for (int i = 0; i < kShards; ++i) {
        std::lock_guard<Spinlock> g(shards_[i].m);
        s.directory += shards_[i].map.size();
    }
    return s;
}

}  // namespace cascade
