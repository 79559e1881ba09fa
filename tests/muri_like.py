"""A trace shaped like Muri's published ones (SIGCOMM'22, ``simulator/trace-data/``),
generated: its header, times in milliseconds, its model names (``gpt2``, ``vgg19``,
``bert``, ``resnet18``, and ``dqn``, which tdmcore does not know).

The tests and the docs' walkthrough read this, never the shipped profiles or any
file outside the repository.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: Muri's header, in its order.
HEADER = ("job_id,num_gpu,submit_time,iterations,model_name,batch_size,duration,interval,"
          "iteration_time,resource_time_0,resource_time_1,resource_time_2,priority")
#: What ``--column``/``columns`` maps for it (its iterations column is found by name).
COLUMNS = {"submit": "submit_time", "workers": "num_gpu", "model": "model_name"}
#: Model names as Muri writes them, with an iteration time (ms) for the file.
MODELS = {"gpt2": 433, "vgg19": 212, "bert": 190, "resnet18": 921, "dqn": 490}


def write_muri_like(path: Path, jobs: int = 8, seed: int = 0) -> Path:
    """Write ``jobs`` rows: submit times a few minutes apart, in ms; 2 or 4 GPUs
    (1 for ``dqn``); a few hundred iterations, so that a replay takes seconds."""
    rng = np.random.default_rng(seed)
    names = list(MODELS)
    lines = [HEADER]
    submit = 0
    for k in range(jobs):
        model = names[k % len(names)]
        gpus = 1 if model == "dqn" else int(rng.choice([2, 4]))
        iterations = int(rng.integers(200, 400))
        it_ms = MODELS[model]
        duration = iterations * it_ms
        lines.append(f"{k},{gpus},{submit},{iterations},{model},16,{duration},0,{it_ms},"
                     f"1,1,1,{k % 2}")
        submit += int(rng.integers(30_000, 120_000))  # 30 s to 2 min, in ms
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path
