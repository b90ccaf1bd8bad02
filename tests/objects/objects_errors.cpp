// Mistakes with mobile objects that must end the job with a message naming the handler, the
// object and the ranks (run by tests/CMakeLists.txt through expect_failure.sh).
#include <cascade/cascade.hpp>
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
        // once its runs were short) throws: the job ends as for a worker's task.
        auto bad = objs.make_handler<Counter>(
            [&](Counter& c, long& k) {
                if (k < 0) throw std::runtime_error("counter overflow");
                c.value += k;
                return comm.on_comm_thread() && tp.current_thread() < 0;
            },
            {.name = "bad"});
        if (me == 0) objs.create<Counter>();
        MPI_Barrier(MPI_COMM_WORLD);
        if (me == 1) {
            const mobile_ptr<Counter> p(ObjectKey{0, 0, 1});
            int streak = 0;  // calls in a row that ran on rank 0's communication thread
            for (long i = 0; i < 10000 && streak < 8; ++i)
                streak = bad->call(p, 1L).get() ? streak + 1 : 0;
            bad->invoke(p, -1L);
        }
    } else {
        std::fprintf(stderr, "usage: objects_errors destroyed|order|throws|throws_comm\n");
        return 2;
    }
    tp.join();
    return 0;
}
