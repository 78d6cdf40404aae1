"""Render a consultation in Telegram, as the real bot ran it, to PNG pictures for the docs.

    .venv/bin/python scripts/render_chat.py --out docs/images
    .venv/bin/python scripts/render_chat.py --scenario plans --out docs/images

The real bot (`python -m bot` as a child process, with a throwaway SQLite file) talks to
the fake Bot API and the fake OpenAI-compatible model server of fakes, which run in this
script; only the model's replies are scripted (below). The user's message and button
presses go in as Telegram updates. At two moments the script copies the chat as the fake
Bot API holds it (every message's current text, entities and inline keyboard, edits
included), lays it out as Telegram-like bubbles in HTML and has headless Chromium
(`chromium`, Debian's package) take a screenshot of each:

- ``consultation-round.png``: the request and the clarifying round, three options tapped
  (✓) and "Send answers" not pressed yet;
- ``consultation-answer.png``: what follows in the same chat once "Send answers" is
  pressed: the final answer with its buttons.

With ``--scenario plans`` the bot sells plans in Telegram Stars (PLANS) and a person who
used the day's one consultation buys one:

- ``payments-plans.png``: the refusal offering /plans, /plans and the plans with their Buy
  buttons;
- ``payments-receipt.png``: the invoice the Buy press sent (drawn from the bot's
  ``sendInvoice``: title, description, the "Pay ⭐ N" button Telegram adds), the payment
  (a ``successful_payment`` update, after the bot accepted the pre-checkout query), the
  bot's receipt, and the next question answered again.

Nothing is drawn that the bot did not send (the payment's service line is the update's;
an invoice's Pay button is the one Telegram adds); the layout (colours, bubble shapes) is
this script's approximation of Telegram's light theme. Exit status 1 when the bot did not answer
as expected or Chromium is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the fakes are not installed

from fakes.bot_api import TOKEN, Call, FakeBotApi  # noqa: E402
from fakes.model_server import FakeModelServer  # noqa: E402

CHAT = 7001
USER_NAME = "Alice"
WIDTH = 480
REQUEST = "I'd like to run my first half marathon. How should I train?"
ROUND = (
    "A half marathon is a good goal. Three facts decide the plan:",
    [
        ("How much do you run now?", ["Not at all", "Up to 10 km a week", "More than 10 km"]),
        ("When is the race?", ["In 8 weeks", "In 12 weeks", "In 16+ weeks"]),
        ("Any injuries or joint pain?", ["None", "Knees", "Other"]),
    ],
)
PICKS = ((1, 2), (2, 2), (3, 1))
"""(question, option) pressed, 1-based, before "Send answers"."""
ANSWER = """**What I took into account**
- You run up to 10 km a week now.
- The race is in 12 weeks.
- No injuries; I assume three or four free days a week.

**Your 12-week plan**
1. **Weeks 1–4: build the base.** Three easy runs a week (30–40 min, you can talk while \
running) and one long run growing from 8 to 12 km.
2. **Weeks 5–9: add quality.** One run a week with 4–6 × 1 km at race effort; the long \
run grows to 16–18 km.
3. **Weeks 10–12: sharpen and taper.** Keep the intensity, cut the volume by a third in \
week 11 and by half in race week.

**Every week**
- Never raise your weekly distance by more than about 10 %.
- Two short strength sessions (squats, lunges, calf raises) protect your knees.
- Sleep and an easy day after every hard one matter as much as the runs.

On race day, start slower than you feel you could: the first 5 km decide the last 5."""


# -- running the bot -----------------------------------------------------------------------


def chat_now(api: FakeBotApi) -> list[dict[str, Any]]:
    """The chat's messages as Telegram holds them now (edits applied), oldest first."""
    kept = [m for (chat, _), m in api.messages.items() if str(chat) == str(CHAT)]
    return copy.deepcopy(sorted(kept, key=lambda m: m["message_id"]))


def held(api: FakeBotApi, message_id: int) -> dict[str, Any]:
    """The chat's message `message_id` as the fake Bot API holds it now."""
    return next(
        m for (chat, mid), m in api.messages.items() if str(chat) == str(CHAT) and mid == message_id
    )


