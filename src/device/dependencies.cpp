// Submission: a task's arguments are checked against its kernel, and its implicit
// dependencies are taken from the access modes in submission order (readers share; a writer
// waits for the earlier readers and the earlier writer). Each Data keeps its last writer and
// the readers since; a task locks all its Data together (in address order), so tasks submitted
// concurrently by several threads still see one order.
#include <algorithm>
#include <cstring>

#include "cascade/core/errors.hpp"
#include "cascade/device/devices.hpp"
#include "runtime.hpp"

namespace cascade {

using device::detail::ArgSlot;
using device::detail::DataBlock;
using device::detail::TaskKind;
using device::detail::TaskState;

namespace device::detail {
bool add_successor(TaskState* p, TaskState* s, bool propagate);
void drop(TaskState* s) noexcept;

// Ends a readers' join: it completes once the readers in it did (its successors then run).
void close_join(TaskState* j) {
    Runtime* rt = j->rt;
    j->submitted = true;
    rt->tp.hold_external_work();  // join() waits for it (released in complete())
    rt->outstanding.fetch_add(1, std::memory_order_relaxed);
    j->refs.fetch_add(1, std::memory_order_relaxed);  // the runtime's, until complete()
    if (j->deps.fetch_sub(1, std::memory_order_acq_rel) == 1) rt->make_ready(j);
    drop(j);  // the Data's
}

namespace {
// Gives back what a task being built holds (its Data references), for an error.
void abandon(TaskState* s) noexcept {
    for (ArgSlot& x : s->args)
        if (x.block) release(x.block);
    s->args.clear();
}

const char* kind_name(ParamKind k) {
    switch (k) {
        case ParamKind::pointer:
            return "a pointer";
        case ParamKind::i32:
            return "a 4-byte integer";
        case ParamKind::i64:
            return "an 8-byte integer";
        case ParamKind::f32:
            return "a float";
        case ParamKind::f64:
            return "a double";
        case ParamKind::other:
            return "a value";
    }
    return "?";
}

// Registers t's implicit dependencies on the Data of its arguments.
void register_accesses(TaskState* t);
}  // namespace
void register_accesses_of(TaskState* t) {
    register_accesses(t);
}
namespace {
void register_accesses(TaskState* t) {
    DataBlock* blocks[16];
    std::vector<DataBlock*> many;
    DataBlock** bs = blocks;
    std::size_t n = 0;
    for (const ArgSlot& a : t->args)
        if (a.block) ++n;
    if (n == 0) return;
    if (n > 16) {
        many.resize(n);
        bs = many.data();
    }
    n = 0;
    for (const ArgSlot& a : t->args)
        if (a.block) bs[n++] = a.block;
    std::sort(bs, bs + n);
    n = static_cast<std::size_t>(std::unique(bs, bs + n) - bs);
    for (std::size_t i = 0; i < n; ++i)
        bs[i]->lock.lock();
    for (std::size_t i = 0; i < n; ++i) {
        DataBlock* b = bs[i];
        DataAccess mode{};
        for (const ArgSlot& a : t->args)
            if (a.block == b)
                mode = static_cast<DataAccess>(static_cast<int>(mode) | static_cast<int>(a.mode));
        // Only a reader uses what the last writer produced: its failure fails the reader; a
        // task that overwrites the data just runs after it.
        if (b->last_writer) add_successor(b->last_writer, t, reads(mode));
        if (writes(mode)) {
            // A writer waits for the readers since the last writer through their join.
            if (TaskState* j = b->readers_join) {
                b->readers_join = nullptr;
                add_successor(j, t, false);
                close_join(j);
            }
            if (b->last_writer) drop(b->last_writer);
            t->refs.fetch_add(1, std::memory_order_relaxed);
            b->last_writer = t;
        } else {
            // Readers share: each one joins the group the next writer will wait for. The group
            // is one task state, so finished readers hold nothing and a Data read by many
            // tasks keeps no list of them.
            if (!b->readers_join) {
                TaskState* j = t->rt->acquire();
                j->kind = TaskKind::join;
                b->readers_join = j;
            }
            add_successor(t, b->readers_join, false);
        }
    }
    for (std::size_t i = n; i-- > 0;)
        bs[i]->lock.unlock();
}
}  // namespace
}  // namespace device::detail

TaskState* Devices::begin(const Kernel& k) {
    TaskState* s = rt_->acquire();
    s->kind = TaskKind::kernel;
    s->kernel = &k;
    s->name = k.name();
    return s;
}

void Devices::add_data(TaskState* s, DataBlock* b, DataAccess m, std::size_t elem) {
    const std::size_t i = s->args.size();
    auto fail = [&](const std::string& what) {
        device::detail::abandon(s);
        device::detail::drop(s);
        throw UsageError("task '" + s->kernel->name() + "', argument " + std::to_string(i) + ": " +
                         what);
    };
    if (!b) fail("an empty Data (default-constructed or moved from)");
    if (b->rt != rt_.get())
        fail("Data '" + b->name + "' belongs to another Devices ('" + b->rt->opts.name +
             "'), not to '" + opts_.name + "'");
    if (const auto* ss = s->kernel->single_source()) {
        if (i >= ss->params.size())
            fail("the kernel has only " + std::to_string(ss->params.size()) + " parameters");
        const auto& p = ss->params[i];
        if (p.kind != device::detail::ParamKind::pointer)
            fail("Data '" + b->name + "' given where the kernel expects " +
                 device::detail::kind_name(p.kind));
        if (p.size != elem)
            fail("Data '" + b->name + "' has elements of " + std::to_string(elem) +
                 " bytes, the kernel's pointer parameter points to " + std::to_string(p.size) +
                 "-byte elements");
        if (p.is_const && writes(m))
            fail("Data '" + b->name + "' is passed for " + to_string(m) +
                 " to a pointer-to-const parameter");
    }
    ArgSlot& a = s->args.emplace_back();
    a.block = b;
    a.mode = m;
    a.size = 0;
    device::detail::retain(b);
}

void Devices::add_scalar(TaskState* s, const void* p, std::size_t bytes, int kind, long long iv,
                         double fv) {
    const std::size_t i = s->args.size();
    ArgSlot a;
    a.block = nullptr;
    if (const auto* ss = s->kernel->single_source()) {
        using device::detail::ParamKind;
        auto fail = [&](const std::string& what) {
            device::detail::abandon(s);
            device::detail::drop(s);
            throw UsageError("task '" + s->kernel->name() + "', argument " + std::to_string(i) +
                             ": " + what);
        };
        if (i >= ss->params.size())
            fail("the kernel has only " + std::to_string(ss->params.size()) + " parameters");
        const auto& prm = ss->params[i];
        auto put = [&](auto v) {
            std::memcpy(a.value, &v, sizeof v);
            a.size = sizeof v;
        };
        switch (prm.kind) {
            case ParamKind::pointer:
                fail("a scalar given where the kernel expects a pointer (a Data)");
                break;
            case ParamKind::i32:
                if (kind == 1)
                    put(static_cast<int>(iv));
                else if (kind == 2)
                    put(static_cast<int>(fv));
                else
                    fail("not a number");
                break;
            case ParamKind::i64:
                if (kind == 1)
                    put(static_cast<long>(iv));
                else if (kind == 2)
                    put(static_cast<long>(fv));
                else
                    fail("not a number");
                break;
            case ParamKind::f32:
                if (kind == 1)
                    put(static_cast<float>(iv));
                else if (kind == 2)
                    put(static_cast<float>(fv));
                else
                    fail("not a number");
                break;
            case ParamKind::f64:
                if (kind == 1)
                    put(static_cast<double>(iv));
                else if (kind == 2)
                    put(fv);
                else
                    fail("not a number");
                break;
            case ParamKind::other:
                if (bytes != prm.size)
                    fail("a " + std::to_string(bytes) + "-byte value for a " +
                         std::to_string(prm.size) + "-byte parameter");
                std::memcpy(a.value, p, bytes);
                a.size = static_cast<std::uint32_t>(bytes);
                break;
        }
    } else {
        std::memcpy(a.value, p, bytes);
        a.size = static_cast<std::uint32_t>(bytes);
    }
    s->args.push_back(a);
}

DeviceTask Devices::finish(TaskState* s, const Launch& l) {
    DeviceTask t(s);  // owns the reference acquire() gave
    if (const auto* ss = s->kernel->single_source(); ss && s->args.size() != ss->params.size()) {
        const std::size_t given = s->args.size();
        device::detail::abandon(s);
        throw UsageError("task '" + s->kernel->name() + "': " + std::to_string(given) +
                         " arguments given, the kernel has " + std::to_string(ss->params.size()) +
                         " parameters");
    }
    if (l.name) s->name = l.name;
    s->want = l.device;
    s->on = l.on;
    s->threads = l.threads;
    s->scratch_bytes = l.scratch_bytes;
    auto fail = [&](const std::string& what) {
        device::detail::abandon(s);
        throw UsageError("task '" + s->name + "': " + what);
    };
    if (l.on >= size())
        fail("device " + std::to_string(l.on) + " asked for, there are " + std::to_string(size()));
    if (l.on >= 0 && l.device != DeviceKind::any && device(l.on).kind() != l.device)
        fail("device " + std::to_string(l.on) + " is " + device(l.on).name() + ", not " +
             to_string(l.device));
    {
        const DeviceKind k = l.on >= 0 ? device(l.on).kind() : l.device;
        if (k != DeviceKind::any && !s->kernel->has_variant(k))
            fail(std::string("kernel '") + s->kernel->name() + "' has no variant for " +
                 to_string(k) + " devices");
        if (k == DeviceKind::any) {
            bool some = false;
            for (int i = 0; i < size(); ++i)
                some |= s->kernel->has_variant(device(i).kind());
            if (!some)
                fail(std::string("kernel '") + s->kernel->name() +
                     "' has no variant for any device of '" + opts_.name + "'");
        } else if (l.on < 0 && find(k) < 0) {
            fail(std::string("no ") + to_string(k) + " device in '" + opts_.name + "'");
        }
    }
    for (int d = 0; d < 3; ++d) {
        const std::size_t g = l.threads.global[d], lo = l.threads.local[d];
        if (lo && g % lo)
            fail("global size " + std::to_string(g) + " is not a multiple of the local size " +
                 std::to_string(lo) + " (dimension " + std::to_string(d) + ")");
    }
    device::detail::register_accesses(s);
    return t;
}

}  // namespace cascade
