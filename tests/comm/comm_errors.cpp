// Programs that must fail loudly (run by expect_failure.sh): each mode is one mistake.
//   unknown    rank 1 sends an active message rank 0 never registered
//   signature  ranks register the same AM id with different argument types
//   same_types ranks register two AMs of the same types in different orders
//   task       a task throws on rank 1 while rank 0 is busy
//   handler    an active-message handler throws on rank 0
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "cascade/cascade.hpp"

using namespace cascade;

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    Communicator comm;
    const int me = comm.rank();
    Threadpool tp(2, &comm);
    Taskflow<int> tf(&tp, "explode");
    auto ping = comm.make_active_msg([](int&) {}, "ping");
    if (std::strcmp(mode, "unknown") == 0) {
        if (me == 1) {
            auto extra = comm.make_active_msg([](int&) {}, "only_on_rank_1");
            extra->send(0, 1);
        }
    } else if (std::strcmp(mode, "signature") == 0) {
        if (me == 0) {
            comm.make_active_msg([](int&) {}, "typed");
        } else {
            auto typed = comm.make_active_msg([](double&, double&) {}, "typed");
            typed->send(0, 1.0, 2.0);
        }
    } else if (std::strcmp(mode, "same_types") == 0) {
        auto plus = [](int&) {};
        auto times = [](int&) {};
        if (me == 0) {
            comm.make_active_msg(plus, "plus_one");
            comm.make_active_msg(times, "times_two");
        } else {
            auto t2 = comm.make_active_msg(times, "times_two");
            comm.make_active_msg(plus, "plus_one");
            t2->send(0, 1);
        }
    } else if (std::strcmp(mode, "task") == 0) {
        tf.set_task([&](int k) {
            if (me == 1 && k == 3) throw std::runtime_error("boom in task");
            std::this_thread::sleep_for(std::chrono::milliseconds(me == 1 ? 1 : 200));
            if (k < 1000) tf.fulfill_promise(k + 1);  // rank 0 would run for minutes
        });
        tf.fulfill_promise(0);
    } else if (std::strcmp(mode, "handler") == 0) {
        auto bad = comm.make_active_msg(
            [](int& v) {
                if (v == 7) throw std::runtime_error("boom in handler");
            },
            "bad_handler");
        if (me == comm.ranks() - 1) bad->send(0, 7);
        if (me == 0) {
            tf.set_task([&](int k) {
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
                if (k < 1000) tf.fulfill_promise(k + 1);
            });
            tf.fulfill_promise(0);
        }
    } else {
        std::fprintf(stderr, "usage: %s unknown|signature|same_types|task|handler\n", argv[0]);
        return 2;
    }
    (void)ping;
    tp.join();
    std::printf("rank %d: join returned normally\n", me);
    return 0;
}
