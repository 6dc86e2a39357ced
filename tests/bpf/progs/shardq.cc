// shardq - a controlled sharded work queue with known wake-up behaviour:
// ground truth for osdstage's queue-wait attribution.
//
// USAGE: shardq SHARDS WORKERS ITEMS MODE [GAP_US [DELAY_US [TIMEOUT_MS
//               [BURST [WORK_US]]]]]
//   MODE normal   the producer notifies the shard's condition variable
//        forget   it never notifies: items wait for the workers' timed
//                 wait (TIMEOUT_MS) to expire - a missed wake-up
//        delay    it notifies DELAY_US after queueing
//        contend  as normal, but every CPU runs busy threads and the
//                 workers are pinned to CPU 0 (CPU contention)
//        hold     as normal, but an item is due only DELAY_US after its
//                 enqueue, as mClock's tags make ops: a worker whose head
//                 item is not due waits, with it queued, until it is (a
//                 timed wait on the shard's cv, as Ceph's mClock worker
//                 does); an empty queue is waited for with no timeout
//        lock     as normal, but the items of a shard are one PG's: a
//                 worker that took an item takes the shard's PG mutex
//                 before it calls sim::dequeue (as Ceph's worker takes the
//                 PG's lock before dequeue_op) and works holding it, so the
//                 shard's other workers wait for that lock, asleep inside
//                 other work (blocked); the producer queues a burst's next
//                 item only once the lock is taken for the one before, so
//                 another worker takes it and waits for the lock (not the
//                 same worker after its work)
//        io       as normal, but the work is a wait for a completion
//                 inside sim::dequeue (as Ceph's worker waits for a read
//                 from the disk inside dequeue_op): WORK_US asleep in a
//                 timed wait on a condition variable of its own, not on
//                 a lock, so the later items of a burst wait for workers
//                 asleep inside other work (blocked, not lock)
//        requeue  as io, but a worker puts each item back at the front of
//                 its queue the first time it takes it (sim::dequeue
//                 returns at once) and waits for its completion the
//                 second time: the io waits happen in items dequeued
//                 again, never enqueued again (as Ceph requeues an op that
//                 must wait for its PG), and the later items of a burst
//                 wait for them (blocked)
// Each shard is a queue with a mutex and a condition variable; its WORKERS
// threads (named "shardq-w<shard>") wait with a timeout. One producer
// pushes ITEMS items round-robin over the shards, BURST at a time into one
// shard, GAP_US apart, through sim::enqueue(Shard*, Item*); a worker takes
// an item, calls sim::dequeue(Item*) (the probe points) and then works on
// it for WORK_US (busy CPU), so the later items of a burst wait for busy
// workers. Waits for one line on stdin
// first, so a tracer can attach. At the end it prints its own
// measurements as one JSON line:
//   queue_wait_mean_us  enqueue -> dequeue, all items
//   queue_wait_hi_mean_us  the same from before the call to enqueue() to
//                       inside dequeue(): a tracer's probes fall between
//   asleep_items        items enqueued while every worker of the shard was
//                       waiting on the condition variable
//   wake_mean_us        for those: enqueue -> the first worker resumed
//                       from its wait (signal delay + run-queue delay)
//   wake_hi_mean_us     the same from before the call to enqueue()
//   timeouts_with_work  timed waits that expired after which the worker
//                       took an item (counted once per expired wait)
//   held_mean_us        the dequeuing worker's hold waits between an
//                       item's enqueue and its dequeue, mean over items
//   held_till_mean_us   from an item's enqueue to the end of the dequeuing
//                       worker's last hold wait before its dequeue (0: none
//                       ended after the enqueue), mean over items: up to
//                       then the item was not due (a worker holds only
//                       when the head item is not), whatever the worker
//                       did in between
//   not_due_mean_us     from an item's enqueue to when it was due (its
//                       dequeue if sooner: hold mode only), mean over
//                       items: the time a scheduler held it, by definition
//   locked_mean_us      lock mode: the dequeuing worker's waits for the
//                       PG mutex between an item's enqueue and its dequeue,
//                       from before lock() to after it returned, mean over
//                       items
//   worked_mean_us      the dequeuing worker's work (WORK_US spins) between
//                       an item's enqueue and its dequeue, mean over items
//   io_mean_us          io and requeue modes: the dequeuing worker's
//                       waits for its completions between an item's
//                       enqueue and its (first) dequeue, mean over items
//   workers_cpu_us      the workers' time on CPU from the "go" to the
//                       last item's end (the kernel's schedstat)
//   workers_runq_us     and their time runnable, waiting for a CPU
//   work_cpu_us         the workers' time on CPU in sim::work (the items'
//                       WORK_US spins; their threads' CPU clock)
//   span_us             the time from the "go" to the last item's end
//   hold_waits          hold mode: how many hold waits the workers made
//   hold_waits_total_us   and their time, from before the wait to after
//   late_with_work      waits that returned success at or after their
//                       deadline, after which the worker took an item: the
//                       kernel says "woken", but the timer may have woken
//                       the thread before a notify reached its wait (seen
//                       as a timeout by a tracer, which cannot see that
//                       notify), or the notify may have come first
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <deque>
#include <iostream>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <string>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace sim {
static inline unsigned long now_ns()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000UL + t.tv_nsec;
}

