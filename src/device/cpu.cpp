// The cpu device: kernels run on the pool's own workers, on the host's memory (space 0, so
// no copies). A launch is split into up to one piece per worker (whole work groups each); the
// last piece to finish marks the event. No worker waits for anything.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "cascade/trace/event.hpp"
#include "runtime.hpp"

namespace cascade::device::detail {

namespace {
void* scratch_buffer(std::size_t bytes) {
    thread_local std::vector<unsigned char> buf;
    if (buf.size() < bytes) buf.resize(bytes);
    return bytes ? buf.data() : nullptr;
}

// One piece of a launch, small enough to travel inline in a pool task (no allocation).
struct Piece {
    const LaunchRecord* r;
    Event* e;
    std::size_t begin, end;
};

class CpuDevice final : public Device {
  public:
    explicit CpuDevice(Threadpool& tp) : tp_(tp) {}
    DeviceKind kind() const noexcept override { return DeviceKind::cpu; }
    std::string name() const override { return "cpu"; }
    std::size_t capacity() const noexcept override { return 0; }
    void* allocate(std::size_t) override { return nullptr; }
    void deallocate(void*, std::size_t) noexcept override {}
    void copy_in(void* dst, const void* src, std::size_t n, Event& e) override {
        std::memcpy(dst, src, n);
        e.finish();
    }
    void copy_out(void* dst, const void* src, std::size_t n, Event& e) override {
        std::memcpy(dst, src, n);
        e.finish();
    }
    double bandwidth() const noexcept override { return 20e9; }
    double latency() const noexcept override { return 1e-6; }

    void launch(const LaunchRecord& r, Event& e) override {
        const std::size_t groups = r.kernel->single_source() ? Kernel::cpu_groups(r.threads) : 1;
        const std::size_t pieces = std::max<std::size_t>(
            1, std::min<std::size_t>(groups, static_cast<std::size_t>(tp_.workers())));
        // The launch record lives in the task state until the event is handled.
        std::atomic<int>* left = &e.parts;
        std::atomic<bool>* failed = &e.part_failed;
        e.t_start = trace::stamp();
        left->store(static_cast<int>(pieces), std::memory_order_relaxed);
        failed->store(false, std::memory_order_relaxed);
        for (std::size_t p = 0; p < pieces; ++p) {
            Piece pc{&r, &e, groups * p / pieces, groups * (p + 1) / pieces};
            tp_.insert([pc] { run(pc); });
        }
    }

  private:
    static void run(const Piece& pc) {
        try {
            pc.r->kernel->run_cpu(pc.r->slots, pc.r->sizes, pc.r->n, pc.r->threads,
                                  scratch_buffer(pc.r->scratch_bytes), pc.begin, pc.end);
        } catch (...) {
            if (!pc.e->part_failed.exchange(true)) pc.e->error = std::current_exception();
        }
        if (pc.e->parts.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            pc.e->t_end = trace::stamp();
            if (pc.e->part_failed.load(std::memory_order_acquire))
                pc.e->fail(pc.e->error);
            else
                pc.e->finish();
        }
    }
    Threadpool& tp_;
};
}  // namespace

std::unique_ptr<Device> make_cpu_device(Threadpool& tp) {
    return std::make_unique<CpuDevice>(tp);
}

}  // namespace cascade::device::detail
