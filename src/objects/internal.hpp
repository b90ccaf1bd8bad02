// Internals shared by the files of the objects layer: the wire form of a migration, the
// directory's shards and the pool task that runs one request.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cascade/objects/objects.hpp"
#include "cascade/trace/buffer.hpp"
#include "cascade/trace/recorder.hpp"

namespace cascade::detail {

// Header of a packed object (objects.migrate), followed by the per-sender ordering state, the
// requests queued on it (ready, then held) and the object itself.
struct MigrateHead {
    ObjectKey key;
    std::uint32_t type;
    std::uint32_t n_expected;
    std::uint64_t version;
    double busy_s;
    double recent_s;
    double rate_busy;  // Record::rate_busy and rate_idle, decayed to its departure
    double rate_idle;
    double chained;  // Record::chained and issuing
    double issuing;
    std::uint64_t handled;
    std::uint32_t n_ready;
    std::uint32_t n_held;
    std::uint32_t pinned;
    std::int32_t source;  // the rank it leaves
};
struct ExpectedWire {
    std::int32_t sender;
    std::uint32_t pad;
    std::uint64_t next;
};
// After the MigrateHead of an object whose big members travel as bodies (objects.migrate_bodies):
// who sent it, the number of its bodies and the chunk they travel in. The bodies need no name
// on the wire: they follow the message from the same rank in order, and each side keeps the
// object in a slot of its own (detail::Transit).
struct BodiesHead {
    std::int32_t source;
    std::uint32_t n_bodies;
    std::uint64_t chunk;
};
// Objects up to this size travel in one small active message (one copy into the message);
// bigger ones as the body of a large active message, straight from the packed buffer.
inline constexpr std::size_t kSmallMigration = 64 * 1024;

// Whether a request's head read from the wire names ranks of the job (sender, home, hint,
// destination) and a kind that exists.
inline bool head_ok(const InvokeHead& h, int size) {
    const auto rank_ok = [size](std::int64_t r) { return r >= 0 && r < size; };
    const bool to_rank = h.kind == OpKind::migrate || h.kind == OpKind::rebalance;
    return rank_ok(h.sender) && rank_ok(h.key.home) && h.key.pad == 0 &&
           (h.hint_loc == -1 || rank_ok(h.hint_loc)) && h.kind <= OpKind::rebalance &&
           (!to_rank || rank_ok(h.arg));
}

extern thread_local int t_hops;  // forwards of the request running on this thread
// The object whose exclusive handler runs on this thread (the innermost one), or null.
extern thread_local Record* t_running;
// Requests this thread issued so far (a handler that issued some generates work).
extern thread_local std::uint32_t t_issued;

inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace cascade::detail

namespace cascade {

struct Objects::Shard {
    alignas(64) Spinlock m;
    std::unordered_map<ObjectKey, detail::Entry> map;
    // The last objects of this shard destroyed or heard of as destroyed, with the rank they
    // were destroyed on, for the error a late request gets (the entries themselves go).
    static constexpr std::size_t kGone = 16;
    std::array<std::pair<ObjectKey, int>, kGone> gone{};
    std::size_t next_gone = 0;
};

// The list of requests one routing step lets start, reused by the calling thread (one per
// nesting level: a handler run inline routes requests of its own), so that routing a request
// allocates no list once the thread is warm.
class Objects::Scratch {
  public:
    Scratch() : out(take()) {}
    ~Scratch() {
        out.clear();
        --depth();
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    std::vector<Pending>& out;

  private:
    static std::size_t& depth() {
        thread_local std::size_t d = 0;
        return d;
    }
    static std::vector<Pending>& take() {
        thread_local std::deque<std::vector<Pending>> lists;  // grows without moving its lists
        std::size_t& d = depth();
        if (d == lists.size()) lists.emplace_back();
        return lists[d++];
    }
};

// Payload of a pool task running one request. Its name is read after it ran (traces), so
// it holds only the interned label and the key.
struct Objects::ObjTask {
    Objects* self;
    detail::Record* rec;
    detail::Invocation* inv;
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
    static void discard(cascade::Task& t) {
        auto& p = t.as<ObjTask>();
        p.self->discard(p.rec, p.inv);
    }
    static constexpr TaskVTable vtable{&run, &describe, &discard};
    // The task running `inv` on r (inv null: only named, for a trace).
    static cascade::Task make(Objects* o, detail::Record* r, detail::Invocation* inv,
                              const char* label) {
        cascade::Task t;
        t.vt = &vtable;
        t.emplace<ObjTask>(ObjTask{o, r, inv, label, r->key.id, r->key.home});
        return t;
    }
};

// A request run on the communication thread, for its lifetime: in a trace, a task of that
// thread, named as on a worker.
struct Objects::HereTask {
    trace::Buffer* tb = nullptr;
    std::uint64_t outer = 0;
    HereTask(Objects* o, detail::Record* r, detail::Invocation* inv, const char* label) {
        if (!trace::recording()) [[likely]]
            return;
        tb = trace::this_thread();
        if (!tb) return;
        outer = tb->begin_task(ObjTask::make(o, r, nullptr, label ? label : o->label_of(*r, *inv)));
    }
    ~HereTask() {
        if (tb) [[unlikely]]
            tb->end_task(outer);
    }
    HereTask(const HereTask&) = delete;
    HereTask& operator=(const HereTask&) = delete;
};

}  // namespace cascade
