# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Flow-level network model of periodic training jobs (docs/simulator.md): the event engine.

A job iterates: compute, then every one of its network pods sends a volume through
its node's host link; the iteration ends when the last of its transfers ends
(synchronous data parallel), plus a fixed latency tail (high-latency node pairs).
A link of capacity ``B`` (minus background traffic) shares bandwidth max-min fairly
among its active transfers, each capped at its own rate ``r_p``; when two or more
transfers together ask for more than that, they share ``eta x`` it (the link's
contention efficiency ``L_ETA``, docs/simulator.md).  Rates change only at events
(a phase ends, a transfer ends), so the model is exact between events.

The engine is a discrete-event loop over a binary heap: every job has at most one
pending event (its compute or latency tail ends, or its next iteration starts) and
every link one (its earliest transfer completion at the current rates).  An event
touches only its own job or link, so a step costs ``O(log n)`` plus the active
transfers on one link, whatever the cluster's size.  Links are brought up to date
lazily (each keeps the time its transfers were last advanced).

Transfers that start when no other transfer is on any of their job's links run
*clear* (``clear=True``): the iteration is one event, its end, computed as the loop
would compute transfers alone, and they go back to the loop, in the state the loop
would have them in, the moment another transfer starts on one of those links or the
links are flushed.  So an iteration costs link events only while its transfers
overlap others: the results are the loop's, bit for bit (tests/sim/test_clear.py).

The stop-and-wait controller's continuous regulation (docs/scheduler.md) runs in
the loop: every finished iteration is reported at once to the regulation rule of
:mod:`tdmcore._kernels.regulation` (``regulation.pxd``, the same lines the
controller runs), on the job's own windows; a report whose outcome needs the
controller itself (a pattern that changes, or a target phase that depends on a job
outside the engine) stops the loop *before* it is taken, so the caller hands that
one report to the controller.

Compute noise is counter-based: iteration ``i`` of the job with noise key ``k``
under seed ``s`` draws ``z = noise_normal(s, k, i)``, so any iteration's noise is
known without drawing the ones before it; the closed-form stretches below use the
same function.

Cython rather than Numba: the loop is many small steps over shared state, and a
call between Numba functions reference-counts every array it passes (measured:
~1.7-3.4 us per iteration with Numba helpers, against the tens of nanoseconds the
work takes).  Here every step works on raw pointers into the arrays that
:class:`FlowEngine` owns.  Units: ms, Gbit, Gbps (1e-3 Gbit/ms).
"""

import numpy as np

from cpython.exc cimport PyErr_CheckSignals
from libc.math cimport sqrt, log, cos, exp, fabs, floor, INFINITY, NAN, isnan

from tdmcore._kernels.regulation cimport (
    DRIFT_UPDATE, HORIZON, LIMIT, N_COUNTERS, N_LIMITS, O_T, PAUSE, PAUSE_KEEP,
    PAUSE_UPDATE, QUIET, WINDOW, Watch, decide, next_start, pause_to, pymod, take,
    target_phase,
)

ctypedef long long i64
ctypedef unsigned long long u64

#: A transfer with less than this left (Gbit) is finished (float round-off).
DONE_GBIT = 1e-12
cdef double DONE = 1e-12

cpdef enum:
    # phases
    PHASE_WAIT = 0      # the next iteration starts at F_T
    PHASE_COMPUTE = 1   # compute ends at F_T
    PHASE_COMM = 2      # transfers pending
    PHASE_DONE = 3      # every iteration done
    PHASE_READY = 4     # an iteration just ended; its report or the next start is due
    PHASE_TAIL = 5      # transfers done, the latency tail ends at F_T
    PHASE_FREE = 6      # an unused slot
    PHASE_CLEAR = 7     # its transfers have their links to themselves; the iteration ends at F_T

cpdef enum:
    # why FlowEngine.run returned (with the job slot concerned)
    STOP_TIME = 0       # reached until
    STOP_FINISHED = 1   # a job finished its last iteration (its slot is PHASE_DONE)
    STOP_SAMPLES = 2    # a job's buffer of sampled iteration times is full
    STOP_IDLE = 3       # nothing is left to happen
    STOP_SOLO = 4       # a job flagged to leave is between iterations, no hold pending
    STOP_REPORT = 5     # a job's report needs the controller

cpdef enum:
    # a report the engine leaves to the controller (beside the regulation's outcomes)
    REPORT_CONTROLLER = 2

cdef enum:
    # job fields: rows of the float array ``jf``
    F_T = 0            # time of the job's pending event
    F_ISTART = 1       # start of the iteration in progress (or of the last one)
    F_COMPUTE = 2      # compute time before noise (ms)
    F_IDLE = 3         # idle injected into every compute phase (ms)
    F_TAIL = 4         # latency tail per iteration (ms)
    F_HOLD_PHASE = 5   # next start: the first time congruent to this (NaN: none)
    F_HOLD_PERIOD = 6
    F_BUSY = 7         # sum of the iteration times since the job entered the engine
    F_ANCHOR = 8       # start of the latest finished iteration (the controller's anchor)
    F_TFIX = 9         # target phase when the reference job is not tracked here
    F_PAUSE_MS = 10    # pauses taken in the engine (ms)
    F_LAST_DUR = 11    # the latest finished iteration's time and start
    F_LAST_START = 12
    F_JOB_PERIOD = 13  # the phase period: a pause is taken, and held, modulo it
    # the target phase's terms besides the root's anchor (regulation.pxd's target_phase):
    # compute(root), offset(job), offset(root), compute(job)
    F_T_CR = 14
    F_T_OJ = 15
    F_T_OR = 16
    F_T_CJ = 17
    F_CSTART = 18      # when the iteration in progress started communicating
    F_LAST_OWN = 19    # the latest finished iteration's own part (without communication)
    F_HELD_MS = 20     # time actually held after pauses, counted when the job resumes (ms)
    F_PAUSE_FROM = 21  # when the pending pause began (the paused iteration's end)
    N_JF = 22

cdef enum:
    # job fields: rows of the integer array ``ji``
    I_PHASE = 0
    I_ITER = 1         # iterations finished (the index of the next one)
    I_NITERS = 2
    I_PENDING = 3      # transfers in flight
    I_POD0 = 4         # the job's pods are pods[I_POD0 : I_POD0 + I_NPOD]
    I_NPOD = 5
    I_LEAVE = 6        # stop (STOP_SOLO) when between iterations
    I_KEY = 7          # noise key
    I_DONE = 8         # iterations finished since the job entered the engine
    I_STEP = 9         # iteration i is sampled when i % step == 0
    I_NSAMP = 10       # samples in the buffer
    I_MON = 11         # monitored by the controller
    I_HIGH = 12        # never paused
    I_ROOT = 13        # slot of the reference job (-1: use F_TFIX; -2: ask the controller)
    I_READJ = 14       # readjustments made in the engine
    I_REPORTED = 15    # the latest iteration's report has been taken
    I_PAUSED = 16      # a pause began at F_PAUSE_FROM and the job has not resumed yet
    N_JI = 17

cdef enum:
    # pod fields (float rows, then integer rows)
    P_CAP = 0
    P_VOLUME = 1
    P_LEFT = 2
    P_RATE = 3
    P_SENT = 4
    N_PF = 5
cdef enum:
    P_JOB = 0
    P_LINK = 1
    P_ACTIVE = 2
    P_CLEAR = 3    # a clear transfer in flight (CLEAR_SHARED, CLEAR_PRIVATE), or CLEAR_NONE
    N_PI = 4

cdef enum:
    # a clear transfer runs at its link's rate for it alone, as the event loop would run
    # it on a link (SHARED: other pods sit on it, idle) or as a private transfer (its
    # link carried no other pod when it started: _comm's private path)
    CLEAR_NONE = 0
    CLEAR_SHARED = 1
    CLEAR_PRIVATE = 2

cdef enum:
    # link fields
    L_CAP = 0
    L_BG = 1
    L_T = 2      # transfers on the link advanced up to this time
    L_SENT = 3
    L_MARK = 4   # scratch: the _comm call (C_MARK) that last relinked it
    L_ETA = 5    # contention efficiency: the share of the link a saturating crowd gets
    L_CLEAR_END = 6  # when the clear transfer on the link (lclear) ends
    N_LF = 7

cdef enum:
    # configuration (``cfg``): the regulation's rules first (regulation.pxd's order)
    C_WINDOW = 0
    C_OT = 1
    C_HORIZON = 2
    C_LIMIT = 3
    C_SEED = 4
    C_MARK = 5     # a counter: each _comm call marks the links it relinks
    C_CLEAR = 6    # 1: a job whose transfers meet no other on their links runs them clear
    C_EVENTS = 7   # counters (FlowEngine.counts): events taken from the heap,
    C_CLEARED = 8  # iterations that ended clear,
    C_BACK = 9     # clear iterations whose transfers went back to the loop
    N_CFG = 10

# the rules are read straight from ``cfg``
assert C_WINDOW == WINDOW and C_OT == O_T and C_HORIZON == HORIZON and C_LIMIT == LIMIT


cdef u64 GOLDEN = 0x9E3779B97F4A7C15ULL
cdef double TWO_POW_M53 = 1.1102230246251565e-16
cdef double TWO_PI = 6.283185307179586


# ---------------------------------------------------------------------------- noise
cdef inline u64 _mix(u64 x) noexcept nogil:
    """SplitMix64's finaliser: a bijective 64-bit mixer."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL
    return x ^ (x >> 31)


