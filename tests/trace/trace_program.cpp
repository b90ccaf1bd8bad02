// Programs run under mpiexec with CASCADE_TRACE / CASCADE_DAG / CASCADE_WATCHDOG set; the
// scripts next to this file check what they wrote or printed.
//   dag    a known small graph: main -> a -> b (local), a -> c on the next rank (through the
//          active message "hop"), c -> d (local)
//   load   a few hundred tasks per rank that exchange small and large active messages
//   pool   a Threadpool without Communicator (no MPI): the trace is written at exit
//   incomplete  the same graph without 'consumer': join() returns, and in checked mode
//          throws IncompleteGraphError naming the rank and 'gather'
//   hang   rank 0: 'gather' waits for one promise more than it gets; the task 'consumer'
//          spins until 'gather' ran, so join() never returns (the watchdog must name it)
//   failhang  rank 0: a task holds work outside the workers (as a device request does) and
//          throws before it hands the hold on, so join() cannot end on 2 ranks or more;
//          the job must end (the watchdog, or after 10 s of unchanged holds) printing the
//          task's error (join() would rethrow it at its end)
//   futures  local and remote asyncs, then() continuations and a when_all: their tasks
//          ("async", "future::then") are named when the trace is written, in
//          ~Communicator, long after their jobs were freed (this crashed once)
#include <atomic>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cascade/cascade.hpp"

using namespace cascade;

