// Mobile-object micro-benchmarks (PREMA thesis §3.3.2's ping-pong, plus migration and rate),
// each against the raw active message of the same size in the same run. Rank 0 prints one
// JSON object per line.
//
//   invoke   one-way latency of a handler invoke, ping-pong between two objects:
//            local (both on rank 0), remote (rank 0 <-> rank 1; on_comm_thread: the share of
//            rank 0's runs on its communication thread); "am": a small active
//            message ping-pong carrying the same 16 bytes. after_migration (3+ ranks): rank
//            0 calls an object that has just moved between ranks 1 and 2 behind its back
//            (its cache is stale): the first call's round trip / 2 and its forwards
//            (extra_hops), beside the second call's (after the lazy update; 0 hops).
//   migrate  one-way time of an object of `bytes` bytes (one std::vector<char>) bouncing
//            between ranks 0 and 1 (a handler that migrates its object and invokes itself
//            behind the migration), against a large active message ping-pong of the same body:
//            sent from one buffer at every hop (large_am), and echoed, each rank sending back
//            the body it has just received (large_am_echo; the bytes change cores at every
//            hop, as a migrating object's do, instead of staying in each core's cache).
//   rate     invokes per second to one object on rank 0 from rank 1 ("one") and from every
//            rank ("all"), against small active messages counted by a handler.
#include <atomic>
#include <cstring>
#include <vector>

#include "../comm/common.hpp"
#include "cascade/cascade.hpp"

using namespace commbench;

namespace {

struct Ball {
    long hits = 0;
};
struct Blob {
    std::vector<char> data;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(data);
    }
};
struct Sink {
    long count = 0;
};

}  // namespace

