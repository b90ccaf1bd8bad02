// Where data lives: device memory (allocation through a per-device pool, a cap, eviction of
// the least recently used unpinned copies with write-back of Modified ones), and coherence
// (each argument's copy arranged on the task's device by the MSI protocol, transfers issued
// and followed, staging through the host between two devices).
//
// A task is admitted to a device in submission order (a FIFO per device): the head gets all
// its copies allocated, evicting what it must, or waits while tasks or transfers in flight on
// that device will free memory, or fails with the sizes when even an idle device cannot hold
// its data. No task is ever retried against another's progress, so nothing livelocks.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "cascade/device/msi.hpp"
#include "cascade/trace/event.hpp"
#include "runtime.hpp"

namespace cascade::device::detail {

namespace {
// How many of a device's waiting tasks an eviction looks at to keep the data they read.
constexpr std::size_t kVictimLookahead = 32;
// The first argument naming the same Data as args[i], or i.
std::size_t first_of(const TaskState* t, std::size_t i) {
    for (std::size_t j = 0; j < i; ++j)
        if (t->args[j].block == t->args[i].block) return j;
    return i;
}
// The combined access of all the task's arguments naming args[i]'s Data.
DataAccess merged(const TaskState* t, std::size_t i) {
    int m = 0;
    for (const ArgSlot& a : t->args)
        if (a.block == t->args[i].block) m |= static_cast<int>(a.mode);
    return static_cast<DataAccess>(m);
}
std::string mib(std::size_t b) {
    char s[64];
    if (b >= (std::size_t(1) << 20))
        std::snprintf(s, sizeof s, "%zu bytes (%.1f MiB)", b, static_cast<double>(b) / 1048576.0);
    else
        std::snprintf(s, sizeof s, "%zu bytes", b);
    return s;
}
}  // namespace

void* Runtime::device_allocate(int d, std::size_t bytes) {
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    if (opts.memory_pool) {
        auto it = s.pool.find(bytes);
        if (it != s.pool.end() && !it->second.empty()) {
            void* p = it->second.back();
            it->second.pop_back();
            s.pooled_bytes -= bytes;
            return p;
        }
    }
    auto drain_pool = [&] {
        for (auto& [size, ptrs] : s.pool) {
            for (void* p : ptrs) {
                s.dev->deallocate(p, size);
                s.used -= size;
            }
            ptrs.clear();
        }
        s.pooled_bytes = 0;
    };
    if (s.used + bytes > s.capacity) {
        drain_pool();
        if (s.used + bytes > s.capacity) return nullptr;
    }
    void* p = s.dev->allocate(bytes);
    if (!p && s.pooled_bytes) {
        drain_pool();
        p = s.dev->allocate(bytes);
    }
    if (!p) return nullptr;
    s.used += bytes;
    ++s.stats.allocations;
    return p;
}

void Runtime::device_free(int d, void* p, std::size_t bytes) noexcept {
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    if (opts.memory_pool) {
        s.pool[bytes].push_back(p);
        s.pooled_bytes += bytes;
    } else {
        s.dev->deallocate(p, bytes);
        s.used -= bytes;
    }
}

// The host copy's memory; zeroed only when it holds the data's value (never written: zeros).
void Runtime::ensure_host(DataBlock* b) {
    Copy& h = b->copies[0];
    if (!h.ptr) {
        h.ptr = host.allocate(b->bytes, b->host_zero && b->states[0] != Msi::invalid);
        b->host_zero = false;
    }
}

// Removes a block's copy at `space` from its device: the memory goes back to the pool.
void Runtime::drop_copy(DataBlock* b, int space) noexcept {
    Copy& c = b->copies[static_cast<std::size_t>(space)];
    if (!c.ptr) return;
    const int d = space_device[static_cast<std::size_t>(space)];
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    auto& res = s.resident;
    const auto i = static_cast<std::size_t>(c.resident_index);
    res[i] = res.back();
    res[i]->copies[static_cast<std::size_t>(space)].resident_index = static_cast<int>(i);
    res.pop_back();
    c.resident_index = -1;
    device_free(d, c.ptr, b->bytes);
    c.ptr = nullptr;
    b->states[static_cast<std::size_t>(space)] = Msi::invalid;
    s.stats.memory_used = s.used - s.pooled_bytes;
}

DataBlock* Runtime::lru_victim(int d, const TaskState* t) const {
    const DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    const auto sp = static_cast<std::size_t>(s.dev->space);
    DataBlock* best = nullptr;
    bool best_invalid = false, best_wanted = false;
    for (DataBlock* b : s.resident) {
        const Copy& c = b->copies[sp];
        if (c.pins > 0) continue;
        // Not while a transfer of this Data is in flight (its write-back would race it).
        bool moving = false;
        for (const Copy& o : b->copies)
            moving |= o.pending != nullptr;
        if (moving) continue;
        bool mine = false;
        for (const ArgSlot& a : t->args)
            mine |= a.block == b;
        if (mine) continue;
        // Data that a task waiting for this device reads soon stays if anything else can go.
        bool wanted = false;
        const std::size_t look = std::min(s.admit.size(), kVictimLookahead);
        for (std::size_t j = 0; j < look && !wanted; ++j)
            for (const ArgSlot& a : s.admit[j]->args)
                wanted |= a.block == b;
        const bool inv = b->states[sp] == Msi::invalid;
        // Invalid copies cost nothing to drop: they go first, then data no waiting task
        // wants, then the least recently used.
        if (!best || (inv && !best_invalid) || (inv == best_invalid && !wanted && best_wanted) ||
            (inv == best_invalid && wanted == best_wanted &&
             c.last_use < best->copies[sp].last_use)) {
            best = b;
            best_invalid = inv;
            best_wanted = wanted;
        }
    }
    return best;
}

void Runtime::evict(int d, DataBlock* b) {
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    const int sp = s.dev->space;
    Copy& c = b->copies[static_cast<std::size_t>(sp)];
    ++s.stats.evictions;
    const MsiPlan plan = msi_evict(b->states, sp);
    if (!plan.write_back) {
        drop_copy(b, sp);
        return;
    }
    // Write back, then free the memory when the copy is done.
    ++s.stats.write_backs;
    ensure_host(b);
    void* ptr = c.ptr;
    auto& res = s.resident;
    const auto i = static_cast<std::size_t>(c.resident_index);
    res[i] = res.back();
    res[i]->copies[static_cast<std::size_t>(sp)].resident_index = static_cast<int>(i);
    res.pop_back();
    c.resident_index = -1;
    c.ptr = nullptr;
    Event* e = new_event();
    Copy& h = b->copies[0];
    if (h.pending) unref(h.pending);
    h.pending = e;
    ++e->refs;
    retain(b);
    s.freeing += b->bytes;
    transfers.push_back(Transfer{e, b, d, -1, -1, ptr, b->bytes, true, now_seconds()});
    ++s.transfers;
    s.stats.bytes_out += b->bytes;
    e->t_start = trace::stamp();
    s.dev->copy_out(h.ptr, ptr, b->bytes, *e);
}

bool Runtime::admit(int d, TaskState* t, bool evicting) {
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    const int sp = s.dev->space;
    if (sp == 0) return true;  // the host's memory
    std::size_t total = 0, missing = 0;
    for (std::size_t i = 0; i < t->args.size(); ++i)
        if (t->args[i].block && first_of(t, i) == i) {
            total += t->args[i].block->bytes;
            if (!t->args[i].block->copies[static_cast<std::size_t>(sp)].ptr)
                missing += t->args[i].block->bytes;
        }
    // Without evicting: only if the missing copies fit in the free room (pool included).
    if (!evicting && s.used - s.pooled_bytes + missing > s.capacity) return false;
    if (total > s.capacity) {
        fail_task(t, std::make_exception_ptr(std::runtime_error(
                         "task '" + t->name + "' needs " + mib(total) + " of data on device " +
                         s.dev->name() + ", which may hold " + mib(s.capacity) +
                         " (DevicesOptions::memory or CASCADE_DEVICE_MEMORY)")));
        return true;
    }
    for (std::size_t i = 0; i < t->args.size(); ++i) {
        DataBlock* b = t->args[i].block;
        if (!b || first_of(t, i) != i) continue;
        Copy& c = b->copies[static_cast<std::size_t>(sp)];
        if (c.ptr) continue;
        void* p = device_allocate(d, b->bytes);
        while (!p) {
            // Write-backs in flight free their memory when done: if that makes room, wait
            // for them instead of evicting more.
            if (s.freeing > 0 && s.used - s.pooled_bytes - s.freeing + b->bytes <= s.capacity)
                return false;
            DataBlock* v = lru_victim(d, t);
            if (!v) break;
            evict(d, v);
            p = device_allocate(d, b->bytes);
        }
        if (!p) {
            // Tasks or transfers in flight will unpin or free memory here: wait for them.
            if (s.in_flight > 0 || s.transfers > 0) return false;
            for (DataBlock* r : s.resident) {
                if (r->copies[static_cast<std::size_t>(sp)].pins > 0) return false;
                for (const Copy& o : r->copies)
                    if (o.pending) return false;
            }
            fail_task(t, std::make_exception_ptr(std::runtime_error(
                             "task '" + t->name + "' cannot get " + mib(b->bytes) + " for Data '" +
                             b->name + "' on device " + s.dev->name() + " (it needs " + mib(total) +
                             " in all; the device may hold " + mib(s.capacity) + ", " +
                             mib(s.used) + " allocated and nothing left to evict)")));
            return true;
        }
        c.ptr = p;
        c.resident_index = static_cast<int>(s.resident.size());
        s.resident.push_back(b);
        s.stats.memory_used = s.used - s.pooled_bytes;
        s.stats.memory_peak = std::max(s.stats.memory_peak, s.stats.memory_used);
    }
    for (std::size_t i = 0; i < t->args.size(); ++i) {
        DataBlock* b = t->args[i].block;
        if (b && first_of(t, i) == i) ++b->copies[static_cast<std::size_t>(sp)].pins;
    }
    return true;
}

void Runtime::issue_copy(int d, DataBlock* b, int from, int to, int then_space) {
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    ensure_host(b);
    Copy& dst = b->copies[static_cast<std::size_t>(to)];
    Copy& src = b->copies[static_cast<std::size_t>(from)];
    Event* e = new_event();
    if (dst.pending) unref(dst.pending);
    dst.pending = e;
    ++e->refs;
    if (then_space >= 0) {  // the final destination waits for this stage too
        Copy& fin = b->copies[static_cast<std::size_t>(then_space)];
        if (fin.pending) unref(fin.pending);
        fin.pending = e;
        ++e->refs;
    }
    if (from != 0) ++src.pins;
    retain(b);
    transfers.push_back(
        Transfer{e, b, d, from, then_space, nullptr, b->bytes, to == 0, now_seconds()});
    ++s.transfers;
    e->t_start = trace::stamp();
    if (to == 0) {
        s.stats.bytes_out += b->bytes;
        s.dev->copy_out(dst.ptr, src.ptr, b->bytes, *e);
    } else {
        s.stats.bytes_in += b->bytes;
        s.dev->copy_in(dst.ptr, src.ptr, b->bytes, *e);
    }
}

void Runtime::issue_chunked_out(int d, DataBlock* b, int from, std::size_t chunk,
                                std::uint64_t link) {
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    ensure_host(b);
    Copy& dst = b->copies[0];
    Copy& src = b->copies[static_cast<std::size_t>(from)];
    const std::size_t n = (b->bytes + chunk - 1) / chunk;
    b->chunk = chunk;
    b->chunk_done.assign(n, 0);
    b->chunks_left = n;
    b->host_ready.store(0, std::memory_order_release);
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t off = k * chunk, len = std::min(chunk, b->bytes - off);
        Event* e = new_event();
        if (k + 1 == n) {  // the copy is valid once every chunk landed: marked by the last
            if (dst.pending) unref(dst.pending);
            dst.pending = e;
            ++e->refs;
            b->chunk_last = e;
            ++e->refs;
        }
        ++src.pins;
        retain(b);
        Transfer tr{e, b, d, from, -1, nullptr, len, true, now_seconds()};
        tr.chunk_index = k;
        tr.chunked = true;
        if (link != 0) tr.link = trace::link_id(link, k);
        transfers.push_back(tr);
        ++s.transfers;
        e->t_start = trace::stamp();
        s.stats.bytes_out += len;
        s.dev->copy_out_range(dst.ptr, src.ptr, off, len, *e);
    }
}