cdef inline double _normal(u64 seed, u64 key, u64 i) noexcept nogil:
    cdef u64 base = _mix(_mix(seed + GOLDEN) + key * GOLDEN)
    cdef u64 c = 2 * i
    cdef u64 h1 = _mix(base + (c + 1) * GOLDEN)
    cdef u64 h2 = _mix(base + (c + 2) * GOLDEN)
    cdef double u1 = (<double>(h1 >> 11) + 1.0) * TWO_POW_M53
    cdef double u2 = <double>(h2 >> 11) * TWO_POW_M53
    return sqrt(-2.0 * log(u1)) * cos(TWO_PI * u2)


cdef inline double _factor(u64 seed, u64 key, u64 i, double sigma) noexcept nogil:
    if sigma == 0.0:
        return 1.0
    return exp(sigma * _normal(seed, key, i) - sigma * sigma / 2.0)


cpdef double noise_normal(u64 seed, u64 key, u64 i):
    """A standard normal for iteration ``i`` of noise key ``key`` under ``seed``.

    ``base = mix(mix(seed + g) + key g)``, ``h_m = mix(base + (2 i + m) g)`` for
    m = 1, 2 (``mix`` is SplitMix64's finaliser, ``g`` the golden-ratio constant
    0x9E3779B97F4A7C15, arithmetic modulo 2^64); ``u1 = ((h_1 >> 11) + 1) / 2^53``
    in (0, 1], ``u2 = (h_2 >> 11) / 2^53``; Box-Muller:
    ``z = sqrt(-2 ln u1) cos(2 pi u2)``.
    """
    return _normal(seed, key, i)


cpdef double noise_factor(u64 seed, u64 key, u64 i, double sigma):
    """Lognormal compute multiplier, mean 1: ``exp(sigma z - sigma^2 / 2)``."""
    return _factor(seed, key, i, sigma)



# ---------------------------------------------------------------------------- state
cdef struct Eng:
    double* jf
    i64* ji
    i64 ns           # job slots (columns of jf / ji)
    double* pf
    i64* pi
    i64 npods        # pod columns
    double* lf
    i64 nl           # links
    i64* lptr
    i64* lpods       # per link (CSR): its active pods first, by (cap, pod), then the others
    i64* lact        # per link: how many of its pods are active (the prefix of lpods)
    i64* ppos        # per pod: its index in lpods (-1: on no link)
    i64* lclear      # per link: the pod whose clear transfer was last on it (-1: none)
    # rows of pf / pi / lf (the loop's hot fields, without the row arithmetic)
    double* pcap
    double* pvol
    double* pleft
    double* prate
    double* psent
    i64* pjob
    i64* plink
    i64* pact
    i64* pclear
    double* lcap
    double* lbg
    double* lt
    double* lsent
    double* lmark
    double* leta
    double* lcend
    double* ev_t
    i64* ltree       # the links' tournament tree: ltree[1] is the link whose event is next
                     # (a leaf without a link holds -1, its time inf)
    double* ltt      # the time of each node's link's event (ltt[1]: the next link event)
    i64 lleaf        # its leaves: ltree[lleaf + lk] (a power of two, at least the links)
    double* ht
    i64* hid
    i64* hst
    i64* hsize
    i64 hcap
    double* win      # regulation windows and histories, one row per slot
    double* wino
    i64 w
    double* hist
    double* histo
    i64 h
    i64* readj
    i64 rcap
    i64* mon         # regulation counters, N_COUNTERS per slot
    double* lim      # regulation thresholds, N_LIMITS per slot
    i64* cfg
    double* samples
    i64 scap
    i64* scratch
    double* scratch_f
    double sigma


cdef inline i64 JX(Eng* e, int f, i64 j) noexcept nogil:
    return f * e.ns + j


cdef inline i64 PX(Eng* e, int f, i64 p) noexcept nogil:
    return f * e.npods + p


cdef inline i64 LX(Eng* e, int f, i64 k) noexcept nogil:
    return f * e.nl + k




# ---------------------------------------------------------------------------- events
# Every entity (job slot ``j``, link ``lk`` as entity ``ns + lk``) has at most one
# pending event, at ``ev_t[ent]`` (inf: none); they are taken in (time, entity)
# order.  The jobs' are in an indexed binary min-heap ordered by (time, job):
# ``ht``/``hid`` hold the entries, ``hst[j]`` the position of job ``j`` in it (-1:
# no pending event), moved in place when its event moves.  The links' are in a
# tournament tree (``ltree``, each node's event time beside it in ``ltt``): a leaf
# per link, each inner node the earlier of its two children's events (the lower
# link on a tie), so moving a link's event replays the matches on its path to the
# root, ``log2`` of the links long, without a swap, and a link's own event moves
# it once (its new completion, not "none" first).  Most events are links' (a
# transfer starts or ends: their finish time moves twice per transfer), and there
# are few links, so this is where the loop spent its time in the heap.  The next
# event is the earlier of the heap's top and the tree's root, the job on a tie
# (jobs' entities come first).
cdef inline bint _less(Eng* e, i64 a, i64 b) noexcept nogil:
    return e.ht[a] < e.ht[b] or (e.ht[a] == e.ht[b] and e.hid[a] < e.hid[b])


cdef inline void _swap(Eng* e, i64 a, i64 b) noexcept nogil:
    cdef double t = e.ht[a]
    cdef i64 x = e.hid[a]
    e.ht[a] = e.ht[b]
    e.hid[a] = e.hid[b]
    e.ht[b] = t
    e.hid[b] = x
    e.hst[e.hid[a]] = a
    e.hst[x] = b


cdef inline void _sift_down(Eng* e, i64 n, i64 i) noexcept nogil:
    cdef i64 left, child
    while True:
        left = 2 * i + 1
        if left >= n:
            return
        child = left
        if left + 1 < n and _less(e, left + 1, left):
            child = left + 1
        if _less(e, child, i):
            _swap(e, child, i)
            i = child
        else:
            return


cdef inline void _sift_up(Eng* e, i64 i) noexcept nogil:
    cdef i64 parent
    while i > 0:
        parent = (i - 1) // 2
        if _less(e, i, parent):
            _swap(e, i, parent)
            i = parent
        else:
            return


cdef inline void _match(Eng* e, i64 i) noexcept nogil:
    """Tree node ``i`` takes the earlier of its two children's events, the left one
    (the lower links) on a tie.  Selects, not branches: which side wins is as good
    as random."""
    cdef double tl = e.ltt[2 * i], tr = e.ltt[2 * i + 1]
    cdef i64 a = e.ltree[2 * i], b = e.ltree[2 * i + 1]
    cdef i64 right = -<i64>(tr < tl)  # all ones if the right one wins
    e.ltree[i] = a ^ ((a ^ b) & right)
    e.ltt[i] = tr if tr < tl else tl


cdef inline void _link_event(Eng* e, i64 lk, double t) noexcept nogil:
    """Link ``lk``'s pending event is now at ``t`` (inf: none)."""
    cdef i64 i = e.lleaf + lk
    e.ev_t[e.ns + lk] = t
    e.ltt[i] = t
    i >>= 1
    while i >= 1:
        _match(e, i)
        i >>= 1


cdef void _rebuild(Eng* e) noexcept nogil:
    cdef i64 n = 0, k, i
    for k in range(e.lleaf):
        e.ltree[e.lleaf + k] = k if k < e.nl else -1
        e.ltt[e.lleaf + k] = e.ev_t[e.ns + k] if k < e.nl else INFINITY
    i = e.lleaf - 1
    while i >= 1:
        _match(e, i)
        i -= 1
    for k in range(e.ns):
        e.hst[k] = -1
    for k in range(e.ns):
        if e.ev_t[k] < INFINITY:
            e.ht[n] = e.ev_t[k]
            e.hid[n] = k
            e.hst[k] = n
            n += 1
    i = n // 2 - 1
    while i >= 0:
        _sift_down(e, n, i)
        i -= 1
    e.hsize[0] = n


