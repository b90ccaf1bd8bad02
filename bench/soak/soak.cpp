// Memory over a long run (bench/soak/run): does the resident set stay flat?
//
//   --workload mixed (default): --tasks Taskflow tasks in all (over the ranks), in batches of
//       --sample tasks with a join after each; the keys never repeat. Per 1000 tasks of a
//       rank: 850 are started by the main thread, 149 by small active messages and one by a
//       large active message (--large-bytes body) from the previous rank's tasks; one task
//       in --async-every calls async on the next rank with a 128 KiB vector argument and a
//       128 KiB vector result (bodies both ways). After each batch rank 0 prints a record
//       {"bench":"soak","workload":"mixed","tasks":<so far>,"rss_mb":<largest
//       rank>,"heap_mb":<bytes in use, largest rank>,"comm_buffers_mb":<the communicator's
//       kept send and receive buffers, largest rank>,"inbox_kept_mb":<the emptied inbox
//       segments the pool keeps for reuse, plus the process-wide cache of destroyed pools'
//       ones, largest rank>,"inbox_kept_mb_sum":<the same, all ranks>,"rss_net_mb":<the
//       resident set less that inbox memory, largest rank>,...}.
//   --workload flood_small: ranks 1.. send --messages small active messages in all to rank 0
//       as fast as they can, into a handler that works --slow-ns per message; one record
//       with the peak resident set (VmHWM) of the receiver and of the senders.
//   --workload flood_large: the same with --messages large active messages of --large-bytes
//       each, into an on-arrival callback that works --slow-ns.
//   --workload objects: --objects mobile objects in all (over the ranks), in batches of
//       --sample with two joins each: each rank creates its share, invokes a handler on each
//       and on each of the previous rank's (a request from another rank), migrates its own
//       to the next rank, joins; then checks and destroys its own (where they live now),
//       joins. After each batch rank 0 prints a record {"bench":"soak","workload":"objects",
//       "objects":<so far>,"rss_mb":<largest rank>,"heap_mb":...,"directory":<entries of the
//       largest rank's directory after the destroys>,...}.
//   The floods stop the job when the receiver's resident set passes --rss-limit-mb (default
//   2048): the record then has "limit_exceeded": true and the peak reached.
// Every message and result is checked; a wrong one ends the run with status 1.
#include <malloc.h>
#include <mpi.h>

#include <atomic>
#include <cascade/cascade.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/record.hpp"
#include "common/spin.hpp"
#include "common/stats.hpp"

namespace {

struct Options {
    std::string workload = "mixed";
    long tasks = 10'000'000;
    long sample = 1'000'000;
    int threads = 1;
    long large_bytes = 64 << 10;
    long async_every = 10'000;
    long messages = 0;  // floods: 0 = 10^7 small or 10^4 large
    long objects = 1'000'000;
    long slow_ns = 1000;
    double rss_limit_mb = 2048;  // floods: the receiver stops the job beyond this
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string k = argv[i];
        if (i + 1 >= argc) throw std::runtime_error("option " + k + " needs a value");
        const std::string v = argv[++i];
        if (k == "--workload")
            o.workload = v;
        else if (k == "--tasks")
            o.tasks = static_cast<long>(std::stod(v));
        else if (k == "--sample")
            o.sample = static_cast<long>(std::stod(v));
        else if (k == "--threads")
            o.threads = std::stoi(v);
        else if (k == "--large-bytes")
            o.large_bytes = static_cast<long>(std::stod(v));
        else if (k == "--async-every")
            o.async_every = static_cast<long>(std::stod(v));
        else if (k == "--messages")
            o.messages = static_cast<long>(std::stod(v));
        else if (k == "--slow-ns")
            o.slow_ns = static_cast<long>(std::stod(v));
        else if (k == "--objects")
            o.objects = static_cast<long>(std::stod(v));
        else if (k == "--rss-limit-mb")
            o.rss_limit_mb = std::stod(v);
        else
            throw std::runtime_error("unknown option " + k);
    }
    if (o.workload != "mixed" && o.workload != "flood_small" && o.workload != "flood_large" &&
        o.workload != "objects")
        throw std::runtime_error("--workload must be mixed, objects, flood_small or flood_large");
    if (o.tasks < 1 || o.sample < 1000 || o.threads < 1 || o.large_bytes < 0 || o.async_every < 1 ||
        o.messages < 0 || o.slow_ns < 0)
        throw std::runtime_error("bad option value");
    if (o.messages == 0) o.messages = o.workload == "flood_large" ? 10'000 : 10'000'000;
    return o;
}

