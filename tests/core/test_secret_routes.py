"""Every route a secret can take into a trace or a span, each with its own canary.

Each route records a run that carries a canary value through one path (declared and
undeclared secret arguments, ``**kwargs``, nested headers, URL userinfo, pydantic /
dataclass / Struct fields, ``meta``, exits, tool arguments and results, model requests,
responses and errors, exception messages with and without the OTel SDK), then asserts
that the canary is absent from the trace's decompressed bytes and from every span
attribute and event, that the host saw its own values untouched, and that the trace
still verifies.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import msgspec
import pydantic
import pytest
import zstandard

import agentlog as al
from agentlog._encoding import decode
from agentlog._recorder import log_llm_call
from agentlog.testing import capture_spans

Route = Callable[[Path, str], None]
ROUTES: dict[str, Route] = {}


def route(fn: Route) -> Route:
    ROUTES[fn.__name__] = fn
    return fn


def decompressed(path: Path) -> bytes:
    """The file's bytes followed by the content of every zstd frame in it."""
    data = path.read_bytes()
    parts = [data]
    magic = b"\x28\xb5\x2f\xfd"
    i = data.find(magic)
    while i >= 0:
        d = zstandard.ZstdDecompressor().decompressobj()
        parts.append(d.decompress(data[i:]))
        i = data.find(magic, len(data) - len(d.unused_data))
    return b"".join(parts)


def span_text(spans: Any) -> str:
    parts = []
    for s in spans.spans:
        parts.append(s.name)
        parts.append(repr(dict(s.attributes or {})))
        parts.append(repr(s.status.description))
        for e in s.events:
            parts.append(e.name)
            parts.append(repr(dict(e.attributes or {})))
    return "\n".join(parts)


# ------------------------------------------------------------------ arguments


@route
def declared_secret_argument(path: Path, canary: str) -> None:
    @al.window("w", secret=("passcode",))
    def w(q: str, passcode: str) -> str:
        return q

    with al.record(path):
        assert w("q", canary) == "q"


@route
def annotated_secret_argument(path: Path, canary: str) -> None:
    @al.window("w")
    def w(q: str, code: Annotated[str, al.Secret]) -> str:
        return code

    with al.record(path):
        assert w("q", code=canary) == canary


@route
def undeclared_api_key_argument(path: Path, canary: str) -> None:
    @al.window("w")
    def w(q: str, api_key: str) -> int:
        return len(api_key)

    with al.record(path):
        assert w("q", canary) == len(canary)


@route
def undeclared_authorization_argument(path: Path, canary: str) -> None:
    @al.window("w")
    def w(authorization: str) -> int:
        return 1

    with al.record(path):
        w(f"Basic {canary}")


@route
def undeclared_token_argument(path: Path, canary: str) -> None:
    @al.window("w")
    def w(token: str, k: int = 3) -> int:
        return k

    with al.record(path):
        assert w(canary) == 3


@route
def undeclared_password_keyword_argument(path: Path, canary: str) -> None:
    @al.window("w")
    def w(user: str, *, password: str) -> str:
        return user

    with al.record(path):
        assert w("bob", password=canary) == "bob"


@route
def kwargs_value(path: Path, canary: str) -> None:
    @al.window("w")
    def w(q: str, **options: Any) -> str:
        return q

    with al.record(path):
        assert w("q", api_key=canary, temperature=0.2) == "q"


@route
def nested_header_dict(path: Path, canary: str) -> None:
    @al.window("w")
    def w(request: dict[str, Any]) -> int:
        return len(request)

    with al.record(path):
        assert w({"url": "https://api.example.org/v1",
                  "headers": {"Authorization": f"Bearer {canary}", "Accept": "json"}}) == 2


@route
def nested_x_api_key_header(path: Path, canary: str) -> None:
    @al.window("w")
    def w(config: list[Any]) -> int:
        return 0

    with al.record(path):
        w([{"client": {"headers": {"X-Api-Key": canary}}}])


@route
def url_userinfo_argument(path: Path, canary: str) -> None:
    @al.window("w")
    def w(url: str) -> str:
        return url

    url = f"https://alice:{canary}@db.example.org/x"
    with al.record(path):
        assert w(url) == url  # the host gets its value back untouched


