// Data's shared block: creation, references, and host access (request / release). A host
// request is a task on the host's memory space: it waits for the tasks before it like any
// other, fetches the data to the host, and then holds it (status `granted`) until release().
#include "cascade/device/data.hpp"

#include <cstring>

#include "cascade/core/errors.hpp"
#include "cascade/device/devices.hpp"
#include "runtime.hpp"

namespace cascade::device::detail {

void drop(TaskState* s) noexcept;
void register_accesses_of(TaskState* t);

DataBlock* new_block(Devices& d, std::size_t bytes, std::size_t elem, std::string name,
                     const void* init) {
    Runtime& rt = d.runtime();
    auto* b = new DataBlock;
    b->rt = &rt;
    b->bytes = bytes;
    b->elem_size = elem;
    static std::atomic<unsigned> counter{0};
    b->name = name.empty() ? "data" + std::to_string(counter.fetch_add(1)) : std::move(name);
    b->copies.resize(static_cast<std::size_t>(rt.n_spaces));
    b->states.assign(static_cast<std::size_t>(rt.n_spaces), Msi::invalid);
    b->states[0] = Msi::modified;  // the host copy is the only one (zeros until written)
    if (init) {
        b->copies[0].ptr = rt.host.allocate(bytes, false);
        if (bytes) std::memcpy(b->copies[0].ptr, init, bytes);
    } else {
        b->host_zero = true;
    }
    return b;
}

void retain(DataBlock* b) noexcept {
    b->refs.fetch_add(1, std::memory_order_relaxed);
}

void release(DataBlock* b) noexcept {
    if (b->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) b->rt->free_block(b);
}

std::size_t host_ready(DataBlock* b) noexcept {
    return b->host_ready.load(std::memory_order_acquire);
}

Threadpool& pool_of(DataBlock* b) noexcept {
    return b->rt->tp;
}

void* host_pointer(DataBlock* b) noexcept {
    return b->copies[0].ptr;
}

DeviceKind device_kind(DataBlock* b, int device) {
    if (!b) throw UsageError("Data::device_kind() on an empty Data");
    if (device < 0 || device >= static_cast<int>(b->rt->slots.size()))
        throw UsageError("Data '" + b->name + "': device " + std::to_string(device) +
                         " does not exist");
    return b->rt->slots[static_cast<std::size_t>(device)].dev->kind();
}

namespace {
// The host request of b, granted (b->lock held by the caller), or null.
TaskState* granted_access(DataBlock* b) noexcept {
    TaskState* s = b->host_access;
    return s && s->status.load(std::memory_order_acquire) == TaskState::granted ? s : nullptr;
}
}  // namespace

void* access_pointer(DataBlock* b) noexcept {
    b->lock.lock();
    const TaskState* s = granted_access(b);
    const int d = s ? s->lent : -1;
    b->lock.unlock();
    if (d < 0) return b->copies[0].ptr;
    return b->copies[static_cast<std::size_t>(b->rt->slots[static_cast<std::size_t>(d)].dev->space)]
        .ptr;
}

int access_device(DataBlock* b) noexcept {
    b->lock.lock();
    const TaskState* s = granted_access(b);
    const int d = s ? s->lent : -1;
    b->lock.unlock();
    return d;
}

bool access_fetched(DataBlock* b) noexcept {
    b->lock.lock();
    const TaskState* s = granted_access(b);
    const bool f = s && s->fetched;
    b->lock.unlock();
    return f;
}

void on_granted(const DeviceTask& request, std::function<void()> f) {
    TaskState* s = request.state();
    if (!s || s->kind != TaskKind::host_access)
        throw UsageError("HostAccess::on_granted() on an empty request");
    s->succ_lock.lock();
    const bool waiting = s->status.load(std::memory_order_acquire) == TaskState::pending;
    if (waiting) {
        if (s->on_grant) {
            s->succ_lock.unlock();
            throw UsageError("HostAccess::on_granted() twice on one request");
        }
        s->on_grant = std::move(f);
    }
    s->succ_lock.unlock();
    if (!waiting) f();
}

DeviceTask request_host(DataBlock* b, const AccessAsk& ask) {
    const DataAccess a = ask.mode;
    if (!b) throw UsageError("Data::request() on an empty Data");
    Runtime& rt = *b->rt;
    if (ask.on >= static_cast<int>(rt.slots.size()))
        throw UsageError("Data '" + b->name + "': request_on device " + std::to_string(ask.on) +
                         ", which does not exist");
    b->lock.lock();
    const bool held = b->host_access != nullptr;
    b->lock.unlock();
    if (held)
        throw UsageError("Data '" + b->name + "': request(" + to_string(a) +
                         ") while an earlier host request is not released (call release() "
                         "first)");
    TaskState* s = rt.acquire();
    s->kind = TaskKind::host_access;
    s->chunk = a == DataAccess::read ? ask.chunk : 0;
    s->lend = a == DataAccess::read ? ask.lend : 0;
    s->access_on = a == DataAccess::read ? -1 : ask.on;
    s->link = ask.link;
    s->name = "request(" + b->name + ", " + to_string(a) + ")";
    ArgSlot& arg = s->args.emplace_back();
    arg.block = b;
    arg.mode = a;
    retain(b);
    DeviceTask t(s);
    b->lock.lock();
    if (b->host_access) {  // another thread was quicker
        b->lock.unlock();
        release(b);
        s->args.clear();
        throw UsageError("Data '" + b->name + "': two host requests at once");
    }
    s->refs.fetch_add(1, std::memory_order_relaxed);
    b->host_access = s;
    b->lock.unlock();
    register_accesses_of(s);
    t.submit();
    return t;
}

bool push_range(DataBlock* b, int device, std::size_t off, std::size_t bytes, std::uint64_t link) {
    if (!b) throw UsageError("Data::push_range() on an empty Data");
    Runtime& rt = *b->rt;
    if (device < 0 || device >= static_cast<int>(rt.slots.size()))
        throw UsageError("Data '" + b->name + "': push_range to device " + std::to_string(device) +
                         ", which does not exist");
    if (off > b->bytes || bytes > b->bytes - off)
        throw UsageError("Data '" + b->name + "': push_range past its end");
    b->lock.lock();
    TaskState* s = b->host_access;
    const bool ok = s && s->status.load(std::memory_order_acquire) == TaskState::granted &&
                    writes(s->args[0].mode);
    b->lock.unlock();
    if (!ok)
        throw UsageError("Data '" + b->name +
                         "': push_range() outside a granted host write access");
    if (bytes == 0) return true;
    bool pushed;
    {
        std::lock_guard<std::mutex> g(rt.step_mutex);
        pushed = rt.push_piece(b, device, off, bytes, link);
    }
    rt.wake();
    return pushed;
}

void release_host(DataBlock* b) {
    if (!b) throw UsageError("Data::release() on an empty Data");
    b->lock.lock();
    TaskState* s = b->host_access;
    if (!s) {
        b->lock.unlock();
        throw UsageError("Data '" + b->name + "': release() without a request()");
    }
    const int st = s->status.load(std::memory_order_acquire);
    if (st == TaskState::pending) {
        b->lock.unlock();
        throw UsageError("Data '" + b->name +
                         "': release() before its request was granted "
                         "(wait for the request's future first)");
    }
    b->host_access = nullptr;
    b->lock.unlock();
    if (st == TaskState::granted && (writes(s->args[0].mode) || s->lent >= 0)) {
        std::lock_guard<std::mutex> g(b->rt->step_mutex);
        if (writes(s->args[0].mode)) b->rt->end_pushes(b);
        if (s->lent >= 0) b->rt->end_lend(b, s->lent);
    }
    if (st == TaskState::granted) {
        b->rt->held_accesses.fetch_sub(1, std::memory_order_relaxed);
        b->rt->complete(s, nullptr);
    }
    drop(s);
}

}  // namespace cascade::device::detail
