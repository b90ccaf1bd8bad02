// AfterProgressList (cascade/comm/detail/after_progress.hpp): a fixed number of functions,
// called in the order they were added, again while one of them did something.
#include <gtest/gtest.h>

#include <string>

#include "cascade/comm/detail/after_progress.hpp"

using cascade::detail::AfterProgressList;

namespace {
struct Log {
    std::string calls;
    int work = 0;  // calls left that report work
};
bool fn_a(void* ctx) {
    auto* l = static_cast<Log*>(ctx);
    l->calls += 'a';
    return l->work > 0 && l->work-- > 0;
}
bool fn_b(void* ctx) {
    static_cast<Log*>(ctx)->calls += 'b';
    return false;
}
}  // namespace

TEST(AfterProgressList, AddUpToCapacityInOrder) {
    AfterProgressList list;
    Log l;
    EXPECT_TRUE(list.empty());
    for (std::size_t i = 0; i < AfterProgressList::kCapacity; ++i)
        EXPECT_TRUE(list.add(i % 2 ? fn_b : fn_a, &l));
    EXPECT_FALSE(list.add(fn_a, &l));
    EXPECT_EQ(list.size(), AfterProgressList::kCapacity);
    EXPECT_FALSE(list.call_all());
    EXPECT_EQ(l.calls, "abab");
}

TEST(AfterProgressList, RemoveKeepsTheOthersInOrder) {
    AfterProgressList list;
    Log l1, l2;
    list.add(fn_a, &l1);
    list.add(fn_b, &l1);
    list.add(fn_a, &l2);
    EXPECT_TRUE(list.contains(fn_b, &l1));
    EXPECT_FALSE(list.contains(fn_b, &l2));
    list.remove(fn_b, &l2);  // not there: nothing
    EXPECT_EQ(list.size(), 3u);
    list.remove(fn_b, &l1);
    EXPECT_FALSE(list.contains(fn_b, &l1));
    EXPECT_EQ(list.size(), 2u);
    list.call_all();
    EXPECT_EQ(l1.calls, "a");
    EXPECT_EQ(l2.calls, "a");
    EXPECT_TRUE(list.add(fn_b, &l1));  // room again, at the end
    l1.calls.clear();
    list.call_all();
    EXPECT_EQ(l1.calls, "ab");
}

TEST(AfterProgressList, AgainWhileOneDidSomething) {
    AfterProgressList list;
    Log l;
    l.work = 2;
    list.add(fn_b, &l);
    list.add(fn_a, &l);
    EXPECT_TRUE(list.call_until_quiet());
    EXPECT_EQ(l.calls, "bababa");  // two rounds with work, one without
    l.calls.clear();
    EXPECT_FALSE(list.call_until_quiet());
    EXPECT_EQ(l.calls, "ba");
}