// VmRSS or VmHWM of this process, in MiB.
double status_mb(const char* field) {
    std::ifstream f("/proc/self/status");
    std::string line;
    const std::size_t n = std::strlen(field);
    while (std::getline(f, line))
        if (line.compare(0, n, field) == 0) return std::stod(line.substr(n + 1)) / 1024.0;
    return 0;
}

// Bytes the allocator hands out now (all arenas), in MiB: RSS minus this is what the
// allocator keeps free (fragmentation) rather than what the program holds.
double heap_in_use_mb() {
    const struct mallinfo2 mi = mallinfo2();
    return static_cast<double>(mi.uordblks + mi.hblkhd) / (1024.0 * 1024.0);
}

// Bytes the allocator holds from the system (arenas and its own mmaps), in MiB: what it
// hands out plus what it keeps free.
double heap_held_mb() {
    const struct mallinfo2 mi = mallinfo2();
    return static_cast<double>(mi.arena + mi.hblkhd) / (1024.0 * 1024.0);
}

double reduce(double x, MPI_Op op) {
    double y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    return y;
}

// Busy work of about `ns` nanoseconds (calibrated once).
struct SlowWork {
    double iters_per_ns = 0;
    SlowWork() {
        const std::uint64_t iters = 1 << 20;
        const double t0 = cascade_bench::thread_cpu_seconds();
        cascade_bench::spin(iters);
        iters_per_ns =
            static_cast<double>(iters) / ((cascade_bench::thread_cpu_seconds() - t0) * 1e9);
    }
    void operator()(long ns) const {
        cascade_bench::spin(static_cast<std::uint64_t>(iters_per_ns * static_cast<double>(ns)));
    }
};

std::vector<double> big_vector(long seed, std::size_t len) {
    std::vector<double> v(len);
    for (std::size_t i = 0; i < len; i += 512)
        v[i] = static_cast<double>(seed + static_cast<long>(i));
    return v;
}

