// opqueue - a controlled producer/consumer with the argument shapes of
// Ceph's OSD::enqueue_op / OSD::dequeue_op / PrimaryLogPG::log_op_stats,
// and exactly known delays (ground truth for op-keyed stages).
//
// USAGE: opqueue N QUEUE_US WORK_US [keep]
// After one line on stdin: the main thread enqueues N ops one at a time;
// each op stays queued for at least QUEUE_US (the worker waits on a
// deadline set at enqueue), then the worker "processes" it for WORK_US and
// calls done(). So per op: queue_wait >= QUEUE_US and
// op_total >= QUEUE_US + WORK_US. Ops alternate read / write / other in
// their rmw flags (at a known offset; printed on start-up, and so is
// their request id's: client.4100.0:1, :2, ...). With "keep",
// every op stays allocated until exit, so each has its own address.
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sim {
// like Ceph's spg_t: pg_t {u64 pool; u32 seed} + shard_id_t {int8}: 24 bytes,
// trivially copyable, so passed by value in memory (on the stack)
struct pgt { unsigned long pool; unsigned seed; };
struct spg { pgt pgid; signed char shard; };
static_assert(sizeof(spg) == 24, "spg must be 24 bytes like spg_t");
struct Op {
    std::atomic<int> nref{0};
    char pad[20];
    unsigned rmw_flags = 0;          // offset printed as "rmw_off"
    struct timespec not_before;
    // like Ceph's osd_reqid_t (entity_name_t {u8 type; s64 num}, u64
    // tid, s32 inc): client.4100.0:(i + 1); offset printed as "reqid_off"
    struct { unsigned char type; long num; unsigned long tid; int inc; }
        reqid{8, 4100, 0, 0};
};
inline void intrusive_ptr_add_ref(Op *o) { o->nref++; }
inline void intrusive_ptr_release(Op *o) { if (--o->nref == 0) delete o; }

template <class T> class Ref {       // boost::intrusive_ptr look-alike
public:
    Ref() = default;
    explicit Ref(T *p) : p_(p) { if (p_) intrusive_ptr_add_ref(p_); }
    Ref(const Ref &o) : p_(o.p_) { if (p_) intrusive_ptr_add_ref(p_); }
    Ref(Ref &&o) noexcept : p_(o.p_) { o.p_ = nullptr; }
    ~Ref() { if (p_) intrusive_ptr_release(p_); }
    Ref &operator=(Ref &&o) noexcept { std::swap(p_, o.p_); return *this; }
    T *get() const { return p_; }
    T *operator->() const { return p_; }
private:
    T *p_ = nullptr;
};
struct PG { std::atomic<int> nref{0}; };
inline void intrusive_ptr_add_ref(PG *p) { p->nref++; }
inline void intrusive_ptr_release(PG *p) { if (--p->nref == 0) delete p; }
struct Handle { int n; };

static void sleep_until(const struct timespec &t)
{
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr))
        ;
}
static struct timespec after_us(unsigned us)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += (long)us * 1000;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

class Server {
public:
    unsigned queue_us = 0, work_us = 0;
    unsigned long completed = 0;
    __attribute__((noinline)) void enqueue_op(spg pgid, Ref<Op> &&op, unsigned epoch);
    __attribute__((noinline)) void dequeue_op(Ref<PG> pg, Ref<Op> op, Handle &h);
    __attribute__((noinline)) void log_op_stats(const Op &op, unsigned long inb,
                                                unsigned long outb);
    void worker(long n);
    std::mutex lock;
    std::condition_variable cond;
    std::deque<Ref<Op>> q;
    bool keep = false;
    std::vector<Ref<Op>> kept;
};

void Server::enqueue_op(spg pgid, Ref<Op> &&op, unsigned epoch)
{
    op->not_before = after_us(queue_us);
    std::lock_guard<std::mutex> l(lock);
    q.push_back(std::move(op));
    cond.notify_one();
    asm volatile("" :: "r"(pgid.pgid.pool), "r"(epoch) : "memory");
}

void Server::dequeue_op(Ref<PG> pg, Ref<Op> op, Handle &h)
{
    sleep_until(after_us(work_us));
    log_op_stats(*op.get(), 4096, h.n);
    if (keep)
        kept.push_back(Ref<Op>(op.get()));
    asm volatile("" :: "r"(pg.get()) : "memory");
}

void Server::log_op_stats(const Op &op, unsigned long inb, unsigned long outb)
{
    completed++;
    asm volatile("" :: "r"(&op), "r"(inb), "r"(outb) : "memory");
}

void Server::worker(long n)
{
    Ref<PG> pg(new PG);
    Handle h{0};
    for (long i = 0; i < n; i++) {
        Ref<Op> op;
        {
            std::unique_lock<std::mutex> l(lock);
            cond.wait(l, [this] { return !q.empty(); });
            op = std::move(q.front());
            q.pop_front();
        }
        sleep_until(op->not_before);
        dequeue_op(pg, std::move(op), h);
    }
}
}  // namespace sim

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        std::fprintf(stderr, "usage: opqueue N QUEUE_US WORK_US [keep]\n");
        return 2;
    }
    long n = std::atol(argv[1]);
    sim::Server s;
    s.queue_us = std::atoi(argv[2]);
    s.work_us = std::atoi(argv[3]);
    s.keep = argc == 5 && std::string(argv[4]) == "keep";
    std::printf("rmw_off %zu reqid_off %zu\n", offsetof(sim::Op, rmw_flags),
                offsetof(sim::Op, reqid));
    std::fflush(stdout);
    std::string line;
    std::getline(std::cin, line);
    std::thread w([&] { s.worker(n); });
    static const unsigned flags[3] = {0x2 /*read*/, 0x4 /*write*/, 0x0};
    for (long i = 0; i < n; i++) {
        sim::Ref<sim::Op> op(new sim::Op);
        op->rmw_flags = flags[i % 3];
        op->reqid.tid = i + 1;
        s.enqueue_op(sim::spg{{1, (unsigned)i}, -1}, std::move(op), 7);
        // one op at a time: wait for it to complete
        while (s.completed < (unsigned long)(i + 1))
            std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    w.join();
    std::printf("done %lu\n", s.completed);
    return 0;
}
