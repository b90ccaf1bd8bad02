// Fuzz target: the objects layer's and the balancing policies' message handlers on arbitrary
// bytes, in a one-rank job. The first byte picks the message: a request (objects.invoke), a
// reply to a call (objects.reply, half the time naming a live token), a migration
// (objects.migrate, its head naming a registered type and this rank as sender half the time),
// a migration with bodies (objects.migrate_bodies), a location update, a destruction notice,
// a master-worker or a diffusion message, a request as it comes. Frames go through the messages'
// own decoding (ActiveMsg::on_frame, from rank 0). Malformed input must raise an exception
// (WireError, UsageError, bad_alloc), nothing else; whatever an input installed is removed before
// the next.
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "../src/objects/internal.hpp"
#include "cascade/balance/balancer.hpp"
#include "cascade/balance/diffusion.hpp"
#include "cascade/balance/master_worker.hpp"
#include "cascade/cascade.hpp"
#include "cascade/comm/detail/test_access.hpp"
#include "fuzz_common.hpp"

namespace cascade::detail {

struct FuzzObjects {
    static ActiveMsgBase* am(Objects& o, int which) {
        switch (which) {
            case 0:
                return o.am_.invoke;
            case 1:
                return o.am_.reply;
            case 2:
                return o.am_.migrate;
            case 3:
                return o.am_.migrate_bodies;
            case 4:
                return o.am_.lazy_update;
            case 5:
                return o.am_.home_update;
            default:
                return o.am_.destroyed;
        }
    }
    static std::uint32_t sig(Objects& o, std::uint32_t h) { return o.registry_.handler(h)->sig; }
    static std::uint32_t handlers(Objects& o) { return o.registry_.handlers(); }
    // Removes every object of this rank and every object half-arrived, with their requests.
    static void clear(Objects& o) {
        auto free_record = [](Record& r) {
            for (Invocation* q : r.ready)
                free_invocation(q);
            for (auto& [k, q] : r.held)
                free_invocation(q);
            r.ready.clear();
            r.held.clear();
            if (r.obj) r.type->destroy(r.obj);
            r.obj = nullptr;
        };
        for (int i = 0; i < Objects::kShards; ++i) {
            auto& s = o.shards_[i];
            std::lock_guard<Spinlock> g(s.m);
            for (auto& [k, e] : s.map) {
                for (Invocation* q : e.waiting)
                    free_invocation(q);
                if (e.rec) free_record(*e.rec);
            }
            s.map.clear();
        }
        o.transit_.clear_arriving(free_record);
    }
};

}  // namespace cascade::detail

using namespace cascade;
using detail::FuzzObjects;

namespace {

struct Counter {
    long value = 0;
};
struct Blob {  // a big member: migrates with a body
    std::vector<double> v;
    long n = 0;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(v, n);
    }
};

struct World {
    Communicator comm;
    Threadpool tp{1, &comm, 0, "fuzz", false};  // never started: handlers run in the handler
    Objects objs{tp, comm};
    std::unique_ptr<Balancer> bal, dbal;  // master-worker, diffusion (each its own message)
    World() {
        const HandlerOptions here{.run_in_handler = true};
        objs.make_handler<Counter>([](Counter& c, long& k) { c.value += k; }, here);
        objs.make_handler<Counter>([](const Counter& c) { return c.value; },
                                   {.access = Access::shared, .run_in_handler = true});
        objs.make_handler<Blob>([](Blob& b, std::vector<double>& v) { b.v = v; }, here);
        objs.make_handler<Blob>([](Blob& b) { return b.n; }, here);
        bal = std::make_unique<Balancer>(objs, std::make_unique<MasterWorker>(),
                                         BalanceOptions{.enabled = false});
        dbal = std::make_unique<Balancer>(objs, std::make_unique<Diffusion>(),
                                          BalanceOptions{.enabled = false});
    }
};