@route
def url_query_credential(path: Path, canary: str) -> None:
    @al.window("w")
    def w(url: str) -> None:
        return None

    with al.record(path):
        w(f"https://maps.example.org/api?q=paris&key={canary}&z=3")


@route
def base_url_credentials(path: Path, canary: str) -> None:
    @al.window("w")
    def w(base_url: str, model: str) -> str:
        return model

    with al.record(path):
        assert w(f"https://user:{canary}@llm.example.org/v1", "m") == "m"


@route
def nested_bearer_key(path: Path, canary: str) -> None:
    @al.window("w")
    def w(auth_chain: list[dict[str, Any]]) -> int:
        return len(auth_chain)

    with al.record(path):
        w([{"kind": "oauth", "grant": {"bearer": canary}}])


class ClientConfig(pydantic.BaseModel):
    model: str
    api_key: str


class SecretConfig(pydantic.BaseModel):
    model: str
    key: pydantic.SecretStr


@route
def pydantic_str_field(path: Path, canary: str) -> None:
    @al.window("w")
    def w(cfg: ClientConfig) -> str:
        return cfg.api_key

    with al.record(path):
        assert w(ClientConfig(model="m", api_key=canary)) == canary


@route
def pydantic_secretstr_field(path: Path, canary: str) -> None:
    @al.window("w")
    def w(cfg: SecretConfig) -> str:
        return cfg.model

    with al.record(path):
        assert w(SecretConfig(model="m", key=pydantic.SecretStr(canary))) == "m"


@dataclasses.dataclass
class Login:
    user: str
    password: str


class Session(msgspec.Struct):
    user: str
    session_token: str


@route
def dataclass_field(path: Path, canary: str) -> None:
    @al.window("w")
    def w(login: Login) -> str:
        return login.user

    with al.record(path):
        assert w(Login("bob", canary)) == "bob"


@route
def struct_field(path: Path, canary: str) -> None:
    @al.window("w")
    def w(s: Session) -> str:
        return s.user

    with al.record(path):
        assert w(Session("bob", canary)) == "bob"


@route
def sk_key_in_free_text(path: Path, canary: str) -> None:
    @al.window("w")
    def w(prompt: str) -> int:
        return len(prompt)

    with al.record(path):
        w(f"please use the key sk-{canary} for this call")


@route
def bearer_in_free_text(path: Path, canary: str) -> None:
    @al.window("w")
    def w(note: str) -> None:
        return None

    with al.record(path):
        w(f"curl -H 'Authorization: Bearer {canary}' https://x")


@route
def value_of_a_window_whose_parameter_names_hold_a_stem(path: Path, canary: str) -> None:
    @al.window("w")
    def w(prompt: str, max_tokens: int = 16) -> int:
        return max_tokens

    with al.record(path):
        assert w(f"Authorization: Bearer {canary}") == 16


@route
def default_of_a_window_whose_parameter_names_hold_a_stem(path: Path, canary: str) -> None:
    @al.window("w")
    def w(prompt: str, max_tokens: int = 16,
          endpoint: str = f"https://svc:{canary}@llm.example/v1") -> int:
        return max_tokens

    with al.record(path):
        assert w("hi") == 16


@route
def entry_projection(path: Path, canary: str) -> None:
    @al.window("w", entry=lambda q, cfg: {"q": q, "cfg": cfg})
    def w(q: str, cfg: dict[str, str]) -> str:
        return q

    with al.record(path):
        w("q", {"openai_api_key": canary})


@route
def async_window_argument(path: Path, canary: str) -> None:
    @al.window("w")
    async def w(q: str, api_key: str) -> str:
        return q

    async def main() -> str:
        return await w("q", canary)

    with al.record(path):
        assert asyncio.run(main()) == "q"


# ------------------------------------------------------------------ meta


@route
def record_meta_api_key(path: Path, canary: str) -> None:
    with al.record(path, meta={"api_key": canary, "backbone": "m"}) as run:
        assert run.meta["api_key"] == canary  # the user's own object is untouched


