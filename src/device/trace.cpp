// Device work in the trace: one track per device and queue ("sim0 kernels", "sim0 in",
// "sim0 out"), each kernel and transfer a slice named after its task or Data; and counters
// of bytes moved per direction, which `cascade-trace summary` lists.
#include <algorithm>

#include "cascade/trace/recorder.hpp"
#include "runtime.hpp"

namespace cascade::device::detail {

namespace {
// A slice's name travels in the task payload; describe() gives it back to the exporter.
struct Named {
    const char* text;  // interned for the process (see name_of)
    static std::string describe(const Task& t) { return t.as<Named>().text; }
    static constexpr TaskVTable vtable{nullptr, &describe, nullptr};
};
// The names outlive every static destructor: the trace is written by an exit handler, which
// may run after a function-local static here has been destroyed.
const char* name_of(const std::string& s) {
    static std::mutex m;
    static auto* names = new std::vector<std::unique_ptr<std::string>>;  // never freed
    std::lock_guard<std::mutex> g(m);
    for (auto& n : *names)
        if (*n == s) return n->c_str();
    names->push_back(std::make_unique<std::string>(s));
    return names->back()->c_str();
}
}  // namespace

void Runtime::trace_setup() {
    trace::init_from_env();
    if (!trace::recording()) return;
    for (auto& s : slots) {
        // "opencl0 (pthread-...)" -> "opencl0": the device's short name.
        const std::string full = s.dev->name();
        const std::string n = opts.name + " " + full.substr(0, full.find(" ("));
        s.trace_kernel = trace::new_buffer(n + " kernels");
        if (s.dev->space != 0) {
            s.trace_in = trace::new_buffer(n + " in");
            s.trace_out = trace::new_buffer(n + " out");
        }
    }
}

void Runtime::trace_op(int d, int queue, const std::string& what, Event& e, std::uint64_t link) {
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    void* b = queue == 0 ? s.trace_kernel : queue == 1 ? s.trace_in : s.trace_out;
    if (!b) return;
    auto* buf = static_cast<trace::Buffer*>(b);
    if (trace::Event* ev = buf->reserve(trace::Kind::task)) {
        ev->vt = &Named::vtable;
        Task t;
        t.emplace<Named>(Named{name_of(queue == 0 ? what : (queue == 1 ? "in " : "out ") + what)});
        std::memcpy(ev->payload, t.payload, sizeof ev->payload);
        // Stamps: the op's own when the backend gave them, else its handling time.
        const std::int64_t now = trace::stamp();
        // A track shows one operation at a time: a slice starts no earlier than the previous
        // one on its track ended (commands of an in-order queue are stamped when issued and
        // when seen done; kernels on the cpu device may overlap).
        std::int64_t& last = s.trace_last[queue];
        ev->t0 = std::max(e.t_start ? e.t_start : now, last);
        ev->t1 = std::max(e.t_end ? e.t_end : now, ev->t0);
        last = ev->t1;
        ev->a = ev->b = 0;
        ev->c = trace::kNone;
        ev->peer = -1;
        ev->am = 0;
        ev->flags = 0;
        buf->commit();
        // A copy that is a step of a linked transfer (a piece of a Data body): the same span
        // as a link point, which the trace joins to the message's steps.
        if (link == 0 || queue == 0) return;
        const std::int64_t t0 = ev->t0, t1 = ev->t1;
        if (trace::Event* lk = buf->reserve(trace::Kind::link)) {
            lk->t0 = t0;
            lk->t1 = t1;
            lk->a = link;
            lk->b = static_cast<std::uint64_t>(queue == 2 ? trace::LinkStep::device_to_host
                                                          : trace::LinkStep::host_to_device);
            lk->c = trace::kNone;
            buf->commit();
        }
    }
}

void Runtime::trace_counters() {
    if (!trace::recording()) return;
    std::uint64_t in = 0, out = 0;
    for (auto& s : slots) {
        const std::string full = s.dev->name();
        const std::string n = "device." + full.substr(0, full.find(" ("));
        trace::set_counter(n + ".bytes_in", s.stats.bytes_in);
        trace::set_counter(n + ".bytes_out", s.stats.bytes_out);
        trace::set_counter(n + ".kernels", s.stats.tasks);
        trace::set_counter(n + ".evictions", s.stats.evictions);
        in += s.stats.bytes_in;
        out += s.stats.bytes_out;
    }
    trace::set_counter("device.bytes_host_to_device", in);
    trace::set_counter("device.bytes_device_to_host", out);
}

}  // namespace cascade::device::detail
