"""The web pages: ``/`` and one path per page, plus ``/static`` for their scripts and styles."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

from omnivox.web import PAGE_PATHS, PAGES, STATIC_DIR

# The pages load ES modules by plain names (no build step, no content hashes), so a browser must
# revalidate them (a cheap 304 on the ETag) or it may mix modules of two versions after an upgrade.
REVALIDATE = {"Cache-Control": "no-cache"}


class RevalidatedFiles(StaticFiles):
    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(REVALIDATE)
        return response


def mount_pages(app: FastAPI) -> None:
    app.mount("/static", RevalidatedFiles(directory=STATIC_DIR), name="static")

    def page(name: str) -> Callable[[], Awaitable[FileResponse]]:
        async def serve_page() -> FileResponse:
            path = STATIC_DIR / f"{name}.html"
            if not path.is_file():
                raise HTTPException(
                    404, detail={"code": "not_found", "message": f"page {name} is not built yet"}
                )
            return FileResponse(path, media_type="text/html", headers=REVALIDATE)

        return serve_page

    app.add_api_route("/", page("index"), include_in_schema=False)
    for name in PAGES:
        app.add_api_route(f"/{name}", page(name), include_in_schema=False)
    for path, name in PAGE_PATHS.items():  # the page reads the rest of its path itself
        app.add_api_route(path, page(name), include_in_schema=False)
