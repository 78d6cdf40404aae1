"""The docs' chat pictures can be made: `scripts/render_chat.py` runs its scenarios through
the real bot against the fakes and lays each chat out (`--html-only`: no Chromium here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def render(out: Path, *args: str) -> list[str]:
    """Run the script for HTML only; return the files it wrote."""
    script = str(ROOT / "scripts" / "render_chat.py")
    done = subprocess.run(
        [sys.executable, script, "--html-only", "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return sorted(p.name for p in out.iterdir())


@pytest.mark.parametrize(
    ("args", "names"),
    [
        ((), ["consultation-answer.html", "consultation-round.html"]),
        (("--scenario", "plans"), ["payments-plans.html", "payments-receipt.html"]),
    ],
)
def test_each_scenario_lays_out_its_two_pictures(
    tmp_path: Path, args: tuple[str, ...], names: list[str]
) -> None:
    """The consultation and the purchase each give their two chat pictures."""
    assert render(tmp_path, *args) == names


def test_the_purchase_shows_the_offer_the_invoice_the_payment_and_the_receipt(
    tmp_path: Path,
) -> None:
    """The plans picture has the refusal's offer and the Buy buttons; the receipt picture
    has the invoice the bot sent (title, description, Pay button), the payment's service
    line, the receipt with the charge id, and the question answered again."""
    render(tmp_path, "--scenario", "plans")
    plans = (tmp_path / "payments-plans.html").read_text(encoding="utf-8")
    receipt = (tmp_path / "payments-receipt.html").read_text(encoding="utf-8")
    star = '<span class="star">★</span>'
    assert "For more, see /plans." in plans
    assert f"Buy Pro — 250 {star}" in plans and f"Buy Club — 100 {star}" in plans
    assert '<div class="title">Pro</div>' in receipt
    assert "Up to 20 consultations a day for 30 days" in receipt
    assert f"Pay {star} 250" in receipt
    assert f"You paid {star} 250 to Consultant" in receipt
    assert "Thank you! Pro is yours until " in receipt and "stxRenderCharge1" in receipt
    assert "What finish time are you aiming for" in receipt
