// A TaskTorrent-style program through <tasktorrent/tasktorrent.hpp>: every name the compat
// layer provides beyond the paper's example (Threadpool_shared, Task and insert, Logger,
// DepsLogger, set_logger, recv_process, is_done, get_n_msg_processed / get_n_msg_queued,
// blocking_send_large, the constructor forms, the standard headers of the umbrella header).
// Runs at any rank count; returns 0 when every check holds.
#include "tasktorrent/tasktorrent.hpp"

#include <sstream>  // the one standard header TaskTorrent's umbrella does not bring in

// The rest (atomic, memory, string, vector, functional, mutex, map, ...) comes with the
// umbrella header, as in TaskTorrent.
using namespace std;
using namespace ttor;

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int failures = 0;
    auto check = [&](bool ok, const char* what) {
        if (!ok) {
            printf("rank %d: FAILED %s\n", comm_rank(), what);
            ++failures;
        }
    };
    const int rank = comm_rank(), n = comm_size();
    {
        // Shared memory: Threadpool_shared, Task inserted directly, Logger, DepsLogger.
        Logger log(1000);
        DepsLogger dlog(1000);
        Threadpool_shared tp(2, 0, "Wk_", false);
        tp.set_logger(&log);
        Taskflow<int> tf(&tp, 0);
        atomic<int> ran{0};
        tf.set_task([&](int k) {
              unique_ptr<Event> e = make_unique<Event>("task " + to_string(k));
              ++ran;
              log.record(move(e));
          })
            .set_fulfill([&](int k) {
                if (k < 9) {
                    dlog.add_event(make_unique<DepsEvent>(tf.name(k), tf.name(k + 1)));
                    tf.fulfill_promise(k + 1);
                }
            })
            .set_name([](int k) { return "chain_" + to_string(k); })
            .set_mapping([](int k) { return k % 2; })
            .set_binding([](int) { return false; })
            .set_indegree([](int) { return 1; });
        for (int i = 0; i < 4; ++i) {
            Task* t = new Task();
            t->run = [&] { ++ran; };
            t->fulfill = [] {};
            t->priority = 1.0;
            t->name = "inserted";
            tp.insert(t, i % tp.size(), i == 0);
        }
        tf.fulfill_promise(0);
        check(!tp.is_done(), "is_done before join");
        tp.start();
        tp.join();
        check(tp.is_done(), "is_done after join");
        check(ran.load() == 14, "10 taskflow tasks and 4 inserted tasks ran");
        check(log.n_events() == 10 && !log.was_full(), "Logger kept 10 events");
        ostringstream os, ds;
        os << log;
        ds << dlog;
        const string logged = os.str(), deps = ds.str();
        check(count(logged.begin(), logged.end(), '\n') == 10, "Logger prints 10 lines");
        check(deps.find("chain_3,chain_4\n") != string::npos, "DepsLogger prints edges");
        check(elapsed(log.get_origin(), wctime()) >= 0, "timer helpers");
    }
    {
        // Distributed: the constructor forms, recv_process, message counts,
        // blocking_send_large.
        Communicator comm(MPI_COMM_WORLD, 0, 1 << 16);  // large bodies in 64 KiB pieces
        Logger log(10);
        comm.set_logger(&log);
        vector<double> block(100000, rank + 1.0), inbox;
        int got = 0, sent = 0;
        auto large = comm.make_large_active_msg(
            [&](int& from) { got += inbox.front() == from + 1.0 && inbox.back() == from + 1.0; },
            [&](int&) {
                inbox.resize(100000);
                return inbox.data();
            },
            [&](int&) { ++sent; });
        auto small = comm.make_active_msg([&](int& from) { got += from == (rank + n - 1) % n; });
        // Outside any pool, the program drives the communicator itself.
        large->blocking_send_large((rank + 1) % n, view<double>(block.data(), block.size()), rank);
        small->blocking_send((rank + 1) % n, rank);
        while (!comm.is_done() || got < 2)
            comm.recv_process();
        MPI_Barrier(MPI_COMM_WORLD);  // every rank has received before counts are read
        check(got == 2, "a large and a small message arrived");
        check(sent == 1, "the large body was sent");
        check(comm.get_n_msg_queued() == 2, "get_n_msg_queued counts 2 sends");
        check(comm.get_n_msg_processed() == 2, "get_n_msg_processed counts 2 receptions");

        Threadpool tp(2, &comm, 0, "Wk_", true);
        Taskflow<int> tf(&tp, 0);
        atomic<int> ran{0};
        tf.set_task([&](int) { ++ran; });
        tf.fulfill_promise(0);
        tp.join();
        check(ran.load() == 1 && tp.is_done(), "distributed pool joined");
    }
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("compat_tasktorrent: %s\n", any == 0 ? "OK" : "FAILED");
    MPI_Finalize();
    return any == 0 ? 0 : 1;
}