int run_mixed(const Options& o) {
    cascade::Communicator comm;
    const int me = comm.rank(), ranks = comm.ranks();
    const int next = (me + 1) % ranks;
    cascade::Threadpool tp(o.threads, &comm);
    cascade::Futures fx(tp, &comm);
    const long per_rank = std::max(1000L, o.sample / ranks / 1000 * 1000);
    std::int64_t base = 0;  // first key of this batch
    std::atomic<long> bad{0};

    cascade::Taskflow<std::int64_t> tf(&tp, "soak");
    const std::size_t big = cascade::Futures::kLargeArg / sizeof(double);  // 128 KiB
    auto echo = fx.make_async(
        [](std::vector<double>& v, long& seed) {
            if (v.empty() || v[0] != double(seed)) return std::vector<double>{};
            v[0] += 1;
            return std::move(v);
        },
        "soak_echo");
    std::mutex futures_lock;
    std::vector<std::pair<long, cascade::future<std::vector<double>>>> futures;

    auto small = comm.make_active_msg([&](std::int64_t& k) { tf.fulfill_promise(k); }, "soak_am");
    std::vector<char> body(static_cast<std::size_t>(o.large_bytes), 'x');
    std::vector<std::vector<char>> inbox;  // one large AM in flight per batch and rank
    auto large = comm.make_large_active_msg(
        [&](std::int64_t& k, int& slot) {
            if (inbox[slot].size() != body.size() || (!body.empty() && inbox[slot].back() != 'x'))
                bad.fetch_add(1);
            tf.fulfill_promise(k);
        },
        [&](std::int64_t&, int& slot) {
            inbox[slot].resize(body.size());
            return inbox[slot].data();
        },
        [](std::int64_t&, int&) {}, "soak_large");

    tf.set_indegree([](std::int64_t) { return 1; })
        .set_mapping([&](std::int64_t k) { return static_cast<int>(k % o.threads); })
        .set_task([&](std::int64_t k) {
            const long j = static_cast<long>(k - base);  // index in this rank's batch
            const long m = j % 1000;
            // the key on the next rank this task starts: same batch, same index pattern
            const std::int64_t there = k + 850;
            if (m < 149) small->send(next, there);
            if (m == 500) {
                large->send_large(next, cascade::view<char>(body.data(), body.size()),
                                  k - 500 + 999, static_cast<int>(j / 1000));
            }
            if (j % o.async_every == 7) {
                auto f = cascade::async(next, echo, big_vector(j, big), j);
                std::lock_guard<std::mutex> g(futures_lock);
                futures.emplace_back(j, std::move(f));
            }
        });

    double first_t = cascade_bench::now_seconds();
    long done = 0;
    while (done < o.tasks) {
        inbox.assign(static_cast<std::size_t>(per_rank / 1000), {});
        const double t0 = cascade_bench::now_seconds();
        for (long j = 0; j < per_rank; ++j)
            if (j % 1000 < 850) tf.fulfill_promise(base + j);
        tp.join();
        const double rss_join = status_mb("VmRSS:");  // as join() leaves it
        for (auto& [j, f] : futures) {
            const std::vector<double> v = f.get();
            if (v.size() != big || v[0] != double(j + 1)) bad.fetch_add(1);
        }
        futures.clear();
        const double secs = reduce(cascade_bench::now_seconds() - t0, MPI_MAX);
        done += per_rank * ranks;
        base += per_rank;  // keys of every rank advance together: next batch, new keys
        const double rss = status_mb("VmRSS:");
        const double rss_max = reduce(rss, MPI_MAX), rss_sum = reduce(rss, MPI_SUM);
        const double heap_max = reduce(heap_in_use_mb(), MPI_MAX);
        // Where the resident set is (Linux): private memory (heap, stacks), shared memory
        // (MPI's own segments between ranks of a node), mapped files (code).
        const double held_max = reduce(heap_held_mb(), MPI_MAX);
        // The communicator's spare and burst buffers (part of heap_mb).
        const double comm_max =
            reduce(static_cast<double>(comm.stats().kept_buffer_bytes) / (1 << 20), MPI_MAX);
        // The emptied inbox segments kept for the next seeding (part of heap_mb): as many as
        // the largest backlog of tasks queued by the main thread so far.
        const double inbox_kept = static_cast<double>(tp.stats().kept_inbox_bytes +
                                                      cascade::Threadpool::cached_inbox_bytes()) /
                                  (1 << 20);
        const double inbox_max = reduce(inbox_kept, MPI_MAX),
                     inbox_sum = reduce(inbox_kept, MPI_SUM);
        // The resident set without that cache, per rank (the largest rank's rss_mb less the
        // largest inbox_kept_mb would subtract another rank's cache).
        const double net_max = reduce(rss - inbox_kept, MPI_MAX);
        const double join_max = reduce(rss_join, MPI_MAX);
        const double hwm_max = reduce(status_mb("VmHWM:"), MPI_MAX);
        const double anon_max = reduce(status_mb("RssAnon:"), MPI_MAX);
        const double shmem_max = reduce(status_mb("RssShmem:"), MPI_MAX);
        const double file_max = reduce(status_mb("RssFile:"), MPI_MAX);
        if (me == 0)
            cascade_bench::Record()
                .add("bench", "soak")
                .add("workload", "mixed")
                .add("ranks", ranks)
                .add("threads", o.threads)
                .add("tasks", done)
                .add("rss_mb", rss_max, "%.2f")
                .add("rss_mb_sum", rss_sum, "%.2f")
                .add("heap_mb", heap_max, "%.2f")
                .add("heap_held_mb", held_max, "%.2f")
                .add("comm_buffers_mb", comm_max, "%.2f")
                .add("inbox_kept_mb", inbox_max, "%.2f")
                .add("inbox_kept_mb_sum", inbox_sum, "%.2f")
                .add("rss_net_mb", net_max, "%.2f")
                .add("rss_join_mb", join_max, "%.2f")
                .add("hwm_mb", hwm_max, "%.2f")
                .add("rss_anon_mb", anon_max, "%.2f")
                .add("rss_shmem_mb", shmem_max, "%.2f")
                .add("rss_file_mb", file_max, "%.2f")
                .add("batch_seconds", secs, "%.3f")
                .add("seconds", cascade_bench::now_seconds() - first_t, "%.2f")
                .print();
        if (done < o.tasks) tp.start();
    }
    const long errors = static_cast<long>(reduce(static_cast<double>(bad.load()), MPI_SUM));
    if (me == 0 && errors) std::fprintf(stderr, "soak: %ld wrong messages or results\n", errors);
    return errors ? 1 : 0;
}

