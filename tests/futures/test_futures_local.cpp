// Futures on one process: promises, continuations, combinators, local async, exceptions,
// every worker waiting at once, recursion, and Taskflow interplay.
#include <gtest/gtest.h>

#include <atomic>
#include <cascade/cascade.hpp>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

using namespace cascade;

TEST(FuturesLocal, PromiseAndReadyFutures) {
    Threadpool tp(2);
    Futures fx(tp);
    promise<int> p;
    future<int> f = p.get_future();
    EXPECT_FALSE(f.ready());
    p.set_value(42);
    EXPECT_TRUE(f.ready());
    EXPECT_EQ(f.get(), 42);
    EXPECT_FALSE(f.valid());
    EXPECT_THROW(p.set_value(1), UsageError);
    EXPECT_EQ(make_ready_future(std::string("x")).get(), "x");
    make_ready_future().get();
    auto e = make_exceptional_future<int>(std::make_exception_ptr(std::runtime_error("bad")));
    EXPECT_THROW(e.get(), std::runtime_error);
    tp.join();
}

TEST(FuturesLocal, BrokenPromise) {
    Threadpool tp(1);
    Futures fx(tp);
    future<int> f;
    {
        promise<int> p;
        f = p.get_future();
    }
    EXPECT_THROW(f.get(), UsageError);
    tp.join();
}

TEST(FuturesLocal, AsyncLambdaAndThen) {
    Threadpool tp(2);
    Futures fx(tp);
    auto f = async(
        here, [](int a, int b) { return a + b; }, 2, 3);
    auto g = std::move(f).then([](int v) { return v * 10; });
    auto h = g.then([](future<int> x) { return std::to_string(x.get()); });
    EXPECT_EQ(h.get(), "50");
    // void futures chain too
    std::atomic<int> hit{0};
    async(here, [&] { hit = 1; }).then([&] { hit = hit * 2 + 1; }).get();
    EXPECT_EQ(hit.load(), 3);
    tp.join();
}

TEST(FuturesLocal, ExceptionsReachGetAndSkipValueContinuations) {
    Threadpool tp(2);
    Futures fx(tp);
    auto f = async(
        here, [](int x) -> int { throw std::invalid_argument("bad " + std::to_string(x)); }, 7);
    std::atomic<bool> ran{false};
    auto g = f.then([&](int v) {
        ran = true;
        return v;
    });
    try {
        g.get();
        FAIL() << "no exception";
    } catch (const std::invalid_argument& e) {
        EXPECT_STREQ(e.what(), "bad 7");
    }
    EXPECT_FALSE(ran.load());
    tp.join();  // the exception was the future's, not the pool's
}

TEST(FuturesLocal, WhenAllAndWhenAny) {
    Threadpool tp(3);
    Futures fx(tp);
    std::vector<future<int>> v;
    for (int i = 0; i < 50; ++i)
        v.push_back(async(
            here, [](int x) { return x * x; }, i));
    auto all = when_all(std::move(v));
    auto sq = all.get();
    ASSERT_EQ(sq.size(), 50u);
    for (int i = 0; i < 50; ++i)
        EXPECT_EQ(sq[i], i * i);

    shared_future<int> a = async(here, [] { return 1; }).share();
    auto t = when_all(a, async(here, [] { return std::string("two"); }), a);
    auto [x, y, z] = t.get();
    EXPECT_EQ(x + z, 2);
    EXPECT_EQ(y, "two");
    EXPECT_EQ(a.get(), 1);  // a shared input is not consumed

    promise<int> never;
    std::vector<shared_future<int>> w{never.get_future().share(), make_ready_future(5).share()};
    EXPECT_EQ(when_any(w).get(), 1u);
    EXPECT_EQ(w[1].get(), 5);
    never.set_value(0);

    std::vector<future<void>> voids;
    for (int i = 0; i < 4; ++i)
        voids.push_back(async(here, [] {}));
    when_all(std::move(voids)).get();
    when_all().get();  // no inputs: ready at once
    when_all(std::vector<future<int>>{}).get();
    auto bad = when_all(async(here, []() -> int { throw std::runtime_error("x"); }),
                        async(here, [] { return 1; }));
    EXPECT_THROW(bad.get(), std::runtime_error);
    tp.join();
}

