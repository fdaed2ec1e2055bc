"""`bringup serve`: the runner behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

import errno
import socket
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from bringup.cli.common import JsonOption, VerboseOption
from bringup.cli.engine_flags import ENGINE_OPTIONS, takes_engine_options
from bringup.cli.output import console, print_json
from bringup.errors import BringupError
from bringup.log import configure_logging, get_logger
from bringup.runner.engine.options import BATCH, CHAT, CONTEXT, CPU_FALLBACK, MODEL, TARGET, EngineOptions
from bringup.serve.config import ServerConfig
from bringup.serve.http.body import MIB
from bringup.terminal_text import markup_safe, shown

if TYPE_CHECKING:
    from rich.table import Table

log = get_logger("serve")

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
DEFAULTS = ServerConfig()


@takes_engine_options(MODEL, TARGET, CPU_FALLBACK, BATCH, CONTEXT, CHAT)
def command(
    options: EngineOptions = ENGINE_OPTIONS,
    host: Annotated[str, typer.Option(help="Address to bind. The default serves this machine only; "
                                      "binding wider without --api-key is warned about.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one).", min=0, max=65535)] = 8000,
    api_key: Annotated[Optional[str], typer.Option("--api-key", envvar="BRINGUP_API_KEY",
                                                   help="Require 'Authorization: Bearer <key>' on /v1, "
                                                   "/tokenize and /detokenize (else 401).")] = None,
    max_queue: Annotated[int, typer.Option(help="Most generation requests held at once (running and "
                                           "waiting); more get 429.", min=1)] = DEFAULTS.max_queue,
    served_model_name: Annotated[Optional[str], typer.Option(help="Model name clients must send (default: "
                                                              "the model's own).")] = None,
    drain_timeout: Annotated[float, typer.Option(help="Seconds SIGTERM waits for in-flight requests; those "
                                                 "still running then end with an error and the exit status is "
                                                 "1.", min=0.0)] = DEFAULTS.drain_timeout_s,
    stream_write_timeout: Annotated[float, typer.Option(help="Seconds a stream may wait on a client that reads "
                                                        "nothing; then its request is aborted and its queue slot "
                                                        "freed.", min=0.001)] = DEFAULTS.stream_write_timeout_s,
    max_body_mb: Annotated[float, typer.Option(help="Largest request body in MiB, whatever its transfer "
                                               "encoding; larger ones get 413 and are not read further.",
                                               min=0.001)] = DEFAULTS.max_body_bytes / MIB,
    header_timeout: Annotated[float, typer.Option(help="Seconds a request's line and headers may take to "
                                                  "arrive, from the connection opening (or a kept-alive one's "
                                                  "first byte); slower ones get 408 and are closed.",
                                                  min=0.01)] = DEFAULTS.header_timeout_s,
    body_timeout: Annotated[float, typer.Option(help="Seconds a request body may take to arrive after its "
                                                "headers; slower ones get 408 and are closed.",
                                                min=0.01)] = DEFAULTS.body_timeout_s,
    max_connections: Annotated[int, typer.Option(help="Most open client connections (lowered to what ulimit -n "
                                                 "allows). Past it the longest-silent connection is closed; "
                                                 "if every one has a request in progress, the new one gets 503.",
                                                 min=1)] = DEFAULTS.max_connections,
    template_timeout: Annotated[float, typer.Option(help="Seconds one rendering of the model's chat template may "
                                                    "take; past it (or past its output and value-size limits) "
                                                    "the request gets 400.", min=0.01)] = DEFAULTS.template_timeout_s,
    reconfirm: Annotated[bool, typer.Option(help="When the start's timings ran on a busy machine (or a candidate lost "
                                                 "only inside the noise), re-time the plan while no request runs "
                                                 "and switch only on clean timings; shown at /v1/plan.")] = True,
    json: JsonOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Serve a model over an OpenAI-compatible HTTP API, planned from the device's profile.

    Prints the execution plan (each setting, the value chosen and the profile evidence behind it),
    then serves /v1/completions, /v1/chat/completions, /v1/models, /v1/plan, /health and /metrics.
    SIGTERM (or Ctrl-C) stops admission, lets in-flight requests finish, and exits 0; requests still
    running at --drain-timeout end with an error (each stream gets an error event and [DONE]) and the
    exit status is 1.

    Example: bringup serve --port 8000, then
    curl localhost:8000/v1/completions -d '{"model": "bringup-builtin-llama-2.5m", "prompt": "Hi", "max_tokens": 8}'
    """
    configure_logging(verbose)
    check_served_model_name(served_model_name)
    if host not in LOOPBACK and not api_key:
        log.warning("binding %s without --api-key: anyone who can reach this address can use the server", host)
    sock = bind(host, port)
    from bringup.runner.engine.device_loss import DeviceLostError
    from bringup.runner.engine.engine import LLMEngine
    from bringup.serve.app import create_app
    from bringup.serve.engine_thread import EngineThread
    from bringup.serve.http.runtime import make_server
    from bringup.serve.plan_info import profile_path_in_use

    engine_thread = EngineThread()  # builds the engine and runs every step of it (engine_thread.py says why)
    engine = engine_thread.call(LLMEngine.create, options)
    profile_used = profile_path_in_use(engine, options.profile_path)
    config = ServerConfig(served_model_name=served_model_name, api_key=api_key, max_queue=max_queue,
                          drain_timeout_s=drain_timeout, stream_write_timeout_s=stream_write_timeout,
                          max_body_bytes=int(max_body_mb * 1024 * 1024), profile_path=profile_used,
                          header_timeout_s=header_timeout, body_timeout_s=body_timeout,
                          max_connections=max_connections, template_timeout_s=template_timeout,
                          reconfirm_at_idle=reconfirm)
    app = create_app(engine, config, engine_thread)
    ctx = app.state.ctx
    bound_host, bound_port = sock.getsockname()[:2]
    url = f"http://{bound_host if ':' not in bound_host else f'[{bound_host}]'}:{bound_port}"
    if json:
        print_json("serve", {"url": url, "model": ctx.model_name, "plan": _plan_dict(engine)})
    else:
        console.print(plan_table(engine, ctx.model_name))
        console.print(f"serving [bold]{markup_safe(ctx.model_name)}[/] on {url}  (OpenAI API at {url}/v1; "
                      f"{'API key required' if api_key else 'no API key'}; Ctrl-C or SIGTERM drains and stops)")
    server = make_server(ctx, app, bound_host, bound_port, log_level="info" if verbose else "warning")
    server.run(sockets=[sock])
    if ctx.async_engine.device_loss is not None:
        raise DeviceLostError(ctx.async_engine.device_loss.message)
    if server.requests_cut:
        log.error("server stopped with %d request(s) cut at the drain timeout (listed above); exit status 1",
                  len(server.requests_cut))
        raise typer.Exit(1)
    log.info("server stopped")