// A mobile object of the objects workload: a counter and a few bytes that travel with it.
struct Cell {
    long value = 0;
    std::int64_t tag = 0;
    template <class Archive>
    void serialize(Archive& ar) {
        ar(value, tag);
    }
};

int run_objects(const Options& o) {
    cascade::Communicator comm;
    const int me = comm.rank(), ranks = comm.ranks();
    const int next = (me + 1) % ranks, prev = (me + ranks - 1) % ranks;
    cascade::Threadpool tp(o.threads, &comm);
    cascade::Objects objs(tp, comm);
    std::atomic<long> bad{0};
    auto add = objs.make_handler<Cell>([](Cell& c, long& k) { c.value += k; }, {.name = "add"});
    // Each object got 1 from its home and, with more than one rank, 2 from the previous one.
    const long expect = ranks > 1 ? 3 : 1;
    auto check = objs.make_handler<Cell>(
        [&](Cell& c, std::int64_t& tag) {
            if (c.value != expect || c.tag != tag) bad.fetch_add(1);
        },
        {.name = "check"});
    const long per_rank = std::max(1L, o.sample / ranks);
    std::vector<cascade::mobile_ptr<Cell>> mine;
    mine.reserve(static_cast<std::size_t>(per_rank));
    std::uint64_t first_id = 1;  // ids of this batch on every rank (each creates as many)
    const double first_t = cascade_bench::now_seconds();
    long done = 0;
    while (done < o.objects) {
        const double t0 = cascade_bench::now_seconds();
        mine.clear();
        for (long i = 0; i < per_rank; ++i)
            mine.push_back(objs.create<Cell>(Cell{0, static_cast<std::int64_t>(first_id) + i}));
        MPI_Barrier(MPI_COMM_WORLD);  // every object exists before another rank invokes it
        for (long i = 0; i < per_rank; ++i) {
            add->invoke(mine[static_cast<std::size_t>(i)], 1L);
            if (ranks > 1)
                add->invoke(cascade::mobile_ptr<Cell>(cascade::ObjectKey{
                                prev, 0, first_id + static_cast<std::uint64_t>(i)}),
                            2L);
            objs.migrate(mine[static_cast<std::size_t>(i)], next);
        }
        tp.join();
        tp.start();
        for (long i = 0; i < per_rank; ++i) {
            const auto& p = mine[static_cast<std::size_t>(i)];
            check->invoke(p, static_cast<std::int64_t>(first_id) + i);
            objs.destroy(p);
        }
        tp.join();
        const double secs = reduce(cascade_bench::now_seconds() - t0, MPI_MAX);
        done += per_rank * ranks;
        first_id += static_cast<std::uint64_t>(per_rank);
        const double rss = status_mb("VmRSS:");
        const double rss_max = reduce(rss, MPI_MAX), rss_sum = reduce(rss, MPI_SUM);
        const double heap_max = reduce(heap_in_use_mb(), MPI_MAX);
        const double dir_max = reduce(static_cast<double>(objs.stats().directory), MPI_MAX);
        const double local_max = reduce(static_cast<double>(objs.local_objects().size()), MPI_MAX);
        const double comm_max =
            reduce(static_cast<double>(comm.stats().kept_buffer_bytes) / (1 << 20), MPI_MAX);
        if (me == 0)
            cascade_bench::Record()
                .add("bench", "soak")
                .add("workload", "objects")
                .add("ranks", ranks)
                .add("threads", o.threads)
                .add("objects", done)
                .add("rss_mb", rss_max, "%.2f")
                .add("rss_mb_sum", rss_sum, "%.2f")
                .add("heap_mb", heap_max, "%.2f")
                .add("comm_buffers_mb", comm_max, "%.2f")
                .add("directory", static_cast<long>(dir_max))
                .add("local_objects", static_cast<long>(local_max))
                .add("batch_seconds", secs, "%.3f")
                .add("seconds", cascade_bench::now_seconds() - first_t, "%.2f")
                .print();
        if (done < o.objects) tp.start();
    }
    const long errors = static_cast<long>(reduce(static_cast<double>(bad.load()), MPI_SUM));
    if (me == 0 && errors) std::fprintf(stderr, "soak: %ld objects with a wrong value\n", errors);
    return errors ? 1 : 0;
}