// Every worker blocks in get() on values produced by tasks queued behind them: waiting
// workers must run those tasks (the thesis needed LIFO stacks for this).
TEST(FuturesLocal, EveryWorkerWaitsWithoutDeadlock) {
    for (int threads : {1, 2, 4}) {
        Threadpool tp(threads);
        Futures fx(tp);
        std::vector<future<long>> outer;
        for (int i = 0; i < 4 * threads; ++i)
            outer.push_back(async(here, [i] {
                std::vector<future<long>> inner;
                for (int j = 0; j < 8; ++j)
                    inner.push_back(async(here, [i, j] { return long(i) * 100 + j; }));
                long s = 0;
                for (auto& f : inner)
                    s += f.get();
                return s;
            }));
        long total = 0;
        for (auto& f : outer)
            total += f.get();
        long expect = 0;
        for (int i = 0; i < 4 * threads; ++i)
            expect += 800L * i + 28;
        EXPECT_EQ(total, expect) << threads << " threads";
        tp.join();
    }
}

TEST(FuturesLocal, RecursiveFibonacciWithRegisteredFunction) {
    Threadpool tp(2);
    Futures fx(tp);
    AsyncFn<long(int)> fib;
    fib = fx.make_async(
        [&](int n) -> long {
            if (n < 12) {
                long a = 0, b = 1;
                for (int i = 0; i < n; ++i) {
                    long c = a + b;
                    a = b;
                    b = c;
                }
                return a;
            }
            auto x = async(any, fib, n - 1);
            auto y = async(here, fib, n - 2);
            return x.get() + y.get();
        },
        "fib");
    EXPECT_EQ(async(here, fib, 27).get(), 196418);
    tp.join();
}

TEST(FuturesLocal, DataflowArgumentsWaitWithoutBlocking) {
    Threadpool tp(1);  // one worker: a blocking wait for the argument would deadlock
    Futures fx(tp);
    auto add = fx.make_async([](int& a, int& b) { return a + b; }, "add");
    promise<int> p;
    auto f = async(here, add, p.get_future(), 1);
    auto g = async(here, add, std::move(f), make_ready_future(10));
    EXPECT_FALSE(g.ready());
    p.set_value(5);
    EXPECT_EQ(g.get(), 16);
    promise<int> q;
    auto h = async(here, add, q.get_future(), 0);
    q.set_exception(std::make_exception_ptr(std::runtime_error("input failed")));
    EXPECT_THROW(h.get(), std::runtime_error);
    tp.join();
}

TEST(FuturesLocal, FutureFulfillsTaskflowPromiseAndTaskStartsAsync) {
    Threadpool tp(2);
    Futures fx(tp);
    Taskflow<int> tf(&tp, "tf");
    std::atomic<long> sum{0};
    tf.set_indegree([](int k) { return k == 10 ? 10 : 1; }).set_task([&](int k) {
        if (k < 10) {
            // A task starts an async; its continuation fulfills the promise of task 10.
            async(
                here, [](int x) { return x * x; }, k)
                .then([&](int v) {
                    sum += v;
                    tf.fulfill_promise(10);
                });
        } else {
            sum += 1000;
        }
    });
    for (int k = 0; k < 10; ++k)
        tf.fulfill_promise(k);
    tp.join();
    EXPECT_EQ(sum.load(), 285 + 1000);
}

