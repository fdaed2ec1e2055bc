"""The "Deploy with" section: per engine, the command `bringup export` gives and each setting's reason."""

from __future__ import annotations

from bringup.report.html.parts import Html, e, not_measured, paragraph, section, table
from bringup.report.sections.deploy import DeployView

INTRO = ("The launch configuration `bringup export --engine E` derives from this profile's evidence (the model is "
         "the one `bringup tune` recorded last, or a placeholder); `bringup export` shows the profile entries "
         "behind each line.")


def engine_block(view: DeployView) -> Html:
    if view.refused:
        return Html(f"<h3>{e(view.engine)}</h3>") + paragraph(f"no configuration: {view.refused}", "warn")
    rows = [[r.name, r.value, r.reason] for r in view.rows]
    classes = ["left-out" if r.value == "left out" else "" for r in view.rows]
    return Html(f"<h3>{e(view.engine)}</h3>" + paragraph(f"flags as {view.version} spells them; model {view.model}",
                                                          "note")
                + f"<pre><code>{e(view.command)}</code></pre>"
                + table(f"deploy-{e(view.engine.replace('.', '-'))}", ["flag or variable", "value", "why"], rows,
                        classes)
                + "".join(paragraph(n, "note") for n in view.notes))


def deploy_section(views: list[DeployView]) -> Html:
    if not views:
        return section("deploy", "Deploy with", not_measured("deploy", "Run `bringup all`."))
    return section("deploy", "Deploy with", paragraph(INTRO) + Html("".join(engine_block(v) for v in views)))
