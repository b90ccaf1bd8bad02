// Migration (packing an object with its ordering state and queued requests, installing it on
// arrival, recycled packing buffers) and destruction. See docs/objects.md.
#include "internal.hpp"

#include <algorithm>
#include <cstring>

namespace cascade {

using detail::Entry;
using detail::ExpectedWire;
using detail::Invocation;
using detail::InvokeHead;
using detail::kSmallMigration;
using detail::MigrateHead;
using detail::Record;

void Objects::do_migrate(Record* r, Invocation* inv) {
    std::unique_ptr<Invocation> guard(inv);
    const int dest = inv->h.arg;
    if (dest == rank_) {  // already here
        finish(r, true, 0);
        return;
    }
    // This request runs alone on the object: nothing else reads or writes it meanwhile.
    const std::size_t obj_bytes = r->type->size(r->obj);
    Shard& s = shard(r->key);
    std::unique_ptr<Record> rec;
    {
        std::lock_guard<std::mutex> g(s.m);
        Entry& e = s.map.at(r->key);
        rec = std::move(e.rec);
        e.loc = dest;
        e.ver = rec->version + 1;
    }
    // From here on, requests arriving for it are forwarded to dest.
    std::size_t bytes =
        sizeof(MigrateHead) + rec->expected.size() * sizeof(ExpectedWire) + obj_bytes + 8;
    for (Invocation* q : rec->ready)
        bytes += sizeof(InvokeHead) + wire::size_of(q->args);
    for (auto& [k, q] : rec->held)
        bytes += sizeof(InvokeHead) + wire::size_of(q->args);
    auto buf = take_buffer(bytes);
    wire::Writer w(buf->data());
    MigrateHead mh{rec->key,
                   rec->type->hash,
                   static_cast<std::uint32_t>(rec->expected.size()),
                   rec->version + 1,
                   rec->busy_s,
                   rec->recent_s,
                   rec->handled,
                   static_cast<std::uint32_t>(rec->ready.size()),
                   static_cast<std::uint32_t>(rec->held.size()),
                   rec->pinned ? 1u : 0u,
                   0u};
    w.put(mh);
    for (auto& [sender, next] : rec->expected)
        w.put(ExpectedWire{sender, 0, next});
    for (Invocation* q : rec->ready) {
        w.put(q->h);
        w.put(q->args);
        delete q;
    }
    for (auto& [k, q] : rec->held) {
        w.put(q->h);
        w.put(q->args);
        delete q;
    }
    char* end = rec->type->pack(rec->obj, w.position());
    rec->type->destroy(rec->obj);
    const std::size_t n = static_cast<std::size_t>(end - buf->data());
    counters_.migrations_out.fetch_add(1, std::memory_order_relaxed);
    if (n <= kSmallMigration) {
        migrate_am_->send(dest, view<char>(buf->data(), n));
        give_buffer(std::move(buf));
    } else {
        char* data = buf->data();
        std::uint64_t serial;
        {
            std::lock_guard<std::mutex> g(large_mutex_);
            serial = next_serial_++;
            sending_[serial] = std::move(buf);
        }
        migrate_large_am_->send_large(dest, view<char>(data, n), std::int32_t(rank_),
                                      std::uint64_t(n), serial);
    }
}

std::unique_ptr<detail::Bytes> Objects::take_buffer(std::size_t bytes) {
    {
        std::lock_guard<std::mutex> g(spare_mutex_);
        for (auto& b : spare_) {
            if (b->capacity() >= bytes) {
                auto out = std::move(b);
                b = std::move(spare_.back());
                spare_.pop_back();
                out->resize(bytes);  // no zero-fill (detail::Bytes)
                return out;
            }
        }
    }
    auto out = std::make_unique<detail::Bytes>();
    out->resize(bytes);
    return out;
}

void Objects::give_buffer(std::unique_ptr<detail::Bytes> b) noexcept {
    constexpr std::size_t kMaxSpare = 8, kMaxSpareBytes = std::size_t(256) << 20;
    std::lock_guard<std::mutex> g(spare_mutex_);
    std::size_t total = b->capacity();
    for (auto& x : spare_)
        total += x->capacity();
    if (spare_.size() < kMaxSpare && total <= kMaxSpareBytes) spare_.push_back(std::move(b));
}

void Objects::install(const char* data, std::size_t size, int) {
    wire::Reader rd(data, size);
    const auto mh = rd.get<MigrateHead>();
    const detail::ObjectType* t = type_of(mh.type);
    if (!t)
        throw UsageError("objects: rank " + std::to_string(rank_) + " received object " +
                         to_string(mh.key) +
                         " of a type it never registered (register_type<T>, make_handler<T> or "
                         "create<T> on every rank)");
    auto rec = std::make_unique<Record>();
    rec->key = mh.key;
    rec->type = t;
    rec->version = mh.version;
    rec->busy_s = mh.busy_s;
    rec->recent_s = mh.recent_s;
    rec->handled = mh.handled;
    rec->pinned = mh.pinned != 0;
    for (std::uint32_t i = 0; i < mh.n_expected; ++i) {
        const auto ew = rd.get<ExpectedWire>();
        rec->expected.emplace_back(ew.sender, ew.next);
    }
    for (std::uint32_t i = 0; i < mh.n_ready + mh.n_held; ++i) {
        auto* q = new Invocation;
        q->h = rd.get<InvokeHead>();
        q->args = rd.get<std::vector<char>>();
        if (i < mh.n_ready)
            rec->ready.push_back(q);
        else
            rec->held.emplace(std::make_pair(int(q->h.sender), q->h.seq), q);
    }
    rec->obj = t->unpack(rd);
    counters_.migrations_in.fetch_add(1, std::memory_order_relaxed);
    Shard& s = shard(mh.key);
    std::vector<Pending> out;
    std::vector<int> updates;
    {
        std::lock_guard<std::mutex> g(s.m);
        auto it = s.map.find(mh.key);
        if (it == s.map.end()) {
            it = s.map.emplace(mh.key, Entry{}).first;
        }
        Entry& e = it->second;
        e.rec = std::move(rec);
        e.loc = rank_;
        e.ver = std::max(e.ver, mh.version);
        std::vector<Invocation*> waiting;
        waiting.swap(e.waiting);
        dispatch_locked(*e.rec, out);
        for (Invocation* q : waiting) {
            if (q->h.hops > 0 && q->h.sender != rank_) updates.push_back(q->h.sender);
            deliver_locked(e, q, out);
        }
    }
    start(out);
    std::sort(updates.begin(), updates.end());
    updates.erase(std::unique(updates.begin(), updates.end()), updates.end());
    for (int u : updates)
        send_update(u, mh.key, rank_, mh.version, false);
    if (mh.key.home != rank_) send_update(mh.key.home, mh.key, rank_, mh.version, true);
}

void Objects::do_destroy(Record* r, Invocation* inv) {
    std::unique_ptr<Invocation> guard(inv);
    Shard& s = shard(r->key);
    std::unique_ptr<Record> rec;
    {
        std::lock_guard<std::mutex> g(s.m);
        Entry& e = s.map.at(r->key);
        rec = std::move(e.rec);
        e.destroyed = true;
        e.destroyed_on = rank_;
    }
    rec->type->destroy(rec->obj);
    rec->obj = nullptr;
    if (rec->key.home != rank_) destroyed_am_->send(rec->key.home, rec->key, std::int32_t(rank_));
    // Requests issued after the destruction: the first one is the error.
    Invocation* late = !rec->ready.empty()  ? rec->ready.front()
                       : !rec->held.empty() ? rec->held.begin()->second
                                            : nullptr;
    std::string msg;
    if (late) {
        try {
            error_destroyed(*late, rank_);
        } catch (const UsageError& e) {
            msg = e.what();
        }
    }
    for (Invocation* q : rec->ready)
        delete q;
    for (auto& [k, q] : rec->held)
        delete q;
    if (late) throw UsageError(msg);
}

}  // namespace cascade
