// The objects layer's parts on their own, without MPI: the registry of handlers and types,
// the spares kept for migrations, and the migrations in flight.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cascade/comm/serialization.hpp"
#include "cascade/core/errors.hpp"
#include "cascade/objects/detail/registry.hpp"
#include "cascade/objects/detail/spares.hpp"
#include "cascade/objects/detail/transit.hpp"

using cascade::detail::Bytes;
using cascade::detail::HandlerBase;
using cascade::detail::ObjectType;
using cascade::detail::Record;
using cascade::detail::Registry;
using cascade::detail::Spares;
using cascade::detail::Transit;

namespace parts {

struct Counter {
    int n = 0;
    template <class A>
    void serialize(A& a) {
        a(n);
    }
};

struct NoopHandler : HandlerBase {
    void run(cascade::Objects&, void*, const cascade::ObjectKey&,
             cascade::detail::Invocation&) override {}
};

}  // namespace parts

namespace {

using parts::Counter;

std::unique_ptr<HandlerBase> handler(std::uint32_t type_hash, std::string name = "") {
    auto h = std::make_unique<parts::NoopHandler>();
    h->type_hash = type_hash;
    h->name = std::move(name);
    return h;
}

std::unique_ptr<Bytes> bytes(std::size_t n) {
    auto b = std::make_unique<Bytes>();
    b->resize(n);
    return b;
}

}  // namespace

TEST(ObjectsRegistry, TypesByHashAndHandlersByIdInOrder) {
    Registry r;
    ObjectType t = cascade::detail::make_object_type<Counter>();
    const std::uint32_t hash = t.hash;
    EXPECT_EQ(r.type(hash), nullptr);
    r.add_type(t);
    r.add_type(t);  // known: kept once
    ASSERT_NE(r.type(hash), nullptr);
    EXPECT_EQ(std::string(r.type(hash)->name), "parts::Counter");
    EXPECT_EQ(r.handlers(), 0u);
    EXPECT_EQ(r.find_handler(0), nullptr);
    HandlerBase* a = r.add_handler(handler(hash, "add"));
    HandlerBase* b = r.add_handler(handler(hash));
    EXPECT_EQ(a->id, 0u);
    EXPECT_EQ(b->id, 1u);
    EXPECT_EQ(b->name, "handler#1");
    EXPECT_EQ(std::string(a->label), "add(parts::Counter");
    EXPECT_EQ(r.handlers(), 2u);
    EXPECT_EQ(r.handler(1), b);
    EXPECT_EQ(r.find_handler(2), nullptr);
    r.set_load(hash, [](const void* p) { return 2.0 * static_cast<const Counter*>(p)->n; });
    const Counter c{21};
    EXPECT_EQ(r.type(hash)->load(&c), 42.0);
}

TEST(ObjectsRegistry, AHandlerOfAnUnknownTypeOrBeyondTheLimitIsRefused) {
    Registry r;
    EXPECT_THROW(r.add_handler(handler(12345, "h")), cascade::UsageError);
    ObjectType t = cascade::detail::make_object_type<Counter>();
    r.add_type(t);
    for (std::uint32_t i = 0; i < Registry::kMaxHandlers; ++i)
        r.add_handler(handler(t.hash));
    EXPECT_THROW(r.add_handler(handler(t.hash)), cascade::UsageError);
    EXPECT_EQ(r.handlers(), Registry::kMaxHandlers);
}

TEST(ObjectsSpares, BuffersAreReusedWithinTheBounds) {
    Spares s;
    auto b = s.take_buffer(1000);
    EXPECT_EQ(b->size(), 1000u);
    const char* p = b->data();
    s.give_buffer(std::move(b));
    EXPECT_EQ(s.buffers(), 1u);
    auto c = s.take_buffer(500);  // the kept one is large enough
    EXPECT_EQ(c->data(), p);
    EXPECT_EQ(c->size(), 500u);
    EXPECT_EQ(s.buffers(), 0u);
    auto d = s.take_buffer(1 << 20);  // none kept: a new one
    EXPECT_EQ(d->size(), std::size_t(1) << 20);
    for (std::size_t i = 0; i < Spares::kMaxBuffers + 3; ++i)
        s.give_buffer(bytes(64));
    EXPECT_EQ(s.buffers(), Spares::kMaxBuffers);
}

