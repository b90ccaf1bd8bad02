// Mistakes with mobile objects that must end the job with a message naming the handler, the
// object and the ranks (run by tests/CMakeLists.txt through expect_failure.sh).
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace cascade;

struct Counter {
    long value = 0;
};

// An object with a big member: it migrates as a message and a body.
struct Blob {
    std::vector<double> v;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(v);
    }
};

// The head of a migration whose big members travel as bodies (src/objects/internal.hpp:
// MigrateHead, then BodiesHead), as a rank that forges one writes it.
struct ForgedMigrateHead {
    ObjectKey key;
    std::uint32_t type;
    std::uint32_t n_expected;
    std::uint64_t version;
    double busy_s;
    double recent_s;
    double rate_busy;
    double rate_idle;
    double chained;
    double issuing;
    std::uint64_t handled;
    std::uint32_t n_ready;
    std::uint32_t n_held;
    std::uint32_t pinned;
    std::int32_t source;
};
struct ForgedBodiesHead {
    std::int32_t source;
    std::uint32_t n_bodies;
    std::uint64_t chunk;
};

// Rank 1 registers what an Objects registers (a Futures' messages, then the objects layer's,
// same names and types) without being one, and sends rank 0 a migration that names rank 0
// as the rank its body comes from: rank 0 must refuse it, not wait for a body from itself.
int forged_body_source(Communicator& comm, Threadpool& tp) {
    const int me = comm.rank();
    if (me == 0) {
        Objects objs(tp, comm);
        objs.register_type<Blob>();
        tp.join();
        return 0;
    }
    Futures fx(tp, &comm);
    auto* frame = comm.make_active_msg([](view<char>&) {}, "objects.invoke");
    comm.make_active_msg([](view<char>&) {}, "objects.forward");
    comm.make_active_msg([](ObjectKey&, std::int32_t&, std::uint64_t&) {}, "objects.lazy_update");
    comm.make_active_msg([](ObjectKey&, std::int32_t&, std::uint64_t&) {}, "objects.home_update");
    comm.make_active_msg([](std::int32_t&, std::uint64_t&, std::uint8_t&, view<char>&) {},
                         "objects.reply");
    comm.make_active_msg([](view<char>&) {}, "objects.migrate");
    comm.make_large_active_msg(
        [](std::int32_t&, std::uint64_t&, std::uint64_t&) {},
        [](std::int32_t&, std::uint64_t&, std::uint64_t&) -> char* { return nullptr; },
        [](std::int32_t&, std::uint64_t&, std::uint64_t&) {}, "objects.migrate_large");
    comm.make_active_msg([](ObjectKey&, std::int32_t&) {}, "objects.destroyed");
    auto* bodies_msg = comm.make_active_msg([](view<char>&) {}, "objects.migrate_bodies");
    (void)frame;
    Blob b;
    b.v.assign(1 << 14, 1.5);  // 128 KiB: a body
    std::vector<char> buf(4096);
    ForgedMigrateHead mh{ObjectKey{1, 0, 1},
                         wire::hash_name(wire::type_names<Blob>()),
                         0,
                         1,
                         0,
                         0,
                         0,
                         0,
                         0,
                         0,
                         0,
                         0,
                         0,
                         0,
                         1};
    ForgedBodiesHead bh{0, 1, 1 << 20};  // "the body comes from rank 0"
    std::memcpy(buf.data(), &mh, sizeof mh);
    std::memcpy(buf.data() + sizeof mh, &bh, sizeof bh);
    std::vector<detail::BodyRef> bodies;
    detail::BodyWriter w(buf.data() + sizeof mh + sizeof bh, bodies);
    w.put(b);
    const auto n = static_cast<std::size_t>(w.position() - buf.data());
    bodies_msg->send(0, view<char>(buf.data(), n));
    tp.join();
    return 0;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    Communicator comm;
    Threadpool tp(2, &comm);
    if (std::strcmp(mode, "body_source") == 0) return forged_body_source(comm, tp);
    Objects objs(tp, comm);
    const int me = comm.rank();
    if (std::strcmp(mode, "destroyed") == 0) {
        // A request issued after the object was destroyed.
        auto add =
            objs.make_handler<Counter>([](Counter& c, long& k) { c.value += k; }, {.name = "add"});
        if (me == 0) {
            auto p = objs.create<Counter>();
            add->invoke(p, 1L);
            objs.destroy(p);
            add->invoke(p, 2L);
        }
    } else if (std::strcmp(mode, "order") == 0) {
        // Handlers registered in a different order on rank 1.
        auto reg_add = [&] {
            return objs.make_handler<Counter>([](Counter& c, long& k) { c.value += k; },
                                              {.name = "add"});
        };
        auto reg_reset = [&] {
            return objs.make_handler<Counter>([](Counter& c) { c.value = 0; }, {.name = "reset"});
        };
        if (me == 0) {
            reg_add();
            reg_reset();
            objs.create<Counter>();
        } else {
            auto reset = reg_reset();
            reg_add();
            reset->invoke(mobile_ptr<Counter>(ObjectKey{0, 0, 1}));
        }
    } else if (std::strcmp(mode, "throws") == 0) {
        auto bad = objs.make_handler<Counter>(
            [](Counter&) { throw std::runtime_error("counter overflow"); }, {.name = "bad"});
        if (me == 0) bad->invoke(objs.create<Counter>());
    } else if (std::strcmp(mode, "throws_comm") == 0) {
        // A short handler that runs on the communication thread (arriving at an idle pool
        // once its runs were short) throws: the job ends as for a worker's task. Whether a
        // request runs there depends on the pool being idle when it arrives, so the handler
        // throws only when it runs there, and rank 1 invokes it again until it does (a call
        // would return the exception to the caller instead).
        auto bad = objs.make_handler<Counter>(
            [&](Counter& c, long& k) {
                const bool here = comm.on_comm_thread() && tp.current_thread() < 0;
                if (k < 0 && here) throw std::runtime_error("counter overflow");
                c.value += k;
                return here;
            },
            {.name = "bad"});
        if (me == 0) objs.create<Counter>();
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 1) {
            const mobile_ptr<Counter> p(ObjectKey{0, 0, 1});
            bool failed = false;  // rank 0's pool failed: its calls come back as errors
            for (int i = 0; i < 2000 && !failed; ++i) {
                try {
                    bad->call(p, 1L).get();
                    bad->invoke(p, -1L);  // fails rank 0's pool once it ran on the comm thread
                    // Alone (a request that arrives behind a deferred one sends both to
                    // workers): this thread, which talks to MPI, sends it and waits 1 ms.
                    const auto until =
                        std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
                    while (std::chrono::steady_clock::now() < until)
                        comm.progress();
                    bad->call(p, 0L).get();
                } catch (const RemoteError&) {
                    failed = true;
                }
            }
            if (!failed) {
                std::fprintf(stderr,
                             "objects_errors: no request ran on the communication thread\n");
                return 1;
            }
        }  // then join() throws rank 0's error on both ranks
    } else if (std::strcmp(mode, "forged_reply") == 0) {
        // A reply for a call nobody made: its token names no state waiting on rank 0.
        objs.make_handler<Counter>([](const Counter& c) { return c.value; },
                                   {.access = Access::shared, .name = "get"});
        if (me == 1) objs.send_reply(0, 0x7f00deadbee0ull, false, nullptr, 0);
    } else if (std::strcmp(mode, "duplicate_reply") == 0) {
        // A reply that arrives twice: the second one finds its call answered.
        auto get = objs.make_handler<Counter>([](const Counter& c) { return c.value; },
                                              {.access = Access::shared, .name = "get"});
        if (me == 1) objs.create<Counter>();
        MPI_Barrier(MPI_COMM_WORLD);
        future<long> f;
        if (me == 0) f = get->call(mobile_ptr<Counter>(ObjectKey{1, 0, 1}));
        tp.join();
        if (me == 0 && f.get() != 0) return 3;
        if (me == 1) {  // the reply again: the first token of rank 0's table (slot 0)
            const long v = 0;
            std::vector<char> buf(16);
            wire::Writer w(buf.data());
            w.put(v);
            objs.send_reply(0, std::uint64_t(1) << 32, false, buf.data(),
                            static_cast<std::size_t>(w.position() - buf.data()));
        }
    } else {
        std::fprintf(stderr,
                     "usage: objects_errors destroyed|order|throws|throws_comm|forged_reply|"
                     "duplicate_reply|body_source\n");
        return 2;
    }
    tp.join();
    return 0;
}
