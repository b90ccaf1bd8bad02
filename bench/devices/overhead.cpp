// Submit-to-completion latency and throughput of empty device tasks: Cascade's cpu, sim and
// opencl devices, and raw OpenCL (clEnqueueNDRangeKernel + wait on the event; N enqueues +
// clFinish) on the same OpenCL device in the same run.
//   devices_overhead [--tasks N] [--reps R] [--systems cascade,raw] [--devices cpu,sim,opencl]
// One JSON record per (system, device): latency_us (median over R rounds of the mean of
// N one-at-a-time tasks) and tasks_per_s (N independent tasks, then one wait; median).
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cascade/device/devices.hpp"
#include "common/record.hpp"
#include "common/stats.hpp"

namespace {

CASCADE_KERNEL(empty, (kernel_global int* x), { (void)x; });

const char* kEmptySource = "__kernel void empty(__global int* x) { (void)x; }";

bool has(const std::string& list, const std::string& item) {
    return ("," + list + ",").find("," + item + ",") != std::string::npos;
}

void emit(const char* system, const char* device, double lat_us, double tps, int tasks) {
    cascade_bench::Record r;
    r.add("bench", "overhead").add("device", device).add("system", system);
    r.add("latency_us", lat_us).add("tasks_per_s", tps).add("tasks", tasks);
    r.print();
}

void cascade_run(const std::string& device, int tasks, int reps) {
    cascade::Threadpool tp(1);
    cascade::DevicesOptions o;
    o.cpu = device == "cpu";
    if (device == "sim") {
        o.sim = 1;
        o.sim_options.launch_latency = 0;  // the runtime's overhead, no modelled launch
        o.sim_options.latency = 0;
    }
    if (device == "opencl") o.opencl = 1;
    cascade::Devices devs(tp, o);
    cascade::Data<int> x(devs, 1, "x");
    const cascade::Launch l{.on = 0, .threads = {1}};
    devs.submit(empty, cascade::read(x), l).get();  // builds the program, moves x
    std::vector<double> lat, tput;
    for (int r = 0; r < reps; ++r) {
        double t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i)
            devs.submit(empty, cascade::read(x), l).get();
        lat.push_back((cascade_bench::now_seconds() - t0) / tasks * 1e6);
        t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i)
            devs.submit(empty, cascade::read(x), l);
        devs.wait_all();
        tput.push_back(tasks / (cascade_bench::now_seconds() - t0));
    }
    emit("cascade", device.c_str(), cascade_bench::median(lat), cascade_bench::median(tput), tasks);
}

void raw_opencl(int tasks, int reps) {
    cl_platform_id p;
    cl_device_id d;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &p, &n) != CL_SUCCESS || n == 0 ||
        clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, nullptr) != CL_SUCCESS) {
        std::fprintf(stderr, "raw opencl: no OpenCL device (install pocl-opencl-icd)\n");
        return;
    }
    cl_int err;
    cl_context ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, d, 0, &err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &kEmptySource, nullptr, &err);
    clBuildProgram(prog, 1, &d, "", nullptr, nullptr);
    cl_kernel k = clCreateKernel(prog, "empty", &err);
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(int), nullptr, &err);
    clSetKernelArg(k, 0, sizeof m, &m);
    const std::size_t g = 1;
    std::vector<double> lat, tput;
    for (int r = 0; r < reps + 1; ++r) {
        double t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i) {
            cl_event ev;
            clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, &ev);
            clFlush(q);
            clWaitForEvents(1, &ev);
            clReleaseEvent(ev);
        }
        const double l = (cascade_bench::now_seconds() - t0) / tasks * 1e6;
        t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i)
            clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, nullptr);
        clFinish(q);
        const double t = tasks / (cascade_bench::now_seconds() - t0);
        if (r > 0) {  // the first round warms up
            lat.push_back(l);
            tput.push_back(t);
        }
    }
    emit("raw", "opencl", cascade_bench::median(lat), cascade_bench::median(tput), tasks);
    clReleaseMemObject(m);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
}

}  // namespace

int main(int argc, char** argv) {
    int tasks = 2000, reps = 5;
    std::string systems = "cascade,raw", devices = "cpu,sim,opencl";
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--tasks")
            tasks = std::atoi(argv[i + 1]);
        else if (a == "--reps")
            reps = std::atoi(argv[i + 1]);
        else if (a == "--systems")
            systems = argv[i + 1];
        else if (a == "--devices")
            devices = argv[i + 1];
    }
    // Interleaved: each round runs every system once, so drift hits all alike.
    if (has(systems, "raw") && has(devices, "opencl")) raw_opencl(tasks, reps);
    if (has(systems, "cascade"))
        for (const char* d : {"cpu", "sim", "opencl"})
            if (has(devices, d)) {
                try {
                    cascade_run(d, tasks, reps);
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "cascade %s: %s\n", d, e.what());
                }
            }
    return 0;
}
