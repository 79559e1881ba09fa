# cython: language_level=3
"""Domain objects -> plain arrays, in compiled code (the one hop that touches Python).

Cython rather than Numba: this loop walks Python objects (the cluster state's
dicts and pods), which Numba cannot; compiled, it turns a 5,000-pod cluster into
arrays in well under a millisecond.  It writes into caller-allocated arrays.
"""


def fill_pod_table(list node_pods, list link_rows, dict placed, dict job_ids,
                   long long[::1] node_ptr, double[::1] period, double[::1] duty,
                   double[::1] bandwidth, long long[::1] priority, long long[::1] job,
                   long long[::1] order, long long[::1] n_all, double[::1] sum_bw):
    """Fill the CSR table of the link rows, node by node.

    Row ``i`` in ``node_ptr[n]:node_ptr[n + 1]`` is the i-th entry of
    ``link_rows[n]`` (one pod per job crossing n's link, in deploy order: the
    cluster state's :meth:`~tdmcore.model.ClusterState.job_links` decides them).
    ``n_all[n]`` counts every pod on n (LowComm and local ones included) and
    ``sum_bw[n]`` sums the rows' ``r_p``.  New job names get the next integer id
    in ``job_ids``.  Returns the number of rows written.
    """
    cdef Py_ssize_t n, i = 0, n_nodes = len(node_pods)
    cdef double total
    cdef object entry, pod, pattern, jid
    for n in range(n_nodes):
        node_ptr[n] = i
        n_all[n] = len(<list> node_pods[n])
        names = <list> link_rows[n]
        total = 0.0
        for name in names:
            entry = placed[name]
            pod = entry.pod
            pattern = pod.pattern
            if pattern is None:
                continue
            period[i] = pattern.period_ms
            duty[i] = pattern.duty_cycle
            bandwidth[i] = pattern.bandwidth_gbps
            total += pattern.bandwidth_gbps
            priority[i] = pod.priority
            jid = job_ids.get(pod.job)
            if jid is None:
                jid = len(job_ids)
                job_ids[pod.job] = jid
            job[i] = jid
            order[i] = entry.order
            i += 1
        sum_bw[n] = total
    node_ptr[n_nodes] = i
    return i
