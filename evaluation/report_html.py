"""The HTML report: one self-contained file a browser opens offline.

Inline CSS and an inline SVG chart; no script, no font, no image, nothing fetched. Every
text of the report (transcripts and judge replies are model output) goes through
`html.escape`, so a transcript holding markup shows it as text. The page is also
well-formed XML (void elements closed), which keeps it easy to check and to post-process.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from core.domain.clarifying import option_label
from evaluation.report_chart import score_chart
from evaluation.report_table import (
    KNOWLEDGE_HEADERS,
    NONE,
    OVERALL_HEADERS,
    QUESTION_HEADERS,
    early_text,
    knowledge_cells,
    knowledge_text,
    overall_cells,
    percent,
    question_cells,
    questions_text,
    scenario_repeats,
    score_text,
    winner_text,
)
from evaluation.results import Judgement, Pairwise, Report, RunResult, SeenMessage
from evaluation.summary import Summary, summarise

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  margin: 2rem auto; max-width: 1100px; padding: 0 1rem; color: #1d232b; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #d5dae0; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border: 1px solid #d5dae0; padding: .3rem .55rem; text-align: right; }
th { background: #f2f4f7; } td.l, th.l { text-align: left; }
.failed { color: #b42318; font-weight: 600; }
.meta td { text-align: left; }
details { border: 1px solid #d5dae0; border-radius: 6px; margin: .5rem 0; padding: .3rem .7rem; }
details details { margin-left: .5rem; }
summary { cursor: pointer; font-weight: 600; }
.turn { margin: .45rem 0; padding: .4rem .6rem; border-radius: 6px; background: #f6f8fa; }
.turn.bot { background: #eef4fb; border-left: 3px solid #2f6db3; }
.who { font-size: .8rem; color: #57606a; font-weight: 600; }
.text { white-space: pre-wrap; overflow-wrap: anywhere; }
ul.options { margin: .3rem 0; font-size: .9rem; }
.judge { background: #fff8e6; border-left: 3px solid #b8860b; padding: .4rem .6rem; }
.chart .grid { stroke: #d5dae0; } .chart .tick { font-size: 11px; text-anchor: middle; }
.chart .name { font-size: 13px; text-anchor: end; } .chart .note { font-size: 12px; }
"""


def write_html(report: Report, path: str | Path, *, summary: Summary | None = None) -> None:
    Path(path).write_text(render_html(report, summary=summary), encoding="utf-8")


def render_html(report: Report, *, summary: Summary | None = None) -> str:
    summary = summary if summary is not None else summarise(report)
    body = [
        "<h1>Consultation quality report</h1>",
        _meta(report),
        "<h2>Score distribution</h2>",
        "<p>One dot per judged run; box: quartiles and median; bar below: mean with its "
        "bootstrap 95% interval. Runs the judge could not score are counted, not drawn.</p>",
        score_chart(report, summary),
        "<h2>Overall</h2>",
        _overall(summary),
        "<h3>Questions</h3><p>Questions per clarifying round (a round asked in text counts "
        "its question marks), the share of rounds asked as structured replies, the share of "
        "questions with options the user answered by choosing one, early stops (of which the "
        "model said it knew enough), and early stops as the scenarios expect.</p>",
        _table(list(QUESTION_HEADERS), [question_cells(v) for v in summary.variants]),
        _knowledge(summary),
        _pairs(summary),
        "<h2>Per scenario</h2>",
        _per_scenario(report, summary),
        "<h2>Transcripts</h2>",
        _transcripts(report, summary),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"/>'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>'
        f"<title>Consultation quality report {_e(report.started_at)}</title>"
        f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>\n"
    )


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _row(cells: list[str], *, header: bool = False, left: int = 1) -> str:
    tag = "th" if header else "td"
    out = []
    for i, cell in enumerate(cells):
        classes = ["l"] if i < left else []
        if cell in ("judge failed", "error"):
            classes.append("failed")
        attr = f' class="{" ".join(classes)}"' if classes else ""
        out.append(f"<{tag}{attr}>{_e(cell)}</{tag}>")
    return f"<tr>{''.join(out)}</tr>"


def _table(headers: list[str], rows: list[list[str]], *, left: int = 1) -> str:
    lines = [_row(headers, header=True, left=left)] + [_row(r, left=left) for r in rows]
    return f"<table>{''.join(lines)}</table>"


def _meta(report: Report) -> str:
    rows = [
        ["Started", report.started_at],
        ["Seed", str(report.seed)],
        ["Repeats", str(report.repeats)],
        ["Variants", ", ".join(report.variants)],
        *[[f"Variant {name}", described] for name, described in report.variant_settings.items()],
        ["Scenarios", str(len(report.scenarios))],
    ] + [[f"Model ({role})", name] for role, name in report.models.items()]
    return '<table class="meta">' + "".join(_row(r, left=2) for r in rows) + "</table>"