// A piece of the host copy, written under a host write access, goes to device d now (the
// copy on d is allocated on the first piece, without evicting; false: no room, nothing sent).
bool Runtime::push_piece(DataBlock* b, int d, std::size_t off, std::size_t bytes,
                         std::uint64_t link) {
    DeviceSlot& s = slots[static_cast<std::size_t>(d)];
    const int sp = s.dev->space;
    if (sp == 0) return false;  // the host's memory: nothing to push
    if (b->push_space != 0 && b->push_space != sp) return false;
    Copy& c = b->copies[static_cast<std::size_t>(sp)];
    if (b->push_space == 0) {
        for (const Copy& o : b->copies)  // a transfer of it still in flight: not now
            if (o.pending) return false;
        if (!c.ptr) {
            void* p = device_allocate(d, b->bytes);
            if (!p) return false;
            c.ptr = p;
            c.resident_index = static_cast<int>(s.resident.size());
            s.resident.push_back(b);
            s.stats.memory_used = s.used - s.pooled_bytes;
            s.stats.memory_peak = std::max(s.stats.memory_peak, s.stats.memory_used);
        }
        b->push_space = sp;
        b->pushed = 0;
        ++c.pins;  // not evicted while pieces come
    }
    Event* e = new_event();
    if (c.pending) unref(c.pending);
    c.pending = e;  // the copy-in queue is in order: the newest piece lands last
    ++e->refs;
    retain(b);
    tp.hold_external_work();  // join() waits for the piece
    Transfer tr{e, b, d, -1, -1, nullptr, bytes, false, now_seconds()};
    tr.pushed = true;
    tr.link = link;
    transfers.push_back(tr);
    ++s.transfers;
    e->t_start = trace::stamp();
    s.stats.bytes_in += bytes;
    b->pushed += bytes;
    s.dev->copy_in_range(c.ptr, b->copies[0].ptr, off, bytes, *e);
    c.last_use = ++use_clock;
    return true;
}

