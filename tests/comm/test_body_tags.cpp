// BodyTags (cascade/comm/detail/body_tags.hpp): every tag handed out is held by one stream
// at a time, whatever the threads.
#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

#include "cascade/comm/detail/body_tags.hpp"

using cascade::detail::BodyTags;

TEST(BodyTags, AllTagsOnceThenNone) {
    BodyTags tags;
    std::vector<char> seen(BodyTags::kCount, 0);
    for (int i = 0; i < BodyTags::kCount; ++i) {
        const auto t = tags.take();
        ASSERT_TRUE(t.has_value());
        ASSERT_TRUE(BodyTags::contains(*t));
        ASSERT_FALSE(seen[static_cast<std::size_t>(*t - BodyTags::kFirst)]) << *t;
        seen[static_cast<std::size_t>(*t - BodyTags::kFirst)] = 1;
    }
    EXPECT_FALSE(tags.take().has_value());
    tags.release(BodyTags::kFirst + 5);
    EXPECT_EQ(tags.take(), BodyTags::kFirst + 5);
    tags.release(3);  // not a body tag: nothing
    EXPECT_FALSE(tags.take().has_value());
}

TEST(BodyTags, InTurnAndAroundTheEnd) {
    BodyTags tags;
    EXPECT_EQ(tags.take(), BodyTags::kFirst);
    EXPECT_EQ(tags.take(), BodyTags::kFirst + 1);
    tags.skip(BodyTags::kCount - 3);  // the next one is the last tag, then the first free
    EXPECT_EQ(tags.take(), BodyTags::kFirst + BodyTags::kCount - 1);
    EXPECT_EQ(tags.take(), BodyTags::kFirst + 2);  // kFirst and kFirst + 1 are held
    EXPECT_FALSE(BodyTags::contains(BodyTags::kFirst - 1));
    EXPECT_FALSE(BodyTags::contains(BodyTags::kFirst + BodyTags::kCount));
}

TEST(BodyTags, ThreadsNeverShareATag) {
    BodyTags tags;
    constexpr int kThreads = 4, kEach = 2000;
    std::vector<std::vector<int>> got(kThreads);
    std::vector<std::thread> ts;
    for (int i = 0; i < kThreads; ++i)
        ts.emplace_back([&, i] {
            std::vector<int>& mine = got[static_cast<std::size_t>(i)];
            for (int k = 0; k < kEach; ++k) {
                if (const auto t = tags.take()) mine.push_back(*t);
                if (k % 2 == 1) {  // give back the oldest: tags are reused meanwhile
                    tags.release(mine.front());
                    mine.erase(mine.begin());
                }
            }
        });
    for (auto& t : ts)
        t.join();
    std::set<int> held;
    for (auto& g : got)
        for (int t : g)
            EXPECT_TRUE(held.insert(t).second) << "tag " << t << " held twice";
}