struct Item {
    unsigned long t_enq = 0, t_resume = 0, t_deq = 0, t_due = 0, held = 0,
        held_till = 0, locked = 0, worked = 0, io = 0;
    // the other side of each probe: before the call to enqueue(), first
    // thing inside dequeue() (its first time)
    unsigned long t_call = 0, t_in_deq = 0;
    unsigned long io_from = 0, io_to = 0;   // io mode: its own wait
    bool asleep_at_enq = false;
    bool requeued = false;    // requeue mode: taken once already
};

struct Shard {
    std::mutex m;
    std::mutex pg;            // lock mode: the PG's lock, held while working
    std::condition_variable cv;
    std::deque<Item *> q;
    int waiting = 0;          // workers inside cv.wait_for
    int workers = 0;
    unsigned long resumed_at = 0;   // when a worker last came out of a wait
};

// The item's timestamps are taken as close as possible to where a tracer's
// probes take theirs: t_enq first thing inside enqueue() (a uprobe fires
// just before it), t_deq just before the call to dequeue(); and on the
// probes' other side, t_call before the call to enqueue(), t_in_deq first
// thing inside dequeue(): a thread preempted between its probe and its
// clock (a CPU shared with busy threads: ms) moves the tracer's stamp, not
// the program's, and the pair brackets it.
static unsigned long hold_ns = 0;   // hold mode: an item is due this late
static unsigned long io_ns = 0;     // io mode: a completion comes this late

__attribute__((noinline)) void enqueue(Shard *s, Item *it)
{
    it->t_enq = now_ns();
    it->t_due = it->t_enq + hold_ns;
    std::lock_guard<std::mutex> l(s->m);
    it->asleep_at_enq = s->waiting == s->workers;
    s->q.push_back(it);
    asm volatile("" ::: "memory");
}

static bool requeue_mode = false;

// lock mode: the PG's lock taken and released in functions of their own,
// so that a stack names them (a stack of a wait for the shard's lock
// names neither)
static std::atomic<long> pg_wait_ns{0};     // every wait to take it
__attribute__((noinline)) void lock_pg(Shard *s)
{
    unsigned long a = now_ns();
    s->pg.lock();
    pg_wait_ns += now_ns() - a;
}

__attribute__((noinline)) void unlock_pg(Shard *s)
{
    s->pg.unlock();
    asm volatile("" ::: "memory");  // a call, not a jump: on the stack
}

// The condition variable dequeue waits on in io mode: each worker's own
// (no one signals it). Made when the worker starts (io_wait_ready): its
// first use registers its destructor under the C library's loader lock,
// which workers starting together wait for -- a lock wait that would be
// dequeue's otherwise.
struct IoWait {
    std::mutex m;
    std::condition_variable cv;
};
static thread_local IoWait io_wait;

void io_wait_ready()
{
    asm volatile("" :: "r"(&io_wait) : "memory");
}

// io mode: the worker waits for its item's completion here, inside the
// dequeue function (a tracer sees it as work on the op), on a condition
// variable no lock stands for; the completion is the wait's deadline.
// requeue mode: the same, on the item's second time here only (the first
// time it is put back at the queue's front, as Ceph requeues an op that
// must wait for its PG: dequeued again, never enqueued again).
__attribute__((noinline)) void dequeue(Item *it)
{
    asm volatile("" :: "r"(it) : "memory");
    if (!it->t_in_deq)
        it->t_in_deq = now_ns();
    if (!io_ns || (requeue_mode && !it->requeued))
        return;
    std::mutex &m = io_wait.m;
    std::condition_variable &cv = io_wait.cv;
    std::unique_lock<std::mutex> l(m);
    it->io_from = now_ns();
    struct timespec dl;
    dl.tv_sec = (it->io_from + io_ns) / 1000000000UL;
    dl.tv_nsec = (it->io_from + io_ns) % 1000000000UL;
    while (now_ns() < it->io_from + io_ns)
        pthread_cond_clockwait(cv.native_handle(), m.native_handle(),
                               CLOCK_MONOTONIC, &dl);
    it->io_to = now_ns();
}
}  // namespace sim

