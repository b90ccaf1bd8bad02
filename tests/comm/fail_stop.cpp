// Jobs that must end (non-zero, with a message) instead of hanging; run by
// expect_failure.sh at 3 ranks, each mode one way a rank can drop out:
//   sigkill   rank 1 is killed (SIGKILL) in the middle of join() while the others exchange
//             messages with it
//   caught    rank 1 catches an exception that unwound past its pool and returns from main
//             while the other ranks wait in join()
//   progress  an exception is thrown inside progress() on rank 1 (fault injected)
//   outside   a thread outside the pool sends an active message while join() runs (checked
//             mode)
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "cascade/cascade.hpp"
#include "cascade/comm/detail/test_access.hpp"

using namespace cascade;

namespace {

// A ring of messages between all ranks for about `ms` milliseconds; each hop runs a task
// that sends the next one. Lives until the end of main.
struct Ring {
    Communicator& comm;
    Threadpool& tp;
    void (*on_round)(int me, int round);
    int me = comm.rank(), n = comm.ranks();
    std::chrono::steady_clock::time_point end;
    ActiveMsg<int>* hop = nullptr;
    Ring(Communicator& c, Threadpool& t, int ms, void (*f)(int, int) = nullptr)
        : comm(c), tp(t), on_round(f) {
        end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
        hop = comm.make_active_msg(
            [this](int& round) {
                if (on_round) on_round(me, round);
                if (std::chrono::steady_clock::now() >= end) return;
                const int next = round + 1;
                tp.insert([this, next] {
                    std::this_thread::sleep_for(std::chrono::milliseconds(2));
                    hop->send((me + 1) % n, next);
                });
            },
            "hop");
        if (me == 0) hop->send(1 % n, 0);
    }
};

}  // namespace

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    Communicator comm;
    const int me = comm.rank();
    if (std::strcmp(mode, "sigkill") == 0) {
        Threadpool tp(2, &comm);
        Ring ring(comm, tp, 60000, [](int rank, int round) {
            if (rank == 1 && round > 20) std::raise(SIGKILL);
        });
        tp.join();
    } else if (std::strcmp(mode, "caught") == 0) {
        try {
            Threadpool tp(2, &comm);
            Ring ring(comm, tp, 60000);
            if (me == 1) {
                std::this_thread::sleep_for(std::chrono::milliseconds(200));
                throw std::runtime_error("input file missing");
            }
            tp.join();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "rank %d: caught '%s', returning from main\n", me, e.what());
            return 1;
        }
    } else if (std::strcmp(mode, "progress") == 0) {
        Threadpool tp(2, &comm);
        int polls = 0;
        if (me == 1)
            cascade::detail::CommTestAccess::set_progress_fault(comm, [&polls] {
                if (++polls == 1000) throw std::runtime_error("injected fault in progress");
            });
        Ring ring(comm, tp, 60000);
        tp.join();
    } else if (std::strcmp(mode, "outside") == 0) {
        Threadpool tp(2, &comm);
        auto am = comm.make_active_msg([](int&) {}, "from_outside");
        Ring ring(comm, tp, 60000);
        std::thread outsider([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            try {
                if (me == 1) am->send(0, 1);
            } catch (const std::exception& e) {
                std::fprintf(stderr, "rank %d: outside thread: %s\n", me, e.what());
            }
        });
        tp.join();
        outsider.join();
    } else {
        std::fprintf(stderr, "usage: %s sigkill|caught|progress|outside\n", argv[0]);
        return 2;
    }
    std::printf("rank %d: join returned normally\n", me);
    return 0;
}
