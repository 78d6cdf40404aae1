"""Every interface string, in English, by name: the source of the gettext catalogs.

The English text is the gettext msgid; `pybabel extract` (babel.cfg) finds each string by
its marker: `N_` for a plain message, `NP_` for one whose wording depends on a number.
The translations live in `i18n/locales/<language>/LC_MESSAGES/messages.po`; `i18n.translate`
looks them up. Placeholders are Python `str.format` fields, the same in every language.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Plural:
    """A message with a singular and a plural English form; `count` names the placeholder
    whose value picks the form (by the language's plural rule, via ngettext)."""

    singular: str
    plural: str
    count: str


def N_(message: str) -> str:
    """Marks `message` for extraction; the lookup happens when it is shown."""
    return message


def NP_(singular: str, plural: str, count: str) -> Plural:
    """Marks a plural message for extraction (babel.cfg: `NP_:1,2`)."""
    return Plural(singular, plural, count)


MESSAGES: dict[str, str | Plural] = {
    "start": NP_(
        "Hi! I'm a consultant. Tell me what you need help with. I'll ask a few clarifying "
        "questions (up to {rounds} round), then give you one complete, structured answer.\n\n"
        "/rounds — how many rounds · /answer — final answer now · /reset — start over · "
        "/language — interface language · /help — more",
        "Hi! I'm a consultant. Tell me what you need help with. I'll ask a few clarifying "
        "questions (up to {rounds} rounds), then give you one complete, structured answer.\n\n"
        "/rounds — how many rounds · /answer — final answer now · /reset — start over · "
        "/language — interface language · /help — more",
        "rounds",
    ),
    "help": N_(
        "How it works: you describe your question, I ask the few questions that matter most, "
        "and in the last round I give a complete answer to your original request.\n\n"
        "/rounds [N] — rounds per consultation (1–{limit}, now {rounds})\n"
        "/answer — get the final answer now\n"
        "/reset — end this consultation and start over\n"
        "/status — where the consultation stands\n"
        "/retry — answer your last message again after an error\n"
        "/role — choose the expert\n"
        "/model — choose the model\n"
        "/memory — what I remember about you; /memory off|on\n"
        "/usage — your tokens and cost today and this month\n"
        "/history — your recent consultations\n"
        "/export [N] — the latest consultation (or number N of /history) as DOCX and Markdown "
        "files\n"
        "/language — the interface language\n"
        "/forget — delete everything I keep about you\n\n"
        "In groups, mention me (@{username}) or reply to my message; everyone can answer my "
        "questions."
    ),
    "privacy_note": N_(
        "Privacy mode is on, so in this group I only see commands, replies to my messages and "
        "messages that mention @{username}. To let me read every message, an admin can turn "
        "privacy mode off in @BotFather (Bot Settings → Group Privacy) and re-add me."
    ),
    "round_label": N_("Round {round} of {max_rounds}"),
    "final_label": N_("Final answer"),
    "complete": N_(
        "✅ Consultation complete. To ask about this answer, reply to it or press “Ask a "
        "follow-up”; any other message starts a new consultation."
    ),
    "complete_final": N_("✅ Consultation complete. Send a new message to start another one."),
    "follow_up_label": N_("Follow-up {number} of {limit}"),
    "follow_ups_left": NP_(
        "To ask more about it, reply to this answer ({left} follow-up left); any other "
        "message starts a new consultation.",
        "To ask more about it, reply to this answer ({left} follow-ups left); any other "
        "message starts a new consultation.",
        "left",
    ),
    "follow_ups_done": N_(
        "✅ That was this consultation's last follow-up. Send a new message to start another one."
    ),
    "follow_up_prompt": N_("Send your follow-up question as a reply to this message."),
    "follow_up_not_found": N_(
        "I can't find that consultation in this chat any more. Send a new message to start "
        "another one."
    ),
    "follow_up_not_complete": N_(
        "This consultation has no final answer yet: just send your message to continue it."
    ),
    "follow_up_expired": NP_(
        "That consultation ended more than {minutes} minute ago, so it takes no more "
        "follow-ups. Send a new message to start another one.",
        "That consultation ended more than {minutes} minutes ago, so it takes no more "
        "follow-ups. Send a new message to start another one.",
        "minutes",
    ),
    "follow_up_limit_reached": N_(
        "That consultation has taken all its follow-ups. Send a new message to start another one."
    ),
    "follow_up_disabled": N_(
        "Follow-up questions are turned off. Send a new message to start a new consultation."
    ),
    "follow_up_reply_instead": N_("To ask about that answer, reply to it with your question."),
    "answer_button": N_("Give the final answer now"),
    "send_answers_button": N_("Send answers"),
    "follow_up_button": N_("Ask a follow-up"),
    "export_button": N_("Document"),
    "export_none": N_(
        "There is nothing to export yet. Send your question to start a consultation."
    ),
    "export_range": N_(
        "There is no consultation number {number}. Choose one from 1 to {count} (see /history)."
    ),
    "export_usage": N_(
        "Send /export for your latest consultation, or /export N with its number in /history."
    ),
    "export_gone": N_("This consultation is no longer kept."),
    "history_title": N_("Your recent consultations, newest first (times in UTC):"),
    "history_item": NP_(
        "{number}. {date} · {status} · {done} of {rounds} round\n“{request}”",
        "{number}. {date} · {status} · {done} of {rounds} rounds\n“{request}”",
        "rounds",
    ),
    "history_empty": N_("You have no consultations yet. Send your question to start one."),
    "history_active": N_("in progress"),
    "history_complete": N_("complete"),
    "history_reset": N_("ended"),
    "history_expired": N_("expired"),
    "history_answer_button": N_("Answer {number}"),
    "history_document_button": N_("Document {number}"),
    # The exported document's labels (`i18n.document_labels`).
    # Translators: {date} is the consultation's start, as 2025-06-15 14:26 UTC.
    "document_date": N_("Date: {date}"),
    "document_request": N_("Request"),
    "document_round": N_("Clarifying round {number}"),
    "document_questions": N_("Questions"),
    "document_answer": N_("Answer"),
    "document_not_answered": N_("(not answered)"),
    "document_final": N_("Final answer"),
    # Translators: the document's title when its request has no text.
    "document_untitled": N_("Consultation"),
    "document_follow_ups": N_("Follow-up questions"),
    "document_follow_up": N_("Follow-up {number}"),
    "round_stale": N_("These questions were already answered."),
    "round_nothing_chosen": N_("Choose an option first, or type your answer."),
    "rounds_show": N_(
        "Rounds per consultation: {rounds} (1–{limit}). Change it with /rounds N or:"
    ),
    "rounds_set": N_("Rounds per consultation: {rounds}."),
    "rounds_set_active": N_("This consultation has used {done} of {rounds}."),
    "rounds_next_final": N_("Your next message will get the final answer."),
    "rounds_invalid": N_(
        "“{value}” is not a valid number of rounds. Use a whole number from 1 to {limit}, "
        "e.g. /rounds 3. Nothing was changed."
    ),
    "reset_done": N_("Consultation ended. Your next message starts a new one."),
    "reset_none": N_("There is no active consultation. Send your question to start one."),
    "reset_stopped": N_("Stopped working on your previous message. Send your question again."),
    "status_idle": N_("No active consultation. Rounds: {rounds}. Expert: {role}. Model: {model}."),
    "status_active": NP_(
        "Consultation in progress: {done} of {rounds} round answered. Expert: {role}. "
        "Model: {model}.\nRequest: “{request}”",
        "Consultation in progress: {done} of {rounds} rounds answered. Expert: {role}. "
        "Model: {model}.\nRequest: “{request}”",
        "rounds",
    ),
    "status_open_turn": N_("Your last message is still waiting for an answer: send /retry."),
    "status_answering": N_(
        "I'm writing the answer to your last message now. /reset stops it and starts over."
    ),
    "answer_none": N_("There is nothing to answer yet: send your question first."),
    "retry_none": N_("Nothing to retry: no message is waiting for an answer."),
    "model_error": N_(
        "⚠️ The model is not answering right now ({reason}). Your message is saved and this "
        "round is not used up: send /retry, or simply write again."
    ),
    "reason_timeout": N_("it took too long"),
    "reason_rate_limited": N_("too many requests"),
    "reason_unavailable": N_("the service is unavailable"),
    "reason_rejected": N_("the request was refused"),
    "reason_format_refused": N_("the model refused the reply format"),
    "reason_tools_refused": N_("the model refused the tools"),
    "model_images_rejected": N_(
        "The model cannot look at images. Describe the photo in words, or send the text in it."
    ),
    "model_context_too_long": N_(
        "⚠️ This conversation has grown too long for the model to read. Send /reset to start "
        "over, then ask more briefly."
    ),
    "model_misconfigured": N_(
        "⚠️ I can't use my model because of a configuration problem on my side. The operator "
        "has been told; your message is saved, please try again later."
    ),
    "rate_limited": N_("You're sending messages too fast. Please wait {seconds} s and try again."),
    "not_allowed": N_("Sorry, this bot is not available here."),
    "text_only": N_(
        "I can only read text. Please describe it in words (a caption on a photo works too)."
    ),
    "truncated": NP_(
        "Your message was too long, so I used its first {limit} character.",
        "Your message was too long, so I used its first {limit} characters.",
        "limit",
    ),
    "heard": N_("🎤 “{text}”"),
    "document_cut": NP_(
        "Your document is longer than I can read at once, so I used its first {limit} character.",
        "Your document is longer than I can read at once, so I used its first {limit} characters.",
        "limit",
    ),
    "download_failed": N_(
        "I couldn't download your file from Telegram. Nothing was saved; please send it again."
    ),
    "file_too_large": N_("This file is too large: I can take files up to {limit}."),
    "megabytes": N_("{value} MB"),
    "kilobytes": N_("{value} KB"),
    "file_unsupported": N_(
        "I can't read this kind of file. Documents I can read: {supported}. You can also "
        "paste the text into a message."
    ),
    "file_voice_off": N_(
        "I can't listen to voice messages here. Please type your question instead."
    ),
    "file_unreadable": N_(
        "I couldn't open this file: it looks damaged or password-protected. Please send "
        "another copy, or paste the text into a message."
    ),
    "file_no_text": N_(
        "I found no text to read in this file (a scanned document, or silence in a voice "
        "message). Please type your question, or send a file with text in it."
    ),
    "file_transcription_failed": N_(
        "I couldn't transcribe your voice message just now. Nothing was saved: please try "
        "again, or type it."
    ),
    "file_too_costly": N_(
        "This file takes too long or too much memory to read, so I stopped. Nothing was "
        "saved: please send a smaller or simpler copy, or paste the text into a message."
    ),
    "document_not_read_whole": NP_(
        "Your document is too large to read whole, so I used only its beginning (at most "
        "{limit} character).",
        "Your document is too large to read whole, so I used only its beginning (at most "
        "{limit} characters).",
        "limit",
    ),
    "images_not_seen": N_(
        "(I couldn't see your photo: this model reads text only. Describe it in words if it "
        "matters.)"
    ),
    "expired": NP_(
        "Your previous consultation expired after {minutes} minute without messages, so this "
        "starts a new one.",
        "Your previous consultation expired after {minutes} minutes without messages, so this "
        "starts a new one.",
        "minutes",
    ),
    "incomplete": N_("(This reply may be incomplete: it was cut off before its end.)"),
    "sources": N_("Sources"),
    # Listed under an answer (and in the exported document): the passages of the
    # operator's knowledge base the answer cites.
    "knowledge_sources": N_("Sources from the knowledge base"),
    # Translators: where a cited passage is in its document, after its title: "page 3".
    "knowledge_page": N_("page {page}"),
    # Shown while a tool the expert called runs (replaced by the reply's text when the
    # model writes): {tool} is the tool's server and name, "time · get_current_time".
    "tool_running": N_("Looking up: {tool}…"),
    # Translators: the heading of the list of tools an answer used (and of a document's).
    "tools_used": N_("Looked up"),
    # One tool of that list that gave no result: {call} is "server · tool (arguments)".
    "tool_failed": N_("{call} — failed"),
    "unknown_command": N_("I don't know that command. See /help."),
    "empty": N_("Your message is empty. Please write your question in words."),
    "role_show": N_("Expert: {role}. Choose another one (applies to the next consultation):"),
    "role_set": N_(
        "Expert set to {role}. It applies to your next consultation (/reset to start now)."
    ),
    "role_unknown": N_("Unknown expert “{value}”. Available: {roles}."),
    "model_show": N_("Model: {model}. Choose another one (applies from the next answer):"),
    "model_removed": N_(
        "The model “{removed}” chosen here is no longer available: {model} is used."
    ),
    "model_set": N_("Model set to {model}. It applies from the next answer."),
    "model_unknown": N_("Unknown model “{value}”. Available: {models}."),
    "model_stale": N_("The list of models has changed: send /model again."),
    "not_admin": N_("Only group admins or the member who started the consultation can do that."),
    "forget_confirm": N_(
        "This deletes everything I keep about you and this chat: your consultations with all "
        "their messages, your settings, what I remember about you (in every chat), and "
        "replies waiting to be delivered. It cannot be undone."
    ),
    "forget_confirm_group": N_(
        "This deletes everything I keep about this group: its consultations with all their "
        "messages, its settings and replies waiting to be delivered; and what I remember "
        "about you (in every chat). It cannot be undone."
    ),
    "forget_confirm_member": N_(
        "This deletes what I remember about you (in every chat). This group's consultations "
        "can be deleted only by its admins. It cannot be undone."
    ),
    "forget_button": N_("Delete everything"),
    "forget_cancel": N_("Cancel"),
    "forget_done": N_("🗑 Deleted. Nothing of it is kept or will reach the model again."),
    "forget_done_popup": N_("Deleted."),
    "forget_cancelled": N_("Nothing was deleted."),
    "forget_expired": N_("This confirmation has expired. Send /forget again."),
    "forget_not_yours": N_("Only the person who sent /forget can confirm it."),
    "forget_from_yourself": N_("Send /forget from your own account, not as the group."),
    "presses_limited": N_("Too many presses. Please wait {seconds} s."),
    "internal_error": N_(
        "Something went wrong on my side. Your message is saved; please try again."
    ),
    "store_unavailable": N_(
        "⚠️ My storage is temporarily unavailable. Please try again in a few minutes: "
        "send the same message again."
    ),
    "update_given_up": N_(
        "⚠️ I could not handle this message. Please send it again differently: shorter, "
        "as plain text, or as another file."
    ),
    "store_kept": N_(
        "⚠️ My storage is temporarily unavailable. Your message is kept: I will answer it "
        "when storage is back, no need to send it again."
    ),
    "store_unavailable_press": N_(
        "⚠️ My storage is temporarily unavailable. Please press again in a few minutes."
    ),
    "memory_list": N_(
        "What I remember about you (used in your next consultations{where}):\n\n{facts}\n\n"
        "Press a number to delete that fact. /memory off — stop remembering."
    ),
    "memory_in_group": N_(" in this group"),
    "memory_empty": N_(
        "I remember nothing about you{where} yet. After a consultation I note lasting facts "
        "you told me, so I ask less next time. /memory off — stop remembering."
    ),
    "memory_is_off": N_(
        "Memory is off: I neither use nor note facts about you. /memory on — turn it on."
    ),
    "memory_on_done": N_("Memory is on: after a consultation I note lasting facts you told me."),
    "memory_off_done": N_(
        "Memory is off: I will neither use nor note facts about you. Facts already kept stay "
        "until you delete them with /memory."
    ),
    "memory_usage": N_("/memory — what I remember · /memory off · /memory on"),
    "memory_disabled": N_("Memory is switched off on this bot."),
    "memory_deleted": N_("Deleted."),
    "memory_not_found": N_("That fact is no longer there."),
    "memory_notice": N_(
        "🧠 I noted a few lasting facts you told me, to ask less next time. /memory shows "
        "them and deletes any; /memory off stops it."
    ),
    "usage_report": N_("Your model usage (UTC days):\nToday: {today}\nThis month: {month}"),
    "usage_line": N_("{prompt} tokens in, {completion} out, {cost}"),
    "usage_estimated": N_(" (estimated)"),
    "usage_unpriced": N_("; no price for model {models}"),
    "usage_unknown": N_("I cannot tell who sent this, so I have no usage to show."),
    # The tools the person's consultations called, by tool: {tools} is a list such as
    # "time · get_current_time 3, docs · search 1 (1 failed)".
    "usage_tools_today": N_("Tool calls today: {tools}"),
    "usage_tools_month": N_("Tool calls this month: {tools}"),
    # One tool of that list with calls that gave no result: {tool} is "server · tool".
    "usage_tool_failed": N_("{tool} {calls} ({failed} failed)"),
    # Stands for the tools the model asked for that this bot does not offer.
    "usage_tool_unknown": N_("unknown tools"),
    # Quotas (`core.domain.quotas`, `bot.commands.quota`). A limit's name fills {limit} of the
    # two after it.
    "quota_user_daily_tokens": N_("your daily token limit ({allowed})"),
    "quota_user_monthly_tokens": N_("your monthly token limit ({allowed})"),
    "quota_user_daily_consultations": N_("your daily consultation limit ({allowed})"),
    "quota_api_daily_tokens": N_("this API token's daily token limit ({allowed})"),
    "quota_refused": N_(
        "You have reached {limit}, so I did not send this to the model and nothing was "
        "saved. It resets on {resets} UTC."
    ),
    "quota_final": N_(
        "You have reached {limit}, so this is the final answer of this consultation. "
        "It resets on {resets} UTC."
    ),
    "usage_left_day": N_("Tokens left today: {left} of {allowed}"),
    "usage_left_month": N_("Tokens left this month: {left} of {allowed}"),
    "usage_left_consultations": N_("Consultations left today: {left} of {allowed}"),
    "usage_no_limit": N_("You have no usage limits."),
    "quota_help": N_(
        "/quota <user id> — their limits and usage\n"
        "/quota <user id> <tokens> — their daily token limit (1–{max})\n"
        "/quota <user id> off — no limits for them\n"
        "/quota <user id> default — back to the deployment's limits"
    ),
    "quota_help_people": N_(
        "<user id>: a Telegram user's id, api:<userId> for an HTTP API user, or "
        "api<bot id>:<userId> for an API user of an added bot"
    ),
    "quota_private_only": N_("Use /quota in a private chat with me."),
    "quota_show": N_(
        "User {user}: {state}\nToday: {today} tokens · this month: {month} tokens · "
        "consultations today: {started}"
    ),
    "quota_state_exempt": N_("no limits"),
    "quota_state_limits": N_(
        "daily tokens {daily}, monthly tokens {monthly}, consultations a day {consultations}"
    ),
    "quota_none": N_("none"),
    "quota_overridden": N_(" (set by an operator)"),
    "quota_set": N_("User {user}'s daily token limit is now {limit}."),
    "quota_set_off": N_("User {user} now has no limits."),
    "quota_cleared": N_("User {user} is back to the deployment's limits."),
    "quota_not_set": N_("User {user} had no override: the deployment's limits apply."),
    "stats_refused": N_("/stats is for the bot's operators only."),
    "stats_private_only": N_("/stats works only in a private chat with the bot."),
    "stats_today": N_("Today ({day}, UTC)"),
    "stats_days": N_("Last {days} days ({since} – {until}, UTC)"),
    "stats_people": N_("People: {people}"),
    "stats_consultations": N_(
        "Consultations: {started} started · {completed} completed · {reset} reset · "
        "{expired} expired"
    ),
    "stats_completion": N_("Completed: {rate} of {ended} ended"),
    "stats_rounds": N_(
        "Mean rounds: {rounds} · early finishes: {early} · follow-ups: {follow_ups}"
    ),
    "stats_rounds_used": N_("Rounds used: {buckets}"),
    "stats_times": N_("Time to final answer: median {median} · 95th percentile {p95}"),
    "stats_models": N_("Tokens and cost by model:"),
    "stats_model": N_("• {model}: {prompt} in, {completion} out, {cost}"),
    "stats_total": N_("Total: {prompt} in, {completion} out, {cost}"),
    "stats_by_bot": N_("By bot, last {days} days:"),
    "stats_this_bot": N_("this bot"),
    "stats_bot": N_("• {bot}: {started} started, {completed} completed, {cost}"),
    "stats_more_bots": N_("…and {count} more: the web console's dashboard lists every bot"),
    "stats_no_calls": N_("No model calls."),
    # Every chat's tool calls in the period, by tool: {tools} is a list as /usage shows it.
    "stats_tools": N_("Tool calls: {tools}"),
    "stats_unpriced": N_(" (no price)"),
    "stats_seconds": N_("{s} s"),
    "stats_minutes": N_("{m} min {s} s"),
    "stats_hours": N_("{h} h {m} min"),
    # /knowledge: the operators' knowledge base (bot/commands/knowledge.py).
    "knowledge_usage": N_(
        "/knowledge — the documents of the knowledge base\n"
        "/knowledge remove N [M …] — remove documents by number\n"
        "/knowledge search [role=NAME] QUERY — the passages a consultation would receive\n\n"
        "To add a document, send it as a file with the caption /knowledge (or /knowledge "
        "role=NAME: only for consultations with that expert); a file of the same name "
        "replaces it. Files: {kinds}, up to {limit}."
    ),
    "knowledge_empty": N_(
        "The knowledge base is empty. To add a document, send it as a file with the caption "
        "/knowledge."
    ),
    "knowledge_listed": N_("Documents in the knowledge base: {count}"),
    "knowledge_line": N_("#{id} {title} · passages: {passages} · added {added} UTC"),
    "knowledge_line_role": N_(
        "#{id} {title} · role {role} · passages: {passages} · added {added} UTC"
    ),
    "knowledge_more": N_("…and {count} more"),
    "knowledge_removed": N_("Removed: {ids}."),
    "knowledge_not_found": N_("No such document: {ids}."),
    "knowledge_found": N_("What a consultation would receive, best first:"),
    "knowledge_no_match": N_("No passage of the knowledge base matches."),
    "knowledge_passage": N_("[{label}] {place} (document #{id}, score {score})"),
    "knowledge_passage_page": N_("[{label}] {place}, page {page} (document #{id}, score {score})"),
    "knowledge_unknown_role": N_("There is no role {role}. Roles: {roles}."),
    "knowledge_added": N_("Added #{id} {title} ({name}), passages: {passages}."),
    "knowledge_replaced": N_("Replaced #{id} {title} ({name}), passages: {passages}."),
    "knowledge_unchanged": N_(
        "Unchanged: #{id} {title} ({name}) is already in the knowledge base."
    ),
    "knowledge_for_role": N_("Only for consultations of the role {role}."),
    "knowledge_partial": N_(
        "Only the beginning of the document was read: it is longer than the knowledge base takes."
    ),
    "knowledge_failed": N_("{name} was not added: {reason}"),
    "knowledge_failed_too_large": N_("{name} was not added: it is larger than {limit}."),
    "knowledge_failed_unsupported": N_(
        "{name} was not added: the knowledge base reads these files: {kinds}."
    ),
    "knowledge_failed_unreadable": N_(
        "{name} was not added: it could not be opened (damaged or password-protected)."
    ),
    "knowledge_failed_no_text": N_(
        "{name} was not added: there is no text in it (a scan without a text layer?)."
    ),
    "knowledge_failed_too_costly": N_(
        "{name} was not added: reading it took longer or more memory than a document may."
    ),
    "knowledge_failed_download": N_(
        "{name} was not added: it could not be downloaded from Telegram. Please send it again."
    ),
    "language_show": N_("Interface language: {language}. Choose another one:"),
    "language_set": N_("Interface language: {language}."),
    "language_client_button": N_("As in my Telegram app"),
    "language_cleared": N_("Interface language: {language}, as your Telegram app is set."),
    # The command menu: one description per command of `COMMANDS`.
    "command_start": N_("Start and see how it works"),
    "command_help": N_("Commands and how to use the bot"),
    "command_rounds": N_("Rounds per consultation: /rounds N"),
    "command_answer": N_("Get the final answer now"),
    "command_reset": N_("End the consultation and start over"),
    "command_status": N_("Where the consultation stands"),
    "command_retry": N_("Answer the last message again"),
    "command_role": N_("Choose the expert"),
    "command_model": N_("Choose the model"),
    "command_memory": N_("What I remember about you"),
    "command_usage": N_("Your tokens and cost"),
    "command_forget": N_("Delete everything kept about you"),
    "command_history": N_("Your recent consultations"),
    "command_export": N_("The consultation as DOCX and Markdown files"),
    "command_language": N_("Choose the interface language"),
    "command_plans": N_("Plans paid in Telegram Stars"),
    "command_paysupport": N_("Help with a payment"),
    "command_terms": N_("Terms of payment"),
    "help_payments": N_(
        "/plans — plans paid in Telegram Stars, and yours\n"
        "/paysupport — help with a payment\n"
        "/terms — the terms of payment"
    ),
    # Plans and payments in Telegram Stars (bot.commands.plans).
    "plans_none": N_("No plans are on sale here."),
    "plans_header": N_("Plans, paid in Telegram Stars:"),
    "plan_line": N_("{title} — {stars} ⭐ for {days} days"),
    "plan_line_subscription": N_("{title} — {stars} ⭐ every 30 days (a subscription)"),
    "plans_current": N_("Your plan: {title}, until {ends} UTC."),
    "plans_ending": N_("Your plan: {title}. It ends on {ends} UTC and will not renew."),
    "plans_no_current": N_("You have no plan: the usual limits apply."),
    "plan_buy_button": N_("Buy {title} — {stars} ⭐"),
    "plans_private_only": N_("Plans are bought in a private chat with me."),
    "plan_subscribe": N_("{title}: {stars} ⭐ every 30 days until you cancel it."),
    "plan_subscribe_button": N_("Subscribe — {stars} ⭐"),
    "plan_gone": N_("This plan is no longer on sale: see /plans."),
    "checkout_forged": N_("This invoice was not made for you by this bot: open /plans."),
    "checkout_unknown_plan": N_("This plan is no longer on sale: open /plans."),
    "checkout_currency": N_("Plans are paid in Telegram Stars only."),
    "checkout_amount": N_("The price of this plan has changed: open /plans for a new invoice."),
    "checkout_payer": N_("This invoice was made for someone else: open /plans for your own."),
    "checkout_blocked": N_("Sorry, you cannot buy plans here."),
    "paid_receipt": N_(
        "Thank you! {title} is yours until {ends} UTC. Keep this payment id for support: {charge}"
    ),
    "paid_not_granted": N_(
        "Your payment was received but matches no plan on sale, so nothing changed. "
        "Ask for a refund with /paysupport, giving this payment id: {charge}"
    ),
    "quota_offer_plans": N_("For more, see /plans."),
    "refund_usage": N_("Usage: /refund <payment id>"),
    "refund_done": N_("Refunded {stars} ⭐ to {person}; their plan is revoked."),
    "refund_unknown": N_("No such payment, or it was refunded already."),
    "refund_failed": N_("Telegram refused the refund: {reason}"),
    "cancelsub_usage": N_("Usage: /cancelsub <payment id>"),
    "cancelsub_done": N_(
        "Subscription cancelled for {person}: their plan runs until {ends} UTC and is not renewed."
    ),
    "cancelsub_unknown": N_("No subscription with this payment id, or it was refunded."),
    "cancelsub_failed": N_("Telegram did not cancel the subscription: {reason}"),
    "resumesub_usage": N_("Usage: /resumesub <payment id>"),
    "resumesub_done": N_(
        "{person} may renew the subscription again; their plan runs until {ends} UTC."
    ),
    "resumesub_failed": N_("Telegram did not allow the subscription again: {reason}"),
    "paysupport_none": N_("For help with a payment, write to the operator of this bot."),
    "terms_none": N_("No terms are set for payments here."),
    "stats_stars": N_(
        "Telegram Stars, last {days} days: {stars} ⭐ kept from {payments} payments; "
        "plans active now: {plans}"
    ),
}
