"""The controller's check of a reporter's token (k8s_bridge/auth.py), against a stub of
the API's TokenReview: what is asked, what is remembered, what each answer means.  The
real API server's answers are checked in tests/e2e/test_k8s_e2e_security.py."""

from __future__ import annotations

from typing import Any

import pytest

from k8s_bridge.auth import AGENT_USER, ReportAuth
from k8s_bridge.kube import ApiError
from k8s_bridge.web import HttpError


class Reviews:
    """Answers TokenReviews: ``good`` is the agent's token, bound to pod agent-x;
    ``pod:<namespace>/<name>`` a training pod's (ServiceAccount ``trainer``, pod UID
    ``uid-<name>``), ``sa:<namespace>`` a token of that namespace's ``trainer`` bound to
    no pod."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        self.down = False

    def with_timeout(self, timeout_s: float) -> Reviews:
        return self

    def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        assert kind == "TokenReview"
        self.asked.append(obj["spec"])
        if self.down:
            raise ApiError(0, "ConnectionError", "refused")
        token = obj["spec"]["token"]
        if token == "good":
            return {"status": {"authenticated": True, "audiences": ["tdmcore-controller"],
                               "user": {"username": AGENT_USER, "extra": {
                                   "authentication.kubernetes.io/pod-name": ["agent-x"]}}}}
        if token.startswith("pod:"):
            namespace, _, name = token[4:].partition("/")
            return {"status": {"authenticated": True, "audiences": ["tdmcore-controller"],
                               "user": {"username": f"system:serviceaccount:{namespace}:"
                                                    "trainer", "extra": {
                                   "authentication.kubernetes.io/pod-name": [name],
                                   "authentication.kubernetes.io/pod-uid": [f"uid-{name}"]}}}}
        if token.startswith("sa:"):
            return {"status": {"authenticated": True, "audiences": ["tdmcore-controller"],
                               "user": {"username": f"system:serviceaccount:{token[3:]}:"
                                                    "trainer"}}}
        if token == "other":
            return {"status": {"authenticated": True, "audiences": ["tdmcore-controller"],
                               "user": {"username": "system:serviceaccount:a:b"}}}
        return {"status": {"authenticated": False, "error": "invalid bearer token"}}


def test_one_review_per_token_while_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("k8s_bridge.auth.time.monotonic", lambda: clock[0])
    api = Reviews()
    auth = ReportAuth(api, cache_s=60.0, refused_cache_s=10.0)  # type: ignore[arg-type]
    caller = auth.check("Bearer good")
    assert (caller.user, caller.pod) == (AGENT_USER, "tdmcore-system/agent-x")
    assert api.asked == [{"token": "good", "audiences": ["tdmcore-controller"]}]
    for _ in range(5):
        assert auth.check("bearer good") == caller
    with pytest.raises(HttpError) as err:
        auth.check("Bearer forged")
    assert err.value.status == 401 and "invalid bearer token" in err.value.message
    with pytest.raises(HttpError) as err:
        auth.check("Bearer forged")  # remembered: no second review
    assert len(api.asked) == 2
    with pytest.raises(HttpError) as err:
        auth.check("Bearer other")
    assert err.value.status == 403 and "system:serviceaccount:a:b" in err.value.message
    clock[0] = 11.0  # a refusal is asked again after 10 s, an acceptance after 60
    with pytest.raises(HttpError):
        auth.check("Bearer forged")
    auth.check("Bearer good")
    assert [a["token"] for a in api.asked] == ["good", "forged", "other", "forged"]


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer  ", "Basic Z29vZA=="])
def test_no_bearer_token_is_401_without_asking(header: str | None) -> None:
    api = Reviews()
    with pytest.raises(HttpError) as err:
        ReportAuth(api).check(header)  # type: ignore[arg-type]
    assert err.value.status == 401 and api.asked == []


def test_an_api_server_that_cannot_be_asked_is_503_and_not_remembered() -> None:
    api = Reviews()
    api.down = True
    auth = ReportAuth(api)  # type: ignore[arg-type]
    with pytest.raises(HttpError) as err:
        auth.check("Bearer good")
    assert err.value.status == 503
    api.down = False
    assert auth.check("Bearer good").user == AGENT_USER


def test_no_allowed_user_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="^users"):
        ReportAuth(Reviews(), users=())  # type: ignore[arg-type]


@pytest.mark.parametrize("audiences", [None, [], ["https://kubernetes.default.svc"], "tdmcore"])
def test_a_review_that_does_not_name_our_audience_fails_closed(audiences: Any) -> None:
    """A TokenReview answer that says authenticated but not for ``tdmcore-controller``
    (no ``audiences`` at all, as an audience-blind authenticator may answer) is a
    refusal: a token for anyone's audience must not speak to the controller."""

    class Blind(Reviews):
        def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
            answer = super().create(kind, obj)
            if audiences is None:
                del answer["status"]["audiences"]
            else:
                answer["status"]["audiences"] = audiences
            return answer

    with pytest.raises(HttpError) as err:
        ReportAuth(Blind()).check("Bearer good")  # type: ignore[arg-type]
    assert err.value.status == 401 and "audience" in err.value.message


def test_a_training_pod_speaks_for_itself_only() -> None:
    """Issue 40's review: the agent relays whatever reaches its hostPort with its own
    token, so any pod of a GPU node could report for any pod of that node.  A report
    now carries the sending pod's own token, and it speaks for that pod alone: its
    namespace (the ServiceAccount's), its name and, where the controller knows the pod,
    its UID."""
    api = Reviews()
    auth = ReportAuth(api)  # type: ignore[arg-type]
    sender = auth.check_pod("Bearer pod:team-a/j-0", "team-a", "j-0", "uid-j-0")
    assert (sender.user, sender.pod, sender.pod_uid) == (
        "system:serviceaccount:team-a:trainer", "team-a/j-0", "uid-j-0")
    assert auth.check_pod("Bearer pod:team-a/j-0", "team-a", "j-0") == sender  # UID unknown
    refused = {
        ("Bearer pod:team-a/j-1", "team-a", "j-0", None): 403,    # a neighbour
        ("Bearer pod:team-b/j-0", "team-a", "j-0", None): 403,    # same name, elsewhere
        ("Bearer pod:team-a/j-0", "team-a", "j-0", "uid-2"): 403,  # a pod of that name before
        ("Bearer sa:team-a", "team-a", "j-0", None): 403,          # bound to no pod
        ("Bearer forged", "team-a", "j-0", None): 401,
        (None, "team-a", "j-0", None): 401,                        # an old hook: no token
    }
    for (header, namespace, pod, uid), code in refused.items():
        with pytest.raises(HttpError) as err:
            auth.check_pod(header, namespace, pod, uid)
        assert err.value.status == code, (header, pod, uid, err.value.message)
    with pytest.raises(HttpError) as err:
        auth.check_pod(None, "team-a", "j-0")
    assert "X-Tdmcore-Pod-Authorization" in err.value.message \
        and "team-a/j-0" in err.value.message and "TDMCORE_TOKEN_FILE" in err.value.message
    # a training pod's token is not the agent's, and the agent's is no pod's
    with pytest.raises(HttpError) as err:
        auth.check("Bearer pod:team-a/j-0")
    assert err.value.status == 403
    with pytest.raises(HttpError) as err:
        auth.check_pod("Bearer good", "team-a", "j-0")
    assert err.value.status == 403
