// A Data body whose freshest copy is on a device, sent to another rank in pieces (the
// device-to-host copy of piece k+1 overlaps the network transfer of piece k) against the same
// body sent in one piece (the whole copy to the host first, then the message), interleaved in
// one run. Rank 0 writes the body on its sim device (a kernel), sends it, and stops the clock
// when rank 1's handler acknowledges it with a small message. A third way sends the same body
// from a valid host copy (the message alone: the bound pipelining approaches).
//   mpiexec -n 2 devices_pipeline [--mib 8,32,64] [--chunk-kib 1024] [--reps 7] [--gbps 12]
//                                 [--onto-device 1] [--direct 1]
// --onto-device 1: rank 1's handler runs a kernel reading the body on its sim device before it
// acknowledges; the pieces go on to that device as they arrive (DataMsgOptions::to_device),
// the one-piece body and the host-valid one are copied in whole by the kernel's task.
// --direct 1: a fourth way, the direct path forced (GpuAware::force: the sim device's memory is
// host memory): the body goes from rank 0's device copy, and with --onto-device 1 into rank
// 1's, with no copy to or from the host.
// Devices: one sim device per rank modelling a PCIe GPU (--gbps GB/s page-locked copies,
// 10 us per copy). Prints, per size, the median seconds of each way and whole / pipelined; checks
// that every body arrived intact (its first and last elements).
#include <algorithm>
#include <atomic>
#include <cascade/cascade.hpp>
#include <cascade/comm/data_msg.hpp>
#include <cascade/device/devices.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

CASCADE_KERNEL(fill_body, (kernel_global double* y, double base, int n), {
    int i = kernel_global_id_x;
    if (i < n) y[i] = base + i;
});

CASCADE_KERNEL(read_ends, (kernel_global const double* x, kernel_global double* out, int n), {
    if (kernel_global_id_x == 0) out[0] = x[0] + x[n - 1];
});

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