TEST(ObjectsSpares, RecordsAreKeptUpToTheBound) {
    Spares s;
    auto r = s.take_record();
    Record* raw = r.get();
    s.give_record(std::move(r));
    EXPECT_EQ(s.take_record().get(), raw);
    for (std::size_t i = 0; i < Spares::kMaxRecords + 4; ++i)
        s.give_record(std::make_unique<Record>());
    EXPECT_EQ(s.records(), Spares::kMaxRecords);
}

TEST(ObjectsTransit, BigMigrationsAreFoundByTheirNamesOnce) {
    Transit t;
    auto buf = bytes(10);
    const char* p = buf->data();
    t.expect(3, 7, std::move(buf));
    EXPECT_THROW(t.expect(3, 7, bytes(1)), cascade::WireError);  // announced twice
    EXPECT_THROW(t.arrived(2, 7), cascade::WireError);           // never announced
    EXPECT_EQ(t.arrived(3, 7)->data(), p);
    EXPECT_THROW(t.arrived(3, 7), cascade::WireError);  // taken already

    const std::uint64_t s1 = t.keep_sending(bytes(1)), s2 = t.keep_sending(bytes(2));
    EXPECT_NE(s1, s2);
    EXPECT_EQ(t.sent(s2)->size(), 2u);
    EXPECT_EQ(t.sent(s2), nullptr);
    EXPECT_EQ(t.sent(s1)->size(), 1u);
}

TEST(ObjectsTransit, AnArrivingObjectIsHandedOverWithItsLastBody) {
    Transit t;
    auto rec = std::make_unique<Record>();
    Record* raw = rec.get();
    const std::uint32_t slot = t.add_arriving(std::move(rec), 3);
    EXPECT_EQ(t.body_arrived(slot, 1), nullptr);
    EXPECT_EQ(t.body_arrived(slot, 1), nullptr);
    auto done = t.body_arrived(slot, 1);
    EXPECT_EQ(done.get(), raw);
    EXPECT_THROW(t.body_arrived(slot, 1), cascade::WireError);  // its slot is free again
    EXPECT_THROW(t.body_arrived(99, 1), cascade::WireError);
    // The free slot is reused.
    EXPECT_EQ(t.add_arriving(std::make_unique<Record>(), 1), slot);
    int dropped = 0;
    t.clear_arriving([&](Record&) { ++dropped; });
    EXPECT_EQ(dropped, 1);
}

TEST(ObjectsTransit, ALeavingObjectIsFreedAfterItsLastBody) {
    Transit t;
    const ObjectType type = cascade::detail::make_object_type<Counter>();
    Counter obj;
    const std::uint32_t a = t.reserve_leaving(), b = t.reserve_leaving();
    EXPECT_NE(a, b);
    t.leaving(a) = Transit::Leaving{&type, &obj, 2};
    t.cancel_leaving(b);  // never filled: free again
    EXPECT_EQ(t.reserve_leaving(), b);
    EXPECT_EQ(t.body_sent(a).type, nullptr);
    const Transit::Leaving l = t.body_sent(a);
    EXPECT_EQ(l.obj, &obj);
    EXPECT_EQ(t.body_sent(a).type, nullptr);  // gone
    EXPECT_EQ(t.body_sent(1000).type, nullptr);
    t.leaving(b) = Transit::Leaving{&type, &obj, 1};
    int left = 0;
    t.clear([](Record&) {}, [&](Transit::Leaving& x) { left += x.obj == &obj; });
    EXPECT_EQ(left, 1);
}