cdef inline void _remove_at(Eng* e, i64 i) noexcept nogil:
    cdef i64 n = e.hsize[0] - 1
    e.hst[e.hid[i]] = -1
    e.hsize[0] = n
    if i == n:
        return
    e.ht[i] = e.ht[n]
    e.hid[i] = e.hid[n]
    e.hst[e.hid[i]] = i
    if i > 0 and _less(e, i, (i - 1) // 2):
        _sift_up(e, i)
    else:
        _sift_down(e, n, i)


cdef inline void _schedule(Eng* e, i64 ent, double t) noexcept nogil:
    """Entity ``ent``'s one pending event is now at ``t`` (inf: none)."""
    cdef i64 i
    cdef double old
    if e.ev_t[ent] == t:  # already there (a rate change that moved nothing)
        return
    if ent >= e.ns:
        _link_event(e, ent - e.ns, t)
        return
    i = e.hst[ent]
    e.ev_t[ent] = t
    if t == INFINITY:
        if i >= 0:
            _remove_at(e, i)
        return
    if i >= 0:
        old = e.ht[i]
        e.ht[i] = t
        if t < old:
            _sift_up(e, i)
        elif t > old:
            _sift_down(e, e.hsize[0], i)
        return
    i = e.hsize[0]
    e.ht[i] = t
    e.hid[i] = ent
    e.hst[ent] = i
    e.hsize[0] = i + 1
    _sift_up(e, i)


cdef inline void _pop(Eng* e) noexcept nogil:
    """Remove the root: the hole goes down along the smaller children to a leaf
    (one comparison per level), then the last entry fills it and sifts up."""
    cdef i64 n = e.hsize[0] - 1
    cdef i64 hole = 0, left, child
    e.hst[e.hid[0]] = -1
    e.hsize[0] = n
    if n == 0:
        return
    while True:
        left = 2 * hole + 1
        if left >= n:
            break
        child = left
        if left + 1 < n and _less(e, left + 1, left):
            child = left + 1
        e.ht[hole] = e.ht[child]
        e.hid[hole] = e.hid[child]
        e.hst[e.hid[hole]] = hole
        hole = child
    if hole != n:
        e.ht[hole] = e.ht[n]
        e.hid[hole] = e.hid[n]
        e.hst[e.hid[hole]] = hole
        _sift_up(e, hole)


# ---------------------------------------------------------------------------- links
# A link's pods sit in ``lpods[lptr[lk] : lptr[lk + 1]]``; its ``lact[lk]`` active
# ones first, ordered by (cap, pod), the order progressive filling takes them in,
# so that a link's step touches its active transfers only and sorts nothing.
cdef inline bint _before(Eng* e, i64 a, i64 b) noexcept nogil:
    """Pod ``a`` comes before pod ``b`` in a link's active prefix."""
    return e.pcap[a] < e.pcap[b] or (e.pcap[a] == e.pcap[b] and a < b)


cdef inline void _activate(Eng* e, i64 lk, i64 p) noexcept nogil:
    """Pod ``p`` (on link ``lk``, inactive) starts a transfer: into the prefix."""
    cdef i64 q0 = e.lptr[lk]
    cdef i64 a = q0 + e.lact[lk]
    cdef i64 q = e.ppos[p], x
    x = e.lpods[a]  # the first inactive pod takes p's place
    e.lpods[q] = x
    e.ppos[x] = q
    while a > q0 and _before(e, p, e.lpods[a - 1]):
        x = e.lpods[a - 1]
        e.lpods[a] = x
        e.ppos[x] = a
        a -= 1
    e.lpods[a] = p
    e.ppos[p] = a
    e.pact[p] = 1
    e.lact[lk] += 1


cdef inline double _waterfill(Eng* e, i64 lk) noexcept nogil:
    """Max-min fair rates of link ``lk``'s active transfers (each capped at its
    rate) by progressive filling; returns the earliest completion time.

    Two or more transfers whose rates add up to more than the link has left
    (capacity minus background) contend: they share ``L_ETA`` times it.  One
    transfer alone, or transfers that fit, are not touched (``L_ETA = 1`` is plain
    max-min fair sharing, bit for bit)."""
    cdef i64 q0 = e.lptr[lk]
    cdef i64 k = e.lact[lk]
    cdef i64 i, m, p
    cdef double left, share, first, finish, least, asked = 0.0
    if k == 0:
        return INFINITY
    for m in range(q0, q0 + k):
        asked += e.pcap[e.lpods[m]]
    left = e.lcap[lk] - e.lbg[lk]
    if left < 0.0:
        left = 0.0
    if k >= 2 and asked > left:
        left *= e.leta[lk]
    first = INFINITY
    i = 0
    while i < k:
        share = left / (k - i)
        p = e.lpods[q0 + i]
        if e.pcap[p] <= share:
            e.prate[p] = e.pcap[p]
            left -= e.pcap[p]
            if e.prate[p] > 0.0:
                finish = e.lt[lk] + e.pleft[p] / (e.prate[p] * 1e-3)
                if finish < first:
                    first = finish
            i += 1
        else:
            # the rest share alike: the least left ends first (t0 + x / r is
            # monotone in x, so this is the minimum over them, bit for bit)
            least = INFINITY
            for m in range(q0 + i, q0 + k):
                p = e.lpods[m]
                e.prate[p] = share
                if e.pleft[p] < least:
                    least = e.pleft[p]
            if share > 0.0:
                finish = e.lt[lk] + least / (share * 1e-3)
                if finish < first:
                    first = finish
            break
    return first


cdef inline void _progress(Eng* e, i64 lk, double t) noexcept nogil:
    """Advance link ``lk``'s transfers to ``t``; a transfer that is done leaves,
    and a job whose last transfer left enters its latency tail."""
    cdef double t0 = e.lt[lk]
    cdef double dt = t - t0 if t > t0 else 0.0
    cdef double r, rho, left, moved
    cdef bint due
    cdef i64 q0 = e.lptr[lk]
    cdef i64 k = e.lact[lk]
    cdef i64 m, p, j, kept = 0, gone = 0
    # With no time passed a transfer can still be due: one whose remaining time is
    # below the resolution of t (at 500 h, t in ms has ulps of 1e-7 ms) ends at t.
    for m in range(q0, q0 + k):
        p = e.lpods[m]
        r = e.prate[p]
        left = e.pleft[p]
        rho = r * 1e-3
        moved = rho * dt
        if r > 0.0:
            # due: its end at this rate is at or before t, or what it has left is
            # within DONE.  Its end is not checked (a division) when ``left`` exceeds
            # what it sends by t by a margin far above the rounding of that end:
            # then the end lies after t.  (Only when t and t0 are so small that the
            # margin underflows, t = t0 = 0 among them, can that end still be at t;
            # what is left is then below 1e-18 Gbit, due by DONE all the same.)
            if left > rho * (dt + 1e-12 * (fabs(t) + fabs(t0))) * (1.0 + 1e-12):
                due = left - moved <= DONE
            else:
                due = t0 + left / rho <= t or left - moved <= DONE
            if due:
                moved = left
        if moved == 0.0 and left > 0.0:
            e.lpods[q0 + kept] = p
            kept += 1
            continue
        e.pleft[p] = left - moved
        e.psent[p] += moved
        e.lsent[lk] += moved
        if moved == left:
            e.pleft[p] = 0.0
            e.pact[p] = 0
            e.prate[p] = 0.0
            e.scratch[gone] = p
            gone += 1
            j = e.pjob[p]
            e.ji[JX(e, I_PENDING, j)] -= 1
            if e.ji[JX(e, I_PENDING, j)] == 0:
                e.ji[JX(e, I_PHASE, j)] = PHASE_TAIL
                e.jf[JX(e, F_T, j)] = t + e.jf[JX(e, F_TAIL, j)]
                _schedule(e, j, e.jf[JX(e, F_T, j)])
        else:
            e.lpods[q0 + kept] = p
            kept += 1
    if gone:  # the finished ones move behind the prefix, which keeps its order
        for m in range(gone):
            e.lpods[q0 + kept + m] = e.scratch[m]
        for m in range(q0, q0 + k):
            e.ppos[e.lpods[m]] = m
        e.lact[lk] = kept
    if t > t0:
        e.lt[lk] = t


cdef inline double _unflushed(Eng* e, i64 p, double t) noexcept nogil:
    """What pod ``p`` has sent since its link was last brought up to date, when that
    is not done at ``t`` by :meth:`FlowEngine.flush`: a transfer alone on a link has
    no link event (its end is its job's event), so flush leaves it where its link
    was last updated, and it sends at its constant rate, capped at what it has left.
    0 for any other pod.  The one owner of that rule for the readers of sent volumes
    (``pod_sent_at``, ``link_sent_at``)."""
    cdef i64 lk = e.plink[p]
    cdef double dt
    if lk < 0 or e.pact[p] == 0 or e.ev_t[e.ns + lk] < INFINITY:
        return 0.0
    dt = t - e.lt[lk]
    if dt <= 0.0:
        return 0.0
    return min(e.prate[p] * 1e-3 * dt, e.pleft[p])


cdef inline void _relink(Eng* e, i64 lk) noexcept nogil:
    """New rates on link ``lk`` (already advanced); schedule its next completion."""
    cdef double t = _waterfill(e, lk)
    if e.ev_t[e.ns + lk] != t:
        _link_event(e, lk, t)




# ---------------------------------------------------------------------------- clear transfers
# A job whose transfers start when no other transfer is on any of its links runs
# them *clear*: each at its link's rate for it alone, ending when the event loop
# would end it, with one event for the whole iteration (its end) instead of a
# link event per transfer and a tail event.  Nothing else is written on the links
# meanwhile but the window each holds (``lclear``, ``L_CLEAR_END``).  The moment
# another transfer starts on one of those links before its window ends, or the
# links are flushed, the job's transfers go back to the loop (:func:`_into_loop`)
# in exactly the state the loop would have them in, and the loop takes over: exact,
# not an approximation.  ``C_CLEAR = 0`` runs every transfer in the loop.
cdef inline void _credit(Eng* e, i64 p) noexcept nogil:
    """Pod ``p``'s clear transfer has ended: count what it sent (as _progress counts
    a finished transfer) and close its link's window."""
    cdef i64 lk = e.plink[p]
    e.psent[p] += e.pleft[p]
    e.lsent[lk] += e.pleft[p]
    e.pleft[p] = 0.0
    e.prate[p] = 0.0
    e.pclear[p] = CLEAR_NONE
    if e.lclear[lk] == p:
        e.lclear[lk] = -1


cdef void _into_loop(Eng* e, i64 j, double t) noexcept nogil:
    """Job ``j``'s clear transfers become the event loop's at ``t``, in the state the
    loop would have them in: one that ended before ``t`` counted (its link advanced
    to its end); one in flight active from its start (nothing advanced it since), on
    its link's event, or, private, on the job's event at the latest private end; the
    job COMM, or TAIL (its tail event as it was) when none is left in flight."""
    cdef i64 p0 = e.ji[JX(e, I_POD0, j)]
    cdef i64 p1 = p0 + e.ji[JX(e, I_NPOD, j)]
    cdef i64 p, lk, kind, pending = 0
    cdef double end, private_end = -INFINITY
    e.cfg[C_BACK] += 1
    for p in range(p0, p1):
        kind = e.pclear[p]
        if kind == CLEAR_NONE:
            continue
        lk = e.plink[p]
        end = e.lcend[lk]
        if end <= t:
            e.lt[lk] = end
            _credit(e, p)
            continue
        e.pclear[p] = CLEAR_NONE
        e.lclear[lk] = -1
        _activate(e, lk, p)
        pending += 1
        if kind == CLEAR_PRIVATE:
            if end > private_end:
                private_end = end
        else:
            _relink(e, lk)
    e.ji[JX(e, I_PENDING, j)] = pending
    if pending == 0:
        e.ji[JX(e, I_PHASE, j)] = PHASE_TAIL  # its event: the tail's end, as it was
        return
    e.ji[JX(e, I_PHASE, j)] = PHASE_COMM
    if private_end > -INFINITY:
        e.jf[JX(e, F_T, j)] = private_end
        _schedule(e, j, private_end)
    else:
        e.jf[JX(e, F_T, j)] = e.jf[JX(e, F_CSTART, j)]
        _schedule(e, j, INFINITY)


cdef inline void _close_window(Eng* e, i64 lk, double t) noexcept nogil:
    """A transfer is about to start on link ``lk`` at ``t``: a clear transfer still on
    it goes back to the loop with the rest of its job's; one that has ended is
    counted first (the loop counted it when it ended, before anything later)."""
    cdef i64 q = e.lclear[lk]
    if q < 0:
        return
    if e.lcend[lk] > t:
        _into_loop(e, e.pjob[q], t)
    else:
        _credit(e, q)


cdef inline double _alone_rate(Eng* e, i64 lk, i64 p) noexcept nogil:
    """Pod ``p``'s rate alone on link ``lk``: its cap, at most what the link has left
    (_waterfill's answer for one transfer, and _comm's private path's)."""
    cdef double free = e.lcap[lk] - e.lbg[lk]
    cdef double r = e.pcap[p]
    if free < 0.0:
        free = 0.0
    if r > free:
        r = free
    return r


cdef bint _try_clear(Eng* e, i64 j, double t) noexcept nogil:
    """Job ``j``'s compute ended at ``t``: if none of its links carries a transfer
    (in the loop, or clear and not ended) and each gives it a rate, its transfers
    start clear and its iteration ends at the latest of their ends plus its tail
    (what the loop computes for them alone); returns whether they did."""
    cdef i64 p0 = e.ji[JX(e, I_POD0, j)]
    cdef i64 p1 = p0 + e.ji[JX(e, I_NPOD, j)]
    cdef i64 p, lk, q, n = 0
    cdef double mark, r, finish, end = -INFINITY
    e.cfg[C_MARK] += 1
    mark = <double>e.cfg[C_MARK]
    for p in range(p0, p1):
        lk = e.plink[p]
        if lk < 0 or e.pvol[p] <= 0.0:
            continue
        if e.lact[lk] > 0 or e.lmark[lk] == mark or _alone_rate(e, lk, p) <= 0.0:
            return False
        q = e.lclear[lk]
        if q >= 0 and e.lcend[lk] > t:
            return False
        e.lmark[lk] = mark
        n += 1
    if n == 0:
        return False
    for p in range(p0, p1):
        lk = e.plink[p]
        if lk < 0 or e.pvol[p] <= 0.0:
            continue
        if e.lclear[lk] >= 0:
            _credit(e, e.lclear[lk])
        if t > e.lt[lk]:  # as _comm's _progress of the link
            e.lt[lk] = t
        r = _alone_rate(e, lk, p)
        e.prate[p] = r
        e.pleft[p] = e.pvol[p]
        finish = e.lt[lk] + e.pleft[p] / (r * 1e-3)
        if finish > end:
            end = finish
        e.pclear[p] = CLEAR_PRIVATE if e.lptr[lk + 1] - e.lptr[lk] == 1 else CLEAR_SHARED
        e.lclear[lk] = p
        e.lcend[lk] = finish
    e.ji[JX(e, I_PHASE, j)] = PHASE_CLEAR
    e.ji[JX(e, I_PENDING, j)] = 0
    e.jf[JX(e, F_T, j)] = end + e.jf[JX(e, F_TAIL, j)]
    _schedule(e, j, e.jf[JX(e, F_T, j)])
    return True


cdef inline void _clear_end(Eng* e, i64 j) noexcept nogil:
    """Job ``j``'s clear iteration ends: count what its transfers sent."""
    cdef i64 p0 = e.ji[JX(e, I_POD0, j)]
    cdef i64 p
    e.cfg[C_CLEARED] += 1
    for p in range(p0, p0 + e.ji[JX(e, I_NPOD, j)]):
        if e.pclear[p] != CLEAR_NONE:
            _credit(e, p)




# ---------------------------------------------------------------------------- monitor
cdef inline Watch _watch(Eng* e, i64 j) noexcept nogil:
    """Job slot ``j``'s rows as the regulation rule's watch."""
    cdef Watch x
    x.win = e.win + j * e.w
    x.own = e.wino + j * e.w
    x.hist = e.hist + j * e.h
    x.hown = e.histo + j * e.h
    x.marks = e.readj + j * e.rcap
    x.c = e.mon + j * N_COUNTERS
    x.lim = e.lim + j * N_LIMITS
    return x


cdef int _outcome(Eng* e, i64 j) noexcept nogil:
    """What the report of job ``j``'s latest iteration leads to under the regulation
    rule (regulation.pxd's ``decide``); changes nothing.  A new pattern, or a pause
    whose target depends on a job outside the engine, is the controller's:
    ``REPORT_CONTROLLER``."""
    cdef Watch x
    cdef int outcome
    if e.ji[JX(e, I_MON, j)] == 0:
        return QUIET
    x = _watch(e, j)
    outcome = decide(&x, e.cfg, e.jf[JX(e, F_LAST_DUR, j)], e.jf[JX(e, F_LAST_OWN, j)],
                     e.ji[JX(e, I_HIGH, j)] != 0, e.scratch_f)
    if outcome == DRIFT_UPDATE or outcome == PAUSE_UPDATE:
        return REPORT_CONTROLLER
    if (outcome == PAUSE or outcome == PAUSE_KEEP) and e.ji[JX(e, I_ROOT, j)] == -2:
        return REPORT_CONTROLLER
    return outcome


cdef void _apply(Eng* e, i64 j, double t, int outcome) noexcept nogil:
    """Take the report of job ``j``'s latest iteration (not REPORT_CONTROLLER) at
    ``t`` (regulation.pxd's ``take``); a pause holds its next start onto its target
    phase."""
    cdef Watch x
    cdef i64 root
    cdef double target, anchor, pause, period
    if e.ji[JX(e, I_MON, j)] == 0:
        return
    x = _watch(e, j)
    take(&x, e.cfg, e.jf[JX(e, F_LAST_DUR, j)], e.jf[JX(e, F_LAST_OWN, j)], outcome)
    if outcome != PAUSE and outcome != PAUSE_KEEP:
        return
    target = e.jf[JX(e, F_TFIX, j)]
    root = e.ji[JX(e, I_ROOT, j)]
    if root >= 0:
        anchor = e.jf[JX(e, F_ANCHOR, root)]
        if anchor > -INFINITY:  # the reference has a phase
            target = target_phase(anchor, e.jf[JX(e, F_T_CR, j)], e.jf[JX(e, F_T_OJ, j)],
                                  e.jf[JX(e, F_T_OR, j)], e.jf[JX(e, F_T_CJ, j)])
    period = e.jf[JX(e, F_JOB_PERIOD, j)]
    pause = pause_to(target, t, period)
    e.ji[JX(e, I_READJ, j)] += 1
    e.jf[JX(e, F_PAUSE_MS, j)] += pause
    e.ji[JX(e, I_PAUSED, j)] = 1
    e.jf[JX(e, F_PAUSE_FROM, j)] = t
    e.jf[JX(e, F_HOLD_PHASE, j)] = pymod(t + pause, period)
    e.jf[JX(e, F_HOLD_PERIOD, j)] = period


# ---------------------------------------------------------------------------- jobs
cdef inline void _begin(Eng* e, i64 j, double t) noexcept nogil:
    """Job ``j`` starts its next iteration at ``t``: compute (with its noise)."""
    cdef i64 i = e.ji[JX(e, I_ITER, j)]
    cdef double c
    if e.ji[JX(e, I_PAUSED, j)] != 0:  # resuming after a pause: what it really waited
        e.jf[JX(e, F_HELD_MS, j)] += t - e.jf[JX(e, F_PAUSE_FROM, j)]
        e.ji[JX(e, I_PAUSED, j)] = 0
    e.ji[JX(e, I_PHASE, j)] = PHASE_COMPUTE
    e.jf[JX(e, F_ISTART, j)] = t
    c = e.jf[JX(e, F_COMPUTE, j)] * _factor(<u64>e.cfg[C_SEED], <u64>e.ji[JX(e, I_KEY, j)],
                                             <u64>i, e.sigma) + e.jf[JX(e, F_IDLE, j)]
    e.jf[JX(e, F_T, j)] = t + c
    _schedule(e, j, t + c)


cdef inline void _comm(Eng* e, i64 j, double t) noexcept nogil:
    """Job ``j``'s compute ended at ``t``: its transfers start."""
    cdef i64 p0 = e.ji[JX(e, I_POD0, j)]
    cdef i64 p1 = p0 + e.ji[JX(e, I_NPOD, j)]
    cdef i64 p, lk
    cdef double mark, private_end, free, r, finish
    e.ji[JX(e, I_PHASE, j)] = PHASE_COMM
    e.ji[JX(e, I_PENDING, j)] = 0
    e.jf[JX(e, F_CSTART, j)] = t
    if e.cfg[C_CLEAR] != 0 and _try_clear(e, j, t):
        return
    for p in range(p0, p1):
        lk = e.plink[p]
        if lk < 0 or e.pvol[p] <= 0.0:
            continue
        _close_window(e, lk, t)
        _progress(e, lk, t)
        e.pleft[p] = e.pvol[p]
        _activate(e, lk, p)
        e.ji[JX(e, I_PENDING, j)] += 1
    if e.ji[JX(e, I_PENDING, j)] == 0:
        # nothing to send: all its pods on one node (no tail), or a job spanning
        # nodes with nothing to send (zero duty or rate), whose ring still takes
        # its latency steps, as the closed form (skip_ahead) charges them
        e.ji[JX(e, I_PHASE, j)] = PHASE_TAIL
        e.jf[JX(e, F_T, j)] = t + e.jf[JX(e, F_TAIL, j)]
        _schedule(e, j, e.jf[JX(e, F_T, j)])
        return
    # Each of its links once, in pod order (marks are exact doubles below 2^53).
    # A link that carries this one pod only keeps its rate until the transfer
    # ends (no other pod can start on it): its end is computed as _waterfill
    # would, and the job's own event at the latest such end completes them all
    # (_private_done) instead of one link event each.
    e.cfg[C_MARK] += 1
    mark = <double>e.cfg[C_MARK]
    private_end = -INFINITY
    for p in range(p0, p1):
        lk = e.plink[p]
        if lk < 0 or e.pact[p] == 0:
            continue
        if e.lptr[lk + 1] - e.lptr[lk] == 1:
            free = e.lcap[lk] - e.lbg[lk]
            if free < 0.0:
                free = 0.0
            r = e.pcap[p]
            if r > free:
                r = free
            if r > 0.0:
                e.prate[p] = r
                finish = e.lt[lk] + e.pleft[p] / (r * 1e-3)
                if finish > private_end:
                    private_end = finish
                continue
        if e.lmark[lk] != mark:
            e.lmark[lk] = mark
            _relink(e, lk)
    if private_end > -INFINITY:
        e.jf[JX(e, F_T, j)] = private_end
        _schedule(e, j, private_end)


cdef inline void _private_done(Eng* e, i64 j, double t) noexcept nogil:
    """The job's transfers on links without a pending event (those it had to
    itself when they started) end now: advance those links to ``t``; a transfer
    still in flight (it cannot be) gets its link event."""
    cdef i64 p0 = e.ji[JX(e, I_POD0, j)]
    cdef i64 p1 = p0 + e.ji[JX(e, I_NPOD, j)]
    cdef i64 p, lk
    for p in range(p0, p1):
        lk = e.plink[p]
        if lk < 0 or e.pact[p] == 0 or e.ev_t[e.ns + lk] < INFINITY:
            continue
        _progress(e, lk, t)
        if e.pact[p] != 0:
            _relink(e, lk)


cdef inline void _iteration_end(Eng* e, i64 j, double t) noexcept nogil:
    cdef double d = t - e.jf[JX(e, F_ISTART, j)]
    cdef i64 i = e.ji[JX(e, I_ITER, j)]
    e.ji[JX(e, I_ITER, j)] = i + 1
    e.ji[JX(e, I_DONE, j)] += 1
    e.jf[JX(e, F_BUSY, j)] += d
    if i % e.ji[JX(e, I_STEP, j)] == 0:
        e.samples[j * e.scap + e.ji[JX(e, I_NSAMP, j)]] = d
        e.ji[JX(e, I_NSAMP, j)] += 1
    e.jf[JX(e, F_LAST_DUR, j)] = d
    e.jf[JX(e, F_LAST_OWN, j)] = e.jf[JX(e, F_CSTART, j)] - e.jf[JX(e, F_ISTART, j)]
    e.jf[JX(e, F_LAST_START, j)] = e.jf[JX(e, F_ISTART, j)]
    if e.jf[JX(e, F_ISTART, j)] > e.jf[JX(e, F_ANCHOR, j)]:
        e.jf[JX(e, F_ANCHOR, j)] = e.jf[JX(e, F_ISTART, j)]
    e.ji[JX(e, I_PHASE, j)] = PHASE_READY
    e.ji[JX(e, I_REPORTED, j)] = 0


cdef int _ready(Eng* e, i64 j, double t) noexcept nogil:
    """Job ``j`` is between iterations at ``t``: its report, then its next start.
    Returns a STOP_* reason, or -1 to go on.  On a stop the job stays READY with
    an event at ``t``, so that the loop takes it up again where it stopped."""
    cdef int outcome
    cdef double hold, start
    if e.ji[JX(e, I_NSAMP, j)] == e.scap and e.ji[JX(e, I_ITER, j)] < e.ji[JX(e, I_NITERS, j)]:
        _schedule(e, j, t)
        return STOP_SAMPLES
    if e.ji[JX(e, I_REPORTED, j)] == 0:
        outcome = _outcome(e, j)
        if outcome == REPORT_CONTROLLER:
            _schedule(e, j, t)
            return STOP_REPORT
        _apply(e, j, t, outcome)
        e.ji[JX(e, I_REPORTED, j)] = 1
    if e.ji[JX(e, I_ITER, j)] >= e.ji[JX(e, I_NITERS, j)]:
        e.ji[JX(e, I_PHASE, j)] = PHASE_DONE
        _schedule(e, j, INFINITY)
        return STOP_FINISHED
    hold = e.jf[JX(e, F_HOLD_PHASE, j)]
    if e.ji[JX(e, I_LEAVE, j)] != 0 and isnan(hold):
        _schedule(e, j, t)
        return STOP_SOLO
    start = t
    if not isnan(hold):  # a shift or a pause
        start = next_start(hold, t, e.jf[JX(e, F_HOLD_PERIOD, j)])
        e.jf[JX(e, F_HOLD_PHASE, j)] = NAN
    if start > t:
        if e.ji[JX(e, I_PAUSED, j)] == 0:
            # held by a shift of its offset (not a pause): the wait is wall time
            # of the job's training all the same, counted as held time
            e.ji[JX(e, I_PAUSED, j)] = 1
            e.jf[JX(e, F_PAUSE_FROM, j)] = t
        e.ji[JX(e, I_PHASE, j)] = PHASE_WAIT
        e.jf[JX(e, F_T, j)] = start
        _schedule(e, j, start)
    else:
        _begin(e, j, t)
    return -1


#: ``_advance`` returns to ``FlowEngine.run`` after this many events (not a STOP_*
#: code of the API: ``run`` goes on at once), so a long run still answers Ctrl-C.
cdef i64 _EVENTS_PER_CHECK = 1 << 18
cdef i64 _STOP_BUDGET = -1


cdef double _advance(Eng* e, double t, double until, i64* out, i64 budget) noexcept nogil:
    cdef i64 ent, j, lk
    cdef i64 done = 0
    cdef double te
    cdef int ph, stop
    out[1] = -1
    while True:
        if done == budget:  # between two events: the caller may look at signals
            out[0] = _STOP_BUDGET
            return t
        done += 1
        lk = e.ltree[1]
        te = e.ltt[1]
        if e.hsize[0] > 0 and e.ht[0] <= te:  # a job's event comes first (or none)
            ent = e.hid[0]
            te = e.ht[0]
            lk = -1
        if te == INFINITY:
            out[0] = STOP_IDLE
            return t
        if te >= until:
            out[0] = STOP_TIME
            return until
        e.cfg[C_EVENTS] += 1
        t = te
        if lk >= 0:  # a link: transfers complete
            _progress(e, lk, t)
            _link_event(e, lk, _waterfill(e, lk))  # its event moves: one walk up the tree
            continue
        _pop(e)
        e.ev_t[ent] = INFINITY
        j = ent
        ph = <int>e.ji[JX(e, I_PHASE, j)]
        if ph == PHASE_WAIT:
            if e.ji[JX(e, I_ITER, j)] >= e.ji[JX(e, I_NITERS, j)]:
                e.ji[JX(e, I_PHASE, j)] = PHASE_DONE
                out[0] = STOP_FINISHED
                out[1] = j
                return t
            _begin(e, j, t)
        elif ph == PHASE_COMPUTE:
            _comm(e, j, t)
        elif ph == PHASE_COMM:
            _private_done(e, j, t)
        elif ph == PHASE_TAIL or ph == PHASE_READY or ph == PHASE_CLEAR:
            if ph == PHASE_CLEAR:
                _clear_end(e, j)
            if ph != PHASE_READY:
                _iteration_end(e, j, t)
            stop = _ready(e, j, t)
            if stop >= 0:
                out[0] = stop
                out[1] = j
                return t



# ---------------------------------------------------------------------------- the engine
cdef class FlowEngine:
    """The event engine and its state for a changing set of jobs on fixed links.

    Jobs live in slots (reused after :meth:`remove`); their pods in a pool of
    contiguous blocks; links keep an index of their pods.  The arrays grow on
    demand and belong to the engine: the loop works on raw pointers into them, and
    callers read and change a job through the methods below.  ``samples_per_job``
    sampled iteration times are buffered per job (iteration ``i`` is sampled when
    ``i % step == 0``); a full buffer stops :meth:`run` (``STOP_SAMPLES``) so the
    caller can :meth:`take_samples`.  ``window``, ``o_t``, ``horizon`` and ``limit``
    are the regulation's rules (:class:`tdmcore.metronome.controller.
    ControllerConfig`); ``contention_efficiency`` is every link's ``eta``
    (:func:`tdmcore.sim.engine.network.check_efficiency`).  ``clear``: run the
    transfers that meet no other on their links clear (the module's docstring;
    the same results either way, False steps every transfer through the loop).
    """

    cdef Eng e
    cdef object jf, ji, pf, pi, lf, lptr, lpods, lact, ppos, lclear, ev_t, ltree, ltt, ht, hid, hst
    cdef object hsize
    cdef object win, wino, hist, histo, readj, mon, lim, cfg, samples, scratch, scratch_f
    cdef readonly i64 n_links
    cdef readonly double sigma
    cdef i64 slots, pod_used, pod_live, n_samples, window, horizon
    cdef list free

    def __init__(self, capacity_gbps, background_gbps, *, seed=0, sigma=0.0, window=10,
                 o_t=5, horizon=50, limit=3, samples_per_job=512, jobs_hint=8,
                 contention_efficiency=1.0, clear=True):
        cap = np.asarray(capacity_gbps, dtype=np.float64)
        self.n_links = cap.shape[0]
        self.sigma = float(sigma)
        self.window, self.horizon = int(window), int(horizon)
        self.cfg = np.array([window, o_t, horizon, limit, int(seed), 0, int(bool(clear)), 0, 0,
                             0], dtype=np.int64)
        self.lf = np.zeros((N_LF, self.n_links))
        self.lf[L_CAP] = cap
        self.lf[L_BG] = np.asarray(background_gbps, dtype=np.float64)
        self.lf[L_ETA] = contention_efficiency
        self.lptr = np.zeros(self.n_links + 1, dtype=np.int64)
        self.lpods = np.zeros(0, dtype=np.int64)
        self.lact = np.zeros(self.n_links, dtype=np.int64)
        self.lclear = np.full(self.n_links, -1, dtype=np.int64)
        leaves = 1
        while leaves < self.n_links:
            leaves *= 2
        self.ltree = np.full(2 * leaves, -1, dtype=np.int64)
        self.ltt = np.full(2 * leaves, np.inf)
        self.n_samples = int(samples_per_job)
        self.slots = 0
        self.free = []
        self.pod_used = 0  # pool high-water mark
        self.pod_live = 0
        self.hsize = np.zeros(1, dtype=np.int64)
        self.jf = None
        self._alloc(max(1, jobs_hint), max(4, 2 * jobs_hint))

    # ------------------------------------------------------------ storage
    cdef void _bind(self):
        """Point the loop's state at the arrays (after any of them was replaced)."""
        cdef double[:, ::1] jf = self.jf, pf = self.pf, lf = self.lf, win = self.win
        cdef double[:, ::1] wino = self.wino, hist = self.hist, histo = self.histo
        cdef double[:, ::1] lim = self.lim, samples = self.samples
        cdef i64[:, ::1] ji = self.ji, pi = self.pi, readj = self.readj, mon = self.mon
        cdef i64[::1] lptr = self.lptr, lpods = self.lpods, ltree = self.ltree
        cdef i64[::1] lact = self.lact, ppos = self.ppos, lclear = self.lclear
        cdef i64[::1] hid = self.hid, hst = self.hst, hsize = self.hsize, cfg = self.cfg
        cdef i64[::1] scratch = self.scratch
        cdef double[::1] ev_t = self.ev_t, ht = self.ht, scratch_f = self.scratch_f
        cdef double[::1] ltt = self.ltt
        cdef Eng* e = &self.e
        e.jf = &jf[0, 0]
        e.ji = &ji[0, 0]
        e.ns = jf.shape[1]
        e.pf = &pf[0, 0]
        e.pi = &pi[0, 0]
        e.npods = pf.shape[1]
        e.lf = &lf[0, 0] if lf.shape[1] > 0 else NULL
        e.nl = lf.shape[1]
        e.lptr = &lptr[0]
        e.lpods = &lpods[0] if lpods.shape[0] > 0 else NULL
        e.lact = &lact[0] if lact.shape[0] > 0 else NULL
        e.ppos = &ppos[0]
        e.lclear = &lclear[0] if lclear.shape[0] > 0 else NULL
        e.pcap = e.pf + P_CAP * e.npods
        e.pvol = e.pf + P_VOLUME * e.npods
        e.pleft = e.pf + P_LEFT * e.npods
        e.prate = e.pf + P_RATE * e.npods
        e.psent = e.pf + P_SENT * e.npods
        e.pjob = e.pi + P_JOB * e.npods
        e.plink = e.pi + P_LINK * e.npods
        e.pact = e.pi + P_ACTIVE * e.npods
        e.pclear = e.pi + P_CLEAR * e.npods
        e.lcap = e.lf + L_CAP * e.nl if e.nl > 0 else NULL
        e.lbg = e.lf + L_BG * e.nl if e.nl > 0 else NULL
        e.lt = e.lf + L_T * e.nl if e.nl > 0 else NULL
        e.lsent = e.lf + L_SENT * e.nl if e.nl > 0 else NULL
        e.lmark = e.lf + L_MARK * e.nl if e.nl > 0 else NULL
        e.leta = e.lf + L_ETA * e.nl if e.nl > 0 else NULL
        e.lcend = e.lf + L_CLEAR_END * e.nl if e.nl > 0 else NULL
        e.ev_t = &ev_t[0]
        e.ltree = &ltree[0]
        e.ltt = &ltt[0]
        e.lleaf = ltree.shape[0] // 2
        e.ht = &ht[0]
        e.hid = &hid[0]
        e.hst = &hst[0]
        e.hsize = &hsize[0]
        e.hcap = ht.shape[0]
        e.win = &win[0, 0]
        e.wino = &wino[0, 0]
        e.w = win.shape[1]
        e.hist = &hist[0, 0]
        e.histo = &histo[0, 0]
        e.h = hist.shape[1]
        e.readj = &readj[0, 0]
        e.rcap = readj.shape[1]
        e.mon = &mon[0, 0]
        e.lim = &lim[0, 0]
        e.cfg = &cfg[0]
        e.samples = &samples[0, 0]
        e.scap = samples.shape[1]
        e.scratch = &scratch[0]
        e.scratch_f = &scratch_f[0]
        e.sigma = self.sigma

    def _alloc(self, n_slots, n_pods):
        """(Re)allocate job and pod arrays, keeping what is there."""
        old = self.jf
        w, h = self.window, self.horizon
        jf = np.zeros((N_JF, n_slots))
        ji = np.zeros((N_JI, n_slots), dtype=np.int64)
        ji[I_PHASE] = PHASE_FREE
        win = np.zeros((n_slots, w))
        wino = np.zeros((n_slots, w))
        hist = np.zeros((n_slots, h))
        histo = np.zeros((n_slots, h))
        readj = np.zeros((n_slots, h + 1), dtype=np.int64)
        mon = np.zeros((n_slots, N_COUNTERS), dtype=np.int64)
        lim = np.zeros((n_slots, N_LIMITS))
        samples = np.zeros((n_slots, self.n_samples))
        pf = np.zeros((N_PF, n_pods))
        pi = np.zeros((N_PI, n_pods), dtype=np.int64)
        pi[P_LINK] = -1
        ev_t = np.full(n_slots + self.n_links, np.inf)
        if old is not None:
            s = self.slots
            jf[:, :s] = self.jf[:, :s]
            ji[:, :s] = self.ji[:, :s]
            win[:s] = self.win[:s]
            wino[:s] = self.wino[:s]
            hist[:s] = self.hist[:s]
            histo[:s] = self.histo[:s]
            readj[:s] = self.readj[:s]
            mon[:s] = self.mon[:s]
            lim[:s] = self.lim[:s]
            samples[:s] = self.samples[:s]
            u = self.pod_used
            pf[:, :u] = self.pf[:, :u]
            pi[:, :u] = self.pi[:, :u]
            old_slots = self.jf.shape[1]
            ev_t[:s] = self.ev_t[:s]
            ev_t[n_slots:] = self.ev_t[old_slots:]
        self.jf, self.ji, self.win, self.wino, self.hist = jf, ji, win, wino, hist
        self.histo, self.readj, self.mon, self.lim = histo, readj, mon, lim
        self.samples, self.pf, self.pi, self.ev_t = samples, pf, pi, ev_t
        size = 2 * (n_slots + self.n_links) + 16
        self.ht = np.zeros(size)
        self.hid = np.zeros(size, dtype=np.int64)
        self.hst = np.zeros(size, dtype=np.int64)
        self.scratch = np.zeros(max(8, n_pods), dtype=np.int64)
        self.ppos = np.full(n_pods, -1, dtype=np.int64)
        self.scratch_f = np.zeros(max(w, h + 1))
        self._bind()
        _rebuild(&self.e)

    def _compact_pods(self):
        """Move the live pods to the front of the pool (slot order)."""
        order = []
        for j in range(self.slots):
            if self.ji[I_PHASE, j] != PHASE_FREE:
                p0, n = int(self.ji[I_POD0, j]), int(self.ji[I_NPOD, j])
                self.ji[I_POD0, j] = len(order)
                order.extend(range(p0, p0 + n))
        idx = np.asarray(order, dtype=np.int64)
        n = idx.size
        self.pf[:, :n] = self.pf[:, idx]
        self.pi[:, :n] = self.pi[:, idx]
        self.pi[P_LINK, n:] = -1
        self.pi[P_ACTIVE, n:] = 0
        self.pi[P_CLEAR, n:] = CLEAR_NONE
        moved = np.full(self.pf.shape[1], -1, dtype=np.int64)
        moved[idx] = np.arange(n, dtype=np.int64)
        held = self.lclear >= 0
        self.lclear[held] = moved[self.lclear[held]]
        self.pod_used = n

    def _reindex(self):
        """The links' pod index (CSR) from the live pods."""
        used = self.pod_used
        links = self.pi[P_LINK, :used]
        live = np.zeros(used, dtype=np.bool_)
        for j in range(self.slots):
            if self.ji[I_PHASE, j] != PHASE_FREE:
                p0, n = int(self.ji[I_POD0, j]), int(self.ji[I_NPOD, j])
                live[p0:p0 + n] = True
        on = np.flatnonzero(live & (links >= 0))
        counts = np.bincount(links[on], minlength=self.n_links)
        self.lptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        # per link: the active pods first, by (cap, pod), then the others by pod
        active = self.pi[P_ACTIVE, on] != 0
        cap = np.where(active, self.pf[P_CAP, on], 0.0)
        self.lpods = on[np.lexsort((on, cap, ~active, links[on]))].astype(np.int64)
        self.lact = np.bincount(links[on][active], minlength=self.n_links).astype(np.int64)
        self.ppos[:] = -1
        self.ppos[self.lpods] = np.arange(self.lpods.size, dtype=np.int64)
        self._bind()

    # ------------------------------------------------------------ jobs
    def add(self, *, key, compute_ms, iterations, start_ms, links, cap_gbps, volume_gbit,
            tail_ms=0.0, idle_ms=0.0, done=0, step=1, job_period_ms=1.0):
        """Add a job that starts iteration ``done`` at ``start_ms``; return its slot.

        ``links``: one entry per pod, its link or -1 (on one node with the
        others).  ``idle_ms``: idle injected into every compute phase.  ``step``:
        iteration ``i`` is sampled when ``i % step == 0``.
        """
        if self.free:
            j = self.free.pop()
        else:
            if self.slots == self.jf.shape[1]:
                self._alloc(2 * self.slots, max(self.pf.shape[1], 2 * self.pod_used))
            j = self.slots
            self.slots += 1
        n = len(links)
        if self.pod_used + n > self.pf.shape[1]:
            if self.pod_live + n <= self.pf.shape[1] // 2:
                self._compact_pods()
            else:
                self._alloc(self.jf.shape[1], 2 * (self.pod_live + n) + 8)
                self._compact_pods()
        p0 = self.pod_used
        self.pod_used += n
        self.pod_live += n
        jf, ji = self.jf, self.ji
        jf[:, j] = 0.0
        ji[:, j] = 0
        jf[F_T, j] = start_ms
        jf[F_ISTART, j] = start_ms
        jf[F_CSTART, j] = start_ms
        jf[F_COMPUTE, j] = compute_ms
        jf[F_IDLE, j] = idle_ms
        jf[F_TAIL, j] = tail_ms
        jf[F_HOLD_PHASE, j] = np.nan
        jf[F_HOLD_PERIOD, j] = job_period_ms
        jf[F_ANCHOR, j] = -np.inf
        jf[F_JOB_PERIOD, j] = job_period_ms
        ji[I_PHASE, j] = PHASE_WAIT
        ji[I_ITER, j] = done
        ji[I_NITERS, j] = iterations
        ji[I_POD0, j] = p0
        ji[I_NPOD, j] = n
        ji[I_KEY, j] = key
        ji[I_STEP, j] = max(1, step)
        ji[I_HIGH, j] = 1
        ji[I_ROOT, j] = -1
        ji[I_REPORTED, j] = 1
        self.mon[j] = 0
        self.lim[j] = 0.0
        self.pf[:, p0:p0 + n] = 0.0
        self.pf[P_CAP, p0:p0 + n] = cap_gbps
        self.pf[P_VOLUME, p0:p0 + n] = volume_gbit
        self.pi[P_JOB, p0:p0 + n] = j
        self.pi[P_LINK, p0:p0 + n] = np.asarray(links, dtype=np.int64)
        self.pi[P_ACTIVE, p0:p0 + n] = 0
        self.pi[P_CLEAR, p0:p0 + n] = CLEAR_NONE
        self._reindex()
        self.schedule(j, start_ms)
        return j

    def remove(self, j):
        """Free slot ``j`` (a job between iterations: no transfer in flight)."""
        self.schedule(j, np.inf)
        n = int(self.ji[I_NPOD, j])
        p0 = int(self.ji[I_POD0, j])
        self.pi[P_LINK, p0:p0 + n] = -1
        self.pi[P_ACTIVE, p0:p0 + n] = 0
        self.pi[P_CLEAR, p0:p0 + n] = CLEAR_NONE
        self.lclear[(self.lclear >= p0) & (self.lclear < p0 + n)] = -1
        self.ji[I_PHASE, j] = PHASE_FREE
        self.ji[I_NPOD, j] = 0
        self.pod_live -= n
        self.free.append(j)
        self._reindex()

    def schedule(self, i64 j, double t):
        """Job slot ``j`` has its next event at ``t`` (inf: none)."""
        _schedule(&self.e, j, t)

    def pods(self, j):
        """The slice of the pod pool that holds job ``j``'s pods."""
        p0 = int(self.ji[I_POD0, j])
        return slice(p0, p0 + int(self.ji[I_NPOD, j]))

    def set_transfers(self, j, t, left, sent):
        """Job ``j`` is mid-communication at ``t``: its pods have ``left`` Gbit to
        go (0: done) and have sent ``sent``.  Its links must carry no other
        transfer (the job was alone on them)."""
        cdef Eng* e = &self.e
        cdef i64 p, lk
        pods = self.pods(j)
        for lk in sorted(set(self.pi[P_LINK, pods].tolist()) - {-1}):
            _close_window(e, lk, t)
        self.pf[P_LEFT, pods] = left
        self.pf[P_SENT, pods] = sent
        active = (left > 0.0) & (self.pi[P_LINK, pods] >= 0)
        for p in range(pods.start, pods.stop):
            if active[p - pods.start] and e.pact[p] == 0:
                _activate(e, e.plink[p], p)
        self.ji[I_PENDING, j] = int(active.sum())
        for lk in sorted(set(self.pi[P_LINK, pods][active].tolist())):
            e.lt[lk] = t
            _relink(e, lk)

    # A job taken back mid-iteration (it ran in closed form until ``t``): its
    # iteration started at ``start_ms`` and communicates from ``comm_start_ms``.
    def rejoin_computing(self, j, double start_ms, double comm_start_ms):
        """... still computing: its transfers start at ``comm_start_ms``."""
        self._rejoin(j, start_ms, comm_start_ms, PHASE_COMPUTE, comm_start_ms)

    def rejoin_communicating(self, j, double start_ms, double comm_start_ms, double t,
                             left, sent):
        """... communicating at ``t``: :meth:`set_transfers` ``left`` and ``sent``."""
        self._rejoin(j, start_ms, comm_start_ms, PHASE_COMM, np.inf)
        self.set_transfers(j, t, left, sent)

    def rejoin_in_tail(self, j, double start_ms, double comm_start_ms, sent,
                       double end_ms):
        """... its transfers done (``sent`` each), its latency tail ends at ``end_ms``."""
        self.pf[P_SENT, self.pods(j)] = sent
        self._rejoin(j, start_ms, comm_start_ms, PHASE_TAIL, end_ms)

    def _rejoin(self, j, double start_ms, double comm_start_ms, int phase, double event_ms):
        self.jf[F_ISTART, j] = start_ms
        self.jf[F_CSTART, j] = comm_start_ms
        self.ji[I_PHASE, j] = phase
        if phase != PHASE_COMM:
            self.jf[F_T, j] = event_ms
        self.schedule(j, event_ms)

    # ------------------------------------------------------------ running
    def run(self, double t, double until):
        """Run the events before ``until``; return (time reached, STOP_*, slot).

        Events at ``until`` or later are left for the next call.  Between calls the
        caller may change anything (add or remove jobs, set holds, idle, regulation
        parameters), which is how arrivals and the controller act on the model.
        """
        cdef double reached = t
        cdef i64 out[2]
        while True:
            with nogil:
                reached = _advance(&self.e, reached, until, out, _EVENTS_PER_CHECK)
            if out[0] != _STOP_BUDGET:
                return float(reached), int(out[0]), int(out[1])
            # a long stretch of events: let Python run its signal handlers (Ctrl-C
            # raises KeyboardInterrupt here), then go on exactly where it stopped
            PyErr_CheckSignals()

    def flush(self, double t):
        """Bring every link's transfers up to ``t`` (no event lies before ``t``), so
        that the sent volumes are exact at ``t``."""
        cdef i64 lk, j
        cdef Eng* e = &self.e
        for j in range(self.slots):  # clear transfers go back to the loop, to be advanced
            if e.ji[JX(e, I_PHASE, j)] == PHASE_CLEAR:
                _into_loop(e, j, t)
        for lk in range(e.nl):
            if e.ev_t[e.ns + lk] < INFINITY and e.lt[lk] < t:
                _progress(e, lk, t)
                _relink(e, lk)

    def resume(self, j, t):
        """Job ``j`` (READY after a stop) goes on at ``t`` (its report taken)."""
        self.ji[I_REPORTED, j] = 1
        self.schedule(j, t)

    def take_samples(self, j):
        """The iteration times sampled since the last call (the buffer empties)."""
        n = int(self.ji[I_NSAMP, j])
        out = self.samples[j, :n].copy()
        self.ji[I_NSAMP, j] = 0
        return out

    # ------------------------------------------------------------ a job's state
    def is_waiting(self, j):
        """Between iterations, its next start pending (or not started yet)."""
        return int(self.ji[I_PHASE, j]) == PHASE_WAIT

    def is_done(self, j):
        return int(self.ji[I_PHASE, j]) == PHASE_DONE

    def next_event_ms(self, j):
        return float(self.jf[F_T, j])

    def start_at(self, j, double t):
        """A waiting job starts its next iteration at ``t`` instead."""
        self.jf[F_T, j] = t
        self.schedule(j, t)

    def hold(self, j, double phase_ms, double period_ms):
        """The job's next start is the first time congruent to ``phase_ms`` modulo
        ``period_ms`` (a pause, or a new offset)."""
        self.jf[F_HOLD_PHASE, j] = phase_ms
        self.jf[F_HOLD_PERIOD, j] = period_ms

    def iteration(self, j):
        """Iterations finished (the index of the next one)."""
        return int(self.ji[I_ITER, j])

    def idle_ms(self, j):
        return float(self.jf[F_IDLE, j])

    def set_idle(self, j, double idle_ms):
        """Idle injected into every compute phase from the next one on."""
        self.jf[F_IDLE, j] = idle_ms

    def set_leave(self, j, bint leave):
        """Stop (``STOP_SOLO``) when the job is next between iterations, no hold
        pending."""
        self.ji[I_LEAVE, j] = int(leave)

    def anchor(self, j):
        """The start of its latest finished iteration (-inf before the first)."""
        return float(self.jf[F_ANCHOR, j])

    def set_anchor(self, j, double anchor_ms):
        self.jf[F_ANCHOR, j] = anchor_ms

    def last_report(self, j):
        """``(start, duration, own part)`` of its latest finished iteration."""
        return (float(self.jf[F_LAST_START, j]), float(self.jf[F_LAST_DUR, j]),
                float(self.jf[F_LAST_OWN, j]))

    def totals(self, j):
        """``(iterations, busy ms, readjustments, pause ms)`` since it entered; pause
        ms is the time it was actually held after its pauses (a later shift of a
        paused job's start changes it), counted when it resumes."""
        return (int(self.ji[I_DONE, j]), float(self.jf[F_BUSY, j]),
                int(self.ji[I_READJ, j]), float(self.jf[F_HELD_MS, j]))

    def mark_paused(self, j, double at_ms):
        """A pause decided outside the engine began at ``at_ms`` (the paused
        iteration's end): the wait until the job resumes counts as paused time."""
        self.ji[I_PAUSED, j] = 1
        self.jf[F_PAUSE_FROM, j] = at_ms

    def pod_sent(self, j):
        """Gbit each of its pods has sent since it entered (a copy)."""
        return self.pf[P_SENT, self.pods(j)].copy()

    def pod_sent_at(self, j, double t):
        """Gbit each of its pods has sent by ``t`` (after :meth:`flush` at ``t``):
        :meth:`pod_sent` plus what a transfer alone on its link has sent since
        (:func:`_unflushed`).  Changes nothing."""
        cdef Eng* e = &self.e
        cdef i64 p
        sl = self.pods(j)
        out = self.pf[P_SENT, sl].copy()
        for k, p in enumerate(range(sl.start, sl.stop)):
            out[k] += _unflushed(e, p, t)
        return out

    # ------------------------------------------------------------ links
    def free_gbps(self, link):
        """Capacity less background traffic."""
        return float(self.lf[L_CAP, link] - self.lf[L_BG, link])

    def set_capacity(self, link, double gbps):
        self.lf[L_CAP, link] = gbps

    def link_sent(self):
        """Gbit each link has carried (a copy)."""
        return self.lf[L_SENT].copy()

    def link_sent_at(self, double t):
        """Gbit each link has carried by ``t`` (after :meth:`flush` at ``t``):
        :meth:`link_sent` plus what the transfers alone on their links have sent
        since (:func:`_unflushed`).  Changes nothing."""
        cdef Eng* e = &self.e
        cdef i64 p, lk
        out = self.lf[L_SENT].copy()
        for p in range(e.npods):
            lk = e.pi[PX(e, P_LINK, p)]
            if lk >= 0:
                out[lk] += _unflushed(e, p, t)
        return out

    # ------------------------------------------------------------ regulation
    def set_regulation(self, j, bint monitored, bint high, limits, double target_ms,
                       double phase_period_ms, root=-1, terms=None):
        """The controller's view of job ``j``: whether it is monitored, whether it is
        high priority (never paused), its thresholds (``N_LIMITS`` values in
        regulation.pxd's order, or None to keep them) and its target phase: the
        offset ``target_ms`` when ``root`` is -1; regulation.pxd's
        ``target_phase(anchor(root), *terms)`` when ``root`` is the reference job's slot;
        the controller's own (a stop before each pause) when ``root`` is -2.  A
        pause lands on the target plus a multiple of ``phase_period_ms``
        (:meth:`tdmcore.metronome.controller.Controller.phase_period_ms`)."""
        self.ji[I_MON, j] = int(monitored)
        self.jf[F_JOB_PERIOD, j] = phase_period_ms
        if limits is not None:
            self.lim[j] = limits
        self.ji[I_HIGH, j] = int(high)
        self.jf[F_TFIX, j] = target_ms
        self.ji[I_ROOT, j] = root
        if terms is not None:
            self.jf[F_T_CR, j], self.jf[F_T_OJ, j], self.jf[F_T_OR, j], \
                self.jf[F_T_CJ, j] = terms

    def set_watch(self, j, win, own, hist, hown, marks, counters):
        """Load job ``j``'s regulation windows (the controller's watch of it)."""
        self.win[j] = win
        self.wino[j] = own
        self.hist[j] = hist
        self.histo[j] = hown
        self.readj[j] = marks
        self.mon[j] = counters

    def watch(self, j):
        """Job ``j``'s regulation windows: ``(win, own, hist, hown, marks,
        counters)``, copies."""
        return (self.win[j].copy(), self.wino[j].copy(), self.hist[j].copy(),
                self.histo[j].copy(), self.readj[j].copy(), self.mon[j].copy())

    def limits(self, j):
        return self.lim[j].copy()

    def rules(self):
        """The regulation's rules, ``N_RULES`` values in regulation.pxd's order."""
        return self.cfg[:4].copy()

    def counts(self):
        """``(events, clear, back)``: events the loop has taken from its heap,
        iterations that ended clear (their transfers alone on their links: one event
        each), and clear iterations whose transfers went back to the loop (another
        transfer started on one of their links, or a flush), since the engine began."""
        return (int(self.cfg[C_EVENTS]), int(self.cfg[C_CLEARED]), int(self.cfg[C_BACK]))

    def report_outcome(self, i64 j):
        """What job ``j``'s latest report leads to: a regulation outcome, or
        ``REPORT_CONTROLLER``; changes nothing."""
        return _outcome(&self.e, j)

    def take_report(self, i64 j, double t, int outcome):
        """Take job ``j``'s latest report at ``t`` with ``outcome`` (not
        ``REPORT_CONTROLLER``)."""
        _apply(&self.e, j, t, outcome)

    def set_last_report(self, j, double start_ms, double duration_ms, double own_ms):
        """What its latest iteration was (a report made outside the loop)."""
        self.jf[F_LAST_START, j] = start_ms
        self.jf[F_LAST_DUR, j] = duration_ms
        self.jf[F_LAST_OWN, j] = own_ms
        if start_ms > self.jf[F_ANCHOR, j]:
            self.jf[F_ANCHOR, j] = start_ms

    def pause_taken(self, j):
        """Pause ms taken in the engine and the job's hold ``(phase, period)``."""
        return (float(self.jf[F_PAUSE_MS, j]), float(self.jf[F_HOLD_PHASE, j]),
                float(self.jf[F_HOLD_PERIOD, j]))


# ---------------------------------------------------------------------------- stretches
# A job alone on all its links (or on one node) is affected by nobody: iteration i
# lasts ``compute x noise_i + const`` (const = idle + its comm time alone + its
# latency tail), exactly what the engine computes for it.  These walk a stretch of
# iterations i0 .. i0 + n - 1 starting at s0 without events.

def stretch_summary(u64 seed, u64 key, double sigma, i64 i0, i64 n, double compute,
                    double const):
    """(total time, shortest iteration, longest iteration) of the stretch."""
    cdef double total = 0.0, lo = INFINITY, hi = -INFINITY, d
    cdef i64 i
    if n <= 0:
        return 0.0, INFINITY, -INFINITY
    if sigma == 0.0:
        d = compute + const
        return d * n, d, d
    with nogil:
        for i in range(i0, i0 + n):
            d = compute * _factor(seed, key, <u64>i, sigma) + const
            total += d
            if d < lo:
                lo = d
            if d > hi:
                hi = d
    return total, lo, hi


def stretch_locate(u64 seed, u64 key, double sigma, i64 i0, i64 n, double compute,
                   double const, double s0, double t):
    """``(k, s_k, s_prev)``: ``k`` iterations of the stretch end by ``t`` (at most
    ``n``); iteration ``i0 + k`` starts at ``s_k``; the last one that ended started
    at ``s_prev`` (NaN when none did)."""
    cdef double s = s0, prev = NAN, d
    cdef i64 k
    if sigma == 0.0:
        d = compute + const
        if d <= 0.0:
            return n, s0, NAN
        k = <i64>min(<double>n, max(0.0, floor((t - s0) / d)))
        while k < n and s0 + (k + 1) * d <= t:  # round-off: the ends as multiples of d
            k += 1
        while k > 0 and s0 + k * d > t:
            k -= 1
        return k, s0 + k * d, (s0 + (k - 1) * d) if k > 0 else NAN
    with nogil:
        for k in range(n):
            d = compute * _factor(seed, key, <u64>(i0 + k), sigma) + const
            if s + d > t:
                break
            prev = s
            s += d
        else:
            k = n
    return k, s, prev


def stretch_commit(u64 seed, u64 key, double sigma, i64 i0, i64 n, double compute,
                   double const, double s0, i64 step, double[::1] samples,
                   double[::1] last_d, double[::1] last_s):
    """Walk ``n`` iterations: returns ``(total, samples written, tail kept)``.

    Iteration ``i`` is written to ``samples`` when ``i % step == 0``; the last
    ``len(last_d)`` iterations' times and starts fill ``last_d``/``last_s`` (a ring,
    read back oldest first by the caller from the returned count).
    """
    cdef i64 m = last_d.shape[0], w = 0, kept = 0, k, i
    cdef double total = 0.0, s = s0, d
    cdef double const_d = compute + const
    with nogil:
        for k in range(n):
            i = i0 + k
            if sigma == 0.0:
                d = const_d
            else:
                d = compute * _factor(seed, key, <u64>i, sigma) + const
            if i % step == 0:
                samples[w] = d
                w += 1
            if m > 0:
                last_d[kept % m] = d
                last_s[kept % m] = s
                kept += 1
            total += d
            s += d
    return total, w, kept