int run_flood(const Options& o) {
    cascade::Communicator comm;
    const int me = comm.rank(), ranks = comm.ranks();
    if (ranks < 2) throw std::runtime_error("the floods need at least 2 ranks");
    cascade::Threadpool tp(o.threads, &comm);
    const SlowWork slow;
    const bool is_large = o.workload == "flood_large";
    const long mine = me == 0 ? 0 : o.messages / (ranks - 1) + (me <= o.messages % (ranks - 1));
    std::atomic<long> received{0}, bad{0};
    const double t0 = cascade_bench::now_seconds();
    // The receiver ends the job when its resident set passes the limit (this machine is
    // shared): the record then says so, with the peak reached.
    const auto guard = [&] {
        const double rss = status_mb("VmRSS:");
        if (rss <= o.rss_limit_mb) return;
        cascade_bench::Record()
            .add("bench", "soak")
            .add("workload", o.workload)
            .add("ranks", ranks)
            .add("messages", o.messages)
            .add("received", received.load())
            .add("message_bytes", is_large ? o.large_bytes : 8L)
            .add("slow_ns", o.slow_ns)
            .add("peak_rss_mb", status_mb("VmHWM:"), "%.2f")
            .add("rss_limit_mb", o.rss_limit_mb, "%.0f")
            .add("limit_exceeded", true)
            .add("seconds", cascade_bench::now_seconds() - t0, "%.2f")
            .print();
        std::fprintf(stderr, "soak: %s: rank 0 passed %.0f MB resident after %ld messages\n",
                     o.workload.c_str(), o.rss_limit_mb, received.load());
        MPI_Abort(MPI_COMM_WORLD, 3);
    };
    auto small = comm.make_active_msg(
        [&](long& i) {
            slow(o.slow_ns);
            if (i < 0) bad.fetch_add(1);
            if (received.fetch_add(1) % 10000 == 0) guard();
        },
        "flood_small");
    std::vector<char> body(static_cast<std::size_t>(o.large_bytes), 'y');
    // Receive buffers, allocated when a header arrives, freed when its body has been handled
    // (both on the communication thread).
    std::unordered_map<std::int64_t, std::unique_ptr<char[]>> buffers;
    const auto slot = [](int from, long i) { return (std::int64_t(from) << 40) + i; };
    auto large = comm.make_large_active_msg(
        [&](int& from, long& i) {
            guard();
            slow(o.slow_ns);
            auto it = buffers.find(slot(from, i));
            if (it == buffers.end() || (!body.empty() && it->second[body.size() - 1] != 'y'))
                bad.fetch_add(1);
            if (it != buffers.end()) buffers.erase(it);
            received.fetch_add(1);
        },
        [&](int& from, long& i) {
            if (buffers.size() % 64 == 0) guard();
            auto& b = buffers[slot(from, i)];
            b.reset(new char[body.size() + 1]);
            return b.get();
        },
        [](int&, long&) {}, "flood_large");
    for (long i = 0; i < mine; ++i) {
        if (is_large)
            large->send_large(0, cascade::view<char>(body.data(), body.size()), me, i);
        else
            small->send(0, i);
    }
    tp.join();
    const double secs = reduce(cascade_bench::now_seconds() - t0, MPI_MAX);
    const double hwm = status_mb("VmHWM:");
    const double senders_max = reduce(me == 0 ? 0.0 : hwm, MPI_MAX);
    const long total = static_cast<long>(reduce(static_cast<double>(received.load()), MPI_SUM));
    const long errors = static_cast<long>(reduce(static_cast<double>(bad.load()), MPI_SUM));
    if (me == 0) {
        cascade_bench::Record()
            .add("bench", "soak")
            .add("workload", o.workload)
            .add("ranks", ranks)
            .add("messages", total)
            .add("message_bytes", is_large ? o.large_bytes : 8L)
            .add("slow_ns", o.slow_ns)
            .add("peak_rss_mb", hwm, "%.2f")
            .add("peak_rss_mb_senders", senders_max, "%.2f")
            .add("rss_limit_mb", o.rss_limit_mb, "%.0f")
            .add("limit_exceeded", false)
            .add("seconds", secs, "%.2f")
            .print();
        if (total != o.messages || errors)
            std::fprintf(stderr, "soak: %ld of %ld messages arrived, %ld wrong\n", total,
                         o.messages, errors);
    }
    return total != o.messages || errors ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    try {
        o = parse(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "soak: %s\n", e.what());
        return 2;
    }
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rc = 0;
    try {
        rc = o.workload == "mixed"     ? run_mixed(o)
             : o.workload == "objects" ? run_objects(o)
                                       : run_flood(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "soak: %s\n", e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return rc;
}
