"""Elastic worker counts on Kubernetes: DRAGON, KOD2 and the weighted scheduler.

The simulator's elastic policies (:mod:`tdmcore.elastic`) decide on an
:class:`~tdmcore.elastic.ElasticView` of the cluster; here that view is built
from the API and a policy's plans become replica counts of Kubeflow jobs:

* a PyTorchJob or TFJob takes part when it carries the annotation
  ``tdmcore.io/elastic-model`` (a model of DRAGON's Fig. 2, whose scaling curve the
  policies use) and ``tdmcore.io/steps`` (training steps); its bounds are
  ``spec.elasticPolicy.minReplicas`` / ``maxReplicas`` (PyTorchJob) or the
  annotations ``tdmcore.io/min-workers`` / ``tdmcore.io/max-workers``, its size
  the Worker replicas; the weighted scheduler's utility is the annotation
  ``tdmcore.io/utility: "g1,g2,g3"``;
* its Worker pods are the policy's workers and its Master (PyTorchJob) or PS (TFJob)
  pods its parameter-server tasks, with the requests of their pod templates;
* **[decision]** a plan changes *how many* workers a job has: the bridge patches
  ``spec.{pytorch,tf}ReplicaSpecs.Worker.replicas`` to the count the plan leaves
  and the scheduler (extender or standalone) places the pods; the nodes a plan
  names are the policy's own bookkeeping.  A ``start`` plan of a job with no pod
  running sets its first size.

Patches are idempotent (only a count that differs is written).
"""

from __future__ import annotations

import calendar
import logging
import math
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tdmcore.elastic import ElasticJob, ElasticView, Plan, make_elastic_policy
from tdmcore.elastic.job import DRAGON_FIG2, TaskRequest
from tdmcore.model import ClusterState, Pod

from . import api, convert
from .cache import ClusterModel
from .kube import ApiError, Kube

__all__ = ["ANNOTATION_MODEL", "ElasticController", "TrackedJob", "tracked_job"]

log = logging.getLogger(__name__)

ANNOTATION_MODEL = "tdmcore.io/elastic-model"
ANNOTATION_STEPS = "tdmcore.io/steps"
ANNOTATION_MIN = "tdmcore.io/min-workers"
ANNOTATION_MAX = "tdmcore.io/max-workers"
ANNOTATION_UTILITY = "tdmcore.io/utility"
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
_SPECS = {"PyTorchJob": ("pytorchReplicaSpecs", "Master"), "TFJob": ("tfReplicaSpecs", "PS")}
_DNS = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class TrackedJob:
    """A Kubeflow job under an elastic policy."""

    kind: str
    namespace: str
    name: str
    spec: ElasticJob
    replicas: int


def _int(value: Any, name: str) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: expected an integer, got {value!r:.40}") from exc
    if number != value and str(number) != str(value).strip():
        raise ValueError(f"{name}: expected an integer, got {value!r:.40}")
    return number


def _template_request(spec: Mapping[str, Any], role: str) -> TaskRequest:
    template = ((spec.get(role) or {}).get("template") or {})
    pod = {"metadata": {"name": "template"}, "spec": template.get("spec") or {}}
    cpu, mem, gpu = convert.pod_requests(pod)
    return TaskRequest(cpu=cpu, mem_gib=mem, gpu=gpu)