def button_data(message: dict[str, Any]) -> list[str]:
    markup = message.get("reply_markup") or {}
    return [b["callback_data"] for row in markup.get("inline_keyboard", []) for b in row]


def delivered(call: Call) -> bool:
    """A sendMessage to the chat that the fake Bot API answered."""
    return (
        call.method == "sendMessage"
        and call.result is not None
        and str(call.params.get("chat_id")) == str(CHAT)
    )


def sent(api: FakeBotApi) -> list[Call]:
    """The messages delivered to the chat, in order."""
    return [c for c in api.calls if delivered(c)]


async def wait_sent(api: FakeBotApi, count: int) -> None:
    """Wait until `count` messages in all were delivered to the chat."""
    await api.wait_for(delivered, 30, count=count)


async def press(api: FakeBotApi, message_id: int, data: str) -> None:
    """Press a button and wait until the bot has answered the press."""
    update = api.push_update(api.callback_query(CHAT, CHAT, data, message_id))
    query_id = update["callback_query"]["id"]
    await api.wait_for(
        lambda c: (
            c.method == "answerCallbackQuery"
            and c.params.get("callback_query_id") == query_id
            and c.result is not None
        ),
        30,
    )


def bot_env(
    workdir: Path, api: FakeBotApi, model: FakeModelServer, scenario: str = "consultation"
) -> dict[str, str]:
    """The bot's settings: the fakes, a SQLite file in `workdir`, a two-round consultation
    with a clarifying round of options (plans: one consultation a day and `PLANS` on sale,
    plain rounds); nothing else from the outside world but PATH."""
    common = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": api.base_url,
        "OPENAI_API_KEY": "render-key",
        "OPENAI_BASE_URL": model.base_url,
        "LLM_MODEL": "render-model",
        "DB_PATH": str(workdir / "chat.sqlite3"),
        "DEFAULT_MAX_ROUNDS": "2",
        "MEMORY_ENABLED": "false",
    }
    if scenario == "plans":
        return {
            **common,
            "USER_DAILY_CONSULTATION_LIMIT": "1",
            "PLANS": json.dumps(PLANS),
            "PAYMENT_SUPPORT_TEXT": "Write to support@example.com",
            "PAYMENT_TERMS_TEXT": "Plans are not refunded once used.",
        }
    return {**common, "LLM_STRUCTURED_QUESTIONS": "on", "FINAL_BRIEF": "true"}