// The host write that pushed pieces ends: when they cover the whole Data, the device copy is
// valid too (Shared with the host; tasks wait for its pending mark); else it stays invalid.
void Runtime::end_pushes(DataBlock* b) {
    const int sp = std::exchange(b->push_space, 0);
    if (sp == 0) return;
    Copy& c = b->copies[static_cast<std::size_t>(sp)];
    --c.pins;
    if (b->pushed >= b->bytes && b->states[0] != Msi::invalid) {
        b->states[0] = Msi::shared;
        b->states[static_cast<std::size_t>(sp)] = Msi::shared;
    }
    b->pushed = 0;
}

// A chunk of a chunked fetch finished: advance host_ready over the chunks landed in order;
// the last one clears the host copy's pending mark.
void Runtime::chunk_landed(const Transfer& tr) {
    DataBlock* b = tr.block;
    if (tr.ev->state.load(std::memory_order_acquire) == Event::failed) {
        b->host_ready.store(DataBlock::kFetchFailed, std::memory_order_release);
    } else {
        b->chunk_done[tr.chunk_index] = 1;
        std::size_t ready = b->host_ready.load(std::memory_order_relaxed);
        if (ready != DataBlock::kFetchFailed) {
            std::size_t k = ready / b->chunk;
            while (k < b->chunk_done.size() && b->chunk_done[k])
                ++k;
            b->host_ready.store(std::min(b->bytes, k * b->chunk), std::memory_order_release);
        }
    }
    if (--b->chunks_left == 0) {
        Event* last = std::exchange(b->chunk_last, nullptr);
        for (Copy& c : b->copies)
            if (c.pending == last) {
                c.pending = nullptr;
                unref(last);
            }
        unref(last);
    }
}