// A view<char> argument as its frame carries it: the length, then the bytes.
std::vector<std::uint64_t> view_frame(const char* p, std::size_t n) {
    std::vector<std::uint64_t> f(1 + n / 8 + 1);
    const std::uint64_t len = n;
    std::memcpy(f.data(), &len, sizeof len);
    if (n) std::memcpy(reinterpret_cast<char*>(f.data()) + 8, p, n);
    return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    World& w = fuzz::world<World>();
    if (size < 2) return 0;
    const std::uint8_t mode = data[0];
    const bool patch = (mode & 0x80) != 0;
    std::vector<std::uint64_t> buf(size / 8 + 2, 0);  // frames arrive 8-byte aligned
    std::memcpy(buf.data(), data + 1, size - 1);
    char* p = reinterpret_cast<char*>(buf.data());
    std::size_t n = size - 1;
    std::uint64_t token = 0;
    detail::StateBase* live = nullptr;
    try {
        switch (mode % 8) {
            case 0: {  // a request, to an object of this rank with a registered handler
                if (patch && n >= sizeof(detail::InvokeHead)) {
                    detail::InvokeHead h;
                    std::memcpy(&h, p, sizeof h);
                    h.handler %= FuzzObjects::handlers(w.objs);
                    const bool blob = h.handler >= 2;  // handlers 2 and 3 are Blob's
                    const ObjectKey k =
                        blob ? w.objs.create<Blob>().key() : w.objs.create<Counter>().key();
                    h.key = k;
                    h.sender = 0;
                    h.seq = 0;
                    h.hint_loc = -1;
                    h.sig = FuzzObjects::sig(w.objs, h.handler);
                    if (h.kind == detail::OpKind::migrate) h.arg = 0;
                    std::memcpy(p, &h, sizeof h);
                }
                const auto f = view_frame(p, n);
                FuzzObjects::am(w.objs, 0)->on_frame(0, reinterpret_cast<const char*>(f.data()),
                                                     8 + n);
                break;
            }
            case 1: {  // a reply: (rank, token, failed, bytes)
                if (patch && n >= 16) {
                    live = new detail::State<long>();
                    token = w.objs.add_reply_token(live);
                    std::memset(p, 0, 4);  // rank 0
                    std::memcpy(p + 8, &token, 8);
                }
                FuzzObjects::am(w.objs, 1)->on_frame(0, p, n);
                break;
            }
            case 2:
            case 3: {  // a migration, with or without bodies
                if (patch && n >= sizeof(detail::MigrateHead) + sizeof(detail::BodiesHead)) {
                    detail::MigrateHead mh;
                    std::memcpy(&mh, p, sizeof mh);
                    mh.type = (mh.type & 1) ? wire::hash_name(wire::type_names<Blob>())
                                            : wire::hash_name(wire::type_names<Counter>());
                    mh.source = 0;
                    mh.key.home = 0;
                    mh.key.pad = 0;
                    std::memcpy(p, &mh, sizeof mh);
                    if (mode % 8 == 3) {
                        detail::BodiesHead bh;
                        std::memcpy(&bh, p + sizeof mh, sizeof bh);
                        bh.source = 0;
                        std::memcpy(p + sizeof mh, &bh, sizeof bh);
                    }
                }
                const auto f = view_frame(p, n);
                FuzzObjects::am(w.objs, mode % 8)
                    ->on_frame(0, reinterpret_cast<const char*>(f.data()), 8 + n);
                break;
            }
            case 4:  // a location update, lazy or to the home, or a destruction notice
                FuzzObjects::am(w.objs, 4 + (data[1] % 3))->on_frame(0, p + 1, n - 1);
                break;
            case 5:
            case 6: {  // a balancing message, from rank 0 or from a rank outside the job
                const int source = patch ? 0 : static_cast<std::int8_t>(data[1]);
                Balancer& b = mode % 8 == 5 ? *w.bal : *w.dbal;
                b.policy().on_message(b, source, p + 1, n - 1);
                break;
            }
            default: {  // a request as it comes, nothing patched
                const auto f = view_frame(p, n);
                FuzzObjects::am(w.objs, 0)->on_frame(0, reinterpret_cast<const char*>(f.data()),
                                                     8 + n);
                break;
            }
        }
    } catch (const std::exception&) {
    }
    cascade::detail::CommTestAccess::drop_body_receives(w.comm);
    try {
        fuzz::drain(w.comm);
    } catch (const std::exception&) {
    }
    if (token)
        if (detail::StateBase* s = w.objs.take_reply_token(token)) s->release();
    (void)live;
    FuzzObjects::clear(w.objs);
    return 0;
}
