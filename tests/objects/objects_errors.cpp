// Mistakes with mobile objects that must end the job with a message naming the handler, the
// object and the ranks (run by tests/CMakeLists.txt through expect_failure.sh).
#include <cascade/cascade.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>

using namespace cascade;

struct Counter {
    long value = 0;
};

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    Communicator comm;
    Threadpool tp(2, &comm);
    Objects objs(tp, comm);
    const int me = comm.comm_rank();
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
            for (int i = 0; i < 2000; ++i) {
                bad->call(p, 1L).get();
                bad->invoke(p, -1L);  // ends the job once it ran on the comm thread
                // Alone (a request that arrives behind a deferred one sends both to workers):
                // this thread, which talks to MPI, sends it and waits 1 ms before the next.
                const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
                while (std::chrono::steady_clock::now() < until)
                    comm.progress();
                bad->call(p, 0L).get();
            }
            std::fprintf(stderr, "objects_errors: no request ran on the communication thread\n");
            return 1;
        }
    } else {
        std::fprintf(stderr, "usage: objects_errors destroyed|order|throws|throws_comm\n");
        return 2;
    }
    tp.join();
    return 0;
}