async def record(workdir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the consultation; the chat after the taps, and the messages the final answer
    added to it."""
    api, model = FakeBotApi(), FakeModelServer()
    await api.start()
    await model.start()
    with (workdir / "bot.log").open("wb") as log:
        bot = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            env=bot_env(workdir, api, model, "consultation"),
            cwd=workdir,  # no .env of the checkout
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:
        await api.wait_for(lambda c: c.method == "getUpdates", 30)  # polling: the bot is up
        model.enqueue_round(*ROUND)
        api.push_update(api.text_message(CHAT, REQUEST, user_id=CHAT, first_name=USER_NAME))
        await wait_sent(api, 1)
        round_message = sent(api)[-1].result
        assert round_message is not None
        message_id = round_message["message_id"]
        for question, option in PICKS:
            data = next(
                d for d in button_data(held(api, message_id)) if d.endswith(f":{question}:{option}")
            )
            await press(api, message_id, data)
            await api.wait_for(  # the keyboard with this pick marked ✓
                lambda c: c.method == "editMessageReplyMarkup" and c.result is not None,
                30,
                count=question,
            )
        tapped = chat_now(api)
        send = next(d for d in button_data(held(api, message_id)) if d.startswith("qs:"))
        model.enqueue(ANSWER)
        before = len(sent(api))
        await press(api, message_id, send)
        await wait_sent(api, before + 1)
        await api.wait_for(
            lambda c: (
                c.method == "sendMessage"
                and "Consultation complete" in str(c.params.get("text"))
                and c.result is not None
            ),
            30,
        )
        shown = max(m["message_id"] for m in tapped)
        return tapped, [m for m in chat_now(api) if m["message_id"] > shown]
    except (AssertionError, StopIteration, TimeoutError):
        print((workdir / "bot.log").read_text(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        bot.terminate()
        await bot.wait()
        await model.stop()
        await api.stop()


# -- the plans scenario --------------------------------------------------------------------

PLANS = [
    {
        "id": "pro",
        "title": "Pro",
        "description": "Up to 20 consultations a day for 30 days",
        "stars": 250,
        "days": 30,
        "limits": {"daily_consultations": 20},
    },
    {
        "id": "club",
        "title": "Club",
        "description": "10 consultations a day, renewed every month",
        "stars": 100,
        "subscription": True,
        "limits": {"daily_consultations": 10},
    },
]
FIRST = "Which shoes suit a beginner runner?"
FIRST_REPLY = "Do you run mostly on roads or on trails?"
AGAIN = "How do I pace my first race?"
AGAIN_REPLY = "What finish time are you aiming for, and what is your usual 5 km time?"
CHARGE = "stxRenderCharge1"


async def say(api: FakeBotApi, text: str) -> dict[str, Any]:
    """Send `text` from the person and return the bot's first message in reply."""
    before = len(sent(api))
    api.push_update(api.text_message(CHAT, text, user_id=CHAT, first_name=USER_NAME))
    await wait_sent(api, before + 1)
    reply = sent(api)[before].result
    assert reply is not None
    return reply


async def record_plans(workdir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Use the day's one consultation, be refused, open /plans, buy Pro and ask again; the
    chat from the refused question to the plans, and from the invoice on."""
    api, model = FakeBotApi(), FakeModelServer()
    await api.start()
    await model.start()
    with (workdir / "bot.log").open("wb") as log:
        bot = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            env=bot_env(workdir, api, model, "plans"),
            cwd=workdir,  # no .env of the checkout
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
        )
    try:
        await api.wait_for(lambda c: c.method == "getUpdates", 30)  # polling: the bot is up
        model.enqueue(FIRST_REPLY)
        assert FIRST_REPLY in (await say(api, FIRST))["text"]
        await say(api, "/reset")
        refused_from = max(m["message_id"] for m in chat_now(api)) + 1
        refusal = await say(api, AGAIN)
        assert "/plans" in refusal["text"], refusal["text"]
        listing = await say(api, "/plans")
        assert button_data(listing) == ["buy:pro", "buy:club"], listing
        offered = [m for m in chat_now(api) if m["message_id"] >= refused_from]

        await press(api, listing["message_id"], "buy:pro")
        invoice = await api.wait_for(lambda c: c.method == "sendInvoice", 30)
        assert invoice.result is not None, invoice.status
        bought_from = invoice.result["message_id"]
        payload, amount = invoice.params["payload"], invoice.params["prices"][0]["amount"]
        query = api.push_update(api.pre_checkout_query(CHAT, payload, amount))
        query_id = query["pre_checkout_query"]["id"]
        await api.wait_for(
            lambda c: (
                c.method == "answerPreCheckoutQuery"
                and c.params.get("pre_checkout_query_id") == query_id
            ),
            30,
        )
        assert api.checkout_answers[query_id] == (True, None), api.checkout_answers
        before = len(sent(api))
        api.push_update(api.successful_payment(CHAT, payload, amount, charge_id=CHARGE))
        await wait_sent(api, before + 1)
        receipt = sent(api)[before].result
        assert receipt is not None and CHARGE in receipt["text"], receipt
        model.enqueue(AGAIN_REPLY)
        assert AGAIN_REPLY in (await say(api, AGAIN))["text"]
        chat = chat_now(api)
        for message in chat:  # the invoice as the bot sent it
            if message["message_id"] == bought_from:
                message["invoice"] = invoice_of(invoice.params)
        return offered, [m for m in chat if m["message_id"] >= bought_from]
    except (AssertionError, StopIteration, TimeoutError):
        print((workdir / "bot.log").read_text(errors="replace")[-4000:], file=sys.stderr)
        raise
    finally:
        bot.terminate()
        await bot.wait()
        await model.stop()
        await api.stop()


def invoice_of(params: dict[str, Any]) -> dict[str, Any]:
    """The invoice a `sendInvoice` call asked for, as Telegram's Invoice object."""
    return {
        "title": params["title"],
        "description": params["description"],
        "currency": params["currency"],
        "total_amount": params["prices"][0]["amount"],
    }


# -- laying it out -------------------------------------------------------------------------

TAGS = {
    "bold": ("<b>", "</b>"),
    "italic": ("<i>", "</i>"),
    "underline": ("<u>", "</u>"),
    "strikethrough": ("<s>", "</s>"),
    "code": ("<code>", "</code>"),
    "pre": ("<pre>", "</pre>"),
    "blockquote": ("<blockquote>", "</blockquote>"),
    "expandable_blockquote": ("<blockquote>", "</blockquote>"),
    "spoiler": ('<span class="spoiler">', "</span>"),
}


def entity_html(text: str, entities: list[dict[str, Any]]) -> str:
    """The text as HTML with its entities (offsets in UTF-16 code units, as Telegram's)."""
    units = text.encode("utf-16-le")
    opens: dict[int, list[str]] = {}
    closes: dict[int, list[str]] = {}
    for entity in sorted(entities, key=lambda e: (e["offset"], -e["length"])):
        kind = entity["type"]
        if kind == "text_link":
            tags = (f'<a href="{html.escape(entity["url"])}">', "</a>")
        elif kind in ("url", "mention", "bot_command", "email"):
            tags = ('<span class="link">', "</span>")
        else:
            tags = TAGS.get(kind, ("", ""))
        opens.setdefault(entity["offset"], []).append(tags[0])
        closes.setdefault(entity["offset"] + entity["length"], []).insert(0, tags[1])
    length = len(units) // 2
    cuts = sorted({0, length, *opens, *closes})
    out: list[str] = []
    for start, end in zip(cuts, [*cuts[1:], length], strict=True):
        out.extend(closes.get(start, []))
        out.extend(opens.get(start, []))
        out.append(html.escape(units[start * 2 : end * 2].decode("utf-16-le")))
    return "".join(out).replace("\n", "<br>")


def keyboard_html(message: dict[str, Any]) -> str:
    markup = message.get("reply_markup") or {}
    rows = markup.get("inline_keyboard") or []
    lines = []
    for row in rows:
        cells = "".join(f'<div class="key">{html.escape(b["text"])}</div>' for b in row)
        lines.append(f'<div class="row">{cells}</div>')
    return f'<div class="keyboard">{"".join(lines)}</div>' if lines else ""


def invoice_bubble(message: dict[str, Any]) -> str:
    """An invoice as Telegram shows one: title, description, price, and the Pay button."""
    invoice = message["invoice"]
    stars = f"⭐ {invoice['total_amount']}" if invoice["currency"] == "XTR" else ""
    return (
        '<div class="msg in"><div class="bubble invoice">'
        f'<div class="title">{html.escape(invoice["title"])}</div>'
        f"<div>{html.escape(invoice['description'])}</div>"
        f'<div class="price">{html.escape(stars)}</div></div>'
        f'<div class="keyboard"><div class="row"><div class="key">Pay {html.escape(stars)}'
        "</div></div></div></div>"
    )


def service_line(message: dict[str, Any]) -> str:
    """A payment's service message, as Telegram centres one in the chat."""
    paid = message["successful_payment"]
    amount = f"⭐ {paid['total_amount']}" if paid["currency"] == "XTR" else ""
    return f'<div class="service"><span>You paid {html.escape(amount)} to Consultant</span></div>'


def bubble(message: dict[str, Any]) -> str:
    if "invoice" in message:
        return invoice_bubble(message)
    if "successful_payment" in message:
        return service_line(message)
    mine = not message.get("from", {}).get("is_bot")
    text = entity_html(message.get("text") or "", message.get("entities") or [])
    side = "out" if mine else "in"
    return (
        f'<div class="msg {side}"><div class="bubble">{text}</div>'
        f"{'' if mine else keyboard_html(message)}</div>"
    )


PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><style>
body {{ margin: 0; width: {width}px; font: 15px/1.38 "Noto Sans", "DejaVu Sans", sans-serif;
  background: #a7c197; }}
header {{ background: #fff; padding: 10px 16px; border-bottom: 1px solid #d9d9d9; }}
header .name {{ font-weight: bold; }} header .sub {{ color: #8a8a8a; font-size: 13px; }}
main {{ padding: 10px 10px 14px; }}
.msg {{ margin: 6px 0; display: flex; flex-direction: column; }}
.msg.out {{ align-items: flex-end; }} .msg.in {{ align-items: flex-start; }}
.bubble {{ max-width: 86%; padding: 7px 11px; border-radius: 14px; word-wrap: break-word;
  box-shadow: 0 1px 1px rgba(0,0,0,.15); }}
.out .bubble {{ background: #e2fbc8; border-bottom-right-radius: 4px; }}
.in .bubble {{ background: #fff; border-bottom-left-radius: 4px; }}
.keyboard {{ width: 86%; margin-top: 3px; }}
.row {{ display: flex; gap: 3px; margin-top: 3px; }}
.key {{ flex: 1; text-align: center; color: #fff; font-size: 14px; padding: 8px 6px;
  background: rgba(40, 70, 40, .38); border-radius: 8px; }}
code, pre {{ font-family: "DejaVu Sans Mono", monospace; font-size: 13px; }}
.link, a {{ color: #2a7ab8; text-decoration: none; }}
blockquote {{ margin: 2px 0; padding-left: 8px; border-left: 3px solid #5aa2d8; }}
.invoice .title {{ font-weight: bold; }} .invoice .price {{ margin-top: 4px; color: #8a8a8a; }}
.star {{ color: #f5b50a; }} .key .star, .service .star {{ color: #ffd54a; }}
.service {{ text-align: center; margin: 8px 0; }}
.service > span {{ display: inline-block; padding: 3px 10px; border-radius: 12px; color: #fff;
  font-size: 13px; background: rgba(40, 70, 40, .45); }}
</style></head><body>
<header><div class="name">Consultant</div><div class="sub">bot</div></header>
<main>{messages}</main>
<script>document.title = "height:" + document.documentElement.scrollHeight;</script>
</body></html>
"""


STAR = '<span class="star">★</span>'
"""Telegram's Star (⭐, drawn from Apple's or Noto's colour emoji): a gold ★ of the text font
here, so the pictures need no emoji font."""


def page(messages: list[dict[str, Any]]) -> str:
    shown = "\n".join(bubble(m) for m in messages)
    return PAGE.format(width=WIDTH, messages=shown.replace("⭐\ufe0f", STAR).replace("⭐", STAR))


def screenshot(chromium: str, source: Path, target: Path) -> None:
    """Measure the page's height, then take a screenshot of exactly that."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    dom = subprocess.run(
        [chromium, *flags, f"--window-size={WIDTH},100", "--dump-dom", source.as_uri()],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    found = re.search(r"<title>height:(\d+)</title>", dom)
    height = int(found.group(1)) if found else 1200
    subprocess.run(
        [
            chromium,
            *flags,
            "--force-device-scale-factor=2",
            f"--window-size={WIDTH},{height}",
            f"--screenshot={target}",
            source.as_uri(),
        ],
        capture_output=True,
        check=True,
        timeout=120,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--html-only", action="store_true", help="write the HTML, no PNG")
    parser.add_argument(
        "--scenario",
        choices=("consultation", "plans"),
        default="consultation",
        help="a consultation (default), or buying a plan in Telegram Stars",
    )
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None and not args.html_only:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        try:
            if args.scenario == "plans":
                offered, bought = asyncio.run(record_plans(work))
                pictures = [("payments-plans", offered), ("payments-receipt", bought)]
            else:
                tapped, answered = asyncio.run(record(work))
                pictures = [("consultation-round", tapped), ("consultation-answer", answered)]
        except (AssertionError, StopIteration, TimeoutError) as error:
            print(f"the bot did not answer as expected: {error!r}", file=sys.stderr)
            return 1
        args.out.mkdir(parents=True, exist_ok=True)
        for name, messages in pictures:
            source = work / f"{name}.html"
            source.write_text(page(messages), encoding="utf-8")
            if args.html_only:
                shutil.copy(source, args.out / source.name)
                print(args.out / source.name)
                continue
            assert chromium is not None
            screenshot(chromium, source, args.out / f"{name}.png")
            print(args.out / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
