// StarPU's OpenCL driver on the same empty kernel: a codelet with an OpenCL variant that
// enqueues the kernel and waits for it, one vector handle read by every task.
//   STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=0 STARPU_NOPENCL=1 devices_starpu [--tasks N] [--reps R]
// Prints the same record as devices_overhead with system "starpu".
#define CL_TARGET_OPENCL_VERSION 120
#include <starpu.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/record.hpp"
#include "common/stats.hpp"

namespace {

starpu_opencl_program g_program;

void empty_opencl(void* buffers[], void*) {
    cl_mem m = reinterpret_cast<cl_mem>(STARPU_VECTOR_GET_DEV_HANDLE(buffers[0]));
    const int dev = starpu_worker_get_devid(starpu_worker_get_id());
    cl_kernel k;
    cl_command_queue q;
    if (starpu_opencl_load_kernel(&k, &q, &g_program, "empty", dev) != CL_SUCCESS) std::abort();
    clSetKernelArg(k, 0, sizeof m, &m);
    const std::size_t g = 1;
    cl_event ev;
    clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, &ev);
    clWaitForEvents(1, &ev);
    clReleaseEvent(ev);
    starpu_opencl_release_kernel(k);
}

starpu_codelet make_codelet() {
    starpu_codelet c{};
    c.opencl_funcs[0] = empty_opencl;
    c.nbuffers = 1;
    c.modes[0] = STARPU_R;
    c.name = "empty";
    return c;
}

}  // namespace

int main(int argc, char** argv) {
    int tasks = 2000, reps = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--tasks")
            tasks = std::atoi(argv[i + 1]);
        else if (a == "--reps")
            reps = std::atoi(argv[i + 1]);
    }
    if (starpu_init(nullptr) != 0 || starpu_opencl_worker_get_count() == 0) {
        std::fprintf(stderr,
                     "starpu: no OpenCL worker (STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=0 "
                     "STARPU_NOPENCL=1 and pocl-opencl-icd needed)\n");
        return 0;
    }
    starpu_opencl_load_opencl_from_string("__kernel void empty(__global int* x) { (void)x; }",
                                          &g_program, "");
    starpu_codelet cl = make_codelet();
    int value = 0;
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(&value), 1,
                                sizeof(int));
    starpu_task_insert(&cl, STARPU_R, h, 0);
    starpu_task_wait_for_all();
    std::vector<double> lat, tput;
    for (int r = 0; r < reps; ++r) {
        double t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i) {
            starpu_task_insert(&cl, STARPU_R, h, 0);
            starpu_task_wait_for_all();
        }
        lat.push_back((cascade_bench::now_seconds() - t0) / tasks * 1e6);
        t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i)
            starpu_task_insert(&cl, STARPU_R, h, 0);
        starpu_task_wait_for_all();
        tput.push_back(tasks / (cascade_bench::now_seconds() - t0));
    }
    starpu_data_unregister(h);
    starpu_opencl_unload_opencl(&g_program);
    starpu_shutdown();
    cascade_bench::Record rec;
    rec.add("bench", "overhead").add("device", "opencl").add("system", "starpu");
    rec.add("latency_us", cascade_bench::median(lat))
        .add("tasks_per_s", cascade_bench::median(tput))
        .add("tasks", tasks);
    rec.print();
    return 0;
}