def check_served_model_name(name: str | None) -> None:
    """Before the model loads: a name clients must send cannot hold control characters (markup is fine: it is
    printed escaped)."""
    if name is not None and (not name or shown(name) != name):
        what = "is empty" if not name else f"holds control characters ({shown(name)})"
        raise BringupError(f"--served-model-name {what}: clients must send it as the model name; give a "
                           "printable name")


def bind(host: str, port: int) -> socket.socket:
    """Bind the listening socket here, so a busy port is a one-line error rather than a traceback."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise BringupError(f"cannot resolve --host {host!r}: {exc}; give an IP address such as 127.0.0.1") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        why = "it is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
        raise BringupError(f"cannot listen on {host}:{port}: {why}; pick another --port (0 = any free one)") \
            from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _plan_dict(engine: Any) -> dict:
    from bringup.serve.plan_info import plan_dict

    return plan_dict(engine)


def plan_table(engine: Any, model_name: str) -> Table:
    """The start-up plan: each setting, the value chosen, and the profile evidence that chose it."""
    from rich.table import Table

    plan = engine.plan
    table = Table(title=f"execution plan for {markup_safe(model_name)} on {markup_safe(getattr(plan, 'device', '?'))} "
                        f"(profile: {markup_safe(getattr(plan, 'profile', '?'))})", title_justify="left")
    table.add_column("setting", style="bold")
    table.add_column("value")
    table.add_column("evidence", overflow="fold")
    if hasattr(plan, "rows"):
        rows = plan.rows()
    else:
        rows = [(k, str(v.get("value") if isinstance(v, dict) else v),
                 str(v.get("evidence", "")) if isinstance(v, dict) else "") for k, v in _plan_dict(engine).items()]
    for setting, value, evidence in rows:  # evidence quotes the profile: escaped, as any outside text
        table.add_row(markup_safe(setting), markup_safe(value), markup_safe(evidence))
    for warning in getattr(plan, "warnings", []) or []:
        table.add_row("[yellow]warning[/]", "", markup_safe(warning))
    return table
