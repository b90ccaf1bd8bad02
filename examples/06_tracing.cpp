// Tracing from the program: the same as CASCADE_TRACE=pipeline.json CASCADE_DAG=pipeline.dot.
// Open pipeline.json at https://ui.perfetto.dev; `tools/cascade-trace summary pipeline.json`
// prints busy/idle time per thread and the critical path.
#include <cascade/cascade.hpp>

#include <string>

int main() {
    cascade::trace::Options o;
    o.trace_path = "pipeline.json";
    o.dag_path = "pipeline.dot";
    cascade::trace::configure(o);  // before the pool starts

    cascade::Threadpool tp(2);
    cascade::Taskflow<int> stage(&tp, "stage");
    stage.set_name([](int k) { return "stage " + std::to_string(k); })
        .set_task([](int) {
            volatile double x = 0;
            for (int i = 0; i < 100000; ++i)
                x = x + i;
        })
        .set_fulfill([&](int k) {
            if (k < 20) stage.fulfill_promise(k + 1);
        });
    stage.fulfill_promise(0);
    tp.join();
}  // the trace is written when the program ends
