// What one rank keeps about mobile objects: the type-erased operations of each object type,
// the record of an object that lives here (its access state, its queue of requests, the
// per-sender ordering state and its load), and the directory entry every rank keeps for
// the objects it knows (last known location and version, its own sequence counter).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "cascade/comm/detail/leaving.hpp"
#include "cascade/comm/serialization.hpp"
#include "cascade/objects/detail/bodies.hpp"
#include "cascade/objects/detail/invocation.hpp"
#include "cascade/objects/mobile_ptr.hpp"

namespace cascade::detail {

// Per object type: how to pack, unpack and free it (through its codec), whole or with its big
// members as bodies.
struct ObjectType {
    std::uint32_t hash = 0;
    const char* name = "";  // interned: valid for the whole process
    void (*destroy)(void*) = nullptr;
    std::size_t (*size)(const void*) = nullptr;
    char* (*pack)(const void*, char*) = nullptr;
    void* (*unpack)(wire::Reader&) = nullptr;
    // The same with big members as bodies of their own (bodies.hpp): the message's share
    // (upper bound) and the number of bodies; writing it, listing the bodies; a new object
    // read from it, listing where the bodies go; giving the body members to the Recycler.
    std::size_t (*measure_bodies)(const void*, std::size_t* bodies) = nullptr;
    char* (*pack_bodies)(const void*, char*, std::vector<BodyRef>&) = nullptr;
    void* (*unpack_bodies)(BodyReader&) = nullptr;
    void (*donate)(void*) = nullptr;
    // Before a migrating object is measured: readies its members (leaving.hpp).
    void (*leave)(const void*, std::vector<std::function<void()>>& after) = nullptr;
    // Whether readying its members may wait (then its migrations run on a worker).
    bool (*leave_waits)(const void*) = nullptr;
    std::function<double(const void*)> load;  // user load function (Objects::set_load)
    const char* migrate_label = "";           // task names: "migrate(<type>", "destroy(<type>"
    const char* destroy_label = "";
    const char* pin_label = "";
};

// Names that tasks carry: they are read when the trace is written, after the Objects is
// gone, so they live as long as the process.
const char* intern(const std::string& s);

template <class T>
std::string type_name() {
    // "... [with T = Name]" (GCC, Clang) -> "Name"
    std::string s = __PRETTY_FUNCTION__;
    auto b = s.find("T = ");
    if (b == std::string::npos) return "object";
    b += 4;
    auto e = s.find_first_of(";]", b);
    return s.substr(b, e - b);
}

// Reads an object into `p` (just made with new) and returns it; deletes it if reading
// throws.
template <class Reader, class T>
void* read_new(Reader& r, T* p) {
    std::unique_ptr<T> owned(p);
    r.read_into(*owned);
    return owned.release();
}

template <class T>
ObjectType make_object_type() {
    ObjectType t;
    t.name = intern(type_name<T>());
    t.migrate_label = intern("migrate(" + type_name<T>());
    t.destroy_label = intern("destroy(" + type_name<T>());
    t.pin_label = intern("pin(" + type_name<T>());
    t.hash = wire::hash_name(wire::type_names<T>());
    t.destroy = [](void* p) { delete static_cast<T*>(p); };
    t.size = [](const void* p) { return wire::size_of(*static_cast<const T*>(p)); };
    t.pack = [](const void* p, char* out) {
        wire::Writer w(out);
        w.put(*static_cast<const T*>(p));
        return w.position();
    };
    t.unpack = [](wire::Reader& r) -> void* { return read_new(r, new T()); };
    t.measure_bodies = [](const void* p, std::size_t* bodies) {
        BodySizer s;
        s.add(*static_cast<const T*>(p));
        *bodies = s.bodies;
        return s.bytes;
    };
    t.pack_bodies = [](const void* p, char* out, std::vector<BodyRef>& bodies) {
        BodyWriter w(out, bodies);
        w.put(*static_cast<const T*>(p));
        return w.position();
    };
    t.unpack_bodies = [](BodyReader& r) -> void* {
        // A trivially copyable object that is a body is not zero-filled first (it is all
        // overwritten); others start value-initialized, as the packed path's do.
        if constexpr (wire::kind_of<T>() == wire::Kind::raw)
            return read_new(r, new T);
        else
            return read_new(r, new T());
    };
    t.donate = [](void* p) {
        BodyDonor d;
        d.give(*static_cast<T*>(p));
    };
    t.leave = [](const void* p, std::vector<std::function<void()>>& after) {
        LeaveArchive a(after);
        a.visit(*static_cast<const T*>(p));
    };
    t.leave_waits = [](const void* p) {
        LeaveArchive a;
        a.visit(*static_cast<const T*>(p));
        return a.needed();
    };
    return t;
}

// An object living on this rank.
struct Record {
    ObjectKey key;
    const ObjectType* type = nullptr;
    void* obj = nullptr;
    std::uint64_t version = 0;  // migrations so far
    int running_shared = 0;
    bool running_exclusive = false;
    bool pinned = false;       // balancing policies leave it where it is (travels with it)
    bool rebalancing = false;  // a balancing migration is queued or running
    bool leaving = false;      // a migrate or destroy of it is dispatched (about to run or
                               // running): a balancing migration would come too late
    bool deferred = false;     // a request of it waits to run on the communication thread (that
                               // thread's flag: Objects::defer)
    int migrate_to = -1;       // the rank the exclusive handler running on it moves it to when it
                               // ends (Objects::migrate_when_handler_ends), or -1
    std::deque<Invocation*> ready;  // in order, waiting for access
    // Arrived ahead of an earlier request from the same sender: (sender, seq) -> request.
    std::map<std::pair<int, std::uint64_t>, Invocation*> held;
    std::vector<std::pair<int, std::uint64_t>> expected;  // next seq per sender
    double busy_s = 0;                                    // measured handler time (load)
    double recent_s = 0;        // moving average of the last handlers' times (travels with it)
    std::uint64_t handled = 0;  // handlers run
    // Its busy-time rate (Objects::kRateWindowS): handler seconds and idle seconds (no request
    // queued or running), both decayed over the window (they travel with it), as of rate_at;
    // idle_since: when it last ran out of requests (0: it has some). now_s() times.
    double rate_busy = 0, rate_idle = 0, rate_at = 0, idle_since = 0;
    // Share of its recent requests that its own exclusive handler issued (a chain: each step
    // invokes the next), a moving average over deliveries (it travels with it).
    double chained = 0;
    // Share of its recent handlers that issued requests (to any object): work it generates
    // (a moving average over handlers; it travels with it).
    double issuing = 0;
    std::uint64_t& next_expected(int sender) {
        for (auto& e : expected)
            if (e.first == sender) return e.second;
        expected.emplace_back(sender, 0);
        return expected.back().second;
    }
};

// Makes r a new Record again (every member as declared above) and keeps the memory of its
// containers; their requests must have been deleted or handed on.
inline void reset(Record& r) noexcept {
    r.key = {};
    r.type = nullptr;
    r.obj = nullptr;
    r.version = 0;
    r.running_shared = 0;
    r.running_exclusive = r.pinned = r.rebalancing = r.leaving = r.deferred = false;
    r.migrate_to = -1;
    r.ready.clear();
    r.held.clear();
    r.expected.clear();
    r.busy_s = r.recent_s = 0;
    r.handled = 0;
    r.rate_busy = r.rate_idle = r.rate_at = r.idle_since = r.chained = r.issuing = 0;
}

// What this rank knows of one object.
struct Entry {
    int loc = -1;                      // last known location (the home's is authoritative)
    std::uint64_t ver = 0;             // the object's version at that location
    std::unique_ptr<Record> rec;       // set while the object lives here
    std::uint64_t next_seq = 0;        // sequence number of this rank's next request to it
    std::vector<Invocation*> waiting;  // arrived before the object (it is on its way here)
    bool destroyed = false;
    int destroyed_on = -1;
    // At the home: the other ranks it lived on since it left (told by their home updates),
    // told in turn when it is destroyed so that they forget it too.
    std::vector<std::int32_t> lived;
};

}  // namespace cascade::detail
