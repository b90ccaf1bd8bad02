// The sim device: a simulated accelerator for tests and models of GPU nodes. Its memory is an
// arena of its own (reserved address space of SimOptions::memory bytes, first-fit with
// coalescing); copies and kernels run on its own engine threads, one per queue (copies in,
// copies out, kernels) or a single one when separate queues are off. A copy takes the
// modelled latency + bytes / bandwidth (half the bandwidth from pageable host memory, when
// page-locked host copies are off); a kernel runs the CPU variant (or sleeps its modelled time)
// after the modelled launch latency. An engine completes what it finished itself (the
// runtime's step, on its thread, while its next operation's modelled time runs).
#include <sys/mman.h>
#include <sys/prctl.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cascade/trace/event.hpp"
#include "runtime.hpp"

namespace cascade::device::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct Op {
    enum Type { in, out, kernel } type;
    void* dst;
    const void* src;
    std::size_t bytes;
    const LaunchRecord* r;
    Event* e;
};

class Engine {
  public:
    Engine(std::string name, const SimOptions& o, bool pinned, bool defer)
        : o_(o), pinned_(pinned), defer_(defer) {
        thread_ = std::thread([this, n = std::move(name)] { run(n); });
    }
    ~Engine() {
        {
            std::lock_guard<std::mutex> g(m_);
            stop_ = true;
        }
        cv_.notify_one();
        thread_.join();
    }
    void push(const Op& op) {
        {
            std::lock_guard<std::mutex> g(m_);
            if (count_ == ring_.size()) grow();
            ring_[(head_ + count_) % ring_.size()] = op;
            ++count_;
        }
        cv_.notify_one();
    }

  private:
    void run(const std::string& name) {
        prctl(PR_SET_TIMERSLACK, 1UL);  // modelled waits of microseconds
        prctl(PR_SET_NAME, name.substr(0, 15).c_str());
        std::vector<unsigned char> scratch;
        std::minstd_rand jitter(static_cast<unsigned>(name.size()) * 7919u + 1u);
        // This thread completes the operations it finishes (runtime.hpp, defer_completions):
        // the runtime's step runs here once the next operation has started (its modelled time
        // runs meanwhile) or when there is none, instead of on a runtime thread woken for it.
        if (defer_) defer_completions();
        for (;;) {
            Op op;
            {
                std::unique_lock<std::mutex> lk(m_);
                if (count_ == 0 && !stop_) {
                    lk.unlock();
                    run_deferred();
                    lk.lock();
                }
                cv_.wait(lk, [&] { return stop_ || count_ > 0; });
                if (count_ == 0) return;
                op = ring_[head_];
                head_ = (head_ + 1) % ring_.size();
                --count_;
            }
            const auto start = Clock::now();
            op.e->t_start = trace::stamp();
            run_deferred();
            try {
                double model;
                if (op.type == Op::kernel) {
                    model = o_.launch_latency;
                    const LaunchRecord& r = *op.r;
                    std::this_thread::sleep_until(start + std::chrono::duration<double>(model));
                    if (o_.run_kernels || !r.kernel->model_fn()) {
                        if (scratch.size() < r.scratch_bytes) scratch.resize(r.scratch_bytes);
                        r.kernel->run_cpu(
                            r.slots, r.sizes, r.n, r.threads,
                            r.scratch_bytes ? scratch.data() : nullptr, 0,
                            r.kernel->single_source() ? Kernel::cpu_groups(r.threads) : 1);
                    } else {
                        model += r.kernel->model_fn()(r.threads);
                    }
                } else {
                    const double bw = pinned_ ? o_.bandwidth : o_.bandwidth / 2;
                    model = o_.latency + static_cast<double>(op.bytes) / bw;
                    if (o_.copy_jitter > 0)
                        model += o_.copy_jitter * static_cast<double>(jitter() % 1024) / 1024.0;
                    std::memcpy(op.dst, op.src, op.bytes);
                }
                std::this_thread::sleep_until(start + std::chrono::duration<double>(model));
                op.e->t_end = trace::stamp();
                op.e->seconds = std::chrono::duration<double>(Clock::now() - start).count();
                op.e->finish();
            } catch (...) {
                op.e->fail(std::current_exception());
            }
        }
        run_deferred();
    }
    SimOptions o_;
    bool pinned_;
    bool defer_;
    std::mutex m_;
    std::condition_variable cv_;
    // A ring of operations that only grows: no allocation per operation once warm.
    void grow() {
        std::vector<Op> r(std::max<std::size_t>(64, ring_.size() * 2));
        for (std::size_t i = 0; i < count_; ++i)
            r[i] = ring_[(head_ + i) % ring_.size()];
        ring_ = std::move(r);
        head_ = 0;
    }
    std::vector<Op> ring_;
    std::size_t head_ = 0, count_ = 0;
    bool stop_ = false;
    std::thread thread_;
};

