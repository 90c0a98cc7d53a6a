"""The MLflow UI that ``python -m emergence.ui`` serves: MLflow's own server app
(``mlflow.server.fastapi_app``), whose pages open in the "Model training" view in a browser that
has not chosen one (MLflow lands on its GenAI pages otherwise: emergence/common/mlflow_ui.py).

Its HTML page first sets the sidebar's switch to ``machine_learning`` *where the browser has no
value yet*, so a choice made in the sidebar stands. Registered as the MLflow app plug-in
``emergence`` (pyproject's ``mlflow.app`` entry point): ``mlflow server --app-name emergence``.
"""

from __future__ import annotations

from emergence.common.mlflow_ui import WORKFLOW_STORAGE_KEY, WORKFLOW_TRAINING
from mlflow.server.fastapi_app import app as mlflow_app  # (reads the store from the server's environment)

#: Run before the UI's scripts: the "Model training" switch where the browser has none.
SCRIPT = (f"<script>try{{if(!localStorage.getItem('{WORKFLOW_STORAGE_KEY}'))"
          f"localStorage.setItem('{WORKFLOW_STORAGE_KEY}','\"{WORKFLOW_TRAINING}\"')}}catch(e){{}}</script>")


def with_switch(html: bytes) -> bytes:
    """The UI's page with :data:`SCRIPT` at the start of its ``<head>`` (unchanged without one)."""
    marker = b"<head>"
    return html.replace(marker, marker + SCRIPT.encode(), 1) if marker in html else html


class ModelTrainingView:
    """ASGI middleware: responses of HTML pages get :func:`with_switch`; everything else passes."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") != "GET":
            return await self.app(scope, receive, send)
        held, body = [], []  # an HTML response's start, held until its body is whole

        async def capture(message):
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers") or [])
                if headers.get(b"content-type", b"").startswith(b"text/html"):
                    held.append(message)
                    return
            if not held or message["type"] != "http.response.body":
                return await send(message)
            body.append(message.get("body", b""))
            if not message.get("more_body"):
                page = with_switch(b"".join(body))
                headers = [(k, str(len(page)).encode() if k == b"content-length" else v)
                           for k, v in held[0].get("headers") or []]
                await send({"type": "http.response.start", "status": held[0]["status"], "headers": headers})
                await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, capture)


app = ModelTrainingView(mlflow_app)