std::vector<std::size_t> parse_list(const char* s) {
    std::vector<std::size_t> out;
    for (const char* p = s; *p;) {
        char* end = nullptr;
        out.push_back(std::strtoull(p, &end, 10));
        p = *end ? end + 1 : end;
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::size_t> mibs = {8, 32, 64};
    std::size_t chunk_kib = 1024;
    int reps = 7;
    double gbps = 12;
    bool onto_device = false;
    bool direct = false;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i];
        if (a == "--mib")
            mibs = parse_list(argv[i + 1]);
        else if (a == "--chunk-kib")
            chunk_kib = std::strtoull(argv[i + 1], nullptr, 10);
        else if (a == "--reps")
            reps = std::atoi(argv[i + 1]);
        else if (a == "--gbps")
            gbps = std::atof(argv[i + 1]);
        else if (a == "--onto-device")
            onto_device = std::atoi(argv[i + 1]) != 0;
        else if (a == "--direct")
            direct = std::atoi(argv[i + 1]) != 0;
    }
    cascade::Communicator comm;
    cascade::Threadpool tp(1, &comm);
    cascade::DevicesOptions o;
    o.cpu = false;
    o.sim = 1;
    o.sim_options.bandwidth = gbps * 1e9;
    o.sim_options.latency = 10e-6;
    o.sim_options.memory = std::size_t(256) << 20;
    cascade::Devices devs(tp, o);
    const int me = comm.rank();
    if (comm.ranks() < 2) {
        if (me == 0) std::printf("devices_pipeline: needs 2 ranks\n");
        return 0;
    }
    std::vector<cascade::Data<double>> bodies;
    for (std::size_t m : mibs)
        bodies.emplace_back(devs, m * (1 << 20) / 8, "body" + std::to_string(m));
    std::atomic<double> t_ack{0};
    std::atomic<int> bad{0};
    using Clock = std::chrono::steady_clock;
    const auto epoch = Clock::now();
    auto now = [&] { return std::chrono::duration<double>(Clock::now() - epoch).count(); };
    auto ack = comm.make_active_msg([&] { t_ack = now(); });
    auto on_body = [&](cascade::Data<double>& d, int& base) {
        const double want = 2 * double(base) + double(d.size() - 1);  // first + last
        if (onto_device) {  // a kernel on the receiver's device reads the body
            cascade::Data<double> ends(devs, 1, "ends");
            devs.submit(read_ends, cascade::read(d), cascade::write(ends), int(d.size()),
                        cascade::Launch{.threads = {1}})
                .wait();
            if (ends.to_vector()[0] != want) ++bad;
        } else {
            auto h = d.request(cascade::DataAccess::read);
            const auto s = h.get();
            if (s.front() + s.back() != want) ++bad;
            d.release();
        }
        ack->send(0);
    };
    auto into = [&](std::size_t n, int&) {
        for (auto& b : bodies)
            if (b.size() == n) return b;
        return cascade::Data<double>{};
    };
    cascade::DataMsgOptions piped, whole, straight;
    piped.chunk_bytes = chunk_kib << 10;
    whole.chunk_bytes = 0;
    piped.gpu_aware = whole.gpu_aware = cascade::GpuAware::off;
    straight.gpu_aware = cascade::GpuAware::force;
    if (onto_device) piped.to_device = straight.to_device = 0;  // pieces go on as they arrive
    cascade::DataActiveMsg<double, int> m_piped(comm, &devs, on_body, into, "piped", piped);
    cascade::DataActiveMsg<double, int> m_whole(comm, &devs, on_body, into, "whole", whole);
    cascade::DataActiveMsg<double, int> m_direct(comm, &devs, on_body, into, "direct", straight);
    const int ways = direct ? 4 : 3;
    if (me == 0)
        std::printf("%-6s %-12s %-12s %-12s %-8s%s\n", "MiB", "pipelined_s", "whole_s", "host_s",
                    "whole/pipelined", direct ? " direct_s" : "");
    for (std::size_t i = 0; i < mibs.size(); ++i) {
        cascade::Data<double>& d = bodies[i];
        const std::size_t n = d.size();
        std::vector<double> times[4];                  // pipelined, whole, host copy valid, direct
        for (int r = 0; r < ways * (reps + 1); ++r) {  // a warm-up run of each, then in turn
            const int way = r % ways;
            double t0 = 0;
            if (me == 0) {
                if (way != 2) {  // fresh on the device, the host copy stale
                    devs.submit(fill_body, cascade::write(d), double(r), int(n),
                                cascade::Launch{.threads = {n}});
                } else {  // the same values, the host copy valid (the message alone)
                    auto h = d.request(cascade::DataAccess::write);
                    const auto s = h.get();
                    for (std::size_t k = 0; k < s.size(); ++k)
                        s[k] = double(r) + double(k);
                    d.release();
                }
                devs.wait_all();
                t0 = now();
                (way == 0 ? m_piped : way == 3 ? m_direct : m_whole).send(1, d, r);
            }
            tp.join();
            if (me == 0 && r >= ways) times[way].push_back(t_ack.load() - t0);
        }
        if (me == 0) {
            const double a = median(times[0]), b = median(times[1]), c = median(times[2]);
            std::printf("%-6zu %-12.5f %-12.5f %-12.5f %-8.3f", mibs[i], a, b, c, b / a);
            if (direct) std::printf("        %-12.5f", median(times[3]));
            std::printf("\n");
        }
    }
    if (me == 0 && direct && m_direct.sent_by(cascade::DataPath::direct) == 0) {
        std::printf("devices_pipeline: the direct way was never taken\n");
        return 1;
    }
    tp.join();
    if (me == 1 && bad.load() != 0) {
        std::printf("devices_pipeline: %d bodies arrived wrong\n", bad.load());
        return 1;
    }
    return 0;
}