class SimDevice final : public Device {
  public:
    SimDevice(int number, const SimOptions& o, bool separate, bool pinned, bool defer)
        : name_("sim" + std::to_string(number)), o_(o) {
        kernels_ = std::make_unique<Engine>(name_ + " kernels", o, pinned, defer);
        if (separate) {
            in_ = std::make_unique<Engine>(name_ + " in", o, pinned, defer);
            out_ = std::make_unique<Engine>(name_ + " out", o, pinned, defer);
        }
    }
    ~SimDevice() override {
        kernels_.reset();
        in_.reset();
        out_.reset();
        if (arena_) munmap(arena_, o_.memory);
    }
    DeviceKind kind() const noexcept override { return DeviceKind::sim; }
    std::string name() const override { return name_; }
    std::size_t capacity() const noexcept override { return o_.memory; }
    double bandwidth() const noexcept override { return o_.bandwidth; }
    double latency() const noexcept override { return o_.latency; }
    // The arena is anonymous memory of this process.
    bool host_addressable() const noexcept override { return true; }

    void* allocate(std::size_t bytes) override {
        if (o_.alloc_latency > 0)
            std::this_thread::sleep_for(std::chrono::duration<double>(o_.alloc_latency));
        if (!arena_) {
            void* p = mmap(nullptr, o_.memory, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) throw std::bad_alloc();
            arena_ = static_cast<unsigned char*>(p);
            free_[0] = o_.memory;
        }
        const std::size_t n = round(bytes);
        for (auto it = free_.begin(); it != free_.end(); ++it) {
            if (it->second < n) continue;
            const std::size_t off = it->first, size = it->second;
            free_.erase(it);
            if (size > n) free_[off + n] = size - n;
            return arena_ + off;
        }
        return nullptr;
    }
    void deallocate(void* p, std::size_t bytes) noexcept override {
        std::size_t off = static_cast<std::size_t>(static_cast<unsigned char*>(p) - arena_);
        std::size_t n = round(bytes);
        auto next = free_.lower_bound(off);
        if (next != free_.end() && off + n == next->first) {
            n += next->second;
            next = free_.erase(next);
        }
        if (next != free_.begin()) {
            auto prev = std::prev(next);
            if (prev->first + prev->second == off) {
                prev->second += n;
                return;
            }
        }
        free_[off] = n;
    }
    void copy_in(void* dst, const void* src, std::size_t n, Event& e) override {
        (in_ ? *in_ : *kernels_).push(Op{Op::in, dst, src, n, nullptr, &e});
    }
    void copy_out(void* dst, const void* src, std::size_t n, Event& e) override {
        (out_ ? *out_ : *kernels_).push(Op{Op::out, dst, src, n, nullptr, &e});
    }
    void launch(const LaunchRecord& r, Event& e) override {
        kernels_->push(Op{Op::kernel, nullptr, nullptr, 0, &r, &e});
    }

  private:
    static std::size_t round(std::size_t b) {
        return (std::max<std::size_t>(b, 1) + 255) / 256 * 256;
    }
    std::string name_;
    SimOptions o_;
    unsigned char* arena_ = nullptr;
    std::map<std::size_t, std::size_t> free_;  // offset -> bytes
    std::unique_ptr<Engine> kernels_, in_, out_;
};

}  // namespace

std::unique_ptr<Device> make_sim_device(int number, const SimOptions& o, bool separate_queues,
                                        bool pinned, bool complete_on_engine) {
    return std::make_unique<SimDevice>(number, o, separate_queues, pinned, complete_on_engine);
}

}  // namespace cascade::device::detail
