"""One rank of a PyTorch DDP training loop with the tdmcore hook (for ``test_k8s_train``).

Run as ``python -m tests.k8s_bridge.ddp_train RANK WORLD PORT STEPS OUT`` with the
hook's environment (``TDMCORE_AGENT_URL``, ``POD_NAME``, ``POD_NAMESPACE``) and
``TDMCORE_TRAIN_*`` timings.  It trains a small model with DDP over gloo on loopback,
each step inside ``hook.step()``, the hook's DDP communication hook around the
all-reduce, and writes per step, in epoch ms: when the loop asked for the step
(``enter``), when the step's body began (``body``: after the hook's pause and idle)
and when it ended (``exit``), as JSON to ``OUT``.

The loop is shaped like the traffic pattern the controller plans with: the step
computes for ``TDMCORE_TRAIN_COMPUTE_MS`` (a forward and backward pass, padded), and
the all-reduce's future completes ``TDMCORE_TRAIN_COMM_MS`` after the gradients are
handed over -- on loopback the all-reduce itself takes microseconds, so the delay
stands for the link transfer of the pattern's communication phase.  Steps in
``TDMCORE_TRAIN_SLOW`` (``first:last``) communicate ``TDMCORE_TRAIN_SLOW_MS`` longer,
as contention on the link would make them.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any


def main(argv: list[str]) -> None:
    rank, world, port, steps, out = int(argv[0]), int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    compute_s = float(os.environ["TDMCORE_TRAIN_COMPUTE_MS"]) / 1e3
    comm_s = float(os.environ["TDMCORE_TRAIN_COMM_MS"]) / 1e3
    slow_first, slow_last = (int(x) for x in os.environ["TDMCORE_TRAIN_SLOW"].split(":"))
    slow_s = float(os.environ["TDMCORE_TRAIN_SLOW_MS"]) / 1e3

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel

    from k8s_bridge.hook import TrainingHook

    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1))
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    hook = TrainingHook.from_env(flush_every=5, flush_interval_s=1.0, timeout_s=5.0,
                                 register_atexit=False)
    step_now = [0]

    def link(state: Any, bucket: Any) -> Any:
        """The all-reduce, completing when the pattern's communication would."""
        delay = comm_s + (slow_s if slow_first <= step_now[0] <= slow_last else 0.0)

        def transferred(fut: Any) -> Any:
            time.sleep(delay)
            return fut.value()

        return allreduce_hook(state, bucket).then(transferred)

    ddp.register_comm_hook(None, hook.ddp_comm_hook(link))
    x, y = torch.randn(64, 32), torch.randn(64, 1)
    log: list[dict[str, float]] = []
    for step in range(steps):
        step_now[0] = step
        enter = time.time() * 1000.0
        with hook.step():
            body = time.time() * 1000.0
            started = time.perf_counter()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            time.sleep(max(0.0, compute_s - (time.perf_counter() - started)))
            loss.backward()  # waits for the all-reduce's future
            optimizer.step()
            optimizer.zero_grad()
        log.append({"enter": enter, "body": body, "exit": time.time() * 1000.0})
    hook.close(timeout_s=10.0)
    summary = {"steps": log, "sent": hook.sent_iterations, "dropped": hook.dropped_iterations,
               "idle_ms": hook.idle_ms, "target_phase_ms": hook.target_phase_ms,
               "phase_period_ms": hook.phase_period_ms}
    with open(out, "w") as fh:
        json.dump(summary, fh)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