int main(int argc, char** argv) {
    return guarded_main(argc, argv, "objects_bench", [](Args& a) {
        const auto benches = a.words("bench", "invoke,migrate,rate");
        const int repeats = static_cast<int>(a.num("repeats", 5));
        const long n_pp = a.num("round-trips", 2000);
        const long n_rate = a.num("rate-messages", 100000);
        const long n_after = a.num("after-migration", 50);
        const std::vector<long> sizes =
            a.list("sizes", {1024, 8192, 65536, 262144, 1 << 20, 4 << 20, 8 << 20});
        const int threads = static_cast<int>(a.num("threads", 1));
        a.check();

        cascade::Communicator comm;
        const int me = comm.rank(), n = comm.ranks();
        if (n < 2) throw std::runtime_error("run with at least 2 ranks");
        cascade::Threadpool tp(threads, &comm, 0, "objects", false);
        cascade::Futures fx(tp, &comm);  // promises waited on by the main thread
        cascade::Objects objs(tp, comm);

        // ---- registrations (same order everywhere) ----------------------------------------
        long goal = 0;
        std::atomic<double> t_last{0};
        // Ping-pong between ball[0] and ball[1] (set alike on every rank before each run).
        cascade::mobile_ptr<Ball> ball[2];
        // pong takes the default path (a worker, or the communication thread once its runs
        // proved short); pong_inline runs inside the message handler
        // (HandlerOptions::run_in_handler).
        cascade::Handler<Ball, void, int, long>* pong = nullptr;
        cascade::Handler<Ball, void, int, long>* pong_inline = nullptr;
        cascade::Handler<Ball, void, int, long>* use = nullptr;
        auto pong_fn = [&](Ball& b, int& side, long& k) {
            ++b.hits;
            if (k + 1 < goal)
                use->invoke(ball[1 - side], 1 - side, k + 1);
            else
                t_last = now_s();
        };
        pong = objs.make_handler<Ball>(pong_fn, {.name = "pong"});
        pong_inline =
            objs.make_handler<Ball>(pong_fn, {.name = "pong_inline", .run_in_handler = true});
        cascade::ActiveMsg<int, long>* am = nullptr;
        am = comm.make_active_msg(
            [&](int& side, long& k) {
                if (k + 1 < goal)
                    am->send(1 - side, 1 - side, k + 1);
                else
                    t_last = now_s();
            },
            "bench.am");
        // after_migration: `hop` moves the object to `dest`, then `arrived` (ordered behind
        // the migration, so it runs at dest) tells rank 0; `where` answers 100*rank + hops.
        cascade::promise<int>* moved = nullptr;
        auto moved_am = comm.make_active_msg([&](int& r) { moved->set_value(r); }, "bench.moved");
        auto arrived =
            objs.make_handler<Ball>([&](Ball&) { moved_am->send(0, me); }, {.name = "arrived"});
        auto hop = objs.make_handler<Ball>(
            [&](Ball&, cascade::mobile_ptr<Ball>& self, int& dest) {
                objs.migrate(self, dest);
                arrived->invoke(self);
            },
            {.name = "hop"});
        auto where = objs.make_handler<Ball>(
            [&](Ball&) { return 100 * me + cascade::Objects::current_hops(); }, {.name = "where"});
        cascade::Handler<Blob, void, cascade::mobile_ptr<Blob>, long>* bounce = nullptr;
        bounce = objs.make_handler<Blob>(
            [&](Blob&, cascade::mobile_ptr<Blob>& self, long& k) {
                if (k + 1 < goal) {
                    objs.migrate(self, 1 - me);
                    bounce->invoke(self, self, k + 1);  // runs where the object arrives
                } else {
                    t_last = now_s();
                }
            },
            {.name = "bounce", .run_in_handler = true});
        std::vector<char> lbuf(8 << 20, 'x'), lrecv(lbuf.size());
        // The echo: each rank sends back the body it has just received (two buffers used in
        // turn), so the bytes change cores at every hop, as a migrating object's do.
        std::vector<char> echo[2] = {std::vector<char>(lbuf.size(), 'e'),
                                     std::vector<char>(lbuf.size(), 'e')};
        std::size_t lcur = 0;
        bool echoing = false;
        cascade::LargeActiveMsg<char, long>* large = nullptr;
        large = comm.make_large_active_msg(
            [&](long& k) {
                if (k + 1 < goal) {
                    char* from = echoing ? echo[k & 1].data() : lbuf.data();
                    large->send_large(1 - me, cascade::view<char>(from, lcur), k + 1);
                } else {
                    t_last = now_s();
                }
            },
            [&](long& k) { return echoing ? echo[k & 1].data() : lrecv.data(); }, [](long&) {},
            "bench.large");
        auto tick = objs.make_handler<Sink>([](Sink& s) { ++s.count; }, {.name = "tick"});
        (void)where;
        std::atomic<long> am_ticks{0};
        auto am_tick = comm.make_active_msg([&](char&) { ++am_ticks; }, "bench.tick");

        // Objects: two balls on rank 0 (local), one on rank 1 (remote partner), a sink on
        // rank 0, and (3+ ranks) a ball homed on rank 1 that moves between ranks 1 and 2.
        cascade::mobile_ptr<Ball> local_a, local_b, remote_b, mover;
        cascade::mobile_ptr<Sink> sink;
        if (me == 0) {
            local_a = objs.create<Ball>();
            local_b = objs.create<Ball>();
            sink = objs.create<Sink>();
        }
        if (me == 1) {
            remote_b = objs.create<Ball>();
            mover = objs.create<Ball>();
        }
        local_a = cascade::mobile_ptr<Ball>(cascade::ObjectKey{0, 0, 1});
        local_b = cascade::mobile_ptr<Ball>(cascade::ObjectKey{0, 0, 2});
        sink = cascade::mobile_ptr<Sink>(cascade::ObjectKey{0, 0, 3});
        remote_b = cascade::mobile_ptr<Ball>(cascade::ObjectKey{1, 0, 1});
        mover = cascade::mobile_ptr<Ball>(cascade::ObjectKey{1, 0, 2});
        MPI_Barrier(MPI_COMM_WORLD);

        auto emit_invoke = [&](const char* sys, const char* variant, std::vector<double> v,
                               long hops, long rounds, double comm_share = 0) {
            if (me != 0) return;
            Record r;
            r.add("bench", "invoke")
                .add("system", sys)
                .add("variant", variant)
                .add("latency_us", median(v) * 1e6)
                .add("latency_us_min", vmin(v) * 1e6)
                .add("latency_us_max", vmax(v) * 1e6)
                .add("extra_hops", hops)
                .add("round_trips", rounds)
                .add("on_comm_thread", comm_share)
                .add("ranks", n)
                .add("threads", threads);
            r.print();
        };
        // Share of rank 0's handlers that ran on its communication thread (after progress()).
        double comm_share = 0;

        // One timed ping-pong of goal messages; returns one-way seconds (rank 0).
        auto run_pp = [&](const std::string& what) {
            goal = n_pp;
            t_last = 0;
            tp.start();
            MPI_Barrier(MPI_COMM_WORLD);
            const double t0 = now_s();
            use = what == "remote_inline" ? pong_inline : pong;
            if (me == 0) {
                if (what == "am")
                    am->send(1, 1, 0);
                else
                    use->invoke(ball[1], 1, 0);
            }
            const cascade::ObjectsStats s0 = objs.stats();
            tp.join();
            const cascade::ObjectsStats s1 = objs.stats();
            comm_share = s1.handlers_run > s0.handlers_run
                             ? static_cast<double>(s1.on_comm_thread - s0.on_comm_thread) /
                                   static_cast<double>(s1.handlers_run - s0.handlers_run)
                             : 0.0;
            return (t_last.load() - t0) / static_cast<double>(n_pp);
        };

        for (const auto& b : benches) {
            if (b == "invoke") {
                // The balls every rank's pong handler bounces between.
                std::vector<double> am_v, local_v, remote_v, inline_v, remote_share;
                for (int r = 0; r < repeats + 1; ++r) {  // first round: warm-up
                    ball[0] = local_a;
                    ball[1] = remote_b;
                    const double x_am = run_pp("am");
                    ball[0] = local_a;
                    ball[1] = remote_b;
                    const double x_remote = run_pp("remote");
                    const double share = comm_share;
                    ball[0] = local_a;
                    ball[1] = remote_b;
                    const double x_inline = run_pp("remote_inline");
                    ball[0] = local_a;
                    ball[1] = local_b;
                    const double x_local = run_pp("local");
                    if (r == 0) continue;
                    am_v.push_back(x_am);
                    remote_v.push_back(x_remote);
                    remote_share.push_back(share);
                    inline_v.push_back(x_inline);
                    local_v.push_back(x_local);
                }
                emit_invoke("am", "remote", am_v, 0, n_pp);
                emit_invoke("cascade", "remote", remote_v, 0, n_pp, median(remote_share));
                emit_invoke("cascade", "remote_inline", inline_v, 0, n_pp);
                emit_invoke("cascade", "local", local_v, 0, n_pp);
                if (n >= 3) {
                    // `mover` (home: rank 1) alternates between ranks 2 and 1; rank 0's cache
                    // still names the old rank when it calls: one forward, then the lazy update.
                    std::vector<double> first, second;
                    long hops_first = 0, hops_second = 0;
                    tp.start();
                    if (me == 0) {
                        for (long i = 0; i < n_after + 1; ++i) {
                            const int dest = (i % 2 == 0) ? 2 : 1;
                            cascade::promise<int> pr;
                            auto f = pr.get_future();
                            moved = &pr;
                            hop->invoke(mover, mover, dest);
                            if (f.get() != dest)
                                throw std::runtime_error("moved to the wrong rank");
                            double t0 = now_s();
                            const int a1 = where->call(mover).get();
                            double t1 = now_s();
                            const int a2 = where->call(mover).get();
                            double t2 = now_s();
                            if (a1 / 100 != dest || a2 / 100 != dest)
                                throw std::runtime_error("where: wrong rank");
                            if (i == 0) continue;  // warm-up
                            first.push_back((t1 - t0) / 2);
                            second.push_back((t2 - t1) / 2);
                            hops_first = std::max<long>(hops_first, a1 % 100);
                            hops_second = std::max<long>(hops_second, a2 % 100);
                        }
                    }
                    tp.join();
                    emit_invoke("cascade", "after_migration", first, hops_first, n_after);
                    emit_invoke("cascade", "after_update", second, hops_second, n_after);
                }
            } else if (b == "migrate") {
                for (long bytes : sizes) {
                    cascade::mobile_ptr<Blob> blob;
                    std::vector<double> obj_v, am_v, echo_v;
                    const long rounds = std::max(4L, std::min(200L, (64L << 20) / bytes));
                    if (me == 0) {
                        Blob x;
                        x.data.assign(static_cast<std::size_t>(bytes), 'b');
                        blob = objs.create<Blob>(std::move(x));
                    }
                    MPI_Bcast(&blob, sizeof blob, MPI_BYTE, 0, MPI_COMM_WORLD);
                    for (int r = 0; r < repeats + 1; ++r) {
                        goal = rounds;
                        // Large AM ping-pong.
                        lcur = static_cast<std::size_t>(bytes);
                        t_last = 0;
                        tp.start();
                        MPI_Barrier(MPI_COMM_WORLD);
                        double t0 = now_s();
                        if (me == 0)
                            large->send_large(1, cascade::view<char>(lbuf.data(), lcur), 0);
                        tp.join();
                        const double x_am = (t_last.load() - t0) / static_cast<double>(rounds);
                        // The same, echoing what arrived.
                        echoing = true;
                        t_last = 0;
                        tp.start();
                        MPI_Barrier(MPI_COMM_WORLD);
                        t0 = now_s();
                        if (me == 0)
                            large->send_large(1, cascade::view<char>(echo[1].data(), lcur), 0);
                        tp.join();
                        echoing = false;
                        const double x_echo = (t_last.load() - t0) / static_cast<double>(rounds);
                        // Object bouncing: starts on rank 0 (rounds is even).
                        t_last = 0;
                        tp.start();
                        MPI_Barrier(MPI_COMM_WORLD);
                        t0 = now_s();
                        if (me == 0) {
                            objs.migrate(blob, 1);
                            bounce->invoke(blob, blob, 0);
                        }
                        tp.join();
                        double t_end = t_last.load();
                        MPI_Allreduce(MPI_IN_PLACE, &t_end, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                        const double x_obj = (t_end - t0) / static_cast<double>(rounds);
                        if (r == 0) continue;
                        am_v.push_back(x_am);
                        echo_v.push_back(x_echo);
                        obj_v.push_back(x_obj);
                    }
                    // Bring it home for the next size (and free it).
                    tp.start();
                    if (me == 0) objs.destroy(blob);
                    tp.join();
                    if (me == 0) {
                        for (int s = 0; s < 3; ++s) {
                            const auto& v = s == 0 ? am_v : s == 1 ? echo_v : obj_v;
                            Record rec;
                            rec.add("bench", "migrate")
                                .add("system", s == 2 ? "cascade" : "am")
                                .add("variant", s == 0   ? "large_am"
                                                : s == 1 ? "large_am_echo"
                                                         : "migrate")
                                .add("bytes", bytes)
                                .add("seconds", median(v))
                                .add("latency_us", median(v) * 1e6)
                                .add("latency_us_min", vmin(v) * 1e6)
                                .add("round_trips", rounds)
                                .add("extra_hops", 0L)
                                .add("ranks", n);
                            rec.print();
                        }
                    }
                }
            } else if (b == "rate") {
                for (const std::string from : {"one", "all"}) {
                    std::vector<double> obj_v, am_v;
                    const bool sending = from == "all" ? true : me == 1;
                    const long senders = from == "all" ? n : 1;
                    for (int r = 0; r < repeats + 1; ++r) {
                        // Active messages.
                        am_ticks = 0;
                        tp.start();
                        MPI_Barrier(MPI_COMM_WORLD);
                        double t0 = now_s();
                        if (sending)
                            for (long i = 0; i < n_rate; ++i)
                                am_tick->send(0, char(1));
                        tp.join();
                        double t1 = now_s();
                        const double x_am = t1 - t0;
                        // Invokes to the sink object.
                        tp.start();
                        MPI_Barrier(MPI_COMM_WORLD);
                        t0 = now_s();
                        if (sending)
                            for (long i = 0; i < n_rate; ++i)
                                tick->invoke(sink);
                        tp.join();
                        t1 = now_s();
                        const double x_obj = t1 - t0;
                        if (r == 0) continue;
                        am_v.push_back(x_am);
                        obj_v.push_back(x_obj);
                    }
                    if (me == 0) {
                        for (int s = 0; s < 2; ++s) {
                            const auto& v = s == 0 ? am_v : obj_v;
                            Record rec;
                            rec.add("bench", "rate")
                                .add("system", s == 0 ? "am" : "cascade")
                                .add("variant", from)
                                .add("seconds", median(v))
                                .add("messages", senders * n_rate)
                                .add("rate_per_s",
                                     static_cast<double>(senders * n_rate) / median(v))
                                .add("ranks", n)
                                .add("threads", threads);
                            rec.print();
                        }
                    }
                }
            } else {
                throw std::runtime_error("unknown bench '" + b + "'");
            }
        }
        return 0;
    });
}
