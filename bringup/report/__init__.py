"""HTML / Markdown rendering of profiles and their baselines: `bringup report`, and the page `bringup all` writes."""

from bringup.report.write import default_report_path, render_report, write_report

__all__ = ["default_report_path", "render_report", "write_report"]