def _epoch_s(stamp: Any) -> float:
    try:
        return float(calendar.timegm(time.strptime(str(stamp), "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return 0.0


def tracked_job(obj: Mapping[str, Any], elastic_name: str) -> TrackedJob | None:
    """The :class:`TrackedJob` of a PyTorchJob / TFJob, None if it opts out,
    ``ValueError`` (naming the field) if its annotations are malformed."""
    kind = str(obj.get("kind"))
    if kind not in _SPECS:
        return None
    meta = obj.get("metadata") or {}
    notes = meta.get("annotations") or {}
    if ANNOTATION_MODEL not in notes:
        return None
    model = notes[ANNOTATION_MODEL]
    if model not in DRAGON_FIG2:
        raise ValueError(f"metadata.annotations[{ANNOTATION_MODEL!r}]: expected one of "
                         f"{', '.join(DRAGON_FIG2)}, got {model!r}")
    try:
        steps = float(notes.get(ANNOTATION_STEPS, ""))
    except ValueError as exc:
        raise ValueError(f"metadata.annotations[{ANNOTATION_STEPS!r}]: expected a number")\
            from exc
    if not math.isfinite(steps) or steps <= 0:
        raise ValueError(f"metadata.annotations[{ANNOTATION_STEPS!r}]: must be > 0")
    field, ps_role = _SPECS[kind]
    spec = (obj.get("spec") or {}).get(field) or {}
    replicas = _int((spec.get("Worker") or {}).get("replicas", 1),
                    f"spec.{field}.Worker.replicas")
    policy = (obj.get("spec") or {}).get("elasticPolicy") or {}
    lo = _int(notes.get(ANNOTATION_MIN, policy.get("minReplicas", replicas)), "min workers")
    hi = _int(notes.get(ANNOTATION_MAX, policy.get("maxReplicas", replicas)), "max workers")
    n_ps = _int((spec.get(ps_role) or {}).get("replicas", 0), f"spec.{field}.{ps_role}")
    utility: tuple[float, float, float] = (1.0, 0.0, 0.0)
    if ANNOTATION_UTILITY in notes:
        parts = str(notes[ANNOTATION_UTILITY]).split(",")
        if len(parts) != 3:
            raise ValueError(f"metadata.annotations[{ANNOTATION_UTILITY!r}]: expected g1,g2,g3")
        utility = (float(parts[0]), float(parts[1]), float(parts[2]))
    job = ElasticJob(
        name=elastic_name, model=model, arrival_s=_epoch_s(meta.get("creationTimestamp")),
        steps=steps, min_workers=lo, max_workers=hi, workers=min(max(replicas, lo), hi),
        worker=_template_request(spec, "Worker"),
        ps=_template_request(spec, ps_role) if n_ps else TaskRequest(),
        n_ps=max(n_ps, 1), utility=utility)
    return TrackedJob(kind, str(meta.get("namespace") or "default"), str(meta.get("name")),
                      job, replicas)


class ElasticController:
    """Builds the ElasticView from the API, runs the policy, patches replicas."""

    def __init__(self, model: ClusterModel, kube: Kube | None, policy: str) -> None:
        self.model = model
        self.kube = kube
        self.policy = make_elastic_policy(policy)
        self.jobs_json: dict[str, dict[str, Any]] = {}  # "<Kind>/<ns>/<name>" -> object
        self.lock = threading.RLock()
        self._jobs: dict[str, ElasticJob] | None = None  # what the policy was told
        self.patches = 0

    def on_event(self, kind: str, event: str, obj: dict[str, Any]) -> None:
        """Informer handler for PyTorchJob and TFJob."""
        meta = obj.get("metadata") or {}
        key = f"{kind}/{meta.get('namespace') or 'default'}/{meta.get('name')}"
        with self.lock:
            if event == "DELETED":
                self.jobs_json.pop(key, None)
            else:
                self.jobs_json[key] = obj

    def tracked(self) -> dict[str, TrackedJob]:
        """Elastic name -> job, for the jobs that opted in (malformed ones skipped)."""
        out: dict[str, TrackedJob] = {}
        with self.lock:
            items = sorted(self.jobs_json.items())
        for key, obj in items:
            kind, namespace, name = key.split("/", 2)
            base = _DNS.sub("-", f"{name}" if namespace == "default"
                            else f"{namespace}-{name}".lower())[:63].strip("-")
            try:
                job = tracked_job(obj, base or "job")
            except ValueError as exc:
                log.warning("%s: not managed elastically: %s", key, exc)
                continue
            if job is not None and job.spec.name not in out:
                out[job.spec.name] = job
        return out

    def view(self, now_s: float | None = None) -> tuple[ElasticView, dict[str, TrackedJob]]:
        """The policy's view: the cluster's placed pods, with the tracked jobs' pods
        renamed to the policy's conventions (``<job>-worker-<k>``, ``<job>-ps-<k>``)."""
        jobs = self.tracked()
        with self.model.lock:
            state = self.model.state()
            pods = dict(self.model.objects["Pod"])
        own: dict[tuple[str, str], str] = {(j.namespace, j.name): n for n, j in jobs.items()}
        view_state = ClusterState(state.cluster)
        counters: dict[tuple[str, str], int] = {}
        running: list[str] = []
        for key in sorted(state.placed, key=lambda k: state.placed[k].order):
            placed = state.placed[key]
            pod_json = pods.get(key) or {}
            labels = convert.labels_of(pod_json) if pod_json else {}
            namespace = key.split("/", 1)[0]
            elastic = own.get((namespace, labels.get(api.LABEL_KUBEFLOW_JOB, "")))
            pod = placed.pod
            if elastic is not None:
                role = "worker" if labels.get(LABEL_REPLICA_TYPE, "").lower() == "worker" \
                    else "ps"
                k = counters.get((elastic, role), 0)
                counters[(elastic, role)] = k + 1
                pod = Pod(f"{elastic}-{role}-{k}", elastic, cpu=pod.cpu, mem_gib=pod.mem_gib,
                          gpu=pod.gpu)
                if elastic not in running:
                    running.append(elastic)
            _place_anyway(view_state, pod, placed.node)
        waiting = sorted((n for n in jobs if n not in running),
                         key=lambda n: (jobs[n].spec.arrival_s, n))
        now = time.time() if now_s is None else now_s
        view = ElasticView(now, view_state, {n: j.spec for n, j in jobs.items()},
                           tuple(waiting), tuple(running),
                           {n: jobs[n].spec.arrival_s for n in waiting})
        return view, jobs

    def step(self, now_s: float | None = None) -> list[Plan]:
        """One decision: the plans, applied as replica patches."""
        with self.lock:
            view, jobs = self.view(now_s)
            if not jobs:
                return []
            specs = dict(view.jobs)
            if self._jobs is None:  # the controller's first decision starts the run
                self.policy.reset(specs, view.now_s)
            elif specs != self._jobs:  # jobs came or went: the policy keeps its state
                self.policy.track(specs)
            self._jobs = specs
            plans = self.policy.decide(view)
            for plan in plans:
                self._apply(plan, view, jobs)
            return plans

    def _apply(self, plan: Plan, view: ElasticView, jobs: Mapping[str, TrackedJob]) -> None:
        job = jobs.get(plan.job)
        if job is None:
            return
        spec = job.spec
        placed = len(view.workers_of(plan.job))
        added = sum(1 for pod, _ in plan.add if spec.is_worker(pod.name))
        removed = sum(1 for name in plan.remove if spec.is_worker(name))
        # Workers the job asked for but that are still pending count too: a plan that
        # adds never lowers the replicas, one that removes never raises them.
        if removed:
            target = min(job.replicas, placed - removed)
        else:
            target = max(job.replicas, placed + added)
        target = min(max(target, spec.min_workers), spec.max_workers)
        if target == job.replicas:
            return
        field, _ = _SPECS[job.kind]
        patch = {"spec": {field: {"Worker": {"replicas": target}}}}
        log.info("%s %s/%s: %s -> %d workers (%s)", job.kind, job.namespace, job.name,
                 plan.action, target, plan.reason)
        if self.kube is None:
            return
        try:
            obj = self.kube.merge_patch(job.kind, job.name, patch, namespace=job.namespace)
        except ApiError as exc:
            log.warning("patching %s/%s failed (retried next sync): %s", job.namespace,
                        job.name, exc)
            return
        self.patches += 1
        self.on_event(job.kind, "MODIFIED", obj)


def _place_anyway(state: ClusterState, pod: Pod, node: int) -> None:
    try:
        state.place(pod, node)
    except ValueError:  # over-committed by others: count it, as the model does
        from .cache import _force_place
        _force_place(state, pod, node)