TEST(FuturesLocal, UsageErrors) {
    Threadpool tp(1);
    Futures fx(tp);
    auto f = fx.make_async([](int x) { return x; });
    EXPECT_THROW(async(1, f, 1), UsageError);   // one rank only
    EXPECT_THROW(async(1, [] {}), UsageError);  // unregistered callables stay local
    future<int> empty;
    EXPECT_THROW(empty.get(), UsageError);
    AsyncFn<int(int)> unset;
    EXPECT_THROW(async(here, unset, 1), UsageError);
    tp.join();
}

// Big vectors dropped by calls and states are pooled once receives asked for big vectors, and
// received into again (no zero-fill, no page faults); small ones, and ones too big for a
// request, are not used.
TEST(FuturesLocal, BigVectorsAreRecycled) {
    using R = detail::Recycler<std::vector<float>>;
    const std::size_t n = detail::kLargeBytes / sizeof(float) + 3;
    R::clear();  // start empty, without credits (other tests may have pooled)
    std::vector<float> small(100, 1.0f);
    R::give(small);
    EXPECT_EQ(small.size(), 100u);  // left alone
    EXPECT_EQ(R::pooled(), 0u);
    std::vector<float> big(2 * n, 2.0f);
    const float* mem = big.data();
    R::give(big);  // no receive asked for a big vector yet: kept out of the pool
    EXPECT_EQ(big.size(), 2 * n);
    EXPECT_EQ(R::pooled(), 0u);
    EXPECT_EQ(R::take(2 * n).size(), 2 * n);  // a receive that found nothing: one credit
    R::give(big);
    EXPECT_TRUE(big.empty());
    EXPECT_EQ(R::pooled(), 1u);
    auto too_small_a_need = R::take(n - 4);  // 2n pooled is more than twice n - 4: not used
    EXPECT_NE(too_small_a_need.data(), mem);
    auto w = R::take(n);
    EXPECT_EQ(w.data(), mem);  // the same memory, shrunk without writing
    EXPECT_EQ(w.size(), n);
    EXPECT_EQ(w[n - 1], 2.0f);
    EXPECT_EQ(R::pooled(), 0u);
    for (int i = 0; i < 20; ++i)  // credits for more than the pool holds
        (void)R::take(n);
    for (int i = 0; i < 20; ++i) {  // the pool is bounded
        std::vector<float> v(n, 0.0f);
        R::give(v);
    }
    EXPECT_LE(R::pooled(), 8u);
    // A full pool gives its smallest vector up for a bigger one, and refuses a smaller one.
    R::clear();
    const std::size_t m = detail::kRecycleBytes / sizeof(float);
    for (int i = 0; i < 20; ++i)
        (void)R::take(m);
    for (int i = 0; i < 20; ++i) {
        std::vector<float> v(m, 0.0f);
        R::give(v);
    }
    ASSERT_EQ(R::pooled(), 8u);
    std::vector<float> bigger(n, 3.0f);
    const float* bigger_mem = bigger.data();
    R::give(bigger);
    EXPECT_TRUE(bigger.empty());
    EXPECT_EQ(R::pooled(), 8u);
    std::vector<float> smaller(m - 1, 0.0f);
    R::give(smaller);
    EXPECT_EQ(smaller.size(), m - 1);  // left alone: the pool holds nothing smaller
    EXPECT_EQ(R::take(n).data(), bigger_mem);
    // A call's big argument goes to the pool when the call is done, once receives asked for
    // big vectors; before that it goes back to the allocator.
    R::clear();
    Threadpool tp(2);
    Futures fx(tp);
    auto sum = fx.make_async([](std::vector<float>& v) { return double(v.size()); }, "sumf");
    EXPECT_EQ(async(here, sum, std::vector<float>(n, 1.0f)).get(), double(n));
    EXPECT_EQ(R::pooled(), 0u);
    (void)R::take(n);
    EXPECT_EQ(async(here, sum, std::vector<float>(n, 1.0f)).get(), double(n));
    tp.join();
    EXPECT_EQ(R::pooled(), 1u);
}
