// Submit-to-completion latency and throughput of empty device tasks: Cascade's cpu, sim and
// opencl devices, and raw OpenCL (clEnqueueNDRangeKernel + wait on the event; N enqueues +
// clFinish) on the same OpenCL device in the same run.
//   devices_overhead [--tasks N] [--reps R] [--systems cascade,raw]
//                    [--devices cpu,sim,opencl,opencl-polling]
// (opencl-polling: the opencl device with DevicesOptions::wait_on_events off, the waiter
// polls and the runtime thread completes the task.)
// One JSON record per (system, device): latency_us (the mean of a batch of N/10 tasks run one
// at a time) and tasks_per_s (N/10 independent tasks, then one wait), medians over 10 R
// batches; the systems take turns batch by batch.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
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

// Cascade on one device kind: one-at-a-time latency and N-at-once throughput of a round.
struct CascadeRun {
    cascade::Threadpool tp{1};
    std::unique_ptr<cascade::Devices> devs;
    std::unique_ptr<cascade::Data<int>> x;
    explicit CascadeRun(const std::string& device) {
        cascade::DevicesOptions o;
        o.cpu = device == "cpu";
        if (device == "sim") {
            o.sim = 1;
            o.sim_options.launch_latency = 0;  // the runtime's overhead, no modelled launch
            o.sim_options.latency = 0;
        }
        if (device == "opencl" || device == "opencl-polling") o.opencl = 1;
        o.wait_on_events = device != "opencl-polling";
        devs = std::make_unique<cascade::Devices>(tp, o);
        x = std::make_unique<cascade::Data<int>>(*devs, 1, "x");
        round(10);  // builds the program, moves x
    }
    std::pair<double, double> round(int tasks) {
        const cascade::Launch l{.on = 0, .threads = {1}};
        double t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i)
            devs->submit(empty, cascade::read(*x), l).get();
        const double lat = (cascade_bench::now_seconds() - t0) / tasks * 1e6;
        t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i)
            devs->submit(empty, cascade::read(*x), l);
        devs->wait_all();
        return {lat, tasks / (cascade_bench::now_seconds() - t0)};
    }
};

// Raw OpenCL on the first device: enqueue + wait per kernel; N enqueues + clFinish.
struct RawRun {
    cl_context ctx = nullptr;
    cl_command_queue q = nullptr;
    cl_program prog = nullptr;
    cl_kernel k = nullptr;
    cl_mem m = nullptr;
    bool ok = false;
    RawRun() {
        cl_platform_id p;
        cl_device_id d;
        cl_uint n = 0;
        if (clGetPlatformIDs(1, &p, &n) != CL_SUCCESS || n == 0 ||
            clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &d, nullptr) != CL_SUCCESS) {
            std::fprintf(stderr, "raw opencl: no OpenCL device (install pocl-opencl-icd)\n");
            return;
        }
        cl_int err;
        ctx = clCreateContext(nullptr, 1, &d, nullptr, nullptr, &err);
        q = clCreateCommandQueue(ctx, d, 0, &err);
        prog = clCreateProgramWithSource(ctx, 1, &kEmptySource, nullptr, &err);
        clBuildProgram(prog, 1, &d, "", nullptr, nullptr);
        k = clCreateKernel(prog, "empty", &err);
        m = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(int), nullptr, &err);
        clSetKernelArg(k, 0, sizeof m, &m);
        ok = true;
        round(10);
    }
    ~RawRun() {
        if (!ok) return;
        clReleaseMemObject(m);
        clReleaseKernel(k);
        clReleaseProgram(prog);
        clReleaseCommandQueue(q);
        clReleaseContext(ctx);
    }
    std::pair<double, double> round(int tasks) {
        const std::size_t g = 1;
        double t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i) {
            cl_event ev;
            clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, &ev);
            clFlush(q);
            clWaitForEvents(1, &ev);
            clReleaseEvent(ev);
        }
        const double lat = (cascade_bench::now_seconds() - t0) / tasks * 1e6;
        t0 = cascade_bench::now_seconds();
        for (int i = 0; i < tasks; ++i)
            clEnqueueNDRangeKernel(q, k, 1, nullptr, &g, nullptr, 0, nullptr, nullptr);
        clFinish(q);
        return {lat, tasks / (cascade_bench::now_seconds() - t0)};
    }
};

}  // namespace

int main(int argc, char** argv) {
    int tasks = 2000, reps = 5;
    std::string systems = "cascade,raw", devices = "cpu,sim,opencl,opencl-polling";
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
    // Every system set up once; then rounds that run each in turn (so drift and other load
    // hit all alike), in batches of tasks / 10; medians over all batches.
    std::unique_ptr<RawRun> raw;
    if (has(systems, "raw") && has(devices, "opencl")) raw = std::make_unique<RawRun>();
    std::vector<std::pair<std::string, std::unique_ptr<CascadeRun>>> runs;
    if (has(systems, "cascade"))
        for (const char* d : {"cpu", "sim", "opencl", "opencl-polling"})
            if (has(devices, d)) {
                try {
                    runs.emplace_back(d, std::make_unique<CascadeRun>(d));
                } catch (const std::exception& e) {
                    std::fprintf(stderr, "cascade %s: %s\n", d, e.what());
                }
            }
    const int batch = std::max(1, tasks / 10);
    std::vector<double> raw_lat, raw_tput;
    std::vector<std::vector<double>> lat(runs.size()), tput(runs.size());
    for (int r = 0; r < reps * 10; ++r) {
        if (raw && raw->ok) {
            auto [l, t] = raw->round(batch);
            raw_lat.push_back(l);
            raw_tput.push_back(t);
        }
        for (std::size_t i = 0; i < runs.size(); ++i) {
            auto [l, t] = runs[i].second->round(batch);
            lat[i].push_back(l);
            tput[i].push_back(t);
        }
    }
    if (!raw_lat.empty())
        emit("raw", "opencl", cascade_bench::median(raw_lat), cascade_bench::median(raw_tput),
             batch);
    for (std::size_t i = 0; i < runs.size(); ++i)
        emit("cascade", runs[i].first.c_str(), cascade_bench::median(lat[i]),
             cascade_bench::median(tput[i]), batch);
    return 0;
}
