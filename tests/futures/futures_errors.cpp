// Mistakes that must end the job with a message naming ranks and function.
#include <cascade/cascade.hpp>
#include <cstring>

int main(int argc, char** argv) {
    cascade::Communicator comm;
    cascade::Threadpool tp(1, &comm);
    cascade::Futures fx(tp, &comm);
    const int me = comm.rank();
    const char* what = argc > 1 ? argv[1] : "";
    if (std::strcmp(what, "order") == 0) {
        // rank 1 registers its functions in another order than rank 0
        if (me == 1) {
            fx.make_async([](double x) { return x; }, "doubles");
            fx.make_async([](int x) { return x; }, "ints");
        } else {
            auto a = fx.make_async([](int x) { return x; }, "ints");
            fx.make_async([](double x) { return x; }, "doubles");
            if (me == 0) cascade::async(1, a, 3).get();
        }
    } else if (std::strcmp(what, "same_types") == 0) {
        // two functions of the same types, registered in another order on rank 1
        auto plus1 = [](int x) { return x + 1; };
        auto times2 = [](int x) { return x * 2; };
        if (me == 1) {
            fx.make_async(times2, "times2");
            fx.make_async(plus1, "plus1");
        } else {
            auto a = fx.make_async(plus1, "plus1");
            fx.make_async(times2, "times2");
            if (me == 0) cascade::async(1, a, 3).get();
        }
    } else if (std::strcmp(what, "missing") == 0) {
        if (me == 0) {
            auto a = fx.make_async([](int x) { return x; }, "only_on_0");
            cascade::async(1, a, 3).get();
        }
    }
    tp.join();
}