def _overall(summary: Summary) -> str:
    return _table(list(OVERALL_HEADERS), [overall_cells(v) for v in summary.variants])


def _knowledge(summary: Summary) -> str:
    if all(v.knowledge is None for v in summary.variants):
        return ""
    return (
        "<h3>Knowledge</h3><p>Over the knowledge scenarios' finished runs: the needed facts "
        "whose passage the final answer was given (hit rate at KNOWLEDGE_TOP_K) and the ones "
        "it states; the cited labels whose passage holds a needed fact; the clarifying "
        "questions asking for a fact a passage given to that round held; the judge's mean "
        "groundedness (claims about the operator supported by the excerpts or said to be "
        "not covered).</p>"
        + _table(list(KNOWLEDGE_HEADERS), [knowledge_cells(v) for v in summary.variants])
    )


def _pairs(summary: Summary) -> str:
    if not summary.pairs:
        return ""
    headers = ["A", "B", "A wins", "B wins", "Ties", "Judge failures", "Win rate of A"]
    rows = [
        [
            p.variant_a,
            p.variant_b,
            str(p.wins_a),
            str(p.wins_b),
            str(p.ties),
            str(p.failures),
            percent(p.win_rate_a),
        ]
        for p in summary.pairs
    ]
    return (
        "<h3>Pairwise</h3><p>The judge saw both final answers, in random order, and picked "
        "the better one.</p>" + _table(headers, rows, left=2)
    )


def _per_scenario(report: Report, summary: Summary) -> str:
    variants = [v.variant for v in summary.variants]
    headers = ["Scenario", "Rep"] + [f"Score {v}" for v in variants]
    headers += [f"Better: {p.variant_a} vs {p.variant_b}" for p in summary.pairs]
    knowledge = any(r.knowledge is not None for r in report.results)
    headers += [f"Rounds ({' · '.join(variants)})", "Questions"]
    headers += ["Knowledge"] * knowledge + ["Tokens in/out", "Time"]
    results = _results(report)
    pairwise = _pairwise(report)
    rows = []
    for scenario, repeat in scenario_repeats(report):
        runs = [results.get((scenario, repeat, v)) for v in variants]
        row = [scenario, str(repeat + 1)] + [score_text(r) for r in runs]
        row += [
            winner_text(pairwise.get((scenario, repeat, p.variant_a, p.variant_b)))
            for p in summary.pairs
        ]
        row += [
            " · ".join(_rounds(r) for r in runs),
            " · ".join(NONE if r is None else questions_text(r) for r in runs),
        ]
        if knowledge:
            row.append(" · ".join(NONE if r is None else knowledge_text(r) for r in runs))
        row += [
            " · ".join(NONE if r is None else f"{r.tokens_in}/{r.tokens_out}" for r in runs),
            " · ".join(NONE if r is None else f"{r.seconds:.1f} s" for r in runs),
        ]
        rows.append(row)
    return _table(headers, rows)


def _rounds(r: RunResult | None) -> str:
    if r is None:
        return NONE
    early = early_text(r)
    return f"{r.rounds_used}/{r.max_rounds}" + ("" if early == NONE else f" {early}")


def _transcripts(report: Report, summary: Summary) -> str:
    variants = [v.variant for v in summary.variants]
    results = _results(report)
    out = []
    for scenario, repeat in scenario_repeats(report):
        runs = [r for v in variants if (r := results.get((scenario, repeat, v))) is not None]
        scores = " · ".join(f"{r.variant} {score_text(r)}" for r in runs)
        inner = [
            _pair_block(p)
            for p in report.pairwise
            if (p.scenario_id, p.repeat) == (scenario, repeat)
        ]
        inner += [_run_block(r) for r in runs]
        out.append(
            f"<details><summary>{_e(scenario)} · repeat {repeat + 1} — {_e(scores)}</summary>"
            f"{''.join(inner)}</details>"
        )
    return "".join(out)


def _pair_block(p: Pairwise) -> str:
    first = p.variant_a if p.shown_first == "a" else p.variant_b
    verdict = "judge failed" if p.winner is None else f"better: {winner_text(p)}"
    text = f"{verdict} (shown first: {first})"
    if p.failure:
        text += f" — {p.failure}"
    justification = f'<div class="text">{_e(p.justification)}</div>' if p.justification else ""
    return (
        f'<div class="judge"><div class="who">Pairwise: {_e(p.variant_a)} vs '
        f"{_e(p.variant_b)}</div><div>{_e(text)}</div>{justification}</div>"
    )


