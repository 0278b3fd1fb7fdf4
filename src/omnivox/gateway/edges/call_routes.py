"""The HTTP side of a session protocol: ephemeral client keys and WebRTC calls.

For each protocol that serves them (``client_secrets``, ``media``), under its path:

- ``POST {path}/client_secrets``: with the long-lived client key, mint a key good for one session
  (``{expires_after: {anchor: "created_at", seconds}, session}`` -> ``{value, expires_at, session}``);
- ``POST {path}/calls``: an SDP offer (``application/sdp``, or multipart ``sdp`` + optional
  ``session`` JSON, as the openai SDK sends it) -> 201 with the SDP answer and ``Location`` naming
  the call; the call's session runs like a WebSocket's (``edges.calls``);
- ``POST {path}/calls/{call_id}/hangup``: end a call (passed on to the gateway holding it, when
  that is another one on the same store).

Errors are JSON ``{"error": {type, code, message, param}}``, as OpenAI's HTTP API words them.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from omnivox.core.errors import (
    GatewayDraining,
    InvalidJson,
    InvalidMessage,
    MessageTooLarge,
    OmnivoxError,
    Unauthorized,
)
from omnivox.gateway.auth import allowed, offered_key, origin_allowed
from omnivox.gateway.bodies import read_body
from omnivox.gateway.context import GatewayContext
from omnivox.gateway.edges.calls import Call
from omnivox.gateway.edges.client import authorize, authorize_control, serve_session
from omnivox.gateway.edges.client_keys import digest, is_ephemeral
from omnivox.gateway.edges.elsewhere import pass_on
from omnivox.protocol.spec import WireProtocol
from omnivox.protocol.wire import load_json

MAX_SDP_BYTES = 64 * 1024
_FORM_OVERHEAD = 16 * 1024  # multipart boundaries and part headers around an offer's two parts
DEFAULT_TTL_S = 600


def http_error(err: OmnivoxError) -> JSONResponse:
    kind = "server_error" if err.http_status >= 500 else "invalid_request_error"
    param = err.details.get("param")
    body = {"type": kind, "code": err.code, "message": err.message, "param": param}
    return JSONResponse({"error": body}, status_code=err.http_status)


def mount_http(app: FastAPI, protocol: WireProtocol, ctx: GatewayContext) -> None:
    if protocol.client_secrets:

        async def client_secrets(request: Request) -> Response:
            try:
                return JSONResponse(await _mint(request, protocol, ctx))
            except OmnivoxError as err:
                ctx.metrics.error(err.code)
                return http_error(err)

        app.add_api_route(f"{protocol.path}/client_secrets", client_secrets, methods=["POST"])

    if protocol.media is not None:

        async def calls(request: Request) -> Response:
            try:
                return await _call(request, protocol, ctx)
            except OmnivoxError as err:
                ctx.metrics.error(err.code)
                return http_error(err)

        async def hangup(call_id: str, request: Request) -> Response:
            try:
                if not origin_allowed(ctx.settings, request.headers):
                    raise Unauthorized("this origin may not use this gateway")
                authorize_control(ctx, offered_key(request.headers), call_id)
                owner = None if ctx.calls.held(call_id) else await ctx.peers.call_owner(call_id)
                call = None if owner is not None else ctx.calls.find(call_id)
            except OmnivoxError as err:
                return http_error(err)
            if owner is not None:  # another gateway holds the call: it hangs up there
                passed = await pass_on(owner, "POST", request.url.path, _forwarded(request))
                return Response(passed.content, status_code=passed.status_code)
            assert call is not None
            call.end("hung up")
            return Response(status_code=200)

        app.add_api_route(f"{protocol.path}/calls", calls, methods=["POST"])
        app.add_api_route(f"{protocol.path}/calls/{{call_id}}/hangup", hangup, methods=["POST"])


def _forwarded(request: Request) -> dict[str, str]:
    """What a request passed on to another gateway keeps of this one's headers: its key (the origin
    was checked here; gateway to gateway is no browser's request)."""
    return {k: v for k, v in request.headers.items() if k.lower() == "authorization"}


def check_client(request: Request, ctx: GatewayContext) -> None:
    """The long-lived client key (an ephemeral key cannot mint keys or end calls)."""
    if not origin_allowed(ctx.settings, request.headers):
        raise Unauthorized("this origin may not use this gateway")
    key = offered_key(request.headers)
    if is_ephemeral(key) or not allowed(ctx.settings, "client", key):
        raise Unauthorized("this needs the client key (Authorization: Bearer <key>)")


