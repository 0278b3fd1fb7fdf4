"""The remote services a worker's models depend on, checked at start and then every little while.

A worker whose LLM, ASR or TTS is another server (``--llm-url``, ``--asr-url``, ``--tts-url``)
answers nobody well when that server is down: the first caller would hear nothing. So the worker
asks each server for its models (``GET {url}/models``, the OpenAI-compatible probe) when it starts
and every ``interval_s`` after; any HTTP answer means the server is there. A server that cannot be
reached is logged once (a warning, and again when it is back) and reported in the worker's
``/health`` as a problem, which the gateway's ``/health`` shows as ``degraded`` with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import httpx

from omnivox.core.config import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Dependency:
    role: str  # llm | asr | tts
    url: str  # the OpenAI-compatible base URL (".../v1")
    api_key: str | None = None

    @property
    def probe_url(self) -> str:
        return self.url.rstrip("/") + "/models"


def dependencies(settings: Settings) -> list[Dependency]:
    """The servers this worker's models use, as its settings name them."""
    out = []
    if settings.llm_url and settings.llm in ("auto", "openai"):
        out.append(Dependency("llm", settings.llm_url, settings.llm_api_key))
    if settings.asr_url and settings.asr == "openai":
        out.append(Dependency("asr", settings.asr_url, settings.asr_api_key))
    if settings.tts_url and settings.tts == "openai":
        out.append(Dependency("tts", settings.tts_url, settings.tts_api_key))
    return out


async def probe(client: httpx.AsyncClient, dep: Dependency) -> str | None:
    """None when the server answers (whatever it says), else why it cannot be reached."""
    headers = {"Authorization": f"Bearer {dep.api_key}"} if dep.api_key else {}
    try:
        resp = await client.get(dep.probe_url, headers=headers)
    except httpx.HTTPError as exc:
        return f"the {dep.role} server {dep.url} cannot be reached ({type(exc).__name__}: {exc})"
    if resp.status_code >= 500:
        return f"the {dep.role} server {dep.url} answers {resp.status_code}"
    return None


class DependencyMonitor:
    def __init__(self, deps: list[Dependency], interval_s: float = 30.0, timeout_s: float = 3.0) -> None:
        self.deps = deps
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.problems: dict[str, str] = {}  # role -> why its server cannot be used now

    async def check(self, client: httpx.AsyncClient) -> None:
        found = await asyncio.gather(*(probe(client, d) for d in self.deps))
        for dep, problem in zip(self.deps, found, strict=True):
            before = self.problems.get(dep.role)
            if problem is None:
                self.problems.pop(dep.role, None)
                if before is not None:
                    log.info("the %s server %s is reachable again", dep.role, dep.url)
            else:
                self.problems[dep.role] = problem
                if before is None:
                    log.warning("%s: replies that need it fail until it is back", problem)

    async def run(self) -> None:
        if not self.deps:
            return
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            while True:
                await self.check(client)
                await asyncio.sleep(self.interval_s)
