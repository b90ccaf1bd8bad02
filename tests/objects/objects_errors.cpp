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
    } else {
        std::fprintf(stderr, "usage: objects_errors destroyed|order|throws\n");
        return 2;
    }
    tp.join();
    return 0;
}