async def json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object (empty body: ``{}``), read no further than ``http_body_max_bytes``."""
    raw = await read_body(request, request.app.state.ctx.settings.http_body_max_bytes)
    if not raw.strip():
        return {}
    try:
        body = load_json(raw)
    except InvalidJson:
        raise InvalidMessage("the body is not JSON") from None
    if not isinstance(body, dict):
        raise InvalidMessage("the body must be a JSON object")
    return body


async def _mint(request: Request, protocol: WireProtocol, ctx: GatewayContext) -> dict[str, Any]:
    check_client(request, ctx)
    body = await json_body(request)
    expires = body.get("expires_after") or {}
    if not isinstance(expires, dict) or expires.get("anchor", "created_at") != "created_at":
        raise InvalidMessage('expires_after.anchor must be "created_at"', param="expires_after.anchor")
    seconds = expires.get("seconds", DEFAULT_TTL_S)
    longest = ctx.settings.client_secret_max_s
    if not isinstance(seconds, int) or isinstance(seconds, bool) or not 10 <= seconds <= longest:
        raise InvalidMessage(f"expires_after.seconds must be 10 to {longest}", param="expires_after.seconds")
    session = body.get("session")
    if session is not None and not isinstance(session, dict):
        raise InvalidMessage("session must be an object", param="session")
    largest = ctx.settings.client_secret_session_bytes
    if session is not None and len(json.dumps(session)) > largest:
        raise MessageTooLarge(f"a key's session is at most {largest} bytes of JSON", param="session")
    effective = protocol.session_defaults(session or {})
    owner = request.client.host if request.client else "unknown"
    key, grant = await ctx.client_keys.mint(seconds, session or None, owner)
    return {"value": key, "expires_at": int(grant.expires_at), "session": effective}


async def _offer(request: Request, session_limit: int) -> tuple[str, dict[str, Any] | None]:
    """The SDP offer and the optional session of a call request, each read within its limit."""
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        await read_body(request, MAX_SDP_BYTES + session_limit + _FORM_OVERHEAD)
        form = await request.form()  # parses the body read above
        sdp, session = form.get("sdp"), form.get("session")
        if sdp is not None and not isinstance(sdp, str):
            sdp = (await sdp.read()).decode("utf-8", "replace")
        if session is not None and not isinstance(session, str):
            session = (await session.read()).decode("utf-8", "replace")
        parsed = None
        if session:
            try:
                parsed = load_json(session)
            except InvalidJson:
                raise InvalidMessage("session is not JSON", param="session") from None
        if not isinstance(parsed, dict | None):
            raise InvalidMessage("session must be an object", param="session")
        if not sdp:
            raise InvalidMessage("the sdp part is missing", param="sdp")
        return sdp, parsed
    raw = await read_body(request, MAX_SDP_BYTES)
    return raw.decode("utf-8", "replace"), None


async def _call(request: Request, protocol: WireProtocol, ctx: GatewayContext) -> Response:
    settings = ctx.settings
    if not origin_allowed(settings, request.headers):
        raise Unauthorized("this origin may not use this gateway")
    key = offered_key(request.headers)
    if is_ephemeral(key):
        assert key is not None
        await ctx.client_keys.check(key)  # spent only once the offer is answered
    elif not allowed(settings, "client", key):
        raise Unauthorized("a valid API key is required (Authorization: Bearer <key>)")
    sdp, session = await _offer(request, settings.http_body_max_bytes)
    if len(sdp) > MAX_SDP_BYTES:
        raise InvalidMessage(f"the SDP offer is larger than {MAX_SDP_BYTES} bytes", param="sdp")
    if session is not None:
        protocol.session_defaults(session)
    if ctx.draining:
        raise GatewayDraining("this gateway is stopping; call again (another one answers)")
    with ctx.calls.reserve("webrtc", settings.webrtc_max_calls):  # a place, until the call holds it
        held = contextlib.AsyncExitStack()
        await held.enter_async_context(ctx.limits.hold(request.client.host if request.client else "unknown"))
        assert protocol.media is not None
        query = dict(request.query_params)  # e.g. omnivox_events, intent
        call = Call(
            protocol.media,
            settings.webrtc_connect_timeout_s,
            settings.webrtc_host_addresses,
            protocol.withheld(query),
        )
        try:
            answer = await call.answer(sdp)
            grant = await authorize(ctx, key)
        except BaseException:
            await held.aclose()
            await call.pc.close()
            raise
        defaults = {**((grant.session if grant else None) or {}), **(session or {})}
        preamble = protocol.media.preamble(defaults)
        headers = dict(request.headers)
        host = request.client.host if request.client else None

        async def run_session(c: Call) -> None:
            async with held:
                await serve_session(
                    c, protocol, ctx, c.id, query, headers, preamble, host, c.media_connected, bridge=True
                )

        # an ephemeral key controls the call it opened (a sideband, a hang-up), and no other
        opened_with = digest(key) if key is not None and is_ephemeral(key) else None
        ctx.calls.start(call, run_session, opened_with)
    location = f"{protocol.path}/calls/{call.id}"
    return Response(answer, status_code=201, media_type="application/sdp", headers={"Location": location})
