// A TaskTorrent-style program through <tasktorrent/tasktorrent.hpp>: every name the compat
// layer provides beyond the paper's example (Threadpool_shared, Task and insert, Logger,
// DepsLogger, set_logger, recv_process, is_done, get_n_msg_processed / get_n_msg_queued,
// blocking_send_large, the constructor forms, the standard headers of the umbrella header,
// one ActiveMsg for both the small and the large form, bodies of another element type than
// the receiver's buffer, Serializer).
// Runs at any rank count; returns 0 when every check holds.
#include "tasktorrent/src/serialization.hpp"  // TaskTorrent's test of its serializer includes it
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

        // TaskTorrent's Serializer (tasktorrent/src/serialization.hpp): values and views.
        Serializer<int, view<double>, char> ser;
        vector<double> d = {1.5, 2.5, 3.5};
        vector<char> buf(ser.size(7, view<double>(d.data(), d.size()), 'x'));
        ser.write_buffer(buf.data(), buf.size(), 7, view<double>(d.data(), d.size()), 'x');
        auto [i7, dv, cx] = ser.read_buffer(buf.data(), buf.size());
        check(i7 == 7 && cx == 'x' && dv.size() == 3 && dv.data()[2] == 3.5, "Serializer");
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
        // recv_process waits for one message per call, as in TaskTorrent.
        for (int i = 0; i < 2; ++i)
            comm.recv_process();
        while (!comm.is_done())
            comm.progress();
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
    {
        // One active message object for both forms, as in TaskTorrent: a body of any element
        // type into the receiver's buffer, a small send on a message made with a body, an
        // empty body on a message made without one. recv_process once per message.
        static_assert(
            std::is_convertible_v<int, MPI_Comm> || std::is_constructible_v<Communicator, int>,
            "Communicator comm(verb)");
        Communicator comm(MPI_COMM_WORLD, 0);
        const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
        vector<int> ints(1000);
        for (int i = 0; i < 1000; ++i)
            ints[i] = rank * 1000 + i;
        vector<char> bytes_in(ints.size() * sizeof(int));
        int wheres = 0, arrivals = 0, completes = 0, bodies_ok = 0, smalls = 0;
        auto am = comm.make_large_active_msg(
            [&](int& from, int& count) {
                ++arrivals;
                if (count == 0) return;
                vector<int> got(count);
                memcpy(got.data(), bytes_in.data(), count * sizeof(int));
                bodies_ok += from == prev && got.front() == from * 1000 &&
                             got.back() == from * 1000 + count - 1;
            },
            [&](int&, int& count) {
                ++wheres;
                return count > 0 ? bytes_in.data() : nullptr;  // a char* for a view<int>
            },
            [&](int&, int&) { ++completes; });
        auto plain = comm.make_active_msg([&](int& from) { smalls += from == prev; });
        const int count = static_cast<int>(ints.size()), none = 0;
        am->send_large(next, view<int>(ints.data(), ints.size()), rank, count);
        am->send(next, rank, none);                  // where and complete run all the same
        plain->send_large(next, view<int>(), rank);  // no body: a send
        bool threw = false;
        try {
            plain->send_large(next, view<int>(ints.data(), 1), rank);
        } catch (const cascade::UsageError&) {
            threw = true;
        }
        for (int i = 0; i < 5; ++i)
            plain->send(next, rank);  // queued together: they may arrive in one MPI message
        for (int i = 0; i < 8; ++i)
            comm.recv_process();
        while (!comm.is_done())
            comm.progress();
        MPI_Barrier(MPI_COMM_WORLD);
        check(arrivals == 2 && wheres == 2 && bodies_ok == 1, "a view<int> body into a char*");
        check(completes == 2, "complete ran for the large and the small send");
        check(smalls == 6 && threw, "send_large on a message made without a body");
        check(comm.get_n_msg_processed() == 8, "recv_process processed 8 messages");
    }
    int any = 0;
    MPI_Allreduce(&failures, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("compat_tasktorrent: %s\n", any == 0 ? "OK" : "FAILED");
    MPI_Finalize();
    return any == 0 ? 0 : 1;
}