namespace {

int run_dag(Communicator& comm) {
    const int me = comm.rank(), n = comm.ranks();
    Threadpool tp(2, &comm);
    Taskflow<int> tf(&tp, "g");
    const char* names[] = {"a", "b", "c", "d"};
    auto hop = comm.make_active_msg([&](int& k) { tf.fulfill_promise(k); }, "hop");
    tf.set_name([&](int k) { return std::string(names[k]); })
        .set_task([](int) {})
        .set_fulfill([&](int k) {
            if (k == 0) {
                tf.fulfill_promise(1);
                hop->send((me + 1) % n, 2);
            } else if (k == 2) {
                tf.fulfill_promise(3);
            }
        });
    if (me == 0) tf.fulfill_promise(0);
    tp.join();
    return 0;
}

int run_load(Communicator& comm) {
    const int me = comm.rank(), n = comm.ranks();
    constexpr int kTasks = 200;
    Threadpool tp(2, &comm, 0, "load");
    Taskflow<int> work(&tp, "work");
    Taskflow<int> done(&tp, "done");
    std::vector<double> body(4096, 1.0), inbox(4096 * static_cast<std::size_t>(kTasks));
    std::atomic<int> arrived{0};
    auto small = comm.make_active_msg([&](int& k) { done.fulfill_promise(k); }, "small");
    auto large = comm.make_large_active_msg(
        [&](int& k) {
            ++arrived;
            done.fulfill_promise(k);
        },
        [&](int& k) { return inbox.data() + 4096 * static_cast<std::size_t>(k); }, [](int&) {},
        "large");
    work.set_task([](int) {
            volatile double x = 0;
            for (int i = 0; i < 2000; ++i)
                x = x + i;
        })
        .set_name([](int k) { return "work(" + std::to_string(k) + ")"; })
        .set_fulfill([&](int k) {
            if (k % 10 == 0)
                large->send_large((me + 1) % n, view<double>(body.data(), body.size()), k);
            else
                small->send((me + 1) % n, k);
        });
    done.set_task([](int) {}).set_name([](int k) { return "done(" + std::to_string(k) + ")"; });
    for (int k = 0; k < kTasks; ++k)
        work.fulfill_promise(k);
    tp.join();
    return arrived.load() == kTasks / 10 ? 0 : 1;
}

int run_pool() {
    Threadpool tp(2);
    Taskflow<std::tuple<int, int>> tf(&tp, "grid");
    tf.set_indegree([](auto k) { return std::get<0>(k) == 0 ? 1 : 2; })
        .set_task([](auto) {})
        .set_fulfill([&](auto k) {
            const auto [i, j] = k;
            if (i + 1 < 20) {
                tf.fulfill_promise({i + 1, j});
                tf.fulfill_promise({i + 1, (j + 1) % 10});
            }
        });
    for (int j = 0; j < 10; ++j)
        tf.fulfill_promise({0, j});
    tp.join();
    return tp.stats().tasks_run == 200 ? 0 : 1;
}

// A ring of tasks over the ranks; rank 1's 20th task sends rank 0 an active message that
// only rank 1 registered: rank 0 ends the job (fail-stop, MPI_Abort).
int run_abort(Communicator& comm) {
    const int me = comm.rank(), n = comm.ranks();
    Threadpool tp(2, &comm);
    Taskflow<int> tf(&tp, "ring");
    auto next = comm.make_active_msg([&](int& k) { tf.fulfill_promise(k); }, "next");
    ActiveMsg<int>* stray = me == 1 ? comm.make_active_msg([](int&) {}, "only_on_rank_1") : nullptr;
    tf.set_indegree([](int) { return 1; })
        .set_name([](int) { return std::string("explode"); })
        .set_mapping([](int) { return 0; })
        .set_task([&](int k) {
            if (me == 1 && k >= 20) {
                stray->send(0, k);
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            if (k < 100000) next->send((me + 1) % n, k + 1);
        });
    if (me == 0) tf.fulfill_promise(0);
    tp.join();
    return 0;
}

int run_hang(Communicator& comm, bool consumer) {
    const int me = comm.rank(), n = comm.ranks();
    Threadpool tp(2, &comm);
    Taskflow<int> tf(&tp, "h");
    std::atomic<bool> gathered{false};
    auto contribute = comm.make_active_msg([&](int& k) { tf.fulfill_promise(k); }, "contribute");
    // Key 0: 'gather' on rank 0 (indegree n + 1, but only n contributions come); key 1:
    // 'consumer' on rank 0, which waits for 'gather'; key 2: 'contribute' on every rank.
    tf.set_indegree([&](int k) { return k == 0 ? n + 1 : 1; })
        .set_name([](int k) {
            return std::string(k == 0 ? "gather" : k == 1 ? "consumer" : "contribute");
        })
        .set_mapping([](int k) { return k == 1 ? 1 : 0; })
        .set_task([&](int k) {
            if (k == 0) gathered = true;
            if (k == 1)
                while (!gathered.load())
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
        })
        .set_fulfill([&](int k) {
            if (k == 2) contribute->send(0, 0);
        });
    tf.fulfill_promise(2);
    if (me == 0 && consumer) tf.fulfill_promise(1);
    tp.join();
    std::printf("rank %d: join returned (the watchdog did not fire)\n", me);
    return 0;
}

int run_failhang(Communicator& comm) {
    Threadpool tp(2, &comm);
    Taskflow<int> tf(&tp, "f");
    tf.set_indegree([](int) { return 1; })
        .set_name([](int) { return std::string("thrower"); })
        .set_task([&](int) {
            tp.hold_external_work();  // released by what the task never got to start
            throw std::runtime_error("thrown while holding work outside the workers");
        });
    if (comm.rank() == 0) tf.fulfill_promise(0);
    tp.join();
    std::printf("rank %d: join returned (the watchdog did not fire)\n", comm.rank());
    return 0;
}

int run_futures(Communicator& comm) {
    const int me = comm.rank(), n = comm.ranks();
    constexpr int kCalls = 100;
    int rc = 0;
    {
        Threadpool tp(2, &comm, 0, "fx");
        Futures fx(tp, &comm);
        auto square = fx.make_async([](int& x) { return x * x; }, "square");
        std::vector<future<int>> fs;
        for (int i = 0; i < kCalls; ++i) {
            fs.push_back(async((me + 1) % n, square, i).then([](int v) { return v + 1; }));
            fs.push_back(async(here, square, i));
            fs.push_back(async(here, [i] { return -i; }));  // unregistered, this rank only
        }
        const std::vector<int> got = when_all(std::move(fs)).get();
        long sum = 0;
        for (int v : got)
            sum += v;
        const long want = 2L * (kCalls - 1) * kCalls * (2 * kCalls - 1) / 6 + kCalls -
                          long(kCalls - 1) * kCalls / 2;
        if (sum != want) {
            std::fprintf(stderr, "rank %d: futures: sum %ld, expected %ld\n", me, sum, want);
            rc = 1;
        }
        tp.join();
    }  // the Futures and every job are gone; the Communicator writes the trace later
    return rc;
}

}  // namespace

struct Counter {  // outside the anonymous namespace: its name in the trace is "Counter"
    long value = 0;
};

namespace {

// Mobile objects: handlers are tasks named "<handler>(<type> <home>:<id>)", also those run on
// the communication thread, the migration one named "migrate(...)", and the layer's messages
// are flows between ranks.
int run_objects(Communicator& comm) {
    const int me = comm.rank(), n = comm.ranks();
    long value = -1;
    {
        Threadpool tp(2, &comm, 0, "objs");
        Objects objs(tp, comm);
        auto add =
            objs.make_handler<Counter>([](Counter& c, long& k) { c.value += k; }, {.name = "add"});
        auto peek = objs.make_handler<Counter>([](const Counter& c, int&) { return c.value; },
                                               {.access = Access::shared, .name = "peek"});
        if (me == 0) objs.create<Counter>();
        MPI_Barrier(comm.mpi_comm());
        const mobile_ptr<Counter> p(ObjectKey{0, 0, 1});
        for (long i = 1; i <= 100; ++i) {
            add->invoke(p, i);
            if (me == 0 && i == 50) objs.migrate(p, n - 1);
        }
        tp.join();
        // One call at a time to an idle pool: once its runs were short, the handler runs on
        // the communication thread, and is a task in the trace there too.
        if (me == 0)
            for (int i = 0; i < 100; ++i)
                peek->call(p, i).get();
        tp.join();
        if (const Counter* c = objs.local(p)) value = c->value;
    }  // the handlers' names must outlive the Objects: the trace is written later
    if (me == n - 1 && value != 5050L * n) {
        std::fprintf(stderr, "rank %d: objects: value %ld, expected %ld\n", me, value, 5050L * n);
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    if (std::strcmp(mode, "pool") == 0) return run_pool();
    int rc = 2;
    {
        Communicator comm;
        if (std::strcmp(mode, "dag") == 0) {
            rc = run_dag(comm);
        } else if (std::strcmp(mode, "load") == 0) {
            rc = run_load(comm);
        } else if (std::strcmp(mode, "hang") == 0) {
            rc = run_hang(comm, true);
        } else if (std::strcmp(mode, "failhang") == 0) {
            rc = run_failhang(comm);
        } else if (std::strcmp(mode, "incomplete") == 0) {
            rc = run_hang(comm, false);
        } else if (std::strcmp(mode, "abort") == 0) {
            rc = run_abort(comm);
        } else if (std::strcmp(mode, "futures") == 0) {
            rc = run_futures(comm);
        } else if (std::strcmp(mode, "objects") == 0) {
            rc = run_objects(comm);
        } else {
            std::fprintf(stderr,
                         "usage: %s dag|load|pool|incomplete|hang|failhang|futures|objects|abort\n",
                         argv[0]);
        }
    }
    return rc;
}