bool Runtime::progress_transfers() {
    bool moved = false;
    for (std::size_t i = 0; i < transfers.size();) {
        Transfer tr = transfers[i];
        DeviceSlot& s = slots[static_cast<std::size_t>(tr.device)];
        if (!s.dev->poll(*tr.ev)) {
            ++i;
            continue;
        }
        moved = true;
        s.stats.transfer_seconds += tr.ev->seconds > 0 ? tr.ev->seconds : now_seconds() - tr.issued;
        transfers[i] = transfers.back();
        transfers.pop_back();
        --s.transfers;
        trace_op(tr.device, tr.out ? 2 : 1, tr.block->name, *tr.ev, tr.link);
        s.dev->release(*tr.ev);
        tr.ev->processed = true;
        DataBlock* b = tr.block;
        if (tr.src_space > 0) --b->copies[static_cast<std::size_t>(tr.src_space)].pins;
        if (tr.free_ptr) {
            device_free(tr.device, tr.free_ptr, tr.bytes);
            s.freeing -= tr.bytes;
        }
        if (tr.ev->state.load(std::memory_order_acquire) == Event::failed && !b->error)
            b->error = tr.ev->error;
        if (tr.chunked) chunk_landed(tr);
        if (tr.pushed) tp.release_external_work();
        // Clear the pending marks that point to this event.
        for (Copy& c : b->copies)
            if (c.pending == tr.ev) {
                c.pending = nullptr;
                unref(tr.ev);
            }
        if (tr.then_space >= 0 && !b->error)
            issue_copy(space_device[static_cast<std::size_t>(tr.then_space)], b, 0, tr.then_space,
                       -1);
        unref(tr.ev);
        release(b);
    }
    return moved;
}