@route
def record_meta_nested_base_url(path: Path, canary: str) -> None:
    with al.record(path, meta={"client": {"base_url": f"https://k:{canary}@h.example/v1"}}):
        pass


# ------------------------------------------------------------------ exits and tools


@route
def exit_dict_with_credential(path: Path, canary: str) -> None:
    @al.window("w")
    def w(q: str) -> dict[str, str]:
        return {"q": q, "access_token": canary}

    with al.record(path):
        assert w("q") == {"q": "q", "access_token": canary}


@route
def exit_string_with_key(path: Path, canary: str) -> None:
    @al.window("w")
    def w() -> str:
        return f"found sk-{canary} in the logs"

    with al.record(path):
        assert canary in w()


@route
def generator_yields(path: Path, canary: str) -> None:
    @al.window("w")
    def w() -> Iterator[dict[str, str]]:
        yield {"password": canary}

    with al.record(path):
        assert list(w()) == [{"password": canary}]


@route
def tool_declared_secret(path: Path, canary: str) -> None:
    @al.tool("fetch", secret=("sig",))
    def fetch(url: str, sig: str) -> str:
        return url

    with al.record(path):
        fetch("u", canary)


@route
def tool_undeclared_token_argument(path: Path, canary: str) -> None:
    @al.tool("fetch")
    def fetch(url: str, token: str) -> str:
        return url

    @al.window("w")
    def w() -> str:
        return fetch("u", token=canary)

    with al.record(path):
        assert w() == "u"


@route
def tool_result_with_credential(path: Path, canary: str) -> None:
    @al.tool("login")
    def login() -> dict[str, str]:
        return {"user": "bob", "refresh_token": canary}

    with al.record(path):
        assert login()["refresh_token"] == canary


# ------------------------------------------------------------------ exceptions


@route
def window_exception_echoing_a_declared_secret(path: Path, canary: str) -> None:
    @al.window("w", secret=("passcode",))
    def w(passcode: str) -> None:
        raise PermissionError(f"passcode {passcode} rejected")

    with al.record(path), pytest.raises(PermissionError, match=canary):
        w(canary)  # the host's exception keeps its message


@route
def window_exception_echoing_an_undeclared_key_argument(path: Path, canary: str) -> None:
    @al.window("w")
    def w(api_key: str) -> None:
        raise ValueError(f"401 Unauthorized: Incorrect API key provided: {api_key}")

    with al.record(path), pytest.raises(ValueError, match=canary):
        w(canary)


@route
def window_exception_with_sk_key(path: Path, canary: str) -> None:
    @al.window("w")
    def w(q: str) -> None:
        raise RuntimeError(f"provider said: invalid key sk-{canary}")

    with al.record(path), pytest.raises(RuntimeError):
        w("q")


@route
def window_exception_with_assignment(path: Path, canary: str) -> None:
    @al.window("w")
    def w(q: str) -> None:
        raise KeyError(f"bad config {{'model': 'm', 'api_key': '{canary}'}}")

    with al.record(path), pytest.raises(KeyError):
        w("q")


@route
def window_exception_with_url_userinfo(path: Path, canary: str) -> None:
    @al.window("w")
    def w(q: str) -> None:
        raise ConnectionError(f"cannot reach postgres://app:{canary}@db:5432/x")

    with al.record(path), pytest.raises(ConnectionError):
        w("q")


@route
def nested_window_exception_echoing_parent_secret(path: Path, canary: str) -> None:
    @al.window("inner")
    def inner(q: str) -> None:
        raise RuntimeError(f"request with {canary} failed")

    @al.window("outer", secret=("passcode",))
    def outer(passcode: str) -> None:
        inner("q")

    with al.record(path), pytest.raises(RuntimeError):
        outer(canary)


@route
def tool_exception_echoing_its_secret(path: Path, canary: str) -> None:
    @al.tool("fetch")
    def fetch(url: str, api_key: str) -> str:
        raise PermissionError(f"key {api_key} has no access to {url}")

    @al.window("w")
    def w() -> str:
        return fetch("u", canary)

    with al.record(path), pytest.raises(PermissionError):
        w()


# ------------------------------------------------------------------ model calls


