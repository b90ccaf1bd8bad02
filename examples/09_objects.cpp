// Mobile objects: a counter created on rank 0 travels around the ranks while every rank adds
// to it; each request runs where the counter lives at that moment, exactly once.
#include <cascade/cascade.hpp>

#include <cstdio>

struct Counter {
    long value = 0;
};

int main() {
    cascade::Communicator comm;
    cascade::Threadpool tp(2, &comm);
    cascade::Objects objs(tp, comm);  // same point on every rank
    const int me = comm.rank(), n = comm.ranks();
    auto add =
        objs.make_handler<Counter>([](Counter& c, long& k) { c.value += k; }, {.name = "add"});
    auto peek =
        objs.make_handler<Counter>([&](const Counter& c) { return c.value * 1000 + objs.rank(); },
                                   {.access = cascade::Access::shared, .name = "peek"});
    cascade::mobile_ptr<Counter> counter;  // its global name, sent to every rank
    auto share = comm.make_active_msg([&](cascade::mobile_ptr<Counter>& p) { counter = p; });
    if (me == 0) {
        counter = objs.create<Counter>();  // lives on rank 0 first
        for (int r = 1; r < n; ++r)
            share->send(r, counter);
    }
    tp.join();

    for (int i = 0; i < 10; ++i)
        add->invoke(counter, long(me + 1));  // from every rank
    if (me == 0)
        for (int r = 1; r < n; ++r)
            objs.migrate(counter, r);  // requests follow it
    tp.join();

    if (me == 0) {
        long v = peek->call(counter).get();  // a result through a future
        std::printf("counter = %ld after %d adds from %d ranks; it lives on rank %ld\n", v / 1000,
                    10 * n, n, v % 1000);
    }
    tp.join();
}