// See runtime.hpp. A write asked on a device takes that device's copy (allocated without
// evicting) when its memory is addressed by pointers; a read that may be lent a copy takes
// the freshest one when the host's is stale and it is on a device of a kind it lends (CUDA,
// or memory the host addresses). The copy is pinned until release() (end_lend).
int Runtime::prepare_on_device(TaskState* t) {
    ArgSlot& a = t->args[0];
    if (a.prepared) return t->lent >= 0 ? 1 : -1;
    DataBlock* b = a.block;
    if (b->error) std::rethrow_exception(b->error);
    if (t->access_on >= 0) {
        const int d = t->access_on;
        DeviceSlot& s = slots[static_cast<std::size_t>(d)];
        const int sp = s.dev->space;
        if (sp == 0 || s.dev->kind() == DeviceKind::opencl) {
            t->access_on = -1;
            return -1;
        }
        for (const Copy& o : b->copies)  // a write: no transfer may still land in a copy
            if (o.pending) return 0;
        Copy& c = b->copies[static_cast<std::size_t>(sp)];
        if (!c.ptr) {
            void* p = device_allocate(d, b->bytes);
            if (!p) {
                t->access_on = -1;
                return -1;
            }
            c.ptr = p;
            c.resident_index = static_cast<int>(s.resident.size());
            s.resident.push_back(b);
            s.stats.memory_used = s.used - s.pooled_bytes;
            s.stats.memory_peak = std::max(s.stats.memory_peak, s.stats.memory_used);
        }
        msi_access(b->states, sp, DataAccess::write);
        ++c.pins;
        c.last_use = ++use_clock;
        t->lent = d;
        a.prepared = true;
        return 1;
    }
    if (t->lend == 0 || b->states[0] != Msi::invalid) return -1;
    Msi scratch_states[64];
    std::copy(b->states.begin(), b->states.end(), scratch_states);
    const int src =
        msi_access(std::span<Msi>(scratch_states, b->states.size()), 0, DataAccess::read).source;
    if (src <= 0) return -1;
    const int d = space_device[static_cast<std::size_t>(src)];
    const Device& dev = *slots[static_cast<std::size_t>(d)].dev;
    if ((t->lend & (1u << static_cast<unsigned>(dev.kind()))) == 0 ||
        !(dev.kind() == DeviceKind::cuda || dev.host_addressable()))
        return -1;
    Copy& c = b->copies[static_cast<std::size_t>(src)];
    if (c.pending) return 0;  // still arriving there
    ++c.pins;
    c.last_use = ++use_clock;
    t->lent = d;
    b->host_ready.store(b->bytes, std::memory_order_release);
    a.prepared = true;
    return 1;
}

void Runtime::end_lend(DataBlock* b, int d) {
    --b->copies[static_cast<std::size_t>(slots[static_cast<std::size_t>(d)].dev->space)].pins;
}