@route
def llm_request_and_headers(path: Path, canary: str) -> None:
    @al.window("ask")
    def ask() -> None:
        log_llm_call(provider="openai", model="m",
                     request={"messages": [{"role": "user", "content": "hi"}],
                              "api_key": canary, "max_tokens": 16},
                     headers={"Authorization": f"Bearer {canary}", "User-Agent": "x"},
                     response={"choices": []})

    with al.record(path):
        ask()


@route
def llm_error_echoing_the_key(path: Path, canary: str) -> None:
    @al.window("ask")
    def ask() -> None:
        log_llm_call(provider="openai", model="m",
                     request={"messages": [], "api_key": canary},
                     response=None,
                     error=PermissionError(f"Error 401: Incorrect API key provided: {canary}"))

    with al.record(path):
        ask()


@route
def llm_response_echo(path: Path, canary: str) -> None:
    with al.record(path):
        log_llm_call(provider="p", model="m", request={"messages": []},
                     response={"debug": {"echo": {"authorization": canary}}})


@route
def llm_base_url_in_request(path: Path, canary: str) -> None:
    with al.record(path):
        log_llm_call(provider="vllm", model="m",
                     request={"base_url": f"http://u:{canary}@gpu-box:8000/v1"},
                     response={"choices": []})


@pytest.fixture(params=[False, True], ids=["no-otel", "otel"])
def spans(request: pytest.FixtureRequest) -> Iterator[Any]:
    if not request.param:
        yield None
        return
    with capture_spans() as captured:
        yield captured


def test_there_are_at_least_thirty_routes() -> None:
    assert len(ROUTES) >= 30


@pytest.mark.parametrize("name", sorted(ROUTES))
def test_no_canary_reaches_the_trace_or_a_span(name: str, spans: Any, tmp_path: Path) -> None:
    canary = f"Zq9{sum(map(ord, name)) % 997:03d}CanaryVal7x"
    path = tmp_path / "run.zst"
    ROUTES[name](path, canary)
    data = decompressed(path)
    assert canary.encode() not in data, f"route {name!r} leaked into the trace"
    if spans is not None:
        # every window is a span (routes without a window have none to check); the run's
        # root span, tool and model spans are checked for the canary as well
        windows = [s for s in spans.spans if s.name.startswith("agentlog.window.")]
        assert len(windows) == len(al.read(path).windows())
        assert canary not in span_text(spans), f"route {name!r} leaked into a span"
    report = al.verify(path)
    assert report.ok, report


def test_sampling_parameters_and_usage_counts_survive(tmp_path: Path) -> None:
    path = tmp_path / "run.zst"
    request = {"model": "m", "messages": [{"role": "user", "content": "hi"}],
               "max_tokens": 64, "max_completion_tokens": 32, "max_new_tokens": 8,
               "top_logprobs": 5, "logprobs": True, "temperature": 0.7, "top_p": 0.9,
               "n": 2, "stop": ["\n"], "eos_token_id": 2, "skip_special_tokens": False,
               "stop_token_ids": [2, 3], "logit_bias": {"50256": -100}}
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
             "input_tokens": 11, "output_tokens": 7, "cache_read_input_tokens": 3,
             "cache_creation_input_tokens": 1,
             "completion_tokens_details": {"reasoning_tokens": 2},
             "prompt_tokens_details": {"cached_tokens": 3}}
    with al.record(path):
        log_llm_call(provider="openai", model="m", request=request,
                     response={"choices": [], "usage": usage},
                     input_tokens=11, output_tokens=7)
    (call,) = al.read(path).llm_calls()
    assert decode(call.request) == request
    assert decode(call.response)["usage"] == usage


def test_a_window_with_token_count_parameters_keeps_them(tmp_path: Path) -> None:
    @al.window("gen")
    def gen(prompt: str, max_tokens: int = 16, total_tokens: int = 0) -> int:
        return max_tokens

    path = tmp_path / "run.zst"
    with al.record(path):
        assert gen("hi", 64, 5) == 64
    (view,) = al.read(path).windows("gen")
    assert decode(view.entry_bytes) == {"prompt": "hi", "max_tokens": 64, "total_tokens": 5}