static std::atomic<bool> stop{false};
static std::atomic<long> done_items{0};
static std::atomic<long> timeouts_with_work{0};
static std::atomic<long> late_with_work{0};
static std::atomic<long> hold_waits_ns{0};  // every worker's hold waits
static std::atomic<long> hold_waits{0};
// the workers' thread ids, for their time on CPU and waiting for one (the
// kernel's schedstat) between the "go" and the last item's end: whether
// the CPUs were the limit, by the kernel's own accounting
static std::mutex tids_m;
static std::vector<pid_t> worker_tids;

// the workers' (time on CPU, time runnable waiting for a CPU) in ns so
// far: /proc/self/task/TID/schedstat (zeros where the kernel has none)
static std::pair<long, long> workers_schedstat()
{
    long cpu = 0, runq = 0;
    std::lock_guard<std::mutex> g(tids_m);
    for (pid_t tid : worker_tids) {
        char path[64];
        long c, r;
        std::snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat",
                      (int)tid);
        if (FILE *f = std::fopen(path, "r")) {
            if (std::fscanf(f, "%ld %ld", &c, &r) == 2)
                cpu += c, runq += r;
            std::fclose(f);
        }
    }
    return {cpu, runq};
}

static void pin_cpu0()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static unsigned work_us = 0;

namespace sim {
// an item's work: WORK_US on a CPU, in a function of its own (so that the
// workers' samples on a CPU name it), its time on a CPU counted
static std::atomic<long> work_cpu_ns{0};

static unsigned long thread_cpu_ns()
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000UL + t.tv_nsec;
}

__attribute__((noinline)) void work(unsigned us)
{
    unsigned long c = thread_cpu_ns();
    unsigned long end = now_ns() + us * 1000UL;
    while (now_ns() < end)
        asm volatile("" ::: "memory");
    work_cpu_ns += thread_cpu_ns() - c;
}
}  // namespace sim

static bool hold_mode = false;
static bool lock_mode = false;
static std::atomic<long> pg_taken{0};   // lock mode: PG locks taken

// The overlap of intervals `iv` ([start, end), in time order) with
// [from, to).
static unsigned long overlap(
    const std::vector<std::pair<unsigned long, unsigned long>> &iv,
    unsigned long from, unsigned long to)
{
    unsigned long sum = 0;
    for (auto h = iv.rbegin(); h != iv.rend() && h->second > from; ++h)
        sum += std::min(h->second, to) - std::max(h->first, from);
    return sum;
}

static struct timespec ts_of(unsigned long ns)
{
    struct timespec t;
    t.tv_sec = ns / 1000000000UL;
    t.tv_nsec = ns % 1000000000UL;
    return t;
}