bool Runtime::prepare(TaskState* t) {
    if (t->kind == TaskKind::host_access && (t->lend != 0 || t->access_on >= 0)) {
        const int r = prepare_on_device(t);
        if (r >= 0) return r == 1;
    }
    const int sp = t->device >= 0 ? slots[static_cast<std::size_t>(t->device)].dev->space : 0;
    const auto usp = static_cast<std::size_t>(sp);
    Msi scratch_states[64];
    for (std::size_t i = 0; i < t->args.size(); ++i) {
        ArgSlot& a = t->args[i];
        if (!a.block || a.prepared) continue;
        DataBlock* b = a.block;
        if (first_of(t, i) != i) {
            a.duplicate = true;
            a.prepared = true;
            continue;
        }
        if (b->error) std::rethrow_exception(b->error);
        Copy& tgt = b->copies[usp];
        if (tgt.pending) return false;
        const DataAccess mode = merged(t, i);
        // A write makes every other copy stale: no transfer may still be writing into one (an
        // eviction's write-back to the host, say), or it could land after a later fetch.
        if (writes(mode))
            for (const Copy& c : b->copies)
                if (c.pending) return false;
        if (reads(mode) && b->states[usp] == Msi::invalid) {
            // The source must not be still arriving either.
            std::copy(b->states.begin(), b->states.end(), scratch_states);
            const MsiPlan peek =
                msi_access(std::span<Msi>(scratch_states, b->states.size()), sp, mode);
            if (peek.source >= 0 && b->copies[static_cast<std::size_t>(peek.source)].pending)
                return false;
        }
        // Never-written data read from the host: its zeros exist before the protocol moves on.
        if (sp == 0 || (reads(mode) && b->host_zero)) ensure_host(b);
        const MsiPlan plan = msi_access(b->states, sp, mode);
        if (t->kind == TaskKind::host_access && t->chunk > 0) {
            if (plan.source > 0) {
                issue_chunked_out(space_device[static_cast<std::size_t>(plan.source)], b,
                                  plan.source, t->chunk, t->link);
                t->fetched = true;
                tgt.last_use = ++use_clock;
                a.prepared = true;
                continue;
            }
            b->host_ready.store(b->bytes, std::memory_order_release);  // no copy: all there
        }
        if (plan.source >= 0) {
            if (!plan.via_host) {
                const int dev_space = sp == 0 ? plan.source : sp;
                issue_copy(space_device[static_cast<std::size_t>(dev_space)], b, plan.source, sp,
                           -1);
            } else {
                issue_copy(space_device[static_cast<std::size_t>(plan.source)], b, plan.source, 0,
                           sp);
            }
        }
        tgt.last_use = ++use_clock;
        a.prepared = true;
    }
    for (const ArgSlot& a : t->args) {
        if (!a.block) continue;
        if (a.block->error) std::rethrow_exception(a.block->error);
        // A chunked host read is granted while its chunks land (host_ready tells how far).
        if (a.block->copies[usp].pending && !(t->kind == TaskKind::host_access && t->chunk > 0))
            return false;
    }
    return true;
}

void Runtime::release_blocks() {
    DataBlock* b = freed_.exchange(nullptr, std::memory_order_acquire);
    while (b) {
        DataBlock* next = b->next;
        // A block goes only when no task or transfer holds it, so nothing is pinned here.
        for (int sp = 1; sp < n_spaces; ++sp)
            drop_copy(b, sp);
        b->lock.lock();
        if (b->last_writer) drop(b->last_writer);
        b->last_writer = nullptr;
        if (TaskState* j = std::exchange(b->readers_join, nullptr)) close_join(j);
        b->lock.unlock();
        if (b->copies[0].ptr) host.deallocate(b->copies[0].ptr, b->bytes);
        delete b;
        b = next;
    }
}

void Runtime::free_block(DataBlock* b) noexcept {
    DataBlock* head = freed_.load(std::memory_order_relaxed);
    do {
        b->next = head;
    } while (!freed_.compare_exchange_weak(head, b, std::memory_order_release,
                                           std::memory_order_relaxed));
    wake();
}

}  // namespace cascade::device::detail