def _run_block(r: RunResult) -> str:
    head = f"{r.variant}: {score_text(r)} · rounds {r.rounds_used}/{r.max_rounds}"
    if early_text(r) != NONE:
        head += f" · {early_text(r)}"
    if r.final_now_pressed:
        head += " · final answer pressed"
    if r.clarifying_rounds:
        head += f" · questions {questions_text(r)}"
    if r.knowledge is not None and r.error is None:
        head += f" · knowledge {knowledge_text(r)}"
    final = _final_index(r)
    parts = [_seen_html(t, final=i == final) for i, t in enumerate(r.transcript)]
    if final is None and r.final_answer:
        parts.append(_seen_html(SeenMessage(speaker="bot", text=r.final_answer), final=True))
    if r.error is not None:
        parts.append(f'<p class="failed">Consultation error: {_e(r.error)}</p>')
    if r.judgement is not None:
        parts.append(_judgement(r.judgement))
    return f"<details><summary>{_e(head)}</summary>{''.join(parts)}</details>"


def _final_index(r: RunResult) -> int | None:
    """The transcript's last bot message when it is the final answer, else None."""
    for i in range(len(r.transcript) - 1, -1, -1):
        if r.transcript[i].speaker == "bot":
            return i if r.final_answer and r.transcript[i].text == r.final_answer else None
    return None


def _seen_html(seen: SeenMessage, *, final: bool = False) -> str:
    if seen.speaker == "bot":
        who = "Bot" + (f" · round {seen.round}" if seen.round is not None else "")
        who += " · final answer" if final else ""
    elif seen.speaker == "user":
        who = "User"
    else:
        who = seen.speaker
    if seen.final_now:
        who += " · pressed “final answer now”"
    if seen.model_ready:
        who += " · the model knew enough"
    kind = "turn bot" if seen.speaker == "bot" else "turn"
    options = [
        f"<li>{_e(option_label(n, k))}) {_e(option)}</li>"
        for n, question in enumerate(seen.questions, 1)
        for k, option in enumerate(question.options, 1)
    ]
    listed = f'<ul class="options">{"".join(options)}</ul>' if options else ""
    given = "".join(
        f"<li><b>[{_e(p.label)}]</b> {_e(_place(p.title, p.section, p.document))}"
        f'<div class="text">{_e(p.text)}</div></li>'
        for p in seen.knowledge
    )
    passages = (
        f'<details class="given"><summary>Knowledge-base passages given '
        f"({len(seen.knowledge)})</summary><ul>{given}</ul></details>"
        if given
        else ""
    )
    picks = "".join(f"<li>{_e(pick.line)}</li>" for pick in seen.picks)
    chosen = f'<div class="who">Chosen by option:</div><ul>{picks}</ul>' if picks else ""
    return (
        f'<div class="{kind}"><div class="who">{_e(who)}</div>'
        f'<div class="text">{_e(seen.text)}</div>{listed}{chosen}{passages}</div>'
    )


def _place(title: str, section: str, document: str) -> str:
    """Where a passage comes from: title › section (file)."""
    place = " › ".join(part for part in (title, section) if part)
    return f"{place} ({document})" if document else place


def _judgement(j: Judgement) -> str:
    if j.score is None:
        head = f'<div class="who failed">Judge failed: {_e(j.failure or "no score")}</div>'
        raw = f'<div class="text">{_e(j.raw)}</div>' if j.raw else ""
        return f'<div class="judge">{head}{raw}</div>'
    parts = [f'<div class="who">Judge: {j.score:.2f}</div>']
    if j.justification:
        parts.append(f'<div class="text">{_e(j.justification)}</div>')
    if j.groundedness is not None:
        parts.append(f'<div class="who">Groundedness: {j.groundedness:.2f}</div>')
    for label, items in (
        ("Covered", j.covered),
        ("Missed", j.missed),
        ("Not grounded", j.unsupported),
    ):
        if items:
            listed = "".join(f"<li>{_e(item)}</li>" for item in items)
            parts.append(f"<div>{label}:</div><ul>{listed}</ul>")
    return f'<div class="judge">{"".join(parts)}</div>'


def _results(report: Report) -> dict[tuple[str, int, str], RunResult]:
    return {(r.scenario_id, r.repeat, r.variant): r for r in report.results}


def _pairwise(report: Report) -> dict[tuple[str, int, str, str], Pairwise]:
    return {(p.scenario_id, p.repeat, p.variant_a, p.variant_b): p for p in report.pairwise}