static void worker(sim::Shard *s, int shard, unsigned timeout_ms, bool pin)
{
    // hold mode: this worker's hold waits [start, end), for the ground
    // truth of each item it takes
    std::vector<std::pair<unsigned long, unsigned long>> holds;
    // its PG-lock waits, its work and its waits for completions, the same
    // way
    std::vector<std::pair<unsigned long, unsigned long>> locks, works, ios;
    char name[16];
    std::snprintf(name, sizeof(name), "shardq-w%d", shard);
    pthread_setname_np(pthread_self(), name);
    if (pin)
        pin_cpu0();
    sim::io_wait_ready();
    {
        std::lock_guard<std::mutex> g(tids_m);
        worker_tids.push_back((pid_t)syscall(SYS_gettid));
    }
    bool timed_out = false;     // the last wait expired
    bool late = false;          // it succeeded at or after its deadline
    std::unique_lock<std::mutex> l(s->m);
    while (!stop) {
        if (hold_mode && s->q.empty()) {
            s->waiting++;
            pthread_cond_wait(s->cv.native_handle(),
                              l.mutex()->native_handle());
            s->waiting--;
            continue;
        }
        if (hold_mode && s->q.front()->t_due > sim::now_ns()) {
            struct timespec dl = ts_of(s->q.front()->t_due);
            unsigned long a = sim::now_ns();
            pthread_cond_clockwait(s->cv.native_handle(),
                                   l.mutex()->native_handle(),
                                   CLOCK_MONOTONIC, &dl);
            holds.emplace_back(a, sim::now_ns());
            hold_waits_ns += holds.back().second - a;
            hold_waits++;
            continue;
        }
        if (s->q.empty()) {
            s->waiting++;
            // pthread directly: its ETIMEDOUT means the futex wait expired,
            // whereas std::condition_variable::wait_for also reports a
            // timeout when a notified thread ran after the deadline
            struct timespec dl;
            clock_gettime(CLOCK_MONOTONIC, &dl);
            dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
            dl.tv_sec += timeout_ms / 1000 + dl.tv_nsec / 1000000000L;
            dl.tv_nsec %= 1000000000L;
            int rc = pthread_cond_clockwait(s->cv.native_handle(),
                                            l.mutex()->native_handle(),
                                            CLOCK_MONOTONIC, &dl);
            s->waiting--;
            unsigned long t = sim::now_ns();
            timed_out = rc == ETIMEDOUT;
            late = rc == 0 &&
                t >= dl.tv_sec * 1000000000UL + dl.tv_nsec;
            for (auto *it : s->q)
                if (!it->t_resume)
                    it->t_resume = t;
            continue;
        }
        sim::Item *it = s->q.front();
        s->q.pop_front();
        if (timed_out)
            timeouts_with_work++;
        if (late)
            late_with_work++;
        timed_out = late = false;
        if (it->requeued) {     // requeue mode: its second time
            l.unlock();
            sim::dequeue(it);
            ios.emplace_back(it->io_from, it->io_to);
            done_items++;
            l.lock();
            continue;
        }
        l.unlock();
        if (lock_mode) {
            unsigned long a = sim::now_ns();
            sim::lock_pg(s);
            locks.emplace_back(a, sim::now_ns());
            pg_taken++;
        }
        it->t_deq = sim::now_ns();
        it->held = overlap(holds, it->t_enq, it->t_deq);
        if (!holds.empty() && holds.back().second > it->t_enq)
            it->held_till = holds.back().second - it->t_enq;
        it->locked = overlap(locks, it->t_enq, it->t_deq);
        it->worked = overlap(works, it->t_enq, it->t_deq);
        it->io = overlap(ios, it->t_enq, it->t_deq);
        sim::dequeue(it);
        if (it->io_to)
            ios.emplace_back(it->io_from, it->io_to);
        if (sim::requeue_mode) {
            l.lock();
            it->requeued = true;
            s->q.push_front(it);
            continue;
        }
        unsigned long w0 = sim::now_ns();
        sim::work(work_us);
        works.emplace_back(w0, sim::now_ns());
        if (lock_mode)
            sim::unlock_pg(s);
        done_items++;
        l.lock();
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        std::fprintf(stderr, "usage: shardq SHARDS WORKERS ITEMS "
                     "normal|forget|delay|contend|hold|lock|io|requeue "
                     "[GAP_US [DELAY_US [TIMEOUT_MS [BURST [WORK_US]]]]]\n");
        return 2;
    }
    int nshards = std::atoi(argv[1]), nworkers = std::atoi(argv[2]);
    long nitems = std::atol(argv[3]);
    std::string mode = argv[4];
    unsigned gap_us = argc > 5 ? std::atoi(argv[5]) : 2000;
    unsigned delay_us = argc > 6 ? std::atoi(argv[6]) : 1000;
    unsigned timeout_ms = argc > 7 ? std::atoi(argv[7]) : 20;
    long burst = argc > 8 ? std::atol(argv[8]) : 1;
    work_us = argc > 9 ? std::atoi(argv[9]) : 0;
    if (burst < 1)
        burst = 1;
    bool contend = mode == "contend";
    hold_mode = mode == "hold";
    lock_mode = mode == "lock";
    if (hold_mode)
        sim::hold_ns = delay_us * 1000UL;
    sim::requeue_mode = mode == "requeue";
    if (mode == "io" || sim::requeue_mode) {   // the work is the wait
        sim::io_ns = work_us * 1000UL;
        work_us = 0;
    }

    std::vector<sim::Shard> shards(nshards);
    std::vector<std::thread> threads;
    for (int s = 0; s < nshards; s++) {
        shards[s].workers = nworkers;
        for (int w = 0; w < nworkers; w++)
            threads.emplace_back(worker, &shards[s], s, timeout_ms, contend);
    }
    std::vector<std::thread> hogs;
    std::atomic<bool> hog_stop{false};
    std::string line;
    std::getline(std::cin, line);
    auto t_go = sim::now_ns();
    auto sched0 = workers_schedstat();
    if (contend) {
        unsigned n = std::thread::hardware_concurrency();
        for (unsigned c = 0; c < 2 * n; c++)
            hogs.emplace_back([&hog_stop] {
                pthread_setname_np(pthread_self(), "shardq-hog");
                pin_cpu0();
                while (!hog_stop)
                    asm volatile("" ::: "memory");
            });
    }
    // let every worker reach its wait
    std::this_thread::sleep_for(std::chrono::milliseconds(50));

    std::vector<sim::Item> items(nitems);
    for (long i = 0; i < nitems; i += burst) {
        sim::Shard *s = &shards[(i / burst) % nshards];
        long n = std::min(burst, nitems - i);
        for (long j = 0; j < n; j++) {
            items[i + j].t_call = sim::now_ns();
            sim::enqueue(s, &items[i + j]);
            if (mode == "delay")
                std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
            if (mode != "forget")
                s->cv.notify_one();
            while (lock_mode && pg_taken < i + j + 1 && j + 1 < n)
                std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
        // wait for them, then leave a gap so the workers go back to sleep
        while (done_items < i + n)
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
    }
    auto sched1 = workers_schedstat();
    auto t_end = sim::now_ns();
    stop = true;
    for (auto &s : shards) {
        std::lock_guard<std::mutex> l(s.m);
        s.cv.notify_all();
    }
    for (auto &t : threads)
        t.join();
    hog_stop = true;
    for (auto &t : hogs)
        t.join();

    double qw = 0, wake = 0, held = 0, held_till = 0, not_due = 0,
        locked = 0, worked = 0, io = 0, io_total = 0, qw_hi = 0, wake_hi = 0;
    long asleep = 0;
    for (auto &it : items) {
        qw += it.t_deq - it.t_enq;
        qw_hi += it.t_in_deq - it.t_call;
        held += it.held;
        held_till += it.held_till;
        locked += it.locked;
        worked += it.worked;
        io += it.io;
        io_total += it.io_to - it.io_from;
        if (it.t_due)
            not_due += std::min(it.t_due, it.t_deq) - it.t_enq;
        if (it.asleep_at_enq && it.t_resume) {
            asleep++;
            wake += it.t_resume - it.t_enq;
            wake_hi += it.t_resume - it.t_call;
        }
    }
    std::printf("{\"items\": %ld, \"queue_wait_mean_us\": %.3f, "
                "\"queue_wait_hi_mean_us\": %.3f, "
                "\"asleep_items\": %ld, \"wake_mean_us\": %.3f, "
                "\"wake_hi_mean_us\": %.3f, "
                "\"timeouts_with_work\": %ld, \"late_with_work\": %ld, "
                "\"held_mean_us\": %.3f, \"held_till_mean_us\": %.3f, \"not_due_mean_us\": %.3f, "
                "\"locked_mean_us\": %.3f, \"worked_mean_us\": %.3f, "
                "\"io_mean_us\": %.3f, \"io_total_us\": %.3f, "
                "\"pg_lock_wait_total_us\": %.3f, "
                "\"hold_waits\": %ld, \"hold_waits_total_us\": %.3f, "
                "\"workers_cpu_us\": %.3f, \"workers_runq_us\": %.3f, "
                "\"work_cpu_us\": %.3f, "
                "\"span_us\": %.3f}\n",
                nitems, qw / nitems / 1000.0, qw_hi / nitems / 1000.0, asleep,
                asleep ? wake / asleep / 1000.0 : 0.0,
                asleep ? wake_hi / asleep / 1000.0 : 0.0,
                (long)timeouts_with_work, (long)late_with_work,
                held / nitems / 1000.0, held_till / nitems / 1000.0,
                not_due / nitems / 1000.0, locked / nitems / 1000.0,
                worked / nitems / 1000.0, io / nitems / 1000.0,
                io_total / 1000.0, sim::pg_wait_ns / 1000.0,
                (long)hold_waits,
                hold_waits_ns / 1000.0,
                (sched1.first - sched0.first) / 1000.0,
                (sched1.second - sched0.second) / 1000.0,
                sim::work_cpu_ns / 1000.0,
                (t_end - t_go) / 1000.0);
    return 0;
}
